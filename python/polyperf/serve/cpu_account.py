"""Exact CPU of one server: a cgroup of its own whose usage counter the kernel keeps per nanosecond (v1
`cpuacct.usage`, v2 `cpu.stat` usage_usec), read at the edges of a load run — no sampling, no
interpolation. Made with or without a CPU budget (`cpu_budget`); `remove_stale` clears what a killed run
left behind. The hierarchy choice (`find_account_hierarchy`) and the counter parser are pure."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from types import TracebackType

from polyperf.common.procs import pid_running
from polyperf.serve.cpu_budget import (
    CpuBudget,
    CpuBudgetError,
    Hierarchy,
    MountEntry,
    cgroup_name,
    move_into,
    parse_cpu_stat,
    parse_mounts,
    remove_cgroup,
)

__all__ = [
    "CpuAccount",
    "account_support",
    "find_account_hierarchy",
    "parse_usage",
    "remove_stale",
    "stale_cgroups",
]

_MOUNTS = Path("/proc/self/mounts")


def find_account_hierarchy(mounts: list[MountEntry]) -> Hierarchy | None:
    """Where usage is counted (pure): a writable v1 hierarchy carrying `cpuacct` (on a hybrid system it owns
    the accounting), else a writable cgroup2 mount (every v2 cgroup keeps `usage_usec`), else None."""
    for entry in mounts:
        if entry.fstype == "cgroup" and "rw" in entry.options and "cpuacct" in entry.options:
            return Hierarchy(1, entry.mountpoint)
    for entry in mounts:
        if entry.fstype == "cgroup2" and "rw" in entry.options:
            return Hierarchy(2, entry.mountpoint)
    return None


def parse_usage(text: str, version: int) -> float:
    """CPU seconds from `cpuacct.usage` (v1, ns) or `cpu.stat` (v2, usage_usec) text (pure)."""
    if version == 1:
        return int(text.strip()) / 1e9
    usage = parse_cpu_stat(text, 2).usage_s
    if usage is None:
        raise ValueError("cpu.stat has no usage_usec")
    return usage


def _counter(path: Path, version: int) -> Path:
    return path / ("cpuacct.usage" if version == 1 else "cpu.stat")


class CpuAccount:
    """A cgroup that counts one server's CPU (see the module doc). `within(budget)` reads a budget's own
    cgroup instead when both live in one hierarchy (a process is in one cgroup per hierarchy)."""

    def __init__(self, name: str) -> None:
        self.name = cgroup_name("cpu", name)
        self.hierarchy: Hierarchy | None = None
        self.path: Path | None = None
        self.owned = True

    def create(self, budget: CpuBudget | None = None) -> CpuAccount:
        """Makes the cgroup; with `budget`, reads the budget's own cgroup instead where the budget already sits
        in the counting hierarchy (v2, or v1 `cpu,cpuacct` mounted together): a process is in one cgroup per
        hierarchy."""
        hierarchy = find_account_hierarchy(parse_mounts(_MOUNTS.read_text()))
        if hierarchy is None:
            raise CpuBudgetError("no writable cgroup hierarchy counts CPU usage (v1 cpuacct or v2)")
        if budget is not None and budget.path is not None and budget.hierarchy == hierarchy:
            self.hierarchy, self.path, self.owned = hierarchy, budget.path, False
            self.usage_s()  # fails now, in one line, if this hierarchy counts no usage
            return self
        path = hierarchy.mountpoint / self.name
        self.hierarchy, self.path = hierarchy, path  # before mkdir: an interrupt leaves nothing remove() misses
        try:
            path.mkdir()
        except OSError as exc:
            self.path = None
            raise CpuBudgetError(f"cannot create cgroup {path}: {exc.strerror}") from None
        return self

    def add(self, pid: int) -> None:
        if self.path is None:
            raise CpuBudgetError(f"CPU account {self.name} is not created")
        move_into(self.path, pid)

    def usage_s(self) -> float:
        """CPU seconds used by the cgroup's processes since it was made (the kernel's counter)."""
        if self.path is None or self.hierarchy is None:
            raise CpuBudgetError(f"CPU account {self.name} is not created")
        counter = _counter(self.path, self.hierarchy.version)
        try:
            return parse_usage(counter.read_text(), self.hierarchy.version)
        except (OSError, ValueError) as exc:
            raise CpuBudgetError(f"cannot read CPU usage from {counter}: {exc}") from None

    def remove(self) -> None:
        if self.path is None or self.hierarchy is None:
            return
        if self.owned:
            remove_cgroup(self.path, self.hierarchy.mountpoint)
        self.path = None

    def __enter__(self) -> CpuAccount:
        return self.create()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.remove()


def account_support() -> str | None:
    """None if per-server CPU accounting works here (a probe cgroup is made, read and removed), else why not."""
    if os.geteuid() != 0:
        return f"cgroups need root (running as uid {os.geteuid()})"
    try:
        with CpuAccount("probe") as probe:
            probe.usage_s()
    except (CpuBudgetError, OSError) as exc:
        return str(exc)
    return None


def stale_cgroups(names: list[str], alive: set[int] | None = None) -> list[str]:
    """The polyperf cgroups among `names` whose creating process is gone (pure when `alive` is given: the
    live pids; otherwise each pid is checked)."""
    stale = []
    for name in names:
        if not name.startswith("polyperf-"):
            continue
        parts = name.rsplit("-", 2)
        if len(parts) != 3 or not parts[1].isdigit():
            continue
        pid = int(parts[1])
        if pid != os.getpid() and not (pid in alive if alive is not None else pid_running(pid)):
            stale.append(name)
    return stale


def remove_stale() -> list[Path]:
    """Removes the cgroups (v1 and v2, top level) that an earlier polyperf run made and could not remove
    because it was killed; returns them. One that cannot be removed is left alone."""
    try:
        mounts = parse_mounts(_MOUNTS.read_text())
    except OSError:
        return []
    removed = []
    for entry in mounts:
        if "rw" not in entry.options:
            continue
        with contextlib.suppress(OSError):
            names = [p.name for p in entry.mountpoint.iterdir() if p.is_dir()]
            for name in stale_cgroups(names):
                with contextlib.suppress(CpuBudgetError):
                    remove_cgroup(entry.mountpoint / name, entry.mountpoint, timeout=0.5)
                    removed.append(entry.mountpoint / name)
    return removed
