"""Whether processes a test started are gone: the no-orphan checks of several test modules."""

from __future__ import annotations

import time
from collections.abc import Iterable

import psutil


def alive(pids: Iterable[int]) -> set[int]:
    """The pids that still run (a zombie has exited: only its parent's wait is missing)."""
    running = set()
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                running.add(pid)
        except psutil.NoSuchProcess:
            pass
    return running


def gone(pids: int | Iterable[int], timeout: float = 10.0) -> bool:
    """True once none of `pids` runs, waiting at most `timeout` seconds."""
    pids = [pids] if isinstance(pids, int) else list(pids)
    deadline = time.monotonic() + timeout
    while alive(pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
