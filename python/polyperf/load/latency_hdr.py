"""Latencies as an HDR histogram, so that several hosts' percentiles can be merged: each distributed oha
worker turns every latency its oha wrote (`--db-url`) into one histogram, the master adds them up.

Resolution (the error the README states): integer nanoseconds at 3 significant digits. A bucket never
spans more than 2**-10 of its lower bound, and a percentile is reported as the top of its bucket, so the
merged percentile is never below the exact one of all requests and at most 0.1 % (plus 1 ns) above it.
A percentile is the smallest latency with at least that share of requests at or under it (the inverted
CDF, numpy's `method="inverted_cdf"`).

Imports nothing from polyperf: the locust worker, a plain script, imports it as a sibling module.
"""

from __future__ import annotations

import base64
import math
import sqlite3
import struct
import zlib
from collections.abc import Iterable, Sequence
from contextlib import closing
from pathlib import Path

import numpy as np
from hdrh.histogram import HdrHistogram

__all__ = [
    "HIGHEST_NS",
    "RELATIVE_ERROR",
    "SIGNIFICANT_DIGITS",
    "decode",
    "from_seconds",
    "merge",
    "percentiles",
    "read_oha_db",
]

SIGNIFICANT_DIGITS = 3
HIGHEST_NS = 3_600 * 10**9  # one hour: no request of a bounded run waits longer
RELATIVE_ERROR = 2.0**-10  # widest bucket at 3 digits relative to its lower bound (2048 sub-buckets)


def _empty() -> HdrHistogram:
    return HdrHistogram(1, HIGHEST_NS, SIGNIFICANT_DIGITS)


def from_seconds(latencies: Iterable[float]) -> HdrHistogram:
    """A histogram of latencies in seconds (recorded as whole nanoseconds) (pure)."""
    ns = np.rint(np.asarray(list(latencies), dtype=np.float64) * 1e9).astype(np.int64)
    if ns.size and (ns.min() < 0 or ns.max() > HIGHEST_NS):
        raise ValueError(f"latency outside 0..{HIGHEST_NS / 1e9:g} s: {ns.min() / 1e9:g}..{ns.max() / 1e9:g} s")
    histogram = _empty()
    values, counts = np.unique(ns, return_counts=True)  # one call per distinct value, not per request
    for value, count in zip(values.tolist(), counts.tolist(), strict=True):
        histogram.record_value(value, count)
    return histogram


MAX_ENCODED = 4 * 2**20  # characters of base64 a worker may send: ~100x what a full 3-digit histogram takes
MAX_DECODED = 2**20  # bytes its zlib payload may expand to (the counts of 3 digits over 1 ns..1 h are ~300 KB)


def decode(encoded: object) -> HdrHistogram:
    """The histogram that `HdrHistogram.encode()` (base64, compressed) made, from a worker that may lie: its size
    before and after decompression is bounded and its settings must be this module's, checked before the
    histogram's counts are allocated. Raises ValueError (one line) otherwise."""
    if not isinstance(encoded, str) or len(encoded) > MAX_ENCODED:
        raise ValueError(f"latency histogram: not text of at most {MAX_ENCODED} characters")
    try:
        raw = base64.b64decode(encoded, validate=True)
        struct.unpack(">II", raw[:8])  # the cookie and length hdrh checks; here: that the header is whole
        inflater = zlib.decompressobj()
        payload = inflater.decompress(raw[8:], MAX_DECODED)
    except (ValueError, struct.error, zlib.error) as exc:
        raise ValueError(f"latency histogram: not an HDR encoding ({exc})") from None
    if inflater.unconsumed_tail or not inflater.eof:
        raise ValueError(f"latency histogram: expands past {MAX_DECODED} bytes, or is cut short")
    try:
        _cookie, _size, _offset, digits, lowest, highest = struct.unpack(">IIIIQQ", payload[:32])
    except struct.error:
        raise ValueError("latency histogram: its header is cut short") from None
    if (digits, lowest, highest) != (SIGNIFICANT_DIGITS, 1, HIGHEST_NS):
        raise ValueError(
            f"latency histogram: settings ({digits} digits, {lowest}..{highest} ns) are not polyperf's "
            f"({SIGNIFICANT_DIGITS} digits, 1..{HIGHEST_NS} ns)"
        )
    try:
        return HdrHistogram.decode(encoded)
    except Exception as exc:  # hdrh raises its own exception classes and ctypes errors on a malformed payload
        raise ValueError(f"latency histogram: not decodable ({type(exc).__name__})") from None


def merge(histograms: Sequence[HdrHistogram]) -> HdrHistogram:
    """One histogram holding every value of `histograms` (pure)."""
    total = _empty()
    for histogram in histograms:
        total.add(histogram)
    return total


def percentiles(histogram: HdrHistogram, wanted: Sequence[float]) -> dict[float, float]:
    """Fraction -> seconds: for each p, the top of the bucket holding the ceil(p * n)-th smallest latency
    (the module doc's definition); empty when the histogram is (pure)."""
    n = histogram.get_total_count()
    if not n:
        return {}
    ranks = {p: max(1, math.ceil(round(p * n, 9))) for p in wanted}  # round: 0.99 * 100 is 99.00000000000001
    found: dict[float, float] = {}
    seen = 0
    for item in histogram.get_recorded_iterator():
        seen += item.count_at_value_iterated_to
        for p, rank in ranks.items():
            if p not in found and seen >= rank:
                found[p] = histogram.get_highest_equivalent_value(item.value_iterated_to) / 1e9
    return {p: found[p] for p in wanted}


def read_oha_db(path: Path) -> list[float]:
    """Every latency (seconds) oha wrote with `--db-url` (its successful requests, the set its own
    percentiles come from); a missing or unreadable file raises with its path."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"oha wrote no per-request database at {path}")
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        return [row[0] for row in db.execute("SELECT duration FROM oha")]
