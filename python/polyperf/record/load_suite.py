"""`LoadEnv`, the one object of a load suite (on the model of locust's `Environment`): it owns the client
CPUs, the logs, the recorder and the fleet, and hands out measured runs — `env.oha(...)`, `env.wrk(...)`,
`env.locust(...)` — each recorded at once as tidy rows. A server that dies is dropped with its exit code
and log tail, a driver that fails is noted, and the other targets go on; `problems` lists all of it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from polyperf.common.cpus import cpu_label
from polyperf.errors import PolyperfError, ServerFailed
from polyperf.load import DRIVERS, Bounds, LoadFailed
from polyperf.measure.sampler import Measurement, measure
from polyperf.record.recorder import Recorder
from polyperf.record.rows import measurement_rows
from polyperf.serve.cpu_budget import ThrottleStats
from polyperf.serve.fleet import Fleet, Target

__all__ = ["MAX_REQUESTS", "LoadEnv"]

MAX_REQUESTS = 50_000_000  # the safety bound of every run; durations are what end them
QUOTA_BOUND = 0.9  # share of its quota a budgeted server must use for the run to measure the server


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
        self.problems: list[str] = []
        # more process trees measured with every run, by name (e.g. {"db": PostgreSQL's postmaster pid})
        self.extra_pids: dict[str, int] = {}

    def interleave(self, repeats: int, targets: Sequence[Target] | None = None) -> Iterator[tuple[int, Target]]:
        """(repeat, target) as A B C A B C …, so drift of a shared machine hits every target alike; a target
        that died meanwhile is skipped."""
        for repeat in range(repeats):
            for target in targets or self.fleet.targets:
                if target.key in self.fleet.servers:
                    yield repeat, target

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
        **options: Any,
    ) -> Measurement | None:
        """One measured run of `driver` (a name in `polyperf.load.DRIVERS`) against `target`, recorded unless
        `keep` is false (warm-ups, calibration); None if the server or the driver failed."""
        server = self.fleet.servers.get(target.key)
        if server is None:
            return None
        run_driver = DRIVERS[driver]
        bounds = Bounds(duration, max_requests)
        url = server.url + target.path
        where = f"{case} {target.key} ({driver}, repeat {repeat})"

        def drive(on_spawn: Callable[[int], None]) -> Any:
            return run_driver(
                url,
                bounds=bounds,
                client_cpus=self.client_cpus,
                log_dir=self.log_dir,
                on_spawn=on_spawn,
                alive=server.check_alive,
                **options,
            )

        budget = self.fleet.budgets.get(target.key)
        before = budget.stats() if budget is not None else None
        try:
            m = measure(
                server.pid, drive, client_cpus=self.client_cpus, alive=server.check_alive, extra=self.extra_pids
            )
        except ServerFailed as exc:
            self.fleet.drop(target.key, str(exc))
            self.problems.append(f"{where}: server died: {exc}")
            return None
        except LoadFailed as exc:
            self.problems.append(f"{where}: {exc}")
            return None
        budget_rows, saturated = self._budget_rows(target, m, before)
        if keep:
            run_params = {
                **self.params,
                **target.params,
                "path": target.path,
                "duration_s": duration,
                **{k: _as_param(v) for k, v in options.items()},
                **(params or {}),
            }
            if budget is not None:
                run_params |= {"cpu_quota": budget.fraction, "cpu_quota_period_s": budget.period_s}
            self.record.many(
                [*measurement_rows(m), *budget_rows],
                case=case,
                implementation=target.name,
                variant=target.variant,
                driver=driver,
                repeat=repeat,
                client_bound=m.client_bound or not saturated,
                params=run_params,
            )
        return m

    def _budget_rows(self, target: Target, m: Measurement, before: ThrottleStats | None) -> tuple[list, bool]:
        """Throttling over the run, and whether the budget bound (the server used >= 90% of its quota): a run
        under a budget that the server did not fill was limited by the client, whatever its CPU says."""
        budget = self.fleet.budgets.get(target.key)
        if budget is None or before is None:
            return [], True
        delta = budget.stats() - before
        quota_use = m.server.cpu_seconds / (budget.fraction * m.load.duration) if m.load.duration > 0 else 0.0
        rows = [
            ("cpu_quota", budget.fraction, "ratio", {}),
            ("cpu_quota_period_s", budget.period_s, "s", {}),
            ("nr_periods", float(delta.nr_periods), "count", {}),
            ("nr_throttled", float(delta.nr_throttled), "count", {}),
            ("throttled_s", delta.throttled_s, "s", {}),
            ("quota_use", quota_use, "ratio", {}),
        ]
        return rows, quota_use >= QUOTA_BOUND

    def calibrate_cpu_quota(self, *, duration: float = 1.0, steps: int = 3) -> float:
        """`--server-cpu-quota auto`: the largest budget, the same for every server, at which one client run
        is no longer the limit. Estimate from an unthrottled probe of each server (client capacity / server
        requests per CPU-second, with a 30% margin), then confirm with a short run each, lowering by a
        quarter up to `steps` times; falls back to 0.25 CPU and says so in `problems`."""
        self.fleet.set_cpu_quota(1.0)
        estimates = []
        for _repeat, target in self.interleave(1):
            m = self.oha(target, case="calibration", duration=duration, keep=False)
            if m is not None and m.client_cpu_fraction > 0 and m.requests_per_cpu_second > 0:
                estimates.append(0.7 * (m.load.rps / m.client_cpu_fraction) / m.requests_per_cpu_second)
        floor = max(0.1, 0.001 / self.fleet.quota_period_s)
        fraction = max(floor, min(1.0, math.floor(min(estimates, default=0.25) * 20) / 20))
        for _ in range(steps):
            self.fleet.set_cpu_quota(fraction)
            if self._budget_binds(duration):
                return fraction
            fraction = max(floor, round(fraction * 0.75, 3))
        self.fleet.set_cpu_quota(0.25)
        self.problems.append(
            f"--server-cpu-quota auto: no budget was confirmed in {steps} steps; measured at 0.25 CPU instead"
        )
        return 0.25

    def _budget_binds(self, duration: float) -> bool:
        for _repeat, target in self.interleave(1):
            budget = self.fleet.budgets.get(target.key)
            before = budget.stats() if budget else None
            m = self.oha(target, case="calibration", duration=duration, keep=False)
            if m is None:
                continue
            _rows, saturated = self._budget_rows(target, m, before)
            if m.client_bound or not saturated:
                return False
        return True

    def oha(self, target: Target, **kwargs: Any) -> Measurement | None:
        """oha: closed model (`connections`) or fixed rate (`rate`, latency corrected)."""
        return self.run(target, "oha", **kwargs)

    def wrk(self, target: Target, **kwargs: Any) -> Measurement | None:
        return self.run(target, "wrk", **kwargs)

    def locust(self, target: Target, **kwargs: Any) -> Measurement | None:
        """locust's FastHttpUser: `users`, or a step ramp `steps=[(users, seconds), ...]`."""
        return self.run(target, "locust", **kwargs)

    def calibrate(self, *, duration: float, connections: int = 64) -> dict[str, float]:
        """An explicit, unrecorded step: each running target's oha ceiling (req/s) over a short run. Also the
        warm-up (caches, pools, page faults) before recorded runs."""
        ceilings = {}
        for _repeat, target in self.interleave(1):
            m = self.oha(target, case="calibration", duration=duration, connections=connections, keep=False)
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

    def take_problems(self) -> list[str]:
        """The problems noted since the last call (the suite fails its test with them)."""
        problems, self.problems = self.problems, []
        return problems
