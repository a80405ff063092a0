"""Long steps say what they do: one line as they start, with their last time (or what is expected the first
time), shown even inside a pytest session that captures output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from polyperf.common import steps

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _to_stderr(request):
    """These tests read the lines from stderr: the session's own sink (past the capture) is set aside."""
    from polyperf.record.pytest_plugin import live_line_sink

    steps.set_sink(None)
    yield
    steps.set_sink(live_line_sink(request.config))


def test_the_first_time_says_what_is_expected_then_the_last_time(tmp_path, capsys):
    cache = tmp_path / "step-times.json"
    with steps.step("building oha 1.16.0 with cargo install", "cargo install oha", "about 4 min", cache=cache):
        pass
    assert capsys.readouterr().err == "polyperf: building oha 1.16.0 with cargo install (about 4 min) …\n"
    steps.record("cargo install oha", 85.4, cache)
    assert steps.last_seconds("cargo install oha", cache) == 85.4
    assert steps.describe("building", "cargo install oha", "about 4 min", cache=cache).endswith("(last time 85 s) …")
    steps.record("cargo install oha", 250, cache)
    assert "(last time 4.2 min)" in steps.describe("building", "cargo install oha", cache=cache)


def test_a_time_kept_elsewhere_stands_in_until_the_cache_has_one(tmp_path):
    cache = tmp_path / "step-times.json"
    assert steps.describe("building a:b", "build a:b", cache=cache) == "polyperf: building a:b …"
    assert "(last time 12 s)" in steps.describe("building a:b", "build a:b", "about 2 min", last=12.0, cache=cache)
    steps.record("build a:b", 30.0, cache)
    assert "(last time 30 s)" in steps.describe("building a:b", "build a:b", last=12.0, cache=cache)


def test_a_failed_step_leaves_the_last_time_alone(tmp_path):
    cache = tmp_path / "step-times.json"
    steps.record("k", 10.0, cache)
    with pytest.raises(RuntimeError), steps.step("x", "k", cache=cache):
        raise RuntimeError("build failed")
    assert steps.last_seconds("k", cache) == 10.0
    cache.write_text("{not json")
    assert steps.last_seconds("k", cache) is None  # a broken cache only loses the estimate


ANNOUNCING_SUITE = """
from polyperf.common import steps


def test_builds_something():
    steps.announce("polyperf: building toy:release with cargo build (last time 3 s) …")
"""


def test_a_line_announced_inside_a_suite_gets_past_pytest_capture(tmp_path):
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "conftest.py").write_text((ROOT / "suites" / "conftest.py").read_text())
    (suites / "test_toy.py").write_text(ANNOUNCING_SUITE)
    cmd = [sys.executable, "-m", "pytest", "test_toy.py", "-q", "-p", "no:cacheprovider", "--polyperf-out", "out"]
    done = subprocess.run(cmd, cwd=suites, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "polyperf: building toy:release with cargo build (last time 3 s) …" in done.stdout + done.stderr
