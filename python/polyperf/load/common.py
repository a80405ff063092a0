"""What every load driver shares: the bounds of a run, the loopback-only rule (another host only by explicit
opt-in), and `LoadResult`, the one shape in which oha, wrk and locust report back (base units: seconds,
counts, requests per second).

Drivers (`native_driver`, `locust_driver`) produce it; `measure` adds the server's and the client's
cost over the same window; the suites turn both into rows.
"""

from __future__ import annotations

import ipaddress
import itertools
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from polyperf.errors import PolyperfError

__all__ = [
    "PERCENTILES",
    "Bounds",
    "LoadFailed",
    "LoadResult",
    "OnSpawn",
    "TargetNotLoopback",
    "require_loopback",
    "require_target",
]

# Client-side latency percentiles every driver reports (the Rust-vs-Go article used p90; p99.9 shows the tail).
PERCENTILES = (0.50, 0.90, 0.99, 0.999)

# Called with the pid of every load-generator process a driver starts, so `measure` can count its CPU.
OnSpawn = Callable[[int], None]


class LoadFailed(PolyperfError):
    """A load generator failed, overran its bounds or printed nothing usable (message names the command)."""


class TargetNotLoopback(LoadFailed, ValueError):
    """polyperf loads 127.0.0.0/8 or ::1 unless told `--allow-remote`: never a machine that did not agree."""


def require_target(url: str, *, allow_remote: bool = False) -> str:
    """Returns `url` if polyperf may load it; raises `TargetNotLoopback` (one line) otherwise.

    By default only loopback hosts (names are resolved) are accepted; `allow_remote=True` is the explicit
    opt-in (`--allow-remote` on the command line) for a server on another host that agreed to be loaded.
    Either way the URL must be http(s) with a host that resolves."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TargetNotLoopback(f"load target {url!r} is not an http(s) URL with a host")
    host = parts.hostname
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, parts.port or 80, proto=socket.IPPROTO_TCP)}
    except socket.gaierror as exc:
        raise TargetNotLoopback(f"load target {url!r}: cannot resolve {host!r} ({exc})") from None
    if not addresses:
        raise TargetNotLoopback(f"load target {url!r}: {host!r} resolves to nothing")
    foreign = sorted(a for a in addresses if not ipaddress.ip_address(a.split("%")[0]).is_loopback)
    if foreign and not allow_remote:
        raise TargetNotLoopback(
            f"refusing to load {url!r}: {host!r} resolves to {', '.join(foreign)}, not loopback; pass "
            "--allow-remote (allow_remote=True) only for a server on another host that agreed to be loaded"
        )
    return url


def require_loopback(url: str) -> str:
    """Returns `url` if its host is a loopback address (names are resolved); raises `TargetNotLoopback`."""
    return require_target(url, allow_remote=False)


@dataclass(frozen=True)
class Bounds:
    """Every run stops at whichever comes first: `duration` seconds or `max_requests` requests.

    `grace` is how long past `duration` the harness waits for a driver before killing it.
    """

    duration: float
    max_requests: int
    grace: float = 15.0

    def __post_init__(self) -> None:
        if not self.duration > 0 or self.max_requests < 1:
            raise ValueError(f"bounds need duration > 0 and max_requests >= 1, got {self}")


@dataclass(frozen=True)
class LoadResult:
    """One load run as the driver saw it, client side.

    `requests` counts every request that completed, successfully or not, so
    `requests == successes + failures`. `rps` is `requests / duration` over the driver's own measured
    window `[started_at, ended_at]` (epoch seconds), which `measure` uses for the server's CPU too.
    Latencies are in seconds; `latency_resolution` says how finely the driver measures them (locust
    rounds to whole milliseconds below 100 ms).
    """

    driver: str  # "oha" | "wrk" | "locust"
    mode: str  # "closed" (fixed concurrency), "fixed-rate" (open model), "ramp" (locust step shape)
    url: str
    started_at: float
    ended_at: float
    requests: int
    successes: int
    failures: int
    latency: Mapping[float, float]  # percentile (0.5, 0.9, 0.99, 0.999) -> seconds
    latency_resolution: float
    connections: int | None = None  # oha/wrk connections, locust peak users
    offered_rate: float | None = None  # requests/s asked for (fixed-rate only)
    errors: Mapping[str, int] = field(default_factory=dict)  # error kind -> count
    status_counts: Mapping[int, int] = field(default_factory=dict)
    history: Sequence[tuple[float, float, int]] = ()  # (seconds since start, requests/s, users)
    client_processes: int = 1
    client_cpus: Sequence[int] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def duration(self) -> float:
        return self.ended_at - self.started_at

    @property
    def rps(self) -> float:
        return self.requests / self.duration if self.duration > 0 else 0.0

    @property
    def achieved_rate_ratio(self) -> float | None:
        """Achieved / offered rate for fixed-rate runs, None for closed-model runs."""
        return self.rps / self.offered_rate if self.offered_rate else None

    @property
    def non_2xx(self) -> int:
        return sum(n for status, n in self.status_counts.items() if not 200 <= status < 300)

    @classmethod
    def native(
        cls,
        driver: str,
        url: str,
        *,
        started_at: float,
        seconds: float,
        requests: int,
        successes: int,
        client_cpus: Sequence[int],
        **fields: Any,
    ) -> LoadResult:
        """A native generator's run (oha, wrk, bombardier): microsecond latencies, a window of `seconds` from
        `started_at`, and every request that did not succeed a failure; checked before it is returned."""
        result = cls(
            driver=driver,
            mode=fields.pop("mode", "closed"),
            url=url,
            started_at=started_at,
            ended_at=started_at + seconds,
            requests=requests,
            successes=successes,
            failures=requests - successes,
            latency_resolution=1e-6,
            client_cpus=tuple(client_cpus),
            **fields,
        )
        result.check()
        return result

    def check(self) -> None:
        """Raises `LoadFailed` if the numbers contradict each other (a parser bug, not a slow server)."""
        problems = []
        if self.requests != self.successes + self.failures:
            problems.append(f"requests {self.requests} != successes {self.successes} + failures {self.failures}")
        if self.duration <= 0:
            problems.append(f"non-positive duration {self.duration}")
        values = [self.latency[p] for p in PERCENTILES if p in self.latency]
        if any(b < a for a, b in itertools.pairwise(values)):
            problems.append(f"percentiles not monotonic: {dict(self.latency)}")
        if problems:
            raise LoadFailed(f"{self.driver} against {self.url}: " + "; ".join(problems))
