"""`polyperf run` answers as it goes: the suites that need no server first, the claims decided so far after each
suite (every claim's headline on screen, read from the captured output), pytest-benchmark's raw table kept in the
log but not on screen, and the exit code of a run whose suites each ran in a pytest session of their own."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

from polyperf import runner


def test_suites_that_need_no_server_come_first(tmp_path):
    suites = tmp_path / "suites"
    suites.mkdir()
    for name in ("http_frameworks", "io_buffering", "zzz_new", "devices_postgres", "bson"):
        (suites / f"test_{name}.py").write_text("")
    (suites / "conftest.py").write_text("")
    order = [p.stem.removeprefix("test_") for p in runner._suite_files([], suites)]
    assert order == ["io_buffering", "bson", "devices_postgres", "http_frameworks", "zzz_new"]
    named = [p.stem.removeprefix("test_") for p in runner._suite_files(["http_frameworks", "bson"], suites)]
    assert named == ["bson", "http_frameworks"]


def test_exit_code_of_a_run_of_several_sessions():
    assert runner._combined([0, 0, 0]) == 0
    assert runner._combined([0, 1, 0]) == 1
    assert runner._combined([5, 0, 5]) == 0  # `-k counts` deselected every test of two suites
    assert runner._combined([5, 5]) == 5
    assert runner._combined([5, 2, 1]) == 2


def test_the_raw_table_stays_in_the_log(tmp_path, capsys):
    log_path = tmp_path / "pytest.log"
    lines = [
        "suites/test_bson.py::test_a PASSED\n",
        "\x1b[33m----------- benchmark 'decode': 2 tests ------------\x1b[0m\n",
        "Name (time in us)    Min    Max\n",
        "test_a               1.0    2.0\n",
        "Legend:\n",
        "  Outliers: 1 Standard Deviation from Mean; 1.5 IQR (InterQuartile Range) from 1st Quartile.\n",
        "  OPS: Operations Per Second, computed as 1 / Mean\n",
        "===== 1 passed in 1.0s =====\n",
    ]
    log_path.write_text("".join(lines))
    with log_path.open() as log:
        runner._Echo(log, quiet=False, table=False, progress=None).pump(final=True)
    shown = capsys.readouterr().out
    assert "PASSED" in shown and "1 passed" in shown
    assert "Name (time in us)" not in shown and "OPS" not in shown and "benchmark 'decode'" not in shown
    with log_path.open() as log:
        runner._Echo(log, quiet=False, table=True, progress=None).pump(final=True)
    assert "Name (time in us)" in capsys.readouterr().out


def test_a_line_written_in_two_pieces_is_judged_whole(tmp_path, capsys):
    log = io.StringIO()
    echo = runner._Echo(log, quiet=False, table=False, progress=None)
    log.write("------ bench")
    log.seek(0)
    echo.pump()
    position = log.tell()
    log.write("mark: 3 tests ------\nName  Min\nOPS: Operations Per Second\nafter\n")
    log.seek(position)
    echo.pump(final=True)
    assert capsys.readouterr().out == "after\n"


def test_a_main_job_prints_every_claims_headline_as_its_suite_ends(tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "polyperf", "run", "bson", "io_buffering", "--profile", "smoke", "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False, cwd=Path(__file__).parents[1])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    screen = done.stdout
    run_dir = next((out / "runs").iterdir())
    verdicts = subprocess.run(
        [sys.executable, "-m", "polyperf", "verdicts", str(run_dir), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    records = json.loads(verdicts.stdout)
    assert {r["suite"] for r in records} == {"io_buffering", "bson"}
    # what the screen said is what the run wrote, once, in verdicts.json (judged again, the same rows agree)
    written = json.loads((run_dir / "verdicts.json").read_text())
    assert written["written_by"] == "polyperf run" and written["claims_files"][0]["path"].endswith("claims.toml")
    assert [(r["claim"], r["headline"]) for r in written["verdicts"]] == [(r["claim"], r["headline"]) for r in records]
    final = screen[screen.index("answers after 2 of 2 suites") :]
    for record in records:  # every claim, by id, with the headline the verdicts command gives it
        if record["verdict"] != "not measured":
            assert f"{record['claim']}: {record['headline']}" in final, record["claim"]
        else:
            assert record["claim"] in final
    # io_buffering (no server, first in the order) answered before bson's session started
    first = screen.index("answers after 1 of 2 suites (io_buffering)")
    assert first < screen.index("suite 2 of 2: bson")
    assert f"report {run_dir / 'report.html'}" in screen
    # pytest-benchmark's raw table: in the log, not on screen
    assert "OPS: Operations Per Second" not in screen
    assert "OPS: Operations Per Second" in (run_dir / "logs" / "pytest.log").read_text()
    # both sessions' benchmarks are in the run's benchmark.json
    names = {b["fullname"].split("::")[0] for b in json.loads((run_dir / "benchmark.json").read_text())["benchmarks"]}
    assert names == {"suites/test_io_buffering.py", "suites/test_bson.py"}
    guide = (run_dir / "logs" / "polyperf.log").read_text()
    assert "pytest.log" in guide and "servers/" in guide and "load/" in guide
