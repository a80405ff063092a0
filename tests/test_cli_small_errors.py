"""Small things a user meets at the command line: a broken env.json is named, an unknown app leaves no folder
behind, and compare speaks of skipped lines in one plain line."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from polyperf.cli import main
from polyperf.record import Recorder, load_env, new_run_dir
from polyperf.record.run_dir import RowWriter


def _run(out: Path, scale: float = 1.0) -> Path:
    run_dir = new_run_dir(out)
    record = Recorder(RowWriter(run_dir), "toy")
    for repeat in range(6):
        record("seconds", scale * (1.0 + repeat / 100), "s", case="sort", implementation="rust", repeat=repeat)
    return run_dir


@pytest.mark.parametrize(
    ("text", "says"), [("{", "not readable as JSON"), ("[1, 2]", "expected a JSON object, found list")]
)
def test_a_broken_env_json_is_named(tmp_path: Path, text: str, says: str) -> None:
    run_dir = _run(tmp_path)
    (run_dir / "env.json").write_text(text)
    with pytest.raises(ValueError, match=rf"^{run_dir / 'env.json'}: {says}"):
        load_env(run_dir)


def test_report_names_the_broken_env_json(tmp_path: Path) -> None:
    run_dir = _run(tmp_path)
    (run_dir / "env.json").write_text('{"cpu": ')
    done = subprocess.run(
        [sys.executable, "-m", "polyperf", "report", str(run_dir)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"polyperf: error: {run_dir / 'env.json'}: not readable as JSON")
    assert "Traceback" not in done.stderr


def test_build_of_an_unknown_app_leaves_no_run_folder(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["build", "no_such_app", "--out", str(tmp_path / "reports")]) == 2
    assert "unknown app 'no_such_app'" in capsys.readouterr().err
    assert not (tmp_path / "reports").exists()


def test_verify_of_an_unknown_app_leaves_no_temp_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert main(["verify", "axum_devices:no_such_variant"]) == 2
    assert "has no variant 'no_such_variant'" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_compare_says_unreadable_lines_in_one_plain_line(tmp_path: Path) -> None:
    run_a, run_b = _run(tmp_path / "a"), _run(tmp_path / "b", scale=1.5)
    with (run_b / "results.jsonl").open("a") as fh:
        fh.write("garbage\n")
    done = subprocess.run(
        [sys.executable, "-m", "polyperf", "compare", str(run_a), str(run_b), "--figure", str(tmp_path / "c.png")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [line for line in done.stderr.splitlines() if "unreadable" in line]
    assert lines == [f"polyperf: warning: {run_b / 'results.jsonl'}: 1 unreadable line skipped (line 7)"], done.stderr
    assert "UnreadableLines" not in done.stderr and "warnings.warn" not in done.stderr
