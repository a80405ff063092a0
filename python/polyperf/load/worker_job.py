"""What a master may ask of a `polyperf worker`: two small typed jobs, validated on the worker, which builds oha's
command line itself from them. Nothing else a message carries reaches a process or a file name.

Standard library only, like `target.py`: the master (`distributed.py`, `locust_child.py`) builds the jobs with it
and the worker (`locust_remote.py`, a plain sibling module) reads them back with it. locust's master-worker link is
unauthenticated (locust 2.x has no secret or token for it), so a job is treated as input from anyone who can reach
the master's port: every key must be known, every value of its type and within its bounds, and the target passes
`target.parse_target` under the worker's own `--allow-remote`.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any

if __package__:
    from .target import Target, parse_target
else:  # a plain sibling module of locust_child.py, which must not import polyperf
    from target import Target, parse_target

__all__ = ["OHA_SAFETY", "JobRefused", "OhaJob", "UsersJob", "oha_bound", "oha_command"]

# the ranges a worker accepts: wide enough for any lab run, narrow enough that no value means "unbounded"
LIMITS: dict[str, tuple[float, float]] = {
    "connections": (1, 10_000),
    "duration_s": (0.1, 3_600.0),
    "max_requests": (1, 1_000_000_000),
    "rate": (0.1, 10_000_000.0),
    "budget": (1, 1_000_000_000),
    "think": (0.0, 60.0),
    "timeout": (0.01, 600.0),
    "users": (1, 100_000),
}
MAX_BODY = 64 * 1024
# said to oha explicitly whatever its version's defaults: a 3xx is an answer (counted as a failure with its status),
# never followed to another host; https certificates are verified (oha's default; `--insecure` is never passed)
OHA_SAFETY = ("--redirect", "0")
GRACE_S = 15.0  # how long past its duration a worker lets oha run before killing it (Bounds' default grace)


class JobRefused(ValueError):
    """A job a worker will not run; `str()` is one line naming the field."""


def _number(name: str, value: Any, *, integer: bool) -> int | float:
    # bool is an int in Python: refuse it explicitly, as JSON true is no count
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        raise JobRefused(f"job field {name!r}: {value!r} is not {'an integer' if integer else 'a number'}")
    low, high = LIMITS[name]
    if not (math.isfinite(value) and low <= value <= high):
        raise JobRefused(f"job field {name!r}: {value!r} is outside [{low:g}, {high:g}]")
    return value


def _keys(cls: type, data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise JobRefused(f"a {cls.__name__} is a mapping, not {type(data).__name__}")
    known = {f.name for f in fields(cls)}
    required = {f.name for f in fields(cls) if f.default is MISSING}
    unknown = sorted(map(str, set(data) - known))
    missing = sorted(required - set(data))
    if unknown or missing:
        parts = ([f"unknown field(s) {', '.join(unknown)}"] if unknown else []) + (
            [f"missing field(s) {', '.join(missing)}"] if missing else []
        )
        raise JobRefused(f"{cls.__name__} refused: {'; '.join(parts)}")
    return data


def _target(value: Any, allow_remote: bool) -> Target:
    if not isinstance(value, str):
        raise JobRefused(f"job field 'target': {value!r} is not a string")
    return parse_target(value, allow_remote=allow_remote)  # TargetRefused is a ValueError, one line


@dataclass(frozen=True)
class OhaJob:
    """One bounded oha run: `max_requests`, `connections` and `rate` are this worker's share."""

    target: str
    connections: int
    duration_s: float
    max_requests: int
    rate: float | None = None

    @classmethod
    def from_message(cls, data: Any, *, allow_remote: bool) -> tuple[OhaJob, Target]:
        """The job and its parsed target, or `JobRefused`/`TargetRefused` (one line)."""
        data = _keys(cls, data)
        target = _target(data["target"], allow_remote)
        rate = data.get("rate")
        job = cls(
            target=target.url,
            connections=int(_number("connections", data["connections"], integer=True)),
            duration_s=float(_number("duration_s", data["duration_s"], integer=False)),
            max_requests=int(_number("max_requests", data["max_requests"], integer=True)),
            rate=None if rate is None else float(_number("rate", rate, integer=False)),
        )
        return job, target

    def to_message(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def interrupt(self) -> bool:
        """Closed model: the worker sends SIGINT at the duration (a paced oha ends by itself, see `oha_bound`)."""
        return self.rate is None


@dataclass(frozen=True)
class UsersJob:
    """locust users on a worker: this worker's share of the request budget, the most users it runs at once and
    for how long (locust's own spawn messages name a user count the worker does not take on trust), and the POST
    mode's settings. A worker that logs every request (`log_requests`) chooses the file itself, in its own log
    folder."""

    target: str
    budget: int
    users: int = 100
    duration_s: float = 600.0
    method: str = "GET"
    body: str | None = None  # a JSON text, or "devices" (a random device per request)
    think: float = 0.0
    timeout: float | None = None
    log_requests: bool = False

    @classmethod
    def from_message(cls, data: Any, *, allow_remote: bool) -> tuple[UsersJob, Target]:
        data = _keys(cls, data)
        target = _target(data["target"], allow_remote)
        method, body = data.get("method", "GET"), data.get("body")
        if method not in ("GET", "POST"):
            raise JobRefused(f"job field 'method': {method!r} is not GET or POST")
        if body is not None and not (isinstance(body, str) and len(body) <= MAX_BODY):
            raise JobRefused(f"job field 'body': not a string of at most {MAX_BODY} characters")
        if not isinstance(data.get("log_requests", False), bool):
            raise JobRefused(f"job field 'log_requests': {data['log_requests']!r} is not true or false")
        timeout = data.get("timeout")
        job = cls(
            target=target.url,
            budget=int(_number("budget", data["budget"], integer=True)),
            users=int(_number("users", data.get("users", cls.users), integer=True)),
            duration_s=float(_number("duration_s", data.get("duration_s", cls.duration_s), integer=False)),
            method=method,
            body=body,
            think=float(_number("think", data.get("think", 0.0), integer=False)),
            timeout=None if timeout is None else float(_number("timeout", timeout, integer=False)),
            log_requests=data.get("log_requests", False),
        )
        return job, target

    def to_message(self) -> dict[str, Any]:
        return asdict(self)


def oha_bound(budget: int, duration: float, rate: float | None) -> list[str]:
    """oha's arguments for a bound (pure). Closed model: `-n` the request budget, and the worker sends SIGINT at
    the duration (oha then stops orderly and still writes every request). At a fixed rate oha exits on SIGINT
    without writing them, so there it ends by itself: `-z` the duration, or the time the budget takes at that
    rate if shorter (at least 10 ms), and the worker never interrupts it."""
    if not rate:
        return ["-n", str(budget)]
    return ["-z", f"{max(0.01, min(duration, budget / rate)):g}s", "-q", f"{rate:g}", "--latency-correction"]


def oha_command(job: OhaJob, *, oha: str, out: str, requests_db: str, threads: int) -> list[str]:
    """The whole oha command line for a validated job (pure): every value is a number or the canonical URL."""
    return [
        oha,
        *oha_bound(job.max_requests, job.duration_s, job.rate),
        "-c",
        str(job.connections),
        "--no-tui",
        "--db-url",
        requests_db,
        "--output-format",
        "json",
        "-o",
        out,
        "--worker-threads",
        str(max(1, threads)),
        "-t",
        "10s",
        *OHA_SAFETY,
        job.target,
    ]
