"""The servers' side of `polyperf ab`: each server of a load suite built at both revisions, measured as a duet.
HEAD's harness (fleet, driver, pinning, CPU accounting), each revision's server.

In every repeat each server is restarted from both revisions' binaries (a fresh process per side and repeat, the
two started in the repeat's seeded order), warmed up unrecorded, and then A and B are loaded *at the same time*
(duet benchmarking, Bulej et al. 2020), each by its own oha at one fixed rate, both servers pinned to the server
CPUs and both clients to the client CPUs. The gated value is each server's CPU per request over the window: its
cgroup's exact counter where cgroups are writable, else /proc's 10 ms ticks.

Why a duet at a fixed rate, measured on this 2-core VM (same binary on both sides, paired log-ratio's spread over
8-10 repeats): A then B, each at its ceiling under a CPU budget, spread 0.11-0.30 (a budgeted server's cost per
request follows how requests pile up while it is throttled); A then B at a fixed rate, 0.08-0.23 (the VM's speed
drifts within seconds); a duet at a fixed rate in 0.5 s windows 0.04-0.07, in 2 s windows 0.02-0.04. At a rate
below every server's capacity each request is served alone, and both sides see the same machine at the same time.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType

from polyperf.build.revisions import Revision, RevisionError
from polyperf.common.cpus import split_cpus
from polyperf.errors import PolyperfError
from polyperf.load import ensure_oha
from polyperf.load.native_driver import run_oha
from polyperf.load.result import Bounds, LoadFailed, LoadResult
from polyperf.orchestrate.retry import RepeatFailed
from polyperf.orchestrate.run_settings import proc_cpu
from polyperf.record.schema import Row
from polyperf.serve.fleet import Fleet, Target
from polyperf.serve.suite_targets import HTTP_FRAMEWORKS

__all__ = ["SERVER_SUITES", "DuetPlan", "ServerSides", "apps_of"]

SERVER_SUITES: dict[str, Sequence[Target]] = {"http_frameworks": HTTP_FRAMEWORKS}
CASE = "duet"
MAX_REQUESTS = 10_000_000  # the bound of every window besides its duration


def apps_of(suites: Iterable[str]) -> list[str]:
    """The apps whose binaries the server suites among `suites` need, each once."""
    return list(dict.fromkeys(t.name for s in suites for t in SERVER_SUITES.get(s, ())))


@dataclass(frozen=True)
class DuetPlan:
    """One repeat of one server: a warm-up, then both sides at `rate` requests/s each for `window_s`. The rate is
    below every measured server's capacity with two of them sharing one server CPU (a few hundred thousand
    requests/s would be needed to fill it at 20-40 µs each), so the offered load, not the server, sets the pace."""

    window_s: float = 2.0
    warm_up_s: float = 0.3
    rate: int = 4_000
    connections: int = 32


class ServerSides:
    """The servers of `suites` at sides A and B (`revisions`), started, verified and pinned; `measure(repeat,
    order)` returns both sides' rows of one repeat. Use as a context manager: every server and cgroup is stopped
    on the way out, also on failure and Ctrl-C."""

    def __init__(
        self,
        suites: Sequence[str],
        revisions: Mapping[str, Revision],
        *,
        log_dir: Path,
        env_b: Mapping[str, str] | None = None,
        plan: DuetPlan | None = None,
    ) -> None:
        self.plan = plan or DuetPlan()
        self.log_dir = Path(log_dir)
        self.servers: list[tuple[str, Target]] = []  # (suite, the suite's target)
        self.builds: dict[tuple[str, str], Target] = {}  # (side, target key) -> that side's build
        for suite in suites:
            for target in SERVER_SUITES[suite]:
                self.servers.append((suite, target))
                for side, rev in revisions.items():
                    self.builds[side, target.key] = replace(
                        target,
                        instance=f"{target.instance}-{side}" if target.instance else side,
                        binary=rev.binaries[target.name],
                        env=dict(env_b or {}) if side == "B" else {},
                    )
        self.commits = {side: rev.commit for side, rev in revisions.items()}
        self.server_cpus, self.client_cpus = split_cpus()
        self.fleet = Fleet(list(self.builds.values()), log_dir=self.log_dir, server_cpus=self.server_cpus)

    def __enter__(self) -> ServerSides:
        ensure_oha()
        self.fleet.__enter__()  # builds nothing (each side's binary is given), starts and verifies every build
        if self.fleet.failed:
            failed = "; ".join(f"{key}: {why}" for key, why in self.fleet.failed.items())
            self.fleet.stop()
            raise RevisionError(f"servers that did not start or pass verification: {failed}")
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.fleet.stop()

    @property
    def conditions(self) -> dict[str, object]:
        """How the servers were measured, for env.json and the table's footnote."""
        return {
            "method": "duet",
            "server_cpus": self.server_cpus,
            "client_cpus": self.client_cpus,
            "cpu_source": self.fleet.cpu_source,
            "window_s": self.plan.window_s,
            "rate": self.plan.rate,
            "connections": self.plan.connections,
        }

    def measure(self, repeat: int, order: Sequence[str]) -> list[Row]:
        """Both sides of repeat `repeat`, server by server: each side's process restarted (in `order`), warmed up,
        then both loaded at once. Raises RepeatFailed when a load generator fails or a window serves no request
        (the session tries the repeat again), RevisionError when a server dies or cannot restart."""
        rows: list[Row] = []
        for suite, target in self.servers:
            builds = {side: self.builds[side, target.key] for side in order}
            for side in order:
                key = builds[side].key
                self.fleet.restart(key)
                if key not in self.fleet.servers:
                    raise RevisionError(f"{key} could not be restarted: {self.fleet.failed.get(key)}")
            self._together(builds, self.plan.warm_up_s, rate=None)
            results = self._together(builds, self.plan.window_s, rate=self.plan.rate)
            for slot, side in enumerate(order):
                cpu_s, load = results[side]
                rows += self._rows(suite, target, side, slot, repeat, cpu_s, load)
        return rows

    def _together(
        self, builds: Mapping[str, Target], duration: float, *, rate: int | None
    ) -> dict[str, tuple[float, LoadResult]]:
        """Loads every side's server at once, one oha each (threads only wait on processes); per side the server's
        CPU seconds over its load and the load's result."""
        results: dict[str, tuple[float, LoadResult]] = {}
        errors: list[str] = []
        failures: list[RepeatFailed] = []  # of the moment: the session tries the repeat again

        def drive(side: str) -> None:
            key = builds[side].key
            server = self.fleet.servers[key]
            counter = self.fleet.server_cpu(key) or proc_cpu(server.pid)  # a cgroup's exact counter, else /proc
            try:
                before = counter()
                load = run_oha(
                    server.url + builds[side].path,
                    bounds=Bounds(duration, MAX_REQUESTS),
                    client_cpus=self.client_cpus,
                    log_dir=self.log_dir,
                    connections=self.plan.connections if rate else 16,
                    **({"rate": rate} if rate else {}),
                    alive=server.check_alive,
                )
                results[side] = (counter() - before, load)
            except LoadFailed as exc:  # e.g. a load generator still running 15 s after a 0.3 s warm-up
                failures.append(RepeatFailed(f"{key}: {exc}", kind="load generator failed", where=key))
            except PolyperfError as exc:
                errors.append(f"{key}: {exc}")

        threads = [threading.Thread(target=drive, args=(side,), name=f"ab-{side}") for side in builds]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise RevisionError(errors[0])
        if failures:
            raise failures[0]
        for side, (_cpu, load) in results.items():
            key = builds[side].key
            if load.requests == 0:
                raise RepeatFailed(f"{key}: served no request in {duration} s", kind="no request served", where=key)
            if load.failures > 0.01 * load.requests:
                raise RepeatFailed(
                    f"{key}: {load.failures} of {load.requests} requests failed", kind="requests failed", where=key
                )
        return results

    def _rows(
        self, suite: str, target: Target, side: str, slot: int, repeat: int, cpu_s: float, load: LoadResult
    ) -> list[Row]:
        server = f"{target.name}/{target.variant}" if target.variant else target.name
        params = {
            "slot": slot,
            "commit": self.commits[side],
            "rate": self.plan.rate,
            "duration_s": self.plan.window_s,
            "server_cpus": ",".join(map(str, self.server_cpus)),
            "client_cpus": ",".join(map(str, self.client_cpus)),
            "cpu_source": self.fleet.cpu_source,
            "server_process": self.fleet.starts.get(self.builds[side, target.key].key, 0),
            **target.params,
        }
        values = [
            ("cpu_s_per_request", cpu_s / load.requests, "s"),
            ("server_cpu_s", cpu_s, "s"),
            ("requests", float(load.requests), "count"),
            ("rps", load.rps, "1/s"),
            *((f"latency_p{round(q * 100)}_s", v, "s") for q, v in load.latency.items() if q in (0.5, 0.99)),
        ]
        return [
            Row(suite, CASE, server, side, metric, value, unit, repeat, params, "oha") for metric, value, unit in values
        ]
