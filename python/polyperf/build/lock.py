"""One build at a time per target folder: two polyperf processes on one checkout (a main job and a smoke run, say)
would otherwise build in one cargo target folder at once, and a clean build's removal of its folder would pull the
object files from under the other's linker. The lock is an flock on a file beside the folder, so it goes with the
process that holds it, however that process ends."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from polyperf.common import steps

__all__ = ["build_lock", "lock_path"]


def lock_path(target: Path) -> Path:
    """The lock file of a target folder: beside it, named after it."""
    target = Path(target)
    return target.with_name(f".{target.name or 'target'}.polyperf-build.lock")


@contextlib.contextmanager
def build_lock(target: Path, what: str) -> Iterator[None]:
    """Holds the target folder's lock while the block runs. A second process waits, with one line saying for
    whom, then runs its block (which finds the build done and reuses it)."""
    path = lock_path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
            # past pytest's capture, like every long step's line: the wait shows while it lasts
            steps.announce(f"polyperf: {what}: waiting for {holder}, which is building in {target}")
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"polyperf pid {os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock
