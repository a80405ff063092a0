"""A generator is interrupted at the end of its window only once it catches SIGINT: one that installs its handler
late (a loaded machine starting oha) still reports, instead of dying by the signal with no output."""

from __future__ import annotations

import sys

from polyperf.load.native_driver import run_child
from polyperf.load.result import Bounds

# waits 1 s before catching SIGINT, then exits 0 on it (as oha reports and exits)
LATE_HANDLER = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_DFL)  # Python's own handler off: SIGINT kills, as before a handler
time.sleep(1.0)
signal.signal(signal.SIGINT, lambda *_: sys.exit(0))
time.sleep(30)
"""


def test_a_generator_that_catches_sigint_late_still_ends_cleanly(tmp_path):
    spawned, ended = run_child(
        [sys.executable, "-c", LATE_HANDLER],
        bounds=Bounds(0.3, 1),
        cpus=[],
        log_path=tmp_path / "late.log",
        interrupt=True,
        on_spawn=None,
        alive=None,
    )
    assert ended - spawned >= 1.0  # the interrupt waited for the handler
