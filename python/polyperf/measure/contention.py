"""How much of the machine other work took while a benchmark process ran, and the priority that process got.

A microbenchmark whose threads fill every CPU (Tokio's multi-thread runtime with workers = CPUs) is slowed by
anything else that runs: on 2 cores one busy neighbour takes half of it. `Window` tells that apart from the
code measured: the machine's busy time over the window (/proc/stat, steal included: a hypervisor's neighbours
count too) less the CPU time of the children reaped inside it (their rusage) is the CPU others used. It tolerates
a missing /proc (the share is then NaN). The parsers are pure; `watch` is the only clock.
"""

from __future__ import annotations

import math
import os
import resource
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Window", "busy_seconds", "parse_nice", "priority_of", "watch"]

# /proc/stat "cpu" columns counted as busy: user nice system (idle iowait skipped) irq softirq steal.
# guest and guest_nice are already inside user and nice.
_BUSY_COLUMNS = (0, 1, 2, 5, 6, 7)


def busy_seconds(stat_text: str, ticks_per_s: float) -> float:
    """The machine's busy CPU-seconds since boot, all CPUs together, from the text of /proc/stat."""
    for line in stat_text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            values = [int(v) for v in fields[1:]]
            return sum(values[i] for i in _BUSY_COLUMNS if i < len(values)) / ticks_per_s
    raise ValueError("no aggregate 'cpu' line in /proc/stat")


def _machine_busy() -> float:
    try:
        return busy_seconds(Path("/proc/stat").read_text(), os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError):
        return math.nan


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass
class Window:
    """One process's run: wall time, the CPU its children used, the machine's busy time, the CPUs online."""

    wall_s: float = math.nan
    own_cpu_s: float = math.nan
    machine_busy_s: float = math.nan
    cpus: int = 1

    @property
    def foreign_cpu_share(self) -> float:
        """The share of the machine's CPU time in the window that other processes used (0 on a quiet machine, up
        to 1); clock ticks are 10 ms, so a window of 0.3 s on 2 CPUs resolves about 2%."""
        if not (self.wall_s > 0 and math.isfinite(self.machine_busy_s)):
            return math.nan
        foreign = max(0.0, self.machine_busy_s - self.own_cpu_s)
        return min(1.0, foreign / (self.wall_s * self.cpus))


@contextmanager
def watch() -> Iterator[Window]:
    """Fills a `Window` over the block, which must start and reap (wait for) the measured child; children reaped
    by other threads meanwhile would count as its own."""
    window = Window(cpus=os.cpu_count() or 1)
    wall, busy, own = time.perf_counter(), _machine_busy(), _children_cpu()
    try:
        yield window
    finally:
        window.wall_s = time.perf_counter() - wall
        window.machine_busy_s = _machine_busy() - busy
        window.own_cpu_s = _children_cpu() - own


def parse_nice(autogroup_text: str) -> int | None:
    """The nice value of /proc/<pid>/autogroup ("/autogroup-25 nice -20"), None if the text has none."""
    fields = autogroup_text.split()
    if len(fields) >= 3 and fields[1] == "nice":
        try:
            return int(fields[2])
        except ValueError:
            return None
    return None


def priority_of(pid: int) -> str:
    """The priority process `pid` runs at, as the kernel states it: "SCHED_RR N" / "SCHED_FIFO N" (real time),
    "autogroup nice N" where autogroups share the CPU between sessions, else "nice N" (read while the process
    lives; "unknown" once it is gone)."""
    try:
        policy = os.sched_getscheduler(pid)
        if policy in (os.SCHED_RR, os.SCHED_FIFO):
            name = "SCHED_RR" if policy == os.SCHED_RR else "SCHED_FIFO"
            return f"{name} {os.sched_getparam(pid).sched_priority}"
    except OSError:
        return "unknown"
    try:
        enabled = Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() != "0"
        nice = parse_nice(Path(f"/proc/{pid}/autogroup").read_text()) if enabled else None
        if nice is not None:
            return f"autogroup nice {nice}"
    except OSError:
        pass
    try:
        return f"nice {os.getpriority(os.PRIO_PROCESS, pid)}"
    except OSError:
        return "unknown"
