"""A real pytest session with the suites' plugin (record/pytest_plugin.py), in process: the run directory,
rows, pytest-benchmark rounds, env.json, progress and durations it leaves, and what it refuses."""

from __future__ import annotations

import json
import signal

import pytest

from polyperf.record.run_dir import new_run_dir

pytest_plugins = ["pytester"]


DEMO = """
import pytest

def test_rows(record, profile, run_dir):
    assert profile.name == "smoke" and (run_dir / "logs").is_dir()
    record("rps", 5.0, "1/s", case="c", implementation="i")

@pytest.mark.parametrize("size", [4])
def test_timed(benchmark, size):
    benchmark.pedantic(lambda: None, rounds=3, iterations=2)
"""


def _session(pytester, *args):
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP)}
    pytester.makeconftest('pytest_plugins = ["polyperf.record.pytest_plugin"]')
    pytester.makepyfile(test_demo=DEMO)
    try:
        return pytester.runpytest_inprocess("-p", "no:locust", "-p", "no:cacheprovider", *args)
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def test_a_session_records_rows_benchmarks_env_and_progress(pytester):
    result = _session(pytester, "--polyperf-out", "out", "--polyperf-profile", "smoke")
    result.assert_outcomes(passed=2)
    run_dir = next((pytester.path / "out" / "runs").iterdir())
    assert any(line == f"polyperf: profile=smoke run_dir={run_dir}" for line in result.outlines)
    assert (pytester.path / "out" / "latest").resolve() == run_dir.resolve()
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert [(r["suite"], r["case"], r["metric"], r["value"]) for r in rows[:1]] == [("demo", "c", "rps", 5.0)]
    timed = rows[1:]
    assert [(r["case"], r["implementation"], r["metric"], r["repeat"]) for r in timed] == [
        ("timed", "4", "seconds", n) for n in range(3)
    ]
    assert all(r["params"] == {"size": 4, "iterations": 2} for r in timed)
    assert (run_dir / "results.parquet").exists() and (run_dir / "benchmark.json").exists()
    assert json.loads((run_dir / "env.json").read_text())["profile"] == "smoke"
    durations = json.loads((run_dir / "durations.json").read_text())
    assert set(durations) == {"test_demo.py::test_rows", "test_demo.py::test_timed[4]"}
    progress = json.loads((run_dir / "progress.json").read_text())
    assert progress == {
        "nodeid": "test_demo.py::test_timed[4]",
        "index": 1,
        "total": 2,
        "pending": ["test_demo.py::test_timed[4]"],
    }


def test_a_session_writes_into_a_given_run_dir_without_owning_it(pytester):
    given = new_run_dir(pytester.path, "given")  # as `polyperf run` makes it
    result = _session(pytester, "--polyperf-run-dir", str(given), "--polyperf-profile", "smoke", "-k", "rows")
    result.assert_outcomes(passed=1)
    assert (given / "logs").is_dir() and not (pytester.path / "reports").exists()
    assert not (given / "env.json").exists()  # the runner that made the directory writes it
    assert [json.loads(line)["metric"] for line in (given / "results.jsonl").read_text().splitlines()] == ["rps"]


def test_overlapping_cpus_are_refused_before_anything_starts(pytester):
    result = _session(pytester, "--server-cpus", "0", "--client-cpus", "0", "--polyperf-out", "out")
    assert result.ret == pytest.ExitCode.USAGE_ERROR and not (pytester.path / "out").exists()
