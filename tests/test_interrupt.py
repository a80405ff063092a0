"""`polyperf run` stops when told to: SIGINT to its process group (a terminal's Ctrl-C), SIGTERM, or SIGKILL
of the outermost command mid-load leaves no pytest, server or load generator behind, keeps the rows measured
so far, and marks the run interrupted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from process_checks import alive

import polyperf

pytestmark = pytest.mark.slow


def _tree(pid: int) -> set[int]:
    try:
        return {pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))}
    except psutil.NoSuchProcess:
        return set()


def _load_started(out: Path) -> bool:
    rows = list(out.glob("runs/*/results.jsonl"))
    return bool(rows) and '"case": "ceiling"' in rows[0].read_text()


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_run_stops_on_signal_and_keeps_rows(tmp_path, how):
    out = tmp_path / "reports"
    cmd = [sys.executable, "-m", "polyperf", "run", "bson_server", "--profile", "quick", "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    seen: set[int] = set()
    try:
        deadline = time.monotonic() + 240
        while not _load_started(out):  # builds are cached by the session's earlier tests; the first may build
            assert proc.poll() is None, "polyperf run ended before any load"
            assert time.monotonic() < deadline, "no ceiling row within 240 s"
            seen |= _tree(proc.pid)
            time.sleep(0.2)
        seen |= _tree(proc.pid)
        assert len(seen) >= 4, "pytest, three servers and a load generator should be running"
        if how == "SIGINT":
            os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        else:
            proc.send_signal(getattr(signal, how))
        stop_by = time.monotonic() + 15
        while alive(seen) and time.monotonic() < stop_by:
            seen |= set().union(*(_tree(p) for p in alive(seen)))
            time.sleep(0.2)
        assert not alive(seen), f"left running 15 s after {how}: {[psutil.Process(p).cmdline() for p in alive(seen)]}"
    finally:
        for pid in alive(seen | {proc.pid}):
            os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=10)
    run_dir = next(out.glob("runs/*"))
    rows = polyperf.load_run(run_dir)
    assert "rps" in set(rows["metric"])
    assert (run_dir / "results.parquet").exists()
    env = json.loads((run_dir / "env.json").read_text())
    assert env["interrupted"] in {"SIGINT", "SIGTERM"}  # on SIGKILL, pytest's parent-death SIGTERM
    if how != "SIGKILL":
        assert proc.returncode == 128 + getattr(signal, how)
        assert (run_dir / "report.html").exists()
