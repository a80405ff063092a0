"""What one measured load run takes (`LoadEnv.run`'s settings beside each driver's own options, typed for a checker)
and how a process's CPU is read where no cgroup counts it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypedDict

import psutil

from polyperf.load import LocustOptions, OhaOptions, WrkOptions

__all__ = ["LocustRun", "OhaRun", "RunSettings", "WrkRun", "proc_cpu"]


class RunSettings(TypedDict, total=False):
    """What `LoadEnv.run` takes besides the target, the case, the duration and the driver's own options."""

    repeat: int
    params: Mapping[str, Any] | None
    keep: bool
    max_requests: int
    drain: bool


class OhaRun(RunSettings, OhaOptions, total=False):
    pass


class WrkRun(RunSettings, WrkOptions, total=False):
    pass


class LocustRun(RunSettings, LocustOptions, total=False):
    pass


def proc_cpu(pid: int) -> Callable[[], float]:
    """A process's CPU seconds from /proc (10 ms ticks; 0 once it is gone), where no cgroup counts it."""

    def read() -> float:
        try:
            times = psutil.Process(pid).cpu_times()
        except psutil.Error:
            return 0.0
        return times.user + times.system

    return read
