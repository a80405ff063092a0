"""CPU lists: parsing `"0"`, `"0,1"`, `"0-3"`, labelling them, and the default server/client split."""

from __future__ import annotations

import os
from collections.abc import Sequence

__all__ = ["cpu_label", "parse_cpus", "split_cpus"]


def parse_cpus(text: str | None) -> list[int] | None:
    """`"0"`, `"0,1"`, `"0-3"` → CPU list (None for no pinning)."""
    if not text:
        return None
    cpus: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        try:
            cpus.extend(range(int(lo), int(hi or lo) + 1))
        except ValueError:
            raise ValueError(f"bad CPU list {text!r}: expected e.g. 0 or 0,1 or 0-3") from None
    return cpus


def cpu_label(cpus: Sequence[int]) -> str:
    return ",".join(map(str, cpus))


def split_cpus(server: str | None = None, client: str | None = None) -> tuple[list[int], list[int]]:
    """Server and client CPU sets: as given, else the first half of the CPUs this process may use for the
    server and the rest for the client (on 2 cores: server 0, client 1)."""
    available = sorted(os.sched_getaffinity(0))
    server_cpus = parse_cpus(server)
    client_cpus = parse_cpus(client)
    half = max(1, len(available) // 2)
    server_cpus = server_cpus or available[:half]
    client_cpus = client_cpus or [c for c in available if c not in server_cpus] or available
    return server_cpus, client_cpus
