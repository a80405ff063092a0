"""`BackgroundLoop`: a context manager that runs a subclass's `_loop()` on a daemon thread pinned to given CPUs (a
load generator's, never the server's) until `_stop` is set; the samplers and probes of the load runs share it."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from types import TracebackType
from typing import Self

__all__ = ["BackgroundLoop"]


class BackgroundLoop:
    """Start on enter, stop (set `_stop`, then wait up to `join_timeout` seconds) on exit. `_loop()` checks
    `_stop` between steps and sleeps with `_stop.wait(interval)`, so a stop is seen within one interval."""

    join_timeout = 5.0

    def __init__(self, name: str, cpus: Sequence[int] = ()) -> None:
        self.cpus = list(cpus)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._pinned_loop, name=name, daemon=True)

    def _loop(self) -> None:
        raise NotImplementedError

    def _pinned_loop(self) -> None:
        if self.cpus:
            os.sched_setaffinity(threading.get_native_id(), self.cpus)
        self._loop()

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=self.join_timeout)
