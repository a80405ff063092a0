"""`polyperf audit` and `polyperf compare` as a user calls them: exit codes, JSON, regressions."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from polyperf.cli import main
from polyperf.record import Row
from polyperf.record.run_dir import RowWriter, finalize_run, new_run_dir

needs_strace = pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed: apt-get install strace")


def _parse(path: Path, mode: str) -> list[str]:
    return [sys.executable, "-c", f"from polyperf import _native; _native.parse_json_file({str(path)!r}, {mode!r})"]


@needs_strace
@pytest.mark.parametrize(("mode", "flagged"), [("unbuffered", True), ("buffered", False)])
def test_audit_flags_unbuffered_parsing_only(tmp_path, capsys, mode, flagged):
    from polyperf.data.geojson import write_geojson

    path = write_geojson(tmp_path / "fc.json", 20_000)
    code = main(["audit", "--json", "--fail-on-flag", "--no-stack-traces", "--", *_parse(path, mode)])
    findings = json.loads(capsys.readouterr().out)
    assert (str(path) in findings["flagged"]) is flagged
    assert code == (1 if flagged else 0)


def _run(tmp_path: Path, name: str, factor: float) -> Path:
    run_dir = new_run_dir(tmp_path / "reports", name)
    rows = []
    for repeat in range(8):
        jitter = 1 + 0.01 * (repeat % 3)
        rows += [
            Row("toy", "parse", "serde_json", "buffered", "seconds", 0.010 * jitter * factor, "s", repeat),
            Row("toy", "write", "std::io", "buffered", "seconds", 0.002 * jitter, "s", repeat),
            Row("toy", "parse_syscalls", "serde_json", "buffered", "read_syscalls", 247, "count", repeat),
        ]
    RowWriter(run_dir).write(rows)
    finalize_run(run_dir)
    return run_dir


def test_compare_reports_a_tripled_case_as_regressed(tmp_path, capsys):
    a, b, same = _run(tmp_path, "a", 1.0), _run(tmp_path, "b", 3.0), _run(tmp_path, "c", 1.0)
    assert main(["compare", str(a), str(same), "--figure", str(tmp_path / "same.png")]) == 0
    capsys.readouterr()
    assert main(["compare", str(a), str(b), "--markdown", str(tmp_path / "cmp.md")]) == 0
    out = capsys.readouterr().out
    parse_line = next(line for line in out.splitlines() if "/ parse /" in line)
    assert "regressed" in parse_line
    assert (b / "compare-a.png").exists() and (tmp_path / "cmp.md").read_text().strip()
    assert main(["compare", str(a), str(b), "--fail-on-regression", "10"]) == 0  # timings: gated only when asked
    assert main(["compare", str(a), str(b), "--fail-on-regression", "10", "--gate-timings"]) == 1
    assert main(["compare", str(a), str(b), "--fail-on-regression", "500", "--gate-timings"]) == 0
