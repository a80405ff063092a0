"""POST runs against database-backed apps, on top of a `LoadEnv`: each measured run is followed by the rows
check (rows found in the app's table vs POSTs acknowledged) and the database's cost over the same window
(CPU per request and per acknowledged insert of PostgreSQL's whole process tree beside the app's, its share
of its cores, its memory, connections in use, whether it was the bottleneck), all recorded with the run's
params. A failed rows check is a problem of the
`LoadEnv` (the test fails) and a `rows_mismatch` row (the report flags it at the top).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from polyperf.common.redact import redact
from polyperf.load.post_probe import PostProbe
from polyperf.measure.database import ConnectionProbe, is_db_bound
from polyperf.measure.device_table import (
    DatabaseUnavailable,
    DeviceTable,
    RowsCheck,
    check_rows,
    load_counts,
    parse_request_lines,
    read_request_logs,
)
from polyperf.measure.sampler import Measurement
from polyperf.orchestrate.load_suite import LoadEnv
from polyperf.record.recorder import Metric
from polyperf.serve.cpu_account import CpuAccount
from polyperf.serve.fleet import Target
from polyperf.serve.postgres import ThrowawayPostgres

__all__ = ["MIN_REQUESTS_PER_CONNECTION", "Database", "PostRuns", "ceiling_requests", "check_metrics"]

# A ceiling run makes at least this many requests per connection: with fewer, opening the connections and draining
# the last requests fill much of a window. In a main job axum's cold calibration planned 865 requests for 256
# connections (windows of 0.12-0.3 s, a third of gnet's), and gnet/axum ranged 0.6-8.7 over twelve repeats.
MIN_REQUESTS_PER_CONNECTION = 8


def ceiling_requests(ceiling_rps: float, seconds: float, connections: int) -> int:
    """The request count of a ceiling run: `seconds` at 1.5x the calibrated rate (the calibration included the
    warm-up; later runs go faster), and at least `MIN_REQUESTS_PER_CONNECTION` per connection."""
    return max(MIN_REQUESTS_PER_CONNECTION * connections, round(1.5 * ceiling_rps * seconds))


@dataclass
class Database:
    """Where the apps' rows go: the user's server (`throwaway` None) or a throwaway cluster."""

    dsn: str
    pid: int | None  # the postmaster, when it runs here (its tree's CPU is measured)
    cpus: list[int]  # the cores it may run on
    shared: bool  # those cores are the servers' too
    throwaway: ThrowawayPostgres | None = None
    params: dict[str, Any] = field(default_factory=dict)  # stated in every row
    account: CpuAccount | None = None  # the throwaway cluster's own cgroup: its CPU counted exactly

    def __repr__(self) -> str:  # a failing test's traceback prints it: never the password
        return f"Database(dsn={redact(self.dsn)!r}, pid={self.pid}, throwaway={self.throwaway is not None})"


def check_metrics(check: RowsCheck) -> list[Metric]:
    return [
        ("rows_acked", float(check.acked), "count", {}),
        ("rows_found", float(check.found), "count", {}),
        ("rows_ambiguous", float(check.ambiguous), "count", {}),
        ("rows_mismatch", float(check.mismatch), "count", {}),
    ]


class PostRuns:
    """`runs.oha(target, ...)` / `runs.locust(target, ...)`: measured POST runs with the rows check and the
    database's cost. `tables` maps each target's key to its table. Every run, recorded or not (calibration),
    is checked; `whole_run()` then checks each table as a whole, from the mark taken here (after the
    servers' verification POSTs) against every acknowledgement since, stragglers between runs included."""

    def __init__(self, env: LoadEnv, db: Database, tables: Mapping[str, str], *, body: Mapping[str, str]) -> None:
        self.env = env
        self.db = db
        self.tables = dict(tables)
        self.body = dict(body)  # oha sends this one device with every request
        self.start = {key: DeviceTable(db.dsn, table).high_water() for key, table in self.tables.items()}
        self.totals: dict[str, list[int]] = {}  # target key -> [acknowledged, ambiguous] over every run
        self.measure_database()

    def measure_database(self) -> None:
        """The database's process tree measured with every run where it runs here (its cgroup's exact counter,
        where it has one, read at the driver's edges)."""
        if self.db.pid is not None:
            self.env.measure_also("db", self.db.pid, self.db.account.usage_s if self.db.account is not None else None)

    def table(self, target: Target) -> DeviceTable:
        return DeviceTable(self.db.dsn, self.tables[target.key])

    def oha(
        self,
        target: Target,
        *,
        case: str,
        requests: int,
        bound_s: float,
        connections: int,
        rate: float | None = None,
        repeat: int = 0,
        params: Mapping[str, Any] | None = None,
        keep: bool = True,
        witness: PostProbe | None = None,
        per_request: bool = False,
        pss: bool = False,
        settle: Callable[[], None] | None = None,
    ) -> tuple[Measurement | None, RowsCheck | None]:
        """oha, every request the same POST; ends after `requests` requests (so none is cut off and the
        count is exact), or at `bound_s` if slower than planned (cut-off requests then count as ambiguous).
        `witness`: a probe (not yet started, sending the same body) run alongside; its ids are checked one
        by one, its failures count as ambiguous. `per_request`: oha keeps every request (`extra["requests_db"]`);
        `pss`: PostgreSQL's summed PSS is read after the run (costly with hundreds of backends). `settle`: called
        once the load has ended, while the witness still runs and before any row is read (the restart cases wait
        there until PostgreSQL is back and answering). Returns the check None when the rows could not be read."""
        options: dict[str, Any] = {"connections": connections, "method": "POST", "body": json.dumps(self.body)}
        if rate is not None:
            options["rate"] = rate
        if per_request:
            options["per_request"] = True
        mark = self.table(target).high_water()
        probe = ConnectionProbe(self.db.dsn, cpus=self.env.client_cpus, pid=self.db.pid, pss=pss) if keep else None
        with probe or contextlib.nullcontext(), witness or contextlib.nullcontext():
            m = self.env.oha(
                target,
                case=case,
                duration=bound_s,
                repeat=repeat,
                params=params,
                keep=keep,
                max_requests=requests,
                drain=witness is None,  # the witness's own connection is open by design
                **options,
            )
            if settle is not None:
                settle()
        if m is None:
            return m, None
        acked, ambiguous = load_counts(m.load)
        seen = parse_request_lines(witness.lines if witness else [])
        try:
            found = self.table(target).rows_after(mark)
        except DatabaseUnavailable as exc:
            self.unchecked(target, case, repeat, acked + len(seen.acked), ambiguous + seen.ambiguous, exc)
            return m, None
        check = check_rows(
            found,
            acked_count=acked + len(seen.acked),
            ambiguous=ambiguous + seen.ambiguous,
            acked=seen.acked,
            body=self.body,
        )
        self.record_check(
            target,
            m,
            check,
            probe,
            case=case,
            repeat=repeat,
            duration=bound_s,
            options=options,
            params=params,
            keep=keep,
        )
        return m, check

    def locust(
        self,
        target: Target,
        *,
        case: str,
        steps: Sequence[tuple[int, float]],
        think: float,
        timeout: float,
        repeat: int = 0,
        params: Mapping[str, Any] | None = None,
    ) -> tuple[Measurement | None, RowsCheck | None, Any]:
        """locust's step ramp, a random device per request, `think` s between a user's requests; the ids it
        was given are checked one by one. Returns (measurement, check, what its request logs saw)."""
        options: dict[str, Any] = {
            "steps": steps,
            "method": "POST",
            "body": "devices",
            "think": think,
            "timeout": timeout,
        }
        duration = sum(s for _u, s in steps)
        params = {"users": max(u for u, _s in steps), **(params or {})}
        mark = self.table(target).high_water()
        with ConnectionProbe(self.db.dsn, cpus=self.env.client_cpus, pid=self.db.pid) as probe:
            m = self.env.locust(target, case=case, duration=duration, repeat=repeat, params=params, **options)
        if m is None:
            return None, None, None
        seen = read_request_logs(m.load.extra.get("requests_logs", []))
        try:
            found = self.table(target).rows_after(mark)
        except DatabaseUnavailable as exc:
            self.unchecked(target, case, repeat, len(seen.acked), seen.ambiguous, exc)
            return m, None, seen
        check = check_rows(found, acked_count=len(seen.acked), ambiguous=seen.ambiguous, acked=seen.acked)
        self.record_check(
            target, m, check, probe, case=case, repeat=repeat, duration=duration, options=options, params=params
        )
        return m, check, seen

    def unchecked(
        self, target: Target, case: str, repeat: int, acked: int, ambiguous: int, why: DatabaseUnavailable
    ) -> None:
        """A run whose rows could not be read: a problem of the run, said with the reason. Its requests still
        count in the whole run's check (acknowledged as acknowledged, the rest as ambiguous), so the rows they
        inserted are never taken for phantoms."""
        total = self.totals.setdefault(target.key, [0, 0])
        total[0] += acked
        total[1] += ambiguous
        self.env.note_problem(
            f"{case} {target.key} (repeat {repeat}): rows not checked, {acked} acknowledged POSTs unverified: {why}"
        )

    def record_check(
        self,
        target: Target,
        m: Measurement,
        check: RowsCheck,
        probe: ConnectionProbe | None,
        *,
        case: str,
        repeat: int,
        duration: float,
        options: Mapping[str, Any],
        params: Mapping[str, Any] | None,
        keep: bool = True,
    ) -> None:
        """The rows check and the database's cost, with the params `LoadEnv.run` gave the run's own rows
        (`keep` false: checked and counted in the totals, not recorded)."""
        total = self.totals.setdefault(target.key, [0, 0])
        total[0] += check.acked
        total[1] += check.ambiguous
        if not check.ok:
            self.env.note_problem(f"{case} {target.key} (repeat {repeat}): rows check failed: {check.describe()}")
        if not keep:
            return
        run_params = {
            **self.env.params,
            **target.params,
            "path": target.path,
            "duration_s": duration,
            **{k: [list(v) for v in val] if k == "steps" else val for k, val in options.items()},
            **(params or {}),
        }
        metrics = [*check_metrics(check), *self.db_metrics(m, probe, inserts=check.acked)]
        self.env.record.many(
            metrics,
            case=case,
            implementation=target.name,
            variant=target.variant,
            driver=m.load.driver,
            repeat=repeat,
            client_bound=m.client_bound,
            params=run_params,
        )

    def whole_run(self) -> dict[str, tuple[RowsCheck, int]]:
        """Per app (all its tables): every row above the start marks against every acknowledgement of every
        run, by count; and the rows that were there before (the verification's) — the table then holds
        exactly `before + found` rows."""
        out: dict[str, tuple[RowsCheck, int]] = {}
        for key, table in self.tables.items():
            app = key.partition("#")[0].partition("/")[0]
            acked, ambiguous = self.totals.get(key, [0, 0])
            found = DeviceTable(self.db.dsn, table).rows_after(self.start[key])
            before = DeviceTable(self.db.dsn, table).count() - len(found)
            check = check_rows(found, acked_count=acked, ambiguous=ambiguous)
            if app in out:
                prev, prev_before = out[app]
                check = _merge(prev, check)
                before += prev_before
            out[app] = (check, before)
        return out

    def db_metrics(self, m: Measurement, probe: ConnectionProbe | None, *, inserts: int = 0) -> list[Metric]:
        """PostgreSQL's connections and memory (from the probe) and CPU (the sampler's `db` tree) over the run;
        per acknowledged insert, the app's CPU and PostgreSQL's side by side."""
        out: list[Metric] = []
        if probe is not None and probe.samples:
            out += [
                ("db_connections_peak", float(probe.peak), "count", {}),
                ("db_connections_mean", probe.mean, "count", {}),
                ("db_connections_open_peak", float(probe.open_peak), "count", {}),  # every app's pool
            ]
        if probe is not None and probe.rss:
            out.append(("db_rss_peak_bytes", float(probe.rss_peak), "bytes", {}))  # shared buffers once per process
        if probe is not None and probe.pss is not None:
            out.append(("db_pss_bytes", float(probe.pss), "bytes", {}))  # after the run; shared pages split
        usage = m.extra.get("db")
        if usage is None or not m.load.requests or m.load.duration <= 0:
            return out
        cores = max(1, len(self.db.cpus))
        bound = is_db_bound(
            usage.cpu_seconds, m.server.cpu_seconds, m.load.duration, cores=cores, shared=self.db.shared
        )
        # where PostgreSQL's CPU came from: its cgroup's counter at the driver's edges, or /proc samples
        source = {"db_cpu_source": "cgroup" if "db" in self.env.extra_cpu else "proc"}
        out += [
            ("db_cpu_s_per_request", usage.cpu_seconds / m.load.requests, "s", source),
            ("db_cpu_share", usage.cpu_seconds / m.load.duration / cores, "ratio", source),
            ("db_bound", 1.0 if bound else 0.0, "ratio", source),
            # app + database per insert: what one acknowledged row cost the server side in all
            ("total_cpu_s_per_request", (usage.cpu_seconds + m.server.cpu_seconds) / m.load.requests, "s", source),
        ]
        both = usage.cpu_seconds + m.server.cpu_seconds
        if inserts > 0 and both > 0:
            out += [
                ("app_cpu_s_per_insert", m.server.cpu_seconds / inserts, "s", source),
                ("db_cpu_s_per_insert", usage.cpu_seconds / inserts, "s", source),
                ("db_cpu_fraction_of_total", usage.cpu_seconds / both, "ratio", source),
            ]
        return out


def _merge(a: RowsCheck, b: RowsCheck) -> RowsCheck:
    return RowsCheck(
        a.acked + b.acked,
        a.found + b.found,
        a.ambiguous + b.ambiguous,
        a.lost + b.lost,
        a.phantom + b.phantom,
        a.mismatched + b.mismatched,
        a.by_id and b.by_id,
    )
