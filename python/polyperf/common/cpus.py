"""CPU lists: parsing `"0"`, `"0,1"`, `"0-3"`, labelling them, and the server/client split (which must be
disjoint: a load generator that shares a core with the server measures both)."""

from __future__ import annotations

import os
from collections.abc import Sequence

__all__ = ["CpuSplitError", "cpu_label", "parse_cpus", "split_cpus"]


class CpuSplitError(ValueError):
    """The server and client CPU sets overlap, or nothing is left for one of them (one-line message)."""


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


def split_cpus(
    server: str | None = None, client: str | None = None, *, available: Sequence[int] | None = None
) -> tuple[list[int], list[int]]:
    """Server and client CPU sets: as given, else the first half of the CPUs this process may use for the
    server and the rest for the client (on 2 cores: server 0, client 1). Raises `CpuSplitError` when the
    two overlap or when no CPU is left for the client: never a silent fallback to shared CPUs."""
    allowed = sorted(os.sched_getaffinity(0) if available is None else available)
    server_cpus = parse_cpus(server)
    client_cpus = parse_cpus(client)
    half = max(1, len(allowed) // 2)
    server_cpus = server_cpus or [c for c in allowed if c not in (client_cpus or [])][:half]
    client_cpus = client_cpus or [c for c in allowed if c not in server_cpus]
    shared = sorted(set(server_cpus) & set(client_cpus))
    if shared:
        raise CpuSplitError(
            f"--server-cpus {cpu_label(server_cpus)} and --client-cpus {cpu_label(client_cpus)} overlap on CPU "
            f"{cpu_label(shared)}: a load generator sharing the server's cores measures both; give disjoint sets"
        )
    if not server_cpus or not client_cpus:
        raise CpuSplitError(
            f"no CPU left for the {'client' if server_cpus else 'server'} (CPUs usable here: {cpu_label(allowed)}); "
            "load runs need at least two CPUs, one for the servers and one for the load generators"
        )
    return server_cpus, client_cpus
