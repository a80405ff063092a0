"""The CLI and the main job end to end, on the smoke profile."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import polyperf
from polyperf.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_help_explains_every_command(capsys):
    for argv in (["--help"], ["run", "--help"], ["report", "--help"], ["list", "--help"]):
        try:
            main(argv)
        except SystemExit as exc:
            assert exc.code == 0
    out = capsys.readouterr().out
    for word in ("run", "report", "list", "--profile", "smoke", "--out"):
        assert word in out


def test_python_dash_m_works():
    done = subprocess.run(
        [sys.executable, "-m", "polyperf", "list"], capture_output=True, text=True, cwd=ROOT, check=True, timeout=60
    )
    assert "io_buffering" in done.stdout


def test_unknown_suite_is_one_clear_line(tmp_path, capsys):
    assert main(["run", "nope", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("polyperf: error: unknown suite") and "\n" not in err


@pytest.mark.slow
def test_smoke_run_end_to_end(tmp_path):
    outcome = polyperf.run(["io_buffering"], profile="smoke", out=tmp_path, quiet=True)
    assert outcome.ok, (outcome.run_dir / "logs" / "pytest.log").read_text()[-3000:]
    run_dir = outcome.run_dir
    assert (tmp_path / "latest").resolve() == run_dir.resolve()
    for name in ("results.parquet", "results.csv", "env.json", "benchmark.json", "summary.md", "report.html"):
        assert (run_dir / name).exists(), name
    table = polyperf.load_run(tmp_path)
    assert set(table["variant"]) >= {"unbuffered", "buffered", "read_all"}
    assert set(table["metric"]) >= {"read_syscalls", "write_syscalls", "seconds", "bytes"}
    assert set(table["unit"]) <= {"s", "bytes", "count", "1/s", "bytes/s", "ratio"}
    env = json.loads((run_dir / "env.json").read_text())
    assert env["profile"] == "smoke" and env["cpu_count"] >= 1
    assert len(list((run_dir / "report").glob("*.png"))) >= 4
    summary = (run_dir / "summary.md").read_text()
    # the claim's own row: the 2,009,108-byte file read one byte per syscall, plus the read that sees EOF
    rows = {line.split("`")[1]: line for line in summary.splitlines() if line.startswith("| `")}
    row = rows["io.unbuffered_read_syscalls"]
    verdict = row.rstrip().removesuffix("|").rsplit("|", 1)[1].strip()
    assert "| 2,009,109 syscalls |" in row and verdict.startswith("**reproduced**"), row


NEW_SUITE = """
import pytest


@pytest.mark.parametrize("n", [100, 2000])
def test_sort(benchmark, record, n):
    result = benchmark(sorted, list(range(n, 0, -1)))
    record("items", len(result), "count", case="sort_size", implementation="sorted", params={"n": n})
"""


@pytest.mark.slow
def test_a_new_suite_file_gets_rows_a_figure_and_a_table(tmp_path):
    """One file using only pytest-benchmark's `benchmark` and `record`, no report code: it runs and reports."""
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "conftest.py").write_text((ROOT / "suites" / "conftest.py").read_text())
    (suites / "test_toy_sort.py").write_text(NEW_SUITE)
    outcome = polyperf.run(["toy_sort"], profile="smoke", out=tmp_path / "reports", suites_dir=suites, quiet=True)
    assert outcome.ok, (outcome.run_dir / "logs" / "pytest.log").read_text()[-3000:]
    table = polyperf.load_run(outcome.run_dir)
    seconds = table[table["metric"] == "seconds"]
    assert set(seconds["implementation"]) == {"100", "2000"} and set(seconds["case"]) == {"sort"}
    assert set(seconds["params"].map(lambda p: p["n"])) == {100, 2000}
    assert set(table["unit"]) <= {"s", "bytes", "count", "1/s", "bytes/s", "ratio"}
    page = outcome.report.read_text()
    assert "<h2 id='toy_sort'>toy_sort</h2>" in page
    assert (outcome.run_dir / "report" / "toy_sort__sort__seconds.png").exists()
    assert "report/toy_sort__sort__seconds.png" in page and "sorted" in page
