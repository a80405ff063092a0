"""Pure statistics for verdicts, reports and comparisons: a median or a ratio of two implementations, with a
distribution-free 95% interval, or none where no such interval can exist at this n. No I/O, no clocks.

Methods, and why (the unit of replication is always an independent repeat — a load run or a benchmark round —
summarised to one value before it reaches these functions):
- Median: the binomial order-statistic interval (`scipy.stats.quantile_test`), as benchstat does. It holds its
  level for any continuous distribution; it needs n >= 6, since with fewer the widest interval [min, max]
  covers the median with probability 1 - 2 x 0.5^n < 95%.
- Ratio of two independent samples: the Hodges-Lehmann shift of the log-values with its Moses interval (order
  statistics of all pairwise differences at the exact Mann-Whitney critical value). It assumes the two differ
  by a factor, which is what a ratio claims; it needs C(m + n, m) >= 40 (4 + 4 repeats).
- Ratio of paired samples (measured interleaved, repeat by repeat): the Hodges-Lehmann estimate of the
  log-ratios (median of Walsh averages) with the exact signed-rank interval. Pairing cancels drift shared by
  a repeat; the differences of two like-shaped noises are symmetric, which the method assumes; n >= 6 pairs.
The percentile bootstrap used before is [min, max] at n = 3 and covered a median 75% of the time; these
intervals are exact in their coverage (at least the stated level) at every n where they exist.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.stats import binom, norm

__all__ = [
    "LEVEL",
    "Summary",
    "exact_range",
    "min_pairs",
    "ratio",
    "summarize",
    "unpaired_has_interval",
]

LEVEL = 0.95
# Up to these sizes the exact null distributions are computed (each in well under a second, then cached); beyond,
# the normal approximation with a continuity correction, whose critical rank can differ from the exact one by a few
# percent when the two sides are very unequal.
_EXACT_PAIRS = 1000  # 2^n counts stay finite in floating point below n = 1024
_EXACT_CELLS = 40_000  # m x n of the Mann-Whitney table (200 + 200 takes about a second)
METHOD_MEDIAN = "order-statistic interval of the median"
METHOD_UNPAIRED = "Hodges-Lehmann ratio, Moses (Mann-Whitney) interval"
METHOD_PAIRED = "Hodges-Lehmann ratio of pairs, signed-rank interval"
METHOD_EXACT = "exact counts: range over every repeat"


@dataclass(frozen=True)
class Summary:
    """A point estimate and its interval at `LEVEL`; `low`/`high` are NaN where `n` is below `min_n`."""

    median: float
    low: float
    high: float
    n: int
    method: str = METHOD_MEDIAN
    min_n: int = 1

    @property
    def has_interval(self) -> bool:
        return not (math.isnan(self.low) or math.isnan(self.high))

    @property
    def spread(self) -> float:
        """The interval's half-width relative to the estimate, on a log scale for positive values (0.05 means
        ±5%): the smallest relative difference this measurement could resolve. NaN without an interval."""
        if not self.has_interval or self.median == 0:
            return math.nan
        if self.low > 0:
            return max(self.high / self.median, self.median / self.low) - 1
        return (self.high - self.low) / 2 / abs(self.median)


def _finite(values: Sequence[float]) -> np.ndarray:
    data = np.asarray(values, dtype=float)
    return data[np.isfinite(data)]


@lru_cache(maxsize=256)
def _median_rank(n: int, level: float = LEVEL) -> int:
    """The order statistic k of the two-sided binomial interval [x_(k), x_(n+1-k)] of a median; 0 when none exists.
    It is the interval `scipy.stats.quantile_test(x, p=0.5).confidence_interval()` gives (a test holds them equal),
    computed once per n so that reports with hundreds of series stay fast."""
    return _critical_rank(binom.cdf(np.arange(n + 1), n, 0.5), level)


def _median_min_n(level: float = LEVEL) -> int:
    n = 1
    while _median_rank(n, level) < 1:
        n += 1
    return n


def summarize(values: Sequence[float]) -> Summary:
    """The median of independent repeats with its order-statistic interval (NaN bounds below n = 6)."""
    data = np.sort(_finite(values))
    if data.size == 0:
        raise ValueError("no finite values to summarize")
    median = float(np.median(data))
    k = _median_rank(int(data.size))
    if k < 1:
        return Summary(median, math.nan, math.nan, int(data.size), METHOD_MEDIAN, MEDIAN_MIN_N)
    return Summary(median, float(data[k - 1]), float(data[data.size - k]), int(data.size), METHOD_MEDIAN, MEDIAN_MIN_N)


def exact_range(values: Sequence[float]) -> Summary:
    """Exact counts need no interval: the median, and the range every repeat fell in (equal when they agree)."""
    data = _finite(values)
    if data.size == 0:
        raise ValueError("no finite values to summarize")
    return Summary(float(np.median(data)), float(data.min()), float(data.max()), int(data.size), METHOD_EXACT, 1)


@lru_cache(maxsize=256)
def _signed_rank_cdf(n: int) -> np.ndarray:
    """P(W+ <= w) for w = 0 .. n(n+1)/2 under the null: the counts of subsets of 1..n by their sum."""
    counts = np.zeros(n * (n + 1) // 2 + 1)
    counts[0] = 1.0
    for rank in range(1, n + 1):
        counts[rank:] = counts[rank:] + counts[:-rank].copy()
    return np.cumsum(counts) / 2.0**n


@lru_cache(maxsize=256)
def _mann_whitney_cdf(m: int, n: int) -> np.ndarray:
    """P(U <= u) for u = 0 .. m*n under the null (no ties), by the recurrence on the largest observation."""
    # counts[j] holds the distribution of U for sizes (i, j) while i runs from 0 to m
    counts = [np.ones(1) for _ in range(n + 1)]
    for i in range(1, m + 1):
        row = [np.ones(1)]
        for j in range(1, n + 1):
            out = np.zeros(i * j + 1)
            out[j : j + counts[j].size] += counts[j]  # the largest is an x: it beats all j ys
            out[: row[j - 1].size] += row[j - 1]  # the largest is a y: it adds nothing
            row.append(out)
        counts = row
    dist = counts[n]
    return np.cumsum(dist) / dist.sum()


def _critical_rank(cdf: np.ndarray, level: float) -> int:
    """The largest k with P(stat <= k - 1) <= (1 - level) / 2; 0 when no interval at `level` exists."""
    tail = (1 - level) / 2
    return int(np.searchsorted(cdf, tail, side="right"))


def _normal_rank(mean: float, sd: float, level: float) -> int:
    z = norm.ppf(1 - (1 - level) / 2)
    return max(0, math.floor(mean - z * sd + 0.5))


def _paired_rank(n: int, level: float) -> int:
    if n <= _EXACT_PAIRS:
        return _critical_rank(_signed_rank_cdf(n), level)
    return _normal_rank(n * (n + 1) / 4, math.sqrt(n * (n + 1) * (2 * n + 1) / 24), level)


def _unpaired_rank(m: int, n: int, level: float) -> int:
    if m * n <= _EXACT_CELLS:
        return _critical_rank(_mann_whitney_cdf(m, n), level)
    return _normal_rank(m * n / 2, math.sqrt(m * n * (m + n + 1) / 12), level)


def min_pairs(level: float = LEVEL) -> int:
    """The smallest number of pairs at which the signed-rank interval exists (6 at 95%)."""
    n = 1
    while _paired_rank(n, level) < 1:
        n += 1
    return n


def unpaired_has_interval(m: int, n: int, level: float = LEVEL) -> bool:
    return m >= 1 and n >= 1 and _unpaired_rank(m, n, level) >= 1


def _positive_logs(values: np.ndarray, side: str) -> np.ndarray:
    if values.size == 0:
        raise ValueError(f"ratio needs values in the {side}")
    if np.any(values <= 0):
        raise ValueError(f"ratio {side} has values <= 0: a ratio of medians needs positive values")
    return np.log(values)


def _paired(num: np.ndarray, den: np.ndarray, level: float) -> Summary:
    if num.size != den.size:
        raise ValueError(f"paired ratio needs equal counts, got {num.size} and {den.size}")
    d = _positive_logs(num, "numerator") - _positive_logs(den, "denominator")
    upper = np.triu_indices(d.size)
    walsh = np.sort((d[upper[0]] + d[upper[1]]) / 2)
    point = float(np.exp(np.median(walsh)))
    k = _paired_rank(d.size, level)
    need = min_pairs(level)
    if k < 1:
        return Summary(point, math.nan, math.nan, int(d.size), METHOD_PAIRED, need)
    low, high = float(np.exp(walsh[k - 1])), float(np.exp(walsh[walsh.size - k]))
    return Summary(point, low, high, int(d.size), METHOD_PAIRED, need)


def _unpaired(num: np.ndarray, den: np.ndarray, level: float) -> Summary:
    x, y = _positive_logs(num, "numerator"), _positive_logs(den, "denominator")
    diffs = np.sort(np.subtract.outer(x, y).ravel())
    point = float(np.exp(np.median(diffs)))
    k = _unpaired_rank(x.size, y.size, level)
    n = int(min(x.size, y.size))
    if k < 1:
        return Summary(point, math.nan, math.nan, n, METHOD_UNPAIRED, 4)
    low, high = float(np.exp(diffs[k - 1])), float(np.exp(diffs[diffs.size - k]))
    return Summary(point, low, high, n, METHOD_UNPAIRED, 4)


def ratio(
    numerator: Sequence[float], denominator: Sequence[float], *, paired: bool = False, level: float = LEVEL
) -> Summary:
    """The ratio numerator / denominator of two sets of independent repeats, with its interval.

    `paired=True`: element i of each side was measured in the same repeat (the caller joins them by key), so
    the ratio of each pair is the sample. Otherwise the two sides are independent samples of any sizes.
    """
    num, den = _finite(numerator), _finite(denominator)
    if num.size == 0 or den.size == 0:
        raise ValueError("ratio needs values on both sides")
    return _paired(num, den, level) if paired else _unpaired(num, den, level)


MEDIAN_MIN_N = _median_min_n()
