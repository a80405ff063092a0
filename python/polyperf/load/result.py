"""What every load driver shares, and what it reports: the bounds of a run, the loopback-only rule (another host
only by explicit opt-in), and `LoadResult`, the one shape in which oha, wrk and locust report back (base units:
seconds, counts, requests per second).

Drivers (`native_driver`, `locust_driver`) produce it; `measure` adds the server's and the client's
cost over the same window; the suites turn both into rows.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from polyperf.errors import PolyperfError
from polyperf.load.target import Target, TargetRefused, parse_target

__all__ = [
    "MAX_FAILED_SHARE",
    "PERCENTILES",
    "Bounds",
    "LoadFailed",
    "LoadResult",
    "LoadUnanswered",
    "OnSpawn",
    "TargetNotLoopback",
    "check_target",
    "failure_reason",
    "require_answered",
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
    """polyperf loads 127.0.0.0/8 or ::1 unless told `--allow-remote`: never a machine that did not agree, and
    never a URL that two tools could read as different hosts."""


def check_target(url: str, *, allow_remote: bool = False) -> Target:
    """The parsed, resolved `Target` of `url` if polyperf may load it; raises `TargetNotLoopback` (one line).

    By default only loopback (127.0.0.0/8, ::1; a name must resolve to loopback only); `allow_remote=True` is
    the explicit opt-in (`--allow-remote`) for a server on another host that agreed to be loaded. The rules
    for what a URL may look like are `polyperf.load.target`'s."""
    try:
        return parse_target(url, allow_remote=allow_remote)
    except TargetRefused as exc:
        raise TargetNotLoopback(str(exc)) from None


def require_target(url: str, *, allow_remote: bool = False) -> str:
    """The canonical URL (`scheme://ADDRESS:PORT/path`) to hand a generator, if polyperf may load `url`;
    raises `TargetNotLoopback` (one line) otherwise (see `check_target`)."""
    return check_target(url, allow_remote=allow_remote).url


def require_loopback(url: str) -> str:
    """`require_target` without the opt-in: the canonical URL of a loopback target."""
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


# A run is a failed run, and no throughput, when no request succeeded or more than this share failed (no HTTP
# answer, or a status outside 2xx): a rate of refused connections measures how fast the client gives up. Half is
# far above any error rate a benchmark should report as a result, and far below "everything failed".
MAX_FAILED_SHARE = 0.5


class LoadUnanswered(LoadFailed):
    """Most requests of a run failed; the message carries the generator's own error text."""


def _one_line(text: str, limit: int = 240) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def failure_reason(result: LoadResult, max_failed_share: float = MAX_FAILED_SHARE) -> str | None:
    """Why `result` is a failed run (one line, with the generator's most frequent errors), or None (pure)."""
    if result.requests and result.successes and result.failures <= max_failed_share * result.requests:
        return None
    causes = sorted(result.errors.items(), key=lambda kv: -kv[1])[:2]
    causes += sorted(
        ((f"HTTP {code}", n) for code, n in result.status_counts.items() if not 200 <= code < 300),
        key=lambda kv: -kv[1],
    )[:2]
    said = "; ".join(f"{_one_line(text)} ({n}x)" for text, n in causes) or "no error text"
    if not result.requests:
        return f"{result.driver} against {result.url}: no request completed in {result.duration:.2f} s ({said})"
    return (
        f"{result.driver} against {result.url}: {result.failures} of {result.requests} requests failed "
        f"({result.failures / result.requests:.0%}); {result.driver} says: {said}"
    )


def require_answered(result: LoadResult, max_failed_share: float = MAX_FAILED_SHARE) -> LoadResult:
    """`result` if most of its requests succeeded; raises `LoadUnanswered` (see `failure_reason`) otherwise."""
    reason = failure_reason(result, max_failed_share)
    if reason:
        raise LoadUnanswered(reason)
    return result
