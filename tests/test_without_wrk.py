"""Without Debian's wrk the load suites still pass: the oha cross-check is made by bombardier, which the project
installs itself, and the run says what was not measured and how to install wrk."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import polyperf
from polyperf.record.run_dir import load_env

pytestmark = pytest.mark.slow


def _path_without(tool: str, into: Path) -> str:
    """A PATH of one folder holding links to every program on today's PATH but `tool`."""
    into.mkdir()
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for entry in os.scandir(folder):
            link = into / entry.name
            if entry.name != tool and not link.exists() and os.access(entry.path, os.X_OK):
                link.symlink_to(entry.path)
    return str(into)


def test_driver_cross_check_runs_without_wrk(tmp_path):
    env = {**os.environ, "PATH": _path_without("wrk", tmp_path / "bin")}
    out = tmp_path / "reports"
    cmd = [
        sys.executable,
        "-m",
        "polyperf",
        "run",
        "http_frameworks",
        "--profile",
        "smoke",
        "--out",
        str(out),
        "--no-report",
        "--pytest-args",
        "-k",
        "verified or driver_ceiling",
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    run_dir = next(out.glob("runs/*"))
    rows = polyperf.load_run(run_dir)
    drivers = set(rows[rows["case"] == "driver_ceiling"]["driver"])
    assert drivers == {"oha", "bombardier"}
    assert any("wrk" in note for note in load_env(run_dir).get("notes", []))
