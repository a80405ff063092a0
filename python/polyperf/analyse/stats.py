"""Pure statistics for reports and claims: medians with bootstrap confidence intervals, and ratios of
medians. No I/O, no clocks; the bootstrap uses a fixed seed so a report is reproducible."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Summary", "ratio", "summarize"]

CONFIDENCE = 0.95
RESAMPLES = 2000
_SEED = 20190101


@dataclass(frozen=True)
class Summary:
    """A median and its 95% bootstrap percentile interval (equal to the median for n == 1)."""

    median: float
    low: float
    high: float
    n: int

    @property
    def spread(self) -> float:
        """Half-width of the interval relative to the median (0.05 means ±5%)."""
        return (self.high - self.low) / 2 / abs(self.median) if self.median else float("nan")


def _interval(samples: np.ndarray) -> tuple[float, float]:
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(samples, [tail, 100 - tail])
    return float(low), float(high)


def summarize(values: Sequence[float]) -> Summary:
    data = np.asarray(values, dtype=float)
    data = data[np.isfinite(data)]
    if data.size == 0:
        raise ValueError("no finite values to summarize")
    median = float(np.median(data))
    if data.size == 1 or np.all(data == data[0]):
        return Summary(median, median, median, int(data.size))
    rng = np.random.default_rng(_SEED)
    picks = rng.integers(0, data.size, size=(RESAMPLES, data.size))
    low, high = _interval(np.median(data[picks], axis=1))
    return Summary(median, low, high, int(data.size))


def ratio(numerator: Sequence[float], denominator: Sequence[float], *, paired: bool = False) -> Summary:
    """median(numerator) / median(denominator), with a bootstrap interval.

    `paired=True` resamples pairs together (use it when the two were measured interleaved, repeat
    by repeat, so machine drift cancels); otherwise each side is resampled on its own.
    """
    num = np.asarray(numerator, dtype=float)
    den = np.asarray(denominator, dtype=float)
    if num.size == 0 or den.size == 0:
        raise ValueError("ratio needs values on both sides")
    if np.any(den == 0):
        raise ValueError("ratio denominator contains zero")
    point = float(np.median(num) / np.median(den))
    if paired and num.size != den.size:
        raise ValueError(f"paired ratio needs equal counts, got {num.size} and {den.size}")
    if num.size == 1 and den.size == 1:
        return Summary(point, point, point, 1)
    rng = np.random.default_rng(_SEED)
    if paired:
        picks = rng.integers(0, num.size, size=(RESAMPLES, num.size))
        boot = np.median(num[picks], axis=1) / np.median(den[picks], axis=1)
    else:
        num_picks = rng.integers(0, num.size, size=(RESAMPLES, num.size))
        den_picks = rng.integers(0, den.size, size=(RESAMPLES, den.size))
        boot = np.median(num[num_picks], axis=1) / np.median(den[den_picks], axis=1)
    low, high = _interval(boot)
    return Summary(point, min(low, point), max(high, point), int(min(num.size, den.size)))
