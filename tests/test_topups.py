"""The main job's second phase: repeats added to the entries still undecided, within the budget, and a run that
continues an earlier one. A stand-in suite (named like the scheduler suite, so the scheduler's claims judge it)
writes paired rows whose truths are known: a clear 3x effect, a ratio of 1.2 in three repeats of four and 0.95 in
the fourth (6 of the first batch's 8 above 1 decide nothing; more repeats do) and no effect at all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from polyperf.common.repeats import ENV, PLAN_ENV, repeat_numbers, top_up
from polyperf.record.run_dir import load_env, load_run

SUITE = """
import os, random
from polyperf.common.repeats import repeat_numbers


def test_rounds(record):
    rng = random.Random(int(os.environ.get("POLYPERF_MORE", "0:0").split(":")[0]) * 7919 + 1)
    for rnd in repeat_numbers(FIRST):
        for case, effect, noise in CASES:
            new = rng.lognormvariate(0, 0.05)
            old = effect * new * rng.lognormvariate(0, noise)
            if case == "ping_pong":  # 3 of every 4 repeats 1.2x, the 4th 0.95x: the first batch cannot decide it
                old = new * (0.95 if rnd % 4 == 3 else 1.2)
            record("seconds", new, "s", case=case, implementation="tokio", variant="multi_thread", repeat=rnd)
            record("seconds", old, "s", case=case, implementation="tokio 0.1", variant="old_threadpool", repeat=rnd)
    for rnd in repeat_numbers(1):  # a series measured once: context, never repeated by a top-up
        record("seconds", 1.0, "s", case="context", implementation="tokio", variant="multi_thread", repeat=rnd)
"""
CASES = [("yield_many", 3.0, 0.02), ("ping_pong", 1.2, 0.0), ("spawn_many", 1.0, 0.1), ("chained_spawn", 1.0, 0.1)]


def _suites(tmp_path: Path, first: int = 8) -> Path:
    folder = tmp_path / "suites"
    folder.mkdir()
    (folder / "conftest.py").write_text('pytest_plugins = ["polyperf.record.pytest_plugin"]\n')
    (folder / "test_scheduler.py").write_text(f"FIRST = {first}\nCASES = {CASES!r}\n{SUITE}")
    return folder


def _polyperf(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "POLYPERF_STORE": "off"}
    env.pop(ENV, None)
    cmd = [sys.executable, "-m", "polyperf", "run", *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def _repeats(run_dir: Path, case: str) -> list[int]:
    table = load_run(run_dir)
    rows = table[(table["case"] == case) & (table["implementation"] == "tokio")]
    return sorted(set(rows["repeat"].astype(int)))


def test_repeat_numbers_in_a_first_batch_and_in_a_top_up(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert repeat_numbers(8) == range(8) and top_up() is None
    monkeypatch.setenv(ENV, "12:5")
    assert repeat_numbers(8) == range(12, 17)
    assert repeat_numbers(1) == range(0)  # context series are not repeated
    monkeypatch.setenv(PLAN_ENV, json.dumps({"suites/test_x.py::test_a": 3}))
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "suites/test_x.py::test_a (call)")
    assert repeat_numbers(8) == range(12, 15)
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "suites/test_x.py::test_b (setup)")
    assert repeat_numbers(8) == range(12, 17)
    for bad in ("12", "a:b", "-1:3", "3:0"):
        monkeypatch.setenv(ENV, bad)
        with pytest.raises(ValueError, match=ENV):
            repeat_numbers(8)


@pytest.mark.slow
def test_repeats_go_to_the_undecided_entries_and_a_second_run_continues(tmp_path):
    folder = _suites(tmp_path)
    out = tmp_path / "reports"
    first = _polyperf("scheduler", "--suites-dir", str(folder), "--out", str(out), "--budget", "600", cwd=tmp_path)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    run_dir = (out / "latest").resolve()
    top_ups = load_env(run_dir)["top_ups"]
    assert top_ups["batches"], first.stdout[-3000:]
    added = {claim for batch in top_ups["batches"] for claim in batch["claims"]}
    # the three-in-four entry needs repeats beyond the first 8; the null entries are left "within the noise"
    assert "sched.ping_pong_old_vs_new" in added
    assert "within the noise of 1" in top_ups["open"].get("sched.chained_spawn_old_vs_new", "")
    assert "sched.yield_many_old_vs_new" not in added  # decided by its first batch
    assert _repeats(run_dir, "context") == [0]
    extended = _repeats(run_dir, "ping_pong")
    assert extended == list(range(len(extended))) and len(extended) > 8  # new numbers continue the series
    assert "still open:" in first.stdout and "repeats added where undecided" in first.stdout

    again = _polyperf("--continue", str(run_dir), "--budget", "60", cwd=tmp_path)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "suite 1 of" not in again.stdout  # the suite it measured is not run again
    assert len(_repeats(run_dir, "ping_pong")) >= len(extended)


def test_a_run_continues_only_on_its_commit_and_machine(tmp_path):
    folder = _suites(tmp_path, first=1)
    out = tmp_path / "reports"
    made = _polyperf("scheduler", "--suites-dir", str(folder), "--out", str(out), "--profile", "smoke", cwd=tmp_path)
    assert made.returncode == 0, made.stderr[-2000:]
    run_dir = (out / "latest").resolve()
    env = json.loads((run_dir / "env.json").read_text())
    (run_dir / "env.json").write_text(json.dumps({**env, "kernel": "another kernel"}))
    refused = _polyperf("--continue", str(run_dir), cwd=tmp_path)
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and "same commit and machine" in refused.stderr
    missing = _polyperf("--continue", str(tmp_path / "nothing"), cwd=tmp_path)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1


def test_every_repeat_loop_of_the_suites_takes_its_numbers_from_repeat_numbers():
    """A loop over `range(...)` repeats in a suite would write repeat numbers a top-up already has: the rows of two
    runs would pool into one repeat, and the series would not grow (the main job found one such loop)."""
    import re

    suites = Path(__file__).parents[1] / "suites"
    loops = re.compile(r"for\s+(repeat|rnd|round_)\s+in\s+range\(")
    found = [
        f"{p.name}:{i}"
        for p in suites.glob("test_*.py")
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if loops.search(line)
    ]
    assert not found, found


def test_cost_per_repeat_counts_the_first_batch_and_the_share_a_narrowing_test_measures_again(tmp_path):
    from polyperf.record.run import Run, read_producers
    from polyperf.topups import _cost_per_repeat

    series = [["s", "ceiling", impl, "release", "rps"] for impl in ("a", "b", "c", "d")]
    producers = {
        "t::ladder": {"series": series, "repeats": list(range(12)), "added": [8, 9, 10, 11], "narrows": True},
        "t::micro": {"series": series[:1], "repeats": list(range(10)), "added": [8, 9], "added_s": 3.0},
        "t::plain": {"series": series[:1], "repeats": list(range(8))},
    }
    durations = {"t::ladder": 80.0, "t::micro": 40.0, "t::plain": 16.0}
    # 80 s over the first batch's 8 repeats, a quarter of its targets: 2.5 s; not 80 / 12
    assert _cost_per_repeat(["t::ladder"], producers, durations, {("a", "release")}) == pytest.approx(2.5)
    assert _cost_per_repeat(["t::ladder"], producers, durations, None) == pytest.approx(10.0)
    assert _cost_per_repeat(["t::micro"], producers, durations, {("a", "release")}) == pytest.approx(1.5)  # learned
    assert _cost_per_repeat(["t::plain"], producers, durations) == pytest.approx(2.0)
    # what a top-up's session writes: its repeats under `added`, their seconds under `added_s`, added up
    run = Run.attach(tmp_path / "run")
    first = {"t::ladder": {"series": {("s", "ceiling", "a", "release", "rps")}, "repeats": set(range(8))}}
    run.write_producers(first, narrowing={"t::ladder"})
    for added in ({8, 9}, {10}):
        more = {"t::ladder": {"series": {("s", "ceiling", "a", "release", "rps")}, "repeats": added}}
        run.write_producers(more, top_up_s={"t::ladder": 2.0})
    seen = read_producers(run.run_dir)["t::ladder"]
    assert (seen["repeats"], seen["added"], seen["added_s"], seen["narrows"]) == (
        list(range(11)),
        [8, 9, 10],
        4.0,
        True,
    )


def test_a_batch_pays_its_overhead_once_per_suite_file():
    from polyperf.topups import _batch_seconds, _files

    nodes = {"a": ["suites/test_x.py::t1", "suites/test_x.py::t2"], "b": ["suites/test_y.py::t"], "c": []}
    chosen = [("a", 4), ("b", 2)]
    assert _files(chosen, nodes) == {"suites/test_x.py", "suites/test_y.py"}
    assert _batch_seconds(chosen, {"a": 1.0, "b": 3.0}, nodes, 10.0) == pytest.approx(4 + 6 + 2 * 10)
    assert _batch_seconds([("c", 2)], {"c": 1.0}, nodes, 10.0) == pytest.approx(12.0)  # at least one file's worth
