"""Quiet before a timed window: no connection to any server still open and no server's CPU still rising, so
a load run never times one server while another is still working off the previous run's queue. The
/proc/net/tcp parser (`open_connections`) is pure; `wait_quiet` polls it and the CPU counters, bounded."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Quiet", "open_connections", "wait_quiet"]

_TCP_TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
# socket states that hold no connection: LISTEN (0A), TIME_WAIT (06) and CLOSE (07)
_NOT_OPEN = frozenset({"0A", "06", "07"})


@dataclass(frozen=True)
class Quiet:
    """How waiting for quiet went: seconds waited, and what was still busy if the bound ran out."""

    waited_s: float
    timed_out: bool
    open_connections: int = 0
    busy: tuple[str, ...] = ()  # names whose CPU was still rising


def open_connections(text: str, ports: Sequence[int]) -> dict[int, int]:
    """Open TCP connections per port in `ports` (either end), from /proc/net/tcp{,6} text (pure)."""
    wanted = set(ports)
    found = dict.fromkeys(wanted, 0)
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 4 or fields[3] in _NOT_OPEN:
            continue
        with contextlib.suppress(ValueError, IndexError):
            local, remote = int(fields[1].rsplit(":", 1)[1], 16), int(fields[2].rsplit(":", 1)[1], 16)
            for port in {local, remote} & wanted:
                found[port] += 1
    return found


def _open_now(ports: Sequence[int]) -> int:
    total = 0
    for table in _TCP_TABLES:
        with contextlib.suppress(OSError):
            total += sum(open_connections(table.read_text(), ports).values())
    return total


def wait_quiet(
    ports: Sequence[int],
    counters: Mapping[str, Callable[[], float]],
    *,
    timeout: float = 3.0,
    interval: float = 0.02,
    idle: float = 0.001,
) -> Quiet:
    """Waits (at most `timeout` s) until no connection to `ports` is open and no CPU counter (seconds, by
    name) rose by more than `idle` s over `interval` s; returns what it saw."""
    start = time.monotonic()
    while True:
        before = {name: read() for name, read in counters.items()}
        time.sleep(interval)
        busy = tuple(name for name, read in counters.items() if read() - before[name] > idle)
        connections = _open_now(ports)
        waited = time.monotonic() - start
        if not busy and not connections:
            return Quiet(waited, False)
        if waited >= timeout:
            return Quiet(waited, True, connections, busy)
