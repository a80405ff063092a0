"""Latency second by second from oha's own per-request records (`--db-url`: one sqlite row per completed
request, times in seconds as floats, never rounded to milliseconds), and the p99 spike ratio by which the
article's "Go's latency spiked" is judged: the worst second's p99 over the median second's p99, one value per
run, so repeats give it a spread. `read_oha_requests` does the I/O; the rest is pure.
"""

from __future__ import annotations

import contextlib
import math
import sqlite3
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MIN_SECONDS", "Request", "Second", "per_second", "percentile", "read_oha_requests", "spike_ratio"]

MIN_SECONDS = 3  # a spike needs a worst second and a typical one: fewer whole seconds give no ratio


@dataclass(frozen=True)
class Request:
    start: float  # s since the run began: when it was due (fixed rate, latency corrected) or sent
    latency: float  # s, from `start` to the end of the response
    status: int


@dataclass(frozen=True)
class Second:
    second: int  # whole seconds since the run began, by when the requests were due
    requests: int
    p50: float  # s, oha's percentile rule (see `percentile`)
    p99: float


def read_oha_requests(path: Path) -> list[Request]:
    """oha's per-request sqlite (table `oha`; oha keeps the requests that got an answer): with
    `--latency-correction` a request's start is when it was due, and its latency (oha's `duration`) counts
    from then (coordinated omission corrected), as in oha's own summary."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{Path(path)}?mode=ro", uri=True)) as conn:
            rows = conn.execute(
                "SELECT coalesce(start_latency_correction, start), duration, status FROM oha ORDER BY 1"
            ).fetchall()
    except sqlite3.Error as exc:
        raise ValueError(f"{path}: not oha's per-request output ({exc})") from None
    return [Request(float(start), float(duration), int(status)) for start, duration, status in rows]


def percentile(ordered: Sequence[float], p: float) -> float:
    """oha's rule, so that over a whole run these equal its summary's: the value at index floor(p * n) of
    the sorted latencies (a latency some request really had)."""
    return ordered[min(len(ordered) - 1, math.floor(p * len(ordered)))]


def per_second(requests: Sequence[Request]) -> list[Second]:
    """p50 and p99 of every whole second of a run, requests binned by when they were due. A second with
    fewer than half the median second's requests (the last, cut short by the end of the run) is left out."""
    bins: dict[int, list[float]] = {}
    for request in requests:
        bins.setdefault(int(request.start), []).append(request.latency)
    if not bins:
        return []
    typical = statistics.median(len(v) for v in bins.values())
    return [
        Second(second, len(values), percentile(ordered, 0.50), percentile(ordered, 0.99))
        for second, values in sorted(bins.items())
        if len(values) >= typical / 2
        for ordered in [sorted(values)]
    ]


def spike_ratio(seconds: Sequence[Second]) -> float | None:
    """The worst second's p99 over the median second's p99 (1.0: no second stood out), or None with fewer than
    MIN_SECONDS seconds."""
    if len(seconds) < MIN_SECONDS:
        return None
    p99s = [s.p99 for s in seconds]
    typical = statistics.median(p99s)
    return max(p99s) / typical if typical > 0 else None
