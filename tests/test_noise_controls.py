"""The scheduler suite's noise controls (docs/noise.md): old/new pairs adjacent in each round with the first side
alternating, benchmark processes in a session of their own at a raised priority that the kernel confirms, and the
share of the machine other processes used, from /proc/stat less the child's own rusage."""

from __future__ import annotations

import collections
import os
import sys
from pathlib import Path

import pytest

from polyperf.common import procs
from polyperf.measure.contention import Window, busy_seconds, parse_nice, priority_of, watch
from polyperf.orchestrate.db_runs import MIN_REQUESTS_PER_CONNECTION, ceiling_requests
from polyperf.orchestrate.pairs import paired_order
from polyperf.record.schema import series_params_key

CASES = ["spawn_many", "yield_many", "ping_pong", "chained_spawn"]
SIDES = ["tokio", "tokio 0.1"]


@pytest.mark.parametrize("rnd", range(8))
def test_each_round_runs_every_pair_once_with_its_sides_adjacent(rnd):
    order = paired_order(rnd, CASES, SIDES)
    assert sorted(order) == sorted((c, s) for c in CASES for s in SIDES)
    for i in range(0, len(order), len(SIDES)):
        assert len({case for case, _ in order[i : i + len(SIDES)]}) == 1, order


def test_each_side_goes_first_equally_often_for_every_case():
    firsts = collections.Counter()
    for rnd in range(12):
        order = paired_order(rnd, CASES, SIDES)
        firsts.update(order[i] for i in range(0, len(order), len(SIDES)))
    assert firsts == {(c, s): 6 for c in CASES for s in SIDES}


def test_first_sides_alternate_within_a_round_and_cases_rotate():
    order = paired_order(0, CASES, SIDES)
    assert [side for _, side in order[::2]] == ["tokio", "tokio 0.1", "tokio", "tokio 0.1"]
    assert [case for case, _ in paired_order(1, CASES, SIDES)[::2]] == [*CASES[1:], CASES[0]]
    with pytest.raises(ValueError, match="at least one case"):
        paired_order(0, [], SIDES)


def test_busy_seconds_counts_user_system_irq_and_steal_not_idle():
    stat = "cpu  100 5 20 900 30 1 2 7 0 0\ncpu0 50 0 10 450 15 0 1 3 0 0\nintr 1 2\n"
    assert busy_seconds(stat, 100) == pytest.approx((100 + 5 + 20 + 1 + 2 + 7) / 100)
    with pytest.raises(ValueError, match="no aggregate"):
        busy_seconds("cpu0 1 2 3\n", 100)


def test_foreign_share_leaves_out_the_process_own_cpu():
    # 0.5 s on 2 CPUs = 1 CPU-second; the machine was busy 0.8 s, 0.3 s of it the process's own
    assert Window(wall_s=0.5, own_cpu_s=0.3, machine_busy_s=0.8, cpus=2).foreign_cpu_share == pytest.approx(0.5)
    assert Window(wall_s=0.5, own_cpu_s=0.9, machine_busy_s=0.8, cpus=2).foreign_cpu_share == 0.0
    assert Window(wall_s=0.5, own_cpu_s=0.0, machine_busy_s=float("nan"), cpus=2).foreign_cpu_share != 0.0


def test_parse_nice():
    assert parse_nice("/autogroup-25 nice -20\n") == -20
    assert parse_nice("/autogroup-3 nice 0") == 0
    assert parse_nice("") is None


def test_watch_counts_a_reaped_child_cpu_as_its_own(tmp_path):
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
    with watch() as window:
        assert procs.run([sys.executable, "-c", burn], log_path=tmp_path / "burn.log") == 0
    assert window.own_cpu_s >= 0.28
    assert window.wall_s >= window.own_cpu_s * 0.9
    assert 0.0 <= window.foreign_cpu_share <= 1.0


def _may_raise_priority() -> bool:
    try:
        os.setpriority(os.PRIO_PROCESS, 0, os.getpriority(os.PRIO_PROCESS, 0) - 1)
    except OSError:
        return False
    os.setpriority(os.PRIO_PROCESS, 0, os.getpriority(os.PRIO_PROCESS, 0) + 1)
    return True


def test_a_raised_priority_is_applied_in_a_session_of_its_own(tmp_path):
    if not _may_raise_priority():
        pytest.skip("this user may not raise a priority (no CAP_SYS_NICE): the suite records the normal one")
    log = tmp_path / "child.log"
    seen: list[str] = []
    script = "import os, pathlib; p = pathlib.Path('/proc/self/autogroup'); print(os.getsid(0) == os.getpid(), "
    script += "p.read_text().split()[-1] if p.exists() else os.getpriority(os.PRIO_PROCESS, 0))"
    code = procs.run(
        [sys.executable, "-c", script], log_path=log, boost=True, on_spawn=lambda pid: seen.append(priority_of(pid))
    )
    assert code == 0
    assert log.read_text().split() == ["True", "-20"]
    flag = Path("/proc/sys/kernel/sched_autogroup_enabled")
    autogroups = flag.exists() and flag.read_text().strip() != "0"
    expected = "autogroup nice -20" if autogroups else "nice -20"
    assert seen == [expected]


def test_without_nice_the_child_keeps_the_harness_session(tmp_path):
    log = tmp_path / "child.log"
    assert procs.run([sys.executable, "-c", "import os; print(os.getsid(0))"], log_path=log) == 0
    assert int(log.read_text()) == os.getsid(0)


def test_the_share_of_others_does_not_name_a_series():
    a = {"cpus": "0,1", "priority": "autogroup nice -20", "foreign_cpu_share": 0.1, "slot": 0}
    b = {**a, "foreign_cpu_share": 0.7, "slot": 5}
    assert series_params_key(a) == series_params_key(b)
    assert series_params_key(a) != series_params_key({**a, "priority": "nice 0"})


def test_a_ceiling_run_makes_enough_requests_per_connection():
    # axum's cold calibration in a main job: 1,648 req/s, 0.35 s, 256 connections planned 865 requests
    assert ceiling_requests(1_648, 0.35, 256) == MIN_REQUESTS_PER_CONNECTION * 256
    assert ceiling_requests(20_000, 0.3, 256) == 9_000  # a fast calibration keeps its window
