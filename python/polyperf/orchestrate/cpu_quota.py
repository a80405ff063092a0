"""`--server-cpu-quota auto`: the largest CPU budget, the same for every server, at which one client run is no longer
the limit, found by probing the load environment's servers (unrecorded runs: calibrations, never series)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from polyperf.serve.fleet import Target

if TYPE_CHECKING:
    from polyperf.orchestrate.load_suite import LoadEnv

__all__ = ["calibrate_cpu_quota"]


def calibrate_cpu_quota(
    env: LoadEnv,
    *,
    duration: float = 0.5,
    steps: int = 3,
    targets: Sequence[Target] | None = None,
    request: Mapping[str, Any] | None = None,
) -> float:
    """`--server-cpu-quota auto`: the largest budget, the same for every server, at which one client run
    is no longer the limit. Estimate from an unthrottled probe of each server (client capacity per core it
    wanted / server requests per CPU-second, with a 30% margin), then confirm with a short run each, lowering by a
    quarter up to `steps` times; falls back to 0.25 CPU and says so in `problems`. The probes send each target's
    own `request` (or `request`, for every target); `targets` limits them (the budget is set for every server)."""
    env.fleet.set_cpu_quota(1.0)
    estimates = []
    for _repeat, target in env.interleave(1, targets, series=False):
        m = env.oha(target, case="calibration", duration=duration, keep=False, **(request or target.request))
        # the client's requests per core it wanted, not per core it got: on a machine busy with other work
        # it gets a share of its core, and a whole core's worth of requests will not come
        wanted = max(m.client_cpu_fraction, m.client_demand_fraction) if m is not None else 0.0
        if m is not None and wanted > 0 and m.requests_per_cpu_second > 0:
            estimates.append(0.7 * (m.load.rps / wanted) / m.requests_per_cpu_second)
    floor = max(0.1, 0.001 / env.fleet.quota_period_s)
    fraction = max(floor, min(1.0, math.floor(min(estimates, default=0.25) * 20) / 20))
    for _ in range(steps):
        env.fleet.set_cpu_quota(fraction)
        if _budget_binds(env, duration, targets, request):
            return fraction
        fraction = max(floor, round(fraction * 0.75, 3))
    env.fleet.set_cpu_quota(0.25)
    env.problems.append(
        f"--server-cpu-quota auto: no budget was confirmed in {steps} steps; measured at 0.25 CPU instead"
    )
    return 0.25


def _budget_binds(
    env: LoadEnv, duration: float, targets: Sequence[Target] | None, request: Mapping[str, Any] | None
) -> bool:
    for _repeat, target in env.interleave(1, targets, series=False):
        budget = env.fleet.budgets.get(target.key)
        before = budget.stats() if budget else None
        m = env.oha(target, case="calibration", duration=duration, keep=False, **(request or target.request))
        if m is None:
            continue
        _rows, saturated = env._budget_rows(target, m, before)
        if m.client_bound or not saturated:
            return False
    return True
