"""What a load driver is, for a type checker as well as for a reader: the contract every driver keeps (`Driver`),
and each driver's own options (`OhaOptions`, `WrkOptions`, `BombardierOptions`, `LocustOptions`), which
`LoadEnv.oha`, `.wrk`, `.bombardier` and `.locust` take as typed keyword arguments (PEP 692)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol, TypedDict

from polyperf.load.result import Bounds, LoadResult, OnSpawn

__all__ = ["BombardierOptions", "Driver", "LocustOptions", "OhaOptions", "WrkOptions"]


class Driver(Protocol):
    """One bounded run against `url` (loopback unless the driver is told `allow_remote`): it stops at
    `bounds.duration` or `bounds.max_requests`, whichever comes first; every process it starts runs pinned to
    `client_cpus`, logs into `log_dir`, is announced through `on_spawn(pid)` (so its CPU is measured) and is
    stopped when the run ends, also on failure; `alive()` raises if the server died meanwhile. A driver takes its
    own options (below) as further keyword arguments."""

    def __call__(
        self,
        url: str,
        *,
        bounds: Bounds,
        client_cpus: Sequence[int],
        log_dir: Path,
        on_spawn: OnSpawn | None = None,
        alive: Callable[[], None] | None = None,
    ) -> LoadResult: ...


class OhaOptions(TypedDict, total=False):
    """`run_oha`: closed model with `connections`, or open model at `rate` requests/s (latency corrected)."""

    connections: int
    rate: float | None
    method: str
    body: str | None
    content_type: str
    per_request: bool  # every request's due time, end and status into a sqlite file
    allow_remote: bool


class WrkOptions(TypedDict, total=False):
    """`run_wrk`: closed model with `connections` (wrk stops at a duration only)."""

    connections: int
    allow_remote: bool


class BombardierOptions(TypedDict, total=False):
    """`run_bombardier`: closed model with `connections`."""

    connections: int


class LocustOptions(TypedDict, total=False):
    """`run_locust`: `users` (or a step ramp `steps` = [(users, seconds), ...]) of FastHttpUser."""

    users: int
    spawn_rate: float
    steps: Sequence[tuple[int, float]]
    processes: int | None
    method: str
    body: str | None
    think: float
    timeout: float | None
    allow_remote: bool
    external_workers: int
    master_bind: str | None
    worker_wait: float
