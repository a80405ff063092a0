"""CPU budgets: the cpu.stat and mounts parsers, and (where cgroups are writable) that the kernel holds a busy
child to its quota and that `add` moves every thread and child."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from polyperf.serve.cpu_budget import (
    CpuBudget,
    Hierarchy,
    MountEntry,
    ThrottleStats,
    cpu_budget_support,
    find_hierarchy,
    parse_cpu_stat,
    parse_mounts,
    threads_for_budget,
)

V1_STAT = "nr_periods 120\nnr_throttled 97\nthrottled_time 8123456789\nnr_bursts 0\nburst_time 0\n"
V2_STAT = (
    "usage_usec 204817\nuser_usec 203000\nsystem_usec 1817\ncore_sched.force_idle_usec 0\nnr_periods 10\n"
    "nr_throttled 9\nthrottled_usec 712345\nnr_bursts 0\nburst_usec 0\n"
)
HYBRID_MOUNTS = """\
tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0
"""


def test_parse_cpu_stat_v1_is_in_seconds():
    assert parse_cpu_stat(V1_STAT, 1) == ThrottleStats(120, 97, 8.123456789, None)


def test_parse_cpu_stat_v2_is_in_seconds_with_usage():
    stats = parse_cpu_stat(V2_STAT, 2)
    assert (stats.nr_periods, stats.nr_throttled) == (10, 9)
    assert stats.throttled_s == pytest.approx(0.712345)
    assert stats.usage_s == pytest.approx(0.204817)


def test_parse_cpu_stat_without_bandwidth_counters_is_zero():
    assert parse_cpu_stat("usage_usec 5\nuser_usec 5\nsystem_usec 0\n", 2) == ThrottleStats(0, 0, 0.0, 5e-6)
    with pytest.raises(ValueError):
        parse_cpu_stat(V1_STAT, 3)


def test_throttle_stats_difference():
    later, earlier = ThrottleStats(20, 15, 1.5, 2.0), ThrottleStats(5, 5, 0.5, 1.0)
    assert later - earlier == ThrottleStats(15, 10, 1.0, 1.0)
    assert (later - ThrottleStats(0, 0, 0.0, None)).usage_s is None


def test_parse_mounts_keeps_cgroup_mounts_and_unescapes():
    mounts = parse_mounts(HYBRID_MOUNTS + "cgroup2 /mnt/my\\040cg cgroup2 ro,nosuid 0 0\n")
    assert [m.mountpoint for m in mounts] == [
        Path("/sys/fs/cgroup/cpu"),
        Path("/sys/fs/cgroup/memory"),
        Path("/sys/fs/cgroup/unified"),
        Path("/mnt/my cg"),
    ]
    assert mounts[0] == MountEntry(Path("/sys/fs/cgroup/cpu"), "cgroup", frozenset({"rw", "relatime", "cpu"}))
    assert mounts[3].fstype == "cgroup2" and "ro" in mounts[3].options


def test_find_hierarchy_prefers_v2_with_cpu_controller():
    mounts = parse_mounts(HYBRID_MOUNTS)
    unified = Path("/sys/fs/cgroup/unified")
    assert find_hierarchy(mounts, {unified: "cpuset cpu io memory pids\n"}) == Hierarchy(2, unified)
    # a hybrid system whose cpu controller is bound to v1 (this project's CI machine)
    assert find_hierarchy(mounts, {unified: "hugetlb\n"}) == Hierarchy(1, Path("/sys/fs/cgroup/cpu"))


def test_find_hierarchy_accepts_joint_v1_mount_and_refuses_read_only():
    joint = parse_mounts("cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,nosuid,cpu,cpuacct 0 0\n")
    assert find_hierarchy(joint, {}) == Hierarchy(1, Path("/sys/fs/cgroup/cpu,cpuacct"))
    read_only = parse_mounts("cgroup2 /sys/fs/cgroup cgroup2 ro,nosuid 0 0\ncgroup /c cgroup ro,cpu 0 0\n")
    assert find_hierarchy(read_only, {Path("/sys/fs/cgroup"): "cpu memory"}) is None
    assert find_hierarchy([], {}) is None


@pytest.mark.parametrize(("fraction", "threads"), [(0.1, 1), (0.5, 1), (1.0, 1), (1.01, 2), (2.0, 2), (2.5, 3)])
def test_threads_for_budget(fraction, threads):
    assert threads_for_budget(fraction) == threads


@pytest.mark.parametrize(
    ("fraction", "period", "weight"),
    [(0.25, 0.0005, None), (0.25, 2.0, None), (0.0, 0.1, None), (0.1, 0.005, None), (0.5, 0.1, 0), (0.5, 0.1, 10_001)],
)
def test_budget_refuses_what_the_kernel_refuses(fraction, period, weight):
    with pytest.raises(ValueError):
        CpuBudget(fraction, period, "bad", weight=weight)


_UNSUPPORTED = cpu_budget_support()
live = pytest.mark.skipif(_UNSUPPORTED is not None, reason=f"CPU budgets unsupported: {_UNSUPPORTED}")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime, all threads


@live
def test_busy_child_is_held_to_its_quota():
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        # the weight keeps a busy machine from starving the child below its quota
        with CpuBudget(0.2, 0.1, "test-busy", weight=1000) as budget:
            budget.add(child.pid)
            before, start = budget.stats(), time.monotonic()
            used0 = _cpu_seconds(child.pid)
            time.sleep(1.0)
            used = _cpu_seconds(child.pid) - used0
            elapsed = time.monotonic() - start
            stats = budget.stats() - before
    finally:
        child.kill()
        child.wait()
    assert 0.1 <= used / elapsed <= 0.3, f"{used:.3f} CPU-s in {elapsed:.3f} s under a 0.2-CPU budget"
    assert stats.nr_throttled > 0 and stats.throttled_s > 0
    assert stats.nr_periods >= stats.nr_throttled


@live
def test_limits_are_written_in_the_kernels_units():
    with CpuBudget(1.5, 0.01, "test-limits", weight=1000) as budget:
        assert budget.path is not None and budget.hierarchy is not None
        if budget.hierarchy.version == 2:
            assert (budget.path / "cpu.max").read_text().split() == ["15000", "10000"]
            assert (budget.path / "cpu.weight").read_text().strip() == "1000"
        else:
            assert (budget.path / "cpu.cfs_period_us").read_text().strip() == "10000"
            assert (budget.path / "cpu.cfs_quota_us").read_text().strip() == "15000"
            assert (budget.path / "cpu.shares").read_text().strip() == "10240"
        assert budget.pids() == []


def _children(pid: int) -> list[int]:
    return [int(c) for task in Path(f"/proc/{pid}/task").iterdir() for c in (task / "children").read_text().split()]


@live
def test_add_moves_threads_and_children_and_remove_restores():
    script = (
        "import subprocess, threading, time\n"
        "for _ in range(3): threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
        "subprocess.Popen(['sleep', '30']); print('ready', flush=True); time.sleep(30)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    children: list[int] = []
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "ready"
        children = _children(parent.pid)
        with CpuBudget(0.5, 0.01, "test-tree") as budget:
            assert budget.path is not None
            path = budget.path
            budget.add(parent.pid)
            members = set(budget.pids())
            threads = list(Path(f"/proc/{parent.pid}/task").iterdir())
            in_budget = [path.name in (t / "cgroup").read_text() for t in threads]
        assert members == {parent.pid, *children} and len(children) == 1
        assert len(threads) >= 4 and all(in_budget)
        assert not path.exists()
        assert path.name not in Path(f"/proc/{parent.pid}/cgroup").read_text()
    finally:
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        parent.kill()
        parent.wait()
