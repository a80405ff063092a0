"""Benchmark repeats in fresh worker processes (`orchestrate.workers`): one process per repeat, every side in each,
the same warm-up, a seeded order per round, and one calibration for all."""

from __future__ import annotations

import os

import pytest

from polyperf.errors import PolyperfError
from polyperf.orchestrate.workers import Job, Plan, Side, run_job, run_workers
from polyperf.record.pytest_plugin import benchmark_rows

CALLS: list[str] = []


def _note(name: str) -> str:
    CALLS.append(name)
    return name


def _boom() -> None:
    raise RuntimeError("worker side failed on purpose")


def test_each_repeat_is_a_fresh_process_holding_every_side(tmp_path):
    sides = [Side("pid_a", os.getpid), Side("pid_b", os.getpid)]
    plan = Plan(processes=3, rounds=2, warmup=1, seed=7)
    samples = run_workers(sides, plan, log_path=tmp_path / "workers.log")
    assert len(samples) == 3 * 2 * 2
    assert {(s.side, s.process, s.round) for s in samples} == {
        (side, p, r) for side in ("pid_a", "pid_b") for p in range(3) for r in range(2)
    }
    assert all(s.seconds > 0 and s.cpu_seconds >= 0 for s in samples)
    # every slot of a round is taken once
    for p in range(3):
        for r in range(2):
            assert sorted(s.slot for s in samples if (s.process, s.round) == (p, r)) == [0, 1]


def _write_pid(folder: str) -> None:
    with open(os.path.join(folder, f"pid-{os.getpid()}"), "w"):
        pass


def test_worker_processes_differ_from_the_parent_and_each_other(tmp_path):
    """Each call leaves a file named by its process: three workers, three pids, none of them this one."""
    run_workers([Side("pid", _write_pid, (str(tmp_path),))], Plan(processes=3), log_path=tmp_path / "w.log")
    pids = {int(p.name.removeprefix("pid-")) for p in tmp_path.glob("pid-*")}
    assert len(pids) == 3 and os.getpid() not in pids


def test_order_is_seeded_and_warmup_is_the_same_for_every_side():
    CALLS.clear()
    sides = tuple(Side(name, _note, (name,)) for name in "abcd")
    plan = Plan(processes=1, rounds=3, warmup=2, seed=11)
    _iters, first = run_job(Job(sides, 0, plan, {n: 1 for n in "abcd"}))
    calls_first = list(CALLS)
    CALLS.clear()
    _iters, again = run_job(Job(sides, 0, plan, {n: 1 for n in "abcd"}))
    assert calls_first == CALLS  # same seed, same order
    assert [calls_first[:8].count(n) for n in "abcd"] == [2, 2, 2, 2]  # the warm-up: twice each
    orders = [tuple(calls_first[8 + 4 * r : 12 + 4 * r]) for r in range(3)]
    assert all(sorted(o) == list("abcd") for o in orders)
    CALLS.clear()
    run_job(Job(sides, 0, Plan(processes=1, rounds=3, warmup=2, seed=12), {n: 1 for n in "abcd"}))
    assert calls_first != CALLS  # another seed, another order (24^5 orders; these two differ)
    assert [s.slot for s in first] == [s.slot for s in again]


def test_calibration_gives_loops_to_fast_sides_and_later_workers_reuse_them():
    sides = (Side("fast", int), Side("fast2", str))
    iterations, samples = run_job(Job(sides, 0, Plan(processes=1, rounds=1, warmup=1, min_round_s=0.001)))
    assert iterations["fast"] > 1 and iterations["fast2"] > 1
    assert {s.iterations for s in samples if s.side == "fast"} == {iterations["fast"]}
    given = {"fast": 3, "fast2": 5}
    again, later = run_job(Job(sides, 1, Plan(processes=1, rounds=1, warmup=1, min_round_s=1.0), given))
    assert again == given and {s.side: s.iterations for s in later} == given


def test_a_failing_worker_names_its_log(tmp_path):
    with pytest.raises(PolyperfError, match="benchmark worker 0 exited 1"):
        run_workers([Side("boom", _boom)], Plan(processes=2), log_path=tmp_path / "workers.log")
    assert "worker side failed on purpose" in (tmp_path / "workers.log").read_text()


def test_plans_and_sides_are_checked():
    with pytest.raises(ValueError):
        Plan(processes=0)
    with pytest.raises(ValueError, match="unique"):
        run_workers([Side("a", int), Side("a", str)], Plan(processes=1), log_path=os.devnull)


class _Bench:
    """A pytest-benchmark result as `benchmark_rows` reads it (stats per iteration, extra_info)."""

    def __init__(self, data, extra):
        self.stats = type("S", (), {"data": data})()
        self.extra_info = {"polyperf": extra}
        self.iterations = 2
        self.fullname = "suites/test_io_buffering.py::test_parse_time[buffered]"


def test_worker_rounds_become_rows_whose_repeat_is_the_process():
    extra = {
        "case": "parse",
        "implementation": "serde_json",
        "variant": "buffered",
        "params": {"bytes": 10},
        "bytes_per_round": 10,
        "worker_rounds": [[0, 0], [0, 1], [1, 0], [1, 1]],
    }
    rows = benchmark_rows(_Bench([1.0, 2.0, 3.0, 4.0], extra))
    seconds = [r for r in rows if r.metric == "seconds"]
    expected = [(0, 0, 1.0), (0, 1, 2.0), (1, 0, 3.0), (1, 1, 4.0)]
    assert [(r.repeat, r.params["round"], r.value) for r in seconds] == expected
    assert all(r.unit == "s" and r.params["iterations"] == 2 for r in seconds)
    assert [r.value for r in rows if r.metric == "bytes_per_s"] == [10.0, 5.0, 10 / 3, 2.5]
