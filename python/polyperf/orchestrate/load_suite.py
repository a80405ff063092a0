"""`LoadEnv`, the one object of a load suite (on the model of locust's `Environment`): it owns the client
CPUs, the logs, the recorder and the fleet, and hands out measured runs — `env.oha(...)`, `env.wrk(...)`,
`env.locust(...)` — each recorded at once as tidy rows. A server that dies is dropped with its exit code
and log tail, a driver that fails is noted, and the other targets go on; `problems` lists all of it.
"""

from __future__ import annotations

import contextlib
import math
import random
import secrets
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, Unpack

from polyperf.common.cpus import cpu_label
from polyperf.common.paths import log_part
from polyperf.common.repeats import repeat_numbers, top_up_targets
from polyperf.errors import PolyperfError, ServerFailed
from polyperf.load import DRIVERS, Bounds, LoadFailed
from polyperf.measure.count_parse import IoCounts
from polyperf.measure.sampler import Measurement, measure
from polyperf.orchestrate.count_runs import CountPlan, count_target, maybe_io_counts, window_io_rows
from polyperf.orchestrate.retry import LOAD_LIMIT, Retries, retried
from polyperf.orchestrate.run_settings import LocustRun, OhaRun, WrkRun, proc_cpu
from polyperf.record.recorder import Metric, Recorder
from polyperf.record.rows import measurement_rows
from polyperf.serve.cpu_budget import ThrottleStats
from polyperf.serve.drain import Quiet, wait_quiet
from polyperf.serve.fleet import Fleet, Target

__all__ = ["MAX_REQUESTS", "LoadEnv", "proc_cpu"]

MAX_REQUESTS = 50_000_000  # the safety bound of every run; durations are what end them
QUOTA_BOUND = 0.9  # share of its quota a budgeted server must use for the run to measure the server
T = TypeVar("T")


def _per_request_rows(m: Measurement, io: list[IoCounts | None]) -> list:
    """What each request cost the client (CPU) and the server (read/write syscalls over the window): where
    generators differ, these say why."""
    if not m.load.requests:
        return []
    return [
        ("client_cpu_s_per_request", m.client.cpu_seconds / m.load.requests, "s", {}),
        *window_io_rows(io, m.load.requests),
    ]


def _as_param(value: Any) -> Any:
    return [_as_param(v) for v in value] if isinstance(value, list | tuple) else value


class LoadEnv:
    """Measured load runs against `fleet`, recorded through `record` (see the module doc)."""

    def __init__(
        self,
        fleet: Fleet,
        record: Recorder,
        *,
        client_cpus: Sequence[int],
        log_dir: Path,
        params: Mapping[str, Any] | None = None,
        flamegraph_dir: Path | None = None,
        seed: int | None = None,
    ) -> None:
        self.fleet = fleet
        self.record = record
        self.client_cpus = list(client_cpus)
        self.log_dir = Path(log_dir)
        self.flamegraph_dir = flamegraph_dir
        # what every row of this environment carries: the CPU split, stated in the results
        self.params = {
            "server_cpus": cpu_label(fleet.server_cpus),
            "client_cpus": cpu_label(self.client_cpus),
            "server_workers": fleet.workers,
            **(params or {}),
        }
        # the seed of every random order this environment draws (env.json has it; `--seed` repeats it)
        self.seed = secrets.randbelow(2**32) if seed is None else seed
        self._rng = random.Random(f"{self.seed}:{getattr(record, 'suite', '')}")  # each suite its own sequence
        self._slot: tuple[int, str, int] | None = None  # (repeat, target key, slot) of interleave's current item
        self.problems: list[str] = []
        self.retries = Retries(limit=LOAD_LIMIT, cap=LOAD_LIMIT)  # failed runs tried again, counted
        # the client-bound flag of the last run (the rows' `client_bound`: the client, or a budget the server
        # did not fill, was the limit), for cases that summarise their runs (a ramp's peak)
        self.last_client_bound: bool | None = None
        # more process trees measured with every run, by name (e.g. {"db": PostgreSQL's postmaster pid})
        self.extra_pids: dict[str, int] = {}
        # exact CPU-seconds counters of some of them, read at the driver's edges (e.g. {"db": a cgroup's usage})
        self.extra_cpu: dict[str, Callable[[], float]] = {}

    def interleave(
        self,
        repeats: int,
        targets: Sequence[Target] | None = None,
        *,
        processes: int = 1,
        warm_up: Callable[[Target], object] | None = None,
        series: bool = True,
    ) -> Iterator[tuple[int, Target]]:
        """(repeat, target), every target once per repeat in an order drawn anew each repeat from the seeded
        generator (so neither drift of a shared machine nor a fixed neighbour favours one target); the slot
        goes into the rows' params. A target that died meanwhile is skipped.

        `processes` > 1 spreads the repeats over that many server processes per target (contiguous blocks; a
        process keeps one speed for its whole life, so a claim on one process measures that process): before each
        new block every target is restarted and warmed up unrecorded (`warm_up(target)`, else 0.3 s of oha GET);
        rows carry the process's number as `server_process`."""
        chosen = list(targets or self.fleet.targets)
        # a top-up's own repeat numbers (`common.repeats`); `series=False`: a calibration or warm-up, run as asked
        numbers = repeat_numbers(repeats) if series else range(repeats)
        if series and repeats > 1:
            self.record.narrows()
            # a top-up measures again only the targets its open entries select (the others' entries are decided);
            # a loop of a test over other targets measures none (a test may loop over claimed and context targets)
            wanted = top_up_targets()
            if wanted is not None:
                chosen = [t for t in chosen if (t.name, t.variant) in wanted]
        block = math.ceil(len(numbers) / max(1, min(processes, len(numbers)))) if numbers else 1
        try:
            for index, repeat in enumerate(numbers):
                if index and index % block == 0:
                    self._restart(chosen, warm_up)
                for slot, target in enumerate(self.order(chosen)):
                    if target.key in self.fleet.servers:
                        self._slot = (repeat, target.key, slot)
                        yield repeat, target
        finally:
            self._slot = None

    def _restart(self, targets: Sequence[Target], warm_up: Callable[[Target], object] | None) -> None:
        for target in targets:
            if target.key not in self.fleet.servers:
                continue
            self.fleet.restart(target.key)
            if target.key not in self.fleet.servers:
                self.problems.append(f"{target.key}: {self.fleet.failed.get(target.key)}")
            elif warm_up is not None:
                warm_up(target)
            else:
                self.oha(target, case="warmup", duration=0.3, connections=16, keep=False, **target.request)

    def order(self, items: Sequence[T]) -> list[T]:
        """`items` in a random order drawn from this environment's seeded generator (e.g. drivers per repeat)."""
        shuffled = list(items)
        self._rng.shuffle(shuffled)
        return shuffled

    def _quiet(self, timeout: float = 3.0) -> Quiet:
        """Waits until no server has an open connection or rising CPU (bounded): the run about to start is the
        only work any server does."""
        ports = [server.port for _target, server in self.fleet.running]
        counters: dict[str, Callable[[], float]] = {}
        for target, server in self.fleet.running:
            counters[target.key] = self.fleet.server_cpu(target.key) or proc_cpu(server.pid)
        # /proc counts CPU in 10 ms ticks: one tick is not a busy server there
        idle = 0.001 if self.fleet.cpu_source == "cgroup" else 0.011
        return wait_quiet(ports, counters, timeout=timeout, idle=idle)

    # The same keyword tail as count_runs.count_target: every run of a suite takes a case, repeat and params.
    def run(
        self,
        target: Target,
        driver: str,
        *,
        case: str,
        duration: float,
        repeat: int = 0,
        params: Mapping[str, Any] | None = None,
        keep: bool = True,
        max_requests: int = MAX_REQUESTS,
        drain: bool = True,
        **options: Any,
    ) -> Measurement | None:
        """One measured run of `driver` (a name in `polyperf.load.DRIVERS`) against `target`, recorded unless
        `keep` is false (warm-ups, calibration); None if the server or the driver failed. Every server is
        quiet first (see `_quiet`) unless `drain` is false — for a case that keeps a client of its own on the
        server through the run (a witness probe started before it); its rows then say `drain_skipped`. The
        server's CPU is its cgroup's counter where the fleet has one."""
        server = self.fleet.servers.get(target.key)
        if server is None:
            return None
        run_driver = DRIVERS[driver]
        bounds = Bounds(duration, max_requests)
        url = server.url + target.path
        where = f"{case} {target.key} ({driver}, repeat {repeat})"

        io: list[IoCounts | None] = []  # the server's read/write-family syscalls at the driver's start and end

        def drive(on_spawn: Callable[[int], None]) -> Any:
            io.append(maybe_io_counts(server.pid))
            result = run_driver(
                url,
                bounds=bounds,
                client_cpus=self.client_cpus,
                log_dir=log_part(self.log_dir, "load", driver),
                on_spawn=on_spawn,
                alive=server.check_alive,
                **options,
            )
            io.append(maybe_io_counts(server.pid))
            return result

        budget = self.fleet.budgets.get(target.key)
        quiet = self._quiet() if drain else None

        def attempt() -> tuple[Measurement, ThrottleStats | None]:
            io.clear()
            before = budget.stats() if budget is not None else None
            return measure(
                server.pid,
                drive,
                client_cpus=self.client_cpus,
                alive=server.check_alive,
                extra=self.extra_pids,
                server_cpu=self.fleet.server_cpu(target.key),
                extra_cpu=self.extra_cpu,
            ), before

        try:  # a driver that failed, or a window that served no request, is tried again (orchestrate.retry)
            done, notes = retried(
                self.retries, attempt, where=where, transient=(LoadFailed,), empty=lambda r: not r[0].load.requests
            )
        except ServerFailed as exc:
            self.fleet.drop(target.key, str(exc))
            self.problems.append(f"{where}: server died: {exc}")
            self._log_run(driver, f"{where}: server died: {exc}")
            return None
        self.problems += notes
        if done is None:
            self._log_run(driver, f"failed: {notes[-1]}")
            return None
        m, before = done
        load = m.load
        self._log_run(
            driver,
            f"{where}: {load.requests} requests in {load.duration:.2f} s, {load.failures} failed"
            f"{', client-bound' if m.client_bound else ''}{'' if keep else ' (not recorded)'}",
        )
        budget_rows, saturated = self._budget_rows(target, m, before)
        self.last_client_bound = m.client_bound or not saturated
        if keep:
            run_params = {
                **self._run_params(target, m, quiet, repeat),
                "duration_s": duration,
                **{k: _as_param(v) for k, v in options.items()},
                **(params or {}),
            }
            self.record.many(
                [*measurement_rows(m), *budget_rows, *_per_request_rows(m, io)],
                case=case,
                implementation=target.name,
                variant=target.variant,
                driver=driver,
                repeat=repeat,
                client_bound=m.client_bound or not saturated,
                params=run_params,
            )
        return m

    def _log_run(self, driver: str, line: str) -> None:
        """`logs/<driver>.log`: one line per run of that generator (its raw files are in `logs/load/<driver>/`)."""
        with contextlib.suppress(OSError), (self.log_dir / f"{driver}.log").open("a", encoding="utf-8") as log:
            log.write(f"{time.strftime('%H:%M:%S')} {line}\n")

    def _run_params(self, target: Target, m: Measurement, quiet: Quiet | None, repeat: int) -> dict[str, Any]:
        """What a run's rows carry besides the driver's options: the CPU split as it really was, where the
        server's CPU came from, the slot in this repeat's random order, and a drain that ran out of time."""
        out = {
            **self.params,
            **target.params,
            "path": target.path,
            "cpu_source": m.cpu_source,
            "server_affinity": cpu_label(self.fleet.affinity.get(target.key, [])),
            "client_affinity": cpu_label(m.client_affinity),
        }
        if self._slot is not None and self._slot[:2] == (repeat, target.key):
            out["slot"] = self._slot[2]
        out["server_process"] = getattr(self.fleet, "starts", {}).get(target.key, 0)  # stand-in fleets have none
        if quiet is None:
            out["drain_skipped"] = True
        elif quiet.timed_out:  # the run started anyway; say what was still busy
            out |= {"drain_timed_out": True, "drain_open_connections": quiet.open_connections}
            out |= {"drain_busy": ",".join(quiet.busy)} if quiet.busy else {}
        budget = self.fleet.budgets.get(target.key)
        if budget is not None:
            out |= {"cpu_quota": budget.fraction, "cpu_quota_period_s": budget.period_s}
        return out

    def _budget_rows(self, target: Target, m: Measurement, before: ThrottleStats | None) -> tuple[list, bool]:
        """Throttling over the run, and whether the budget bound (the server used >= 90% of its quota): a run
        under a budget that the server did not fill was limited by the client, whatever its CPU says."""
        budget = self.fleet.budgets.get(target.key)
        if budget is None or before is None:
            return [], True
        delta = budget.stats() - before
        quota_use = m.server.cpu_seconds / (budget.fraction * m.load.duration) if m.load.duration > 0 else 0.0
        rows: list[Metric] = [
            ("cpu_quota", budget.fraction, "ratio", {}),
            ("cpu_quota_period_s", budget.period_s, "s", {}),
            ("nr_periods", float(delta.nr_periods), "count", {}),
            ("nr_throttled", float(delta.nr_throttled), "count", {}),
            ("throttled_s", delta.throttled_s, "s", {}),
            ("quota_use", quota_use, "ratio", {}),
        ]
        return rows, quota_use >= QUOTA_BOUND

    def calibrate_cpu_quota(
        self,
        *,
        duration: float = 0.5,
        steps: int = 3,
        targets: Sequence[Target] | None = None,
        request: Mapping[str, Any] | None = None,
    ) -> float:
        """`--server-cpu-quota auto`: the largest budget, the same for every server, at which one client run is no
        longer the limit (`orchestrate.cpu_quota`)."""
        from polyperf.orchestrate.cpu_quota import calibrate_cpu_quota

        return calibrate_cpu_quota(self, duration=duration, steps=steps, targets=targets, request=request)

    def oha(self, target: Target, *, case: str, duration: float, **options: Unpack[OhaRun]) -> Measurement | None:
        """oha: closed model (`connections`) or fixed rate (`rate`, latency corrected)."""
        return self.run(target, "oha", case=case, duration=duration, **options)

    def wrk(self, target: Target, *, case: str, duration: float, **options: Unpack[WrkRun]) -> Measurement | None:
        return self.run(target, "wrk", case=case, duration=duration, **options)

    def locust(self, target: Target, *, case: str, duration: float, **options: Unpack[LocustRun]) -> Measurement | None:
        """locust's FastHttpUser: `users`, or a step ramp `steps=[(users, seconds), ...]`."""
        return self.run(target, "locust", case=case, duration=duration, **options)

    def calibrate(self, *, duration: float, connections: int = 64) -> dict[str, float]:
        """An explicit, unrecorded step: each running target's oha ceiling (req/s) over a short run. Also the
        warm-up (caches, pools, page faults) before recorded runs."""
        ceilings = {}
        for _repeat, target in self.interleave(1, series=False):
            options = {"connections": connections, **target.request}
            m = self.oha(target, case="calibration", duration=duration, keep=False, **options)
            if m is not None:
                ceilings[target.key] = m.load.rps
        return ceilings

    def flamegraph(self, target: Target, *, name: str, duration: float, connections: int = 64) -> Path | None:
        """An extra, unrecorded oha run under `perf record` (perf perturbs what it watches, so no numbers come
        from it), rendered to `<flamegraph_dir>/<name>.svg`. Does nothing without `flamegraph_dir`."""
        from polyperf.measure.flamegraph import PerfRecord, render

        server = self.fleet.servers.get(target.key)
        if self.flamegraph_dir is None or server is None:
            return None
        data = self.flamegraph_dir / f"{name}.perf.data"
        try:
            with PerfRecord(server.pid, data, cpus=self.client_cpus):
                self.oha(target, case="flamegraph", duration=duration, connections=connections, keep=False)
            return render(
                data,
                self.flamegraph_dir / f"{name}.svg",
                title=f"{target.key} under oha (server CPUs {cpu_label(self.fleet.server_cpus)})",
            )
        except PolyperfError as exc:
            self.problems.append(f"flamegraph {name}: {exc}")
            return None
        finally:
            data.unlink(missing_ok=True)

    def count(self, target: Target, *, case: str = "counts", plan: CountPlan | None = None, **kwargs: Any) -> bool:
        """Syscalls and allocations per request of `target` over a fixed number of requests after a warm-up
        (`record.count_runs`): a second, untimed server of the target; False if it could not be counted."""
        return count_target(self, target, plan or CountPlan(), case=case, **kwargs)

    def take_problems(self) -> list[str]:
        """The problems noted since the last call (the suite fails its test with them)."""
        problems, self.problems = self.problems, []
        return problems

    # --- what others may change, through these methods only -------------------------------------------------
    def note_problem(self, text: str) -> None:
        """A problem the current test fails with at its end; the other targets go on meanwhile."""
        self.problems.append(text)

    def add_params(self, **params: Any) -> None:
        """Params every later row of this environment carries (a database's settings, the budget `auto` found)."""
        self.params.update(params)

    def measure_also(self, name: str, pid: int, cpu: Callable[[], float] | None = None) -> None:
        """Measure the process tree of `pid` with every run from now on, as `name` (e.g. "db": PostgreSQL's
        postmaster); `cpu`, an exact CPU-seconds counter of it (its cgroup's), is read at the driver's edges."""
        self.extra_pids[name] = pid
        if cpu is not None:
            self.extra_cpu[name] = cpu

    def stop_measuring(self, name: str) -> None:
        """No longer measure the tree `measure_also` named (e.g. while it restarts under a new pid)."""
        self.extra_pids.pop(name, None)
        self.extra_cpu.pop(name, None)
