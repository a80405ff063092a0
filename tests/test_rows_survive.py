"""Rows survive: pytest-benchmark rounds reach results.jsonl as soon as their test has run (once each), a
SIGKILL mid-run keeps them, and a failing env.json update cannot replace the orderly stop on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import polyperf
from polyperf.record import new_run_dir

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 5

# The second test reads the table while the session still runs: it sees the first test's rounds or nothing.
EARLY_ROWS_SUITE = f"""
import json


def test_sort(benchmark):
    benchmark.pedantic(sorted, args=(list(range(500, 0, -1)),), rounds={ROUNDS}, iterations=3)


def test_rows_already_there(run_dir, record):
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    seen = sum(r["metric"] == "seconds" and r["case"] == "sort" for r in rows)
    record("rows_seen", seen, "count", case="check", implementation="jsonl")
"""


def _suites_dir(tmp_path: Path, name: str, source: str) -> Path:
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "conftest.py").write_text((ROOT / "suites" / "conftest.py").read_text())
    (suites / f"test_{name}.py").write_text(source)
    return suites


@pytest.mark.slow
def test_benchmark_rounds_are_rows_as_soon_as_their_test_ends(tmp_path):
    suites = _suites_dir(tmp_path, "early_rows", EARLY_ROWS_SUITE)
    outcome = polyperf.run(["early_rows"], profile="smoke", out=tmp_path / "reports", suites_dir=suites, quiet=True)
    assert outcome.ok, (outcome.run_dir / "logs" / "pytest.log").read_text()[-3000:]
    table = polyperf.load_run(outcome.run_dir)
    seen = table[table["metric"] == "rows_seen"]["value"].tolist()
    assert seen == [ROUNDS], "the benchmark's rounds were not in results.jsonl when the next test ran"
    seconds = table[table["metric"] == "seconds"]
    assert sorted(seconds["repeat"]) == list(range(ROUNDS)), "each round once: none lost, none written twice"
    assert set(seconds["implementation"]) == {"sort"} and {p["iterations"] for p in seconds["params"]} == {3}
    raw = json.loads((outcome.run_dir / "benchmark.json").read_text())["benchmarks"][0]["stats"]["data"]
    assert sorted(seconds["value"]) == sorted(raw)


def _progress_index(out: Path) -> int:
    try:
        return int(json.loads(next(out.glob("runs/*/progress.json")).read_text())["index"])
    except (StopIteration, OSError, ValueError, KeyError):
        return -1


@pytest.mark.slow
def test_sigkill_mid_run_keeps_the_io_buffering_timings(tmp_path):
    """The whole `polyperf run` (runner and pytest, one process group) killed with no chance to clean up, once the
    suite's pytest-benchmark tests are behind it: their rounds are in the table anyway."""
    out = tmp_path / "reports"
    cmd = [sys.executable, "-m", "polyperf", "run", "io_buffering", "--profile", "smoke", "--out", str(out)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        # test 9 of 14 is test_capacity_sweep: test_parse_time and test_python_peers (benchmarks) have run
        while _progress_index(out) < 8:
            assert proc.poll() is None, "polyperf run ended before the kill"
            assert time.monotonic() < deadline, "io_buffering did not reach its 9th test within 240 s"
            time.sleep(0.1)
        assert proc.poll() is None, "polyperf run ended before the kill"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    run_dir = next(out.glob("runs/*"))
    assert not (run_dir / "benchmark.json").exists(), "pytest-benchmark finished: this was no mid-run kill"
    table = polyperf.load_run(run_dir)
    timings = table[(table["suite"] == "io_buffering") & (table["metric"] == "seconds")]
    assert {"parse"} <= set(timings["case"]) and len(timings) >= 6, table[["case", "metric"]].value_counts()


STOP_SUITE = """
import os
import signal
from pathlib import Path


import pytest


@pytest.fixture
def server(run_dir):
    yield
    (run_dir / "torn_down").write_text("yes")  # what a fleet's teardown stands for


def test_stopped(server, run_dir, record):
    (run_dir / "env.json").unlink(missing_ok=True)
    (run_dir / "env.json").mkdir()  # write_env can neither read nor replace it now
    record("before", 1, "count", case="c", implementation="i")
    os.kill(os.getpid(), signal.SIGTERM)
    record("after", 1, "count", case="c", implementation="i")
"""


@pytest.mark.slow
def test_a_failing_env_update_on_sigterm_still_stops_in_order(tmp_path):
    suites = _suites_dir(tmp_path, "stop", STOP_SUITE)
    run_dir = new_run_dir(tmp_path / "reports", "stopped")
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        str(suites / "test_stop.py"),
        f"--polyperf-run-dir={run_dir}",
        "-p",
        "no:cacheprovider",
    ]
    done = subprocess.run(cmd, cwd=suites, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == pytest.ExitCode.INTERRUPTED, done.stdout[-2000:] + done.stderr[-2000:]
    assert (run_dir / "torn_down").read_text() == "yes"
    assert "could not record the SIGTERM" in (run_dir / "logs" / "polyperf.log").read_text()
    assert set(polyperf.load_run(run_dir)["metric"]) == {"before"}
