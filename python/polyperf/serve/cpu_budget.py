"""CPU budgets: run a server inside a cgroup with a CFS quota (cgroup v2 `cpu.max`, else v1 `cpu.cfs_*`), so
one client core can outpace a throttled server. The parsers of `cpu.stat` and `/proc/self/mounts` are pure."""

from __future__ import annotations

import contextlib
import errno
import math
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from polyperf.errors import PolyperfError

__all__ = [
    "CpuBudget",
    "CpuBudgetError",
    "Hierarchy",
    "MountEntry",
    "ThrottleStats",
    "cgroup_name",
    "cpu_budget_support",
    "find_hierarchy",
    "move_into",
    "parse_cpu_stat",
    "parse_mounts",
    "remove_cgroup",
    "threads_for_budget",
]

_MOUNTS = Path("/proc/self/mounts")
# the kernel's limits for both cgroup versions: period 1 ms..1 s, quota ≥ 1 ms
_MIN_PERIOD_S, _MAX_PERIOD_S, _MIN_QUOTA_S = 1e-3, 1.0, 1e-3


class CpuBudgetError(PolyperfError):
    """A CPU budget could not be created, joined, read or removed (message names the cgroup path)."""


@dataclass(frozen=True)
class MountEntry:
    mountpoint: Path
    fstype: str
    options: frozenset[str]


@dataclass(frozen=True)
class Hierarchy:
    """Where budgets are made: a cgroup v2 mount, or the v1 hierarchy that carries the `cpu` controller."""

    version: int  # 1 | 2
    mountpoint: Path


@dataclass(frozen=True)
class ThrottleStats:
    """`cpu.stat` in base units: periods elapsed, periods throttled, time throttled (s), CPU used (s) if known."""

    nr_periods: int
    nr_throttled: int
    throttled_s: float
    usage_s: float | None = None

    def __sub__(self, other: ThrottleStats) -> ThrottleStats:
        usage = None if self.usage_s is None or other.usage_s is None else self.usage_s - other.usage_s
        return ThrottleStats(
            self.nr_periods - other.nr_periods,
            self.nr_throttled - other.nr_throttled,
            self.throttled_s - other.throttled_s,
            usage,
        )


def _unescape_mount(field: str) -> str:
    # /proc/mounts writes space, tab, newline and backslash as octal escapes
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def parse_mounts(text: str) -> list[MountEntry]:
    """`/proc/self/mounts` text → its cgroup and cgroup2 mounts, in order (pure)."""
    entries = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 4 or fields[2] not in ("cgroup", "cgroup2"):
            continue
        entries.append(MountEntry(Path(_unescape_mount(fields[1])), fields[2], frozenset(fields[3].split(","))))
    return entries


def find_hierarchy(mounts: list[MountEntry], v2_controllers: dict[Path, str]) -> Hierarchy | None:
    """The hierarchy to use (pure): a writable cgroup2 mount whose `cgroup.controllers` (text given in
    `v2_controllers` by mountpoint) lists `cpu`, else a writable v1 mount carrying `cpu`, else None."""
    for entry in mounts:
        if (
            entry.fstype == "cgroup2"
            and "rw" in entry.options
            and "cpu" in v2_controllers.get(entry.mountpoint, "").split()
        ):
            return Hierarchy(2, entry.mountpoint)
    for entry in mounts:
        if entry.fstype == "cgroup" and "rw" in entry.options and "cpu" in entry.options:
            return Hierarchy(1, entry.mountpoint)
    return None


def parse_cpu_stat(text: str, version: int) -> ThrottleStats:
    """`cpu.stat` text → ThrottleStats (pure). v1 gives throttled_time in ns and no usage; v2 gives
    throttled_usec and usage_usec. A kernel without CFS bandwidth control shows no period counters: zeros."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        with contextlib.suppress(ValueError):
            values[key] = int(value.strip())
    if version == 1:
        throttled, usage = values.get("throttled_time", 0) / 1e9, None
    elif version == 2:
        throttled = values.get("throttled_usec", 0) / 1e6
        usage = values["usage_usec"] / 1e6 if "usage_usec" in values else None
    else:
        raise ValueError(f"cgroup version must be 1 or 2, not {version!r}")
    return ThrottleStats(values.get("nr_periods", 0), values.get("nr_throttled", 0), throttled, usage)


def threads_for_budget(fraction: float) -> int:
    """Runtime threads for a budget of `fraction` CPUs: GOMAXPROCS, tokio workers, gnet loops."""
    return max(1, math.ceil(fraction))


def _detect() -> Hierarchy | None:
    mounts = parse_mounts(_MOUNTS.read_text())
    controllers = {}
    for entry in mounts:
        if entry.fstype == "cgroup2":
            with contextlib.suppress(OSError):
                controllers[entry.mountpoint] = (entry.mountpoint / "cgroup.controllers").read_text()
    return find_hierarchy(mounts, controllers)


def _why_unsupported() -> str | None:
    """Static checks, cheapest first; None when a probe is worth trying."""
    try:
        mounts = parse_mounts(_MOUNTS.read_text())
    except OSError as exc:
        return f"cannot read {_MOUNTS}: {exc.strerror}"
    if not mounts:
        return "no cgroup filesystem is mounted (see /proc/self/mounts)"
    if os.geteuid() != 0:
        return f"CPU budgets need root to create cgroups (running as uid {os.geteuid()})"
    if _detect() is None:
        v2 = [str(e.mountpoint) for e in mounts if e.fstype == "cgroup2"]
        where = f"cgroup v2 at {', '.join(v2)} lacks the cpu controller" if v2 else "no cgroup v2 mount"
        return f"{where}, and no writable cgroup v1 hierarchy carries `cpu`"
    return None


def cpu_budget_support() -> str | None:
    """None if CPU budgets work here (checked by creating and removing a probe cgroup), else one line saying why
    not."""
    reason = _why_unsupported()
    if reason is not None:
        return reason
    try:
        with CpuBudget(0.5, 0.1, "probe") as probe:
            probe.stats()
    except CpuBudgetError as exc:
        return str(exc)
    return None


def _write(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except OSError as exc:
        raise CpuBudgetError(f"cannot write {value.strip()!r} to {path}: {exc.strerror}") from None


def _descendants(pid: int) -> list[int]:
    """pid's live descendants, from /proc/<pid>/task/*/children (needs CONFIG_PROC_CHILDREN; else none)."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        for task in Path(f"/proc/{current}/task").glob("*"):
            with contextlib.suppress(OSError, ValueError):
                children = [int(c) for c in (task / "children").read_text().split()]
                found += children
                queue += children
    return found


def move_into(path: Path, pid: int, *, children: bool = True) -> None:
    """Moves `pid` (all its threads: cgroup.procs moves a thread group) and, with `children`, its live
    descendants into the cgroup at `path`."""
    for member in [pid, *(_descendants(pid) if children else [])]:
        try:
            (path / "cgroup.procs").write_text(str(member))
        except ProcessLookupError:
            if member == pid:
                raise CpuBudgetError(f"cannot move pid {pid} into {path}: no such process") from None
        except OSError as exc:
            raise CpuBudgetError(f"cannot move pid {member} into {path}: {exc.strerror}") from None


def remove_cgroup(path: Path, parent: Path, timeout: float = 5.0) -> None:
    """Moves any remaining processes back to `parent`, then removes the cgroup (retrying while exiting tasks
    still hold it); a cgroup already gone is fine."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError, ValueError):
            for pid in (path / "cgroup.procs").read_text().split():
                with contextlib.suppress(ProcessLookupError):
                    (parent / "cgroup.procs").write_text(pid)
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                raise CpuBudgetError(f"cannot remove cgroup {path}: {exc.strerror}") from None
            time.sleep(0.02)


def cgroup_name(kind: str, name: str) -> str:
    """`polyperf-<kind>-<name>-<pid>-<n>`: the pid lets a later run find what a killed one left behind."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name) or kind
    return f"polyperf-{kind}-{safe}-{os.getpid()}-{time.monotonic_ns() % 1_000_000}"


class CpuBudget:
    """A cgroup limited to `fraction` CPUs (quota = fraction × period; > 1 spans CPUs), removed on exit.

    `add(pid)` moves a process, every thread of it and its live descendants; what it starts later is born
    inside. Use as a context manager, or call `create()` and `remove()`. `weight` (cgroup v2 units, 1..10000,
    default 100; v1 shares = weight × 1024 / 100) lets the budget win its quota on a busy machine.
    """

    def __init__(self, fraction: float, period_s: float, name: str, *, weight: int | None = None) -> None:
        if not _MIN_PERIOD_S <= period_s <= _MAX_PERIOD_S:
            raise ValueError(f"period {period_s} s is outside the kernel's 0.001..1 s")
        if not fraction > 0 or fraction * period_s < _MIN_QUOTA_S:
            raise ValueError(f"quota {fraction} × {period_s} s must be at least 1 ms (raise fraction or period)")
        if weight is not None and not 1 <= weight <= 10_000:
            raise ValueError(f"weight {weight} is outside cgroup v2's 1..10000")
        self.fraction = fraction
        self.period_s = period_s
        self.weight = weight
        self.name = cgroup_name("budget", name)
        self.hierarchy: Hierarchy | None = None
        self.path: Path | None = None

    @property
    def quota_s(self) -> float:
        return self.fraction * self.period_s

    def create(self) -> CpuBudget:
        hierarchy = _detect()
        if hierarchy is None:
            raise CpuBudgetError(_why_unsupported() or "no cgroup hierarchy with the cpu controller")
        parent = hierarchy.mountpoint
        if hierarchy.version == 2:
            enabled = (parent / "cgroup.subtree_control").read_text().split()
            if "cpu" not in enabled:  # children only get cpu.max once the parent hands the controller down
                _write(parent / "cgroup.subtree_control", "+cpu")
        path = parent / self.name
        # known before it exists: an interrupt from here on leaves nothing that `remove()` does not clear
        self.hierarchy, self.path = hierarchy, path
        try:
            path.mkdir()
        except OSError as exc:
            self.path = None
            raise CpuBudgetError(f"cannot create cgroup {path}: {exc.strerror}") from None
        try:
            self._set_limit()
        except BaseException:
            self.remove()
            raise
        return self

    def _set_limit(self) -> None:
        period_us, quota_us = round(self.period_s * 1e6), round(self.quota_s * 1e6)
        assert self.path is not None and self.hierarchy is not None
        if self.hierarchy.version == 2:
            _write(self.path / "cpu.max", f"{quota_us} {period_us}")
            if self.weight is not None:
                _write(self.path / "cpu.weight", str(self.weight))
        else:  # period first: a quota is checked against the period in force
            _write(self.path / "cpu.cfs_period_us", str(period_us))
            _write(self.path / "cpu.cfs_quota_us", str(quota_us))
            if self.weight is not None:
                _write(self.path / "cpu.shares", str(max(2, self.weight * 1024 // 100)))

    def set_period(self, period_s: float) -> None:
        """Changes the CFS period of a created budget, keeping its fraction (the quota scales with it)."""
        if not _MIN_PERIOD_S <= period_s <= _MAX_PERIOD_S or self.fraction * period_s < _MIN_QUOTA_S:
            raise ValueError(f"period {period_s} s with {self.fraction} CPU is outside the kernel's limits")
        self.period_s = period_s
        self._set_limit()

    def set_fraction(self, fraction: float) -> None:
        """Changes the quota of a created budget in place (e.g. while calibrating)."""
        if not fraction > 0 or fraction * self.period_s < _MIN_QUOTA_S:
            raise ValueError(f"quota {fraction} × {self.period_s} s must be at least 1 ms")
        self.fraction = fraction
        self._set_limit()

    def _require(self) -> tuple[Hierarchy, Path]:
        if self.path is None or self.hierarchy is None:
            raise CpuBudgetError(f"CPU budget {self.name} is not created (use it as a context manager)")
        return self.hierarchy, self.path

    def add(self, pid: int, *, children: bool = True) -> None:
        """Moves `pid` (all its threads) and, with `children`, its live descendants into the budget."""
        _, path = self._require()
        move_into(path, pid, children=children)

    def pids(self) -> list[int]:
        _, path = self._require()
        return [int(p) for p in (path / "cgroup.procs").read_text().split()]

    def stats(self) -> ThrottleStats:
        hierarchy, path = self._require()
        try:
            return parse_cpu_stat((path / "cpu.stat").read_text(), hierarchy.version)
        except OSError as exc:
            raise CpuBudgetError(f"cannot read {path / 'cpu.stat'}: {exc.strerror}") from None

    def remove(self, timeout: float = 5.0) -> None:
        """Moves any remaining processes back to the parent, then removes the cgroup."""
        if self.path is None or self.hierarchy is None:
            return
        remove_cgroup(self.path, self.hierarchy.mountpoint, timeout)
        self.path = None

    # The usual context-manager pair (as in cpu_account, postgres, server): a mixin would hide which method runs.
    def __enter__(self) -> CpuBudget:
        return self.create()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.remove()
