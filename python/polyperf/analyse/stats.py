"""Pure statistics for verdicts, reports and comparisons: a median or a ratio of two implementations, with a
distribution-free 95% interval and the one-sided p-values that match it, or no interval where none can exist at
this n. No I/O, no clocks.

The unit of replication is always an independent repeat (a process, a load run), summarised to one value before it
reaches these functions. Every estimate and its interval come from one estimator, and each states its estimand:
- Median of one series: the sample median, with the binomial order-statistic interval (`scipy.stats.quantile_test`),
  as benchstat does. Estimand: the median of the distribution of repeats. Exact for any continuous distribution;
  needs n >= 6, since with fewer the widest interval [min, max] covers the median with probability 1 - 2 x 0.5^n.
- Ratio of paired repeats (`paired_ratio`: both sides measured in the same repeat, joined by key): the median of the
  per-repeat ratios num_i / den_i, with the sign-test (binomial order-statistic) interval of the median of their
  logs. Estimand: the median of per-repeat ratios. It assumes only that the pairs are independent of each other,
  not that the log-ratios are symmetric: the Hodges-Lehmann signed-rank interval used before did, and with one
  skewed side and one tight side its coverage fell to 92% at n = 20 and 83% at n = 40. Needs n >= 6 pairs.
- Ratio of independent samples, for verdicts (`ratio_of_medians`): the ratio of the two medians, with an interval
  from each side's order-statistic bounds: the lower end low_num / high_den misses only when one of its two bounds
  does, with probability 2 tau - tau^2 for independent sides each missing with probability tau, and tau is set so
  that this is 2.5% (each side's bounds at about 97.5%, two-sided); the upper end likewise.
  Estimand: the ratio of the two medians. No shape is assumed (the Hodges-Lehmann shift with its Moses interval
  assumes one shape on both sides; with one skewed side and one tight side it covered about 91%); the price is
  width, and 7 + 7 repeats.
- Ratio of independent samples, for comparing one benchmark across two runs (`ratio(paired=False)`: compare,
  change points): the Hodges-Lehmann shift of the log-values with its Moses interval at the exact Mann-Whitney
  critical value, the estimator that matches their Mann-Whitney test. Estimand: the median of the ratio of a random
  repeat of B to one of A. It assumes one noise shape on both sides, as two runs of one benchmark have; 4 + 4.
How these relate to an article's mean (hyperfine's mean, criterion's point estimate): when the noise of each side is
small next to the effect, as in the articles (hyperfine's 11.43x ± 0.63), a median of ratios, a ratio of medians and a
ratio of means agree to within that noise; a right-skewed side (a few slow repeats) pulls its mean up and leaves the
median where most repeats are, so a ratio of means can exceed these estimates by about the skew of the slower side.

Coverage measured by simulation (tests/test_stats.py, 2,000 seeded runs per cell, truth inside the 95% interval, each
cell required to reach 94%; n = 6, 10, 20, 50 pairs; ratio of medians 7 + 7, 10 + 10, 20 + 20, 50 + 50). Every
scenario moves the paired ratio itself (a factor shared by both sides of a pair cancels and tests nothing):
  scenario (tests/stats_sim.py)                           paired n = 6 / 10 / 20 / 50    medians 7 / 10 / 20 / 50
  noise shapes differ (one side skewed, one tight)        96.6 / 98.0 / 95.6 / 96.0%     99.5 / 99.0 / 99.2 / 98.9%
  the ratio drifts ±3% over the run (+ shared drift)      97.6 / 98.8 / 96.8 / 97.9%     100 / 100 / 100 / 100%
  a random effect per process and side (5 rounds each)    96.9 / 98.2 / 96.5 / 96.8%     100 / 100 / 100 / 100%
  ties: both sides read in whole milliseconds             97.2 / 98.4 / 96.5 / 97.0%     99.8 / 99.8 / 99.7 / 99.3%
Pairs that drift stay independent: the sign test counts a Poisson-binomial number of pairs below the pooled median,
which is never more spread than the binomial it assumes (Hoeffding 1956), so the interval holds for that median.
Ties are covered because the interval's ends are closed order statistics.
The unpaired interval is conservative by construction, more so where a shared drift widens both sides. Counting the
rounds of one process as repeats (the negative control) drops the paired coverage to 85% at 10 processes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from scipy.stats import binom, norm

__all__ = [
    "LEVEL",
    "Summary",
    "exact_range",
    "medians_ratio_has_interval",
    "min_pairs",
    "paired_ratio",
    "ratio",
    "ratio_of_medians",
    "summarize",
    "unpaired_has_interval",
]

LEVEL = 0.95
# Up to this size the exact Mann-Whitney null distribution is computed (well under a second, then cached); beyond,
# the normal approximation with a continuity correction.
_EXACT_CELLS = 40_000  # m x n of the Mann-Whitney table (200 + 200 takes about a second)
METHOD_MEDIAN = "order-statistic interval of the median"
METHOD_UNPAIRED = "ratio of medians, order-statistic intervals of each side"
METHOD_HL = "Hodges-Lehmann ratio, Moses (Mann-Whitney) interval"
METHOD_PAIRED = "median of paired ratios, sign-test interval"
METHOD_EXACT = "exact counts: range over every repeat"

Tails = Callable[[float], tuple[float, float]]


@dataclass(frozen=True)
class Summary:
    """A point estimate and its interval at `LEVEL`; `low`/`high` are NaN where `n` is below `min_n`.

    `p_above(t)` / `p_below(t)`: one-sided p-values of "the estimand is above (below) t", from the same test whose
    inversion gives the interval, so `p_above(t) <= (1 - LEVEL) / 2` exactly when the whole interval lies above t.
    NaN for exact counts, which are judged on every repeat instead, and for the Hodges-Lehmann ratio, whose test is
    the caller's Mann-Whitney."""

    median: float
    low: float
    high: float
    n: int
    method: str = METHOD_MEDIAN
    min_n: int = 1
    tails: Tails | None = field(default=None, compare=False, repr=False)
    # (e above t, e below t): the e-values of an anytime-valid summary (`analyse.anytime`), for the family's e-BH
    evidence: Tails | None = field(default=None, compare=False, repr=False)

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

    def p_above(self, threshold: float) -> float:
        return math.nan if self.tails is None else self.tails(threshold)[0]

    def p_below(self, threshold: float) -> float:
        return math.nan if self.tails is None else self.tails(threshold)[1]


def _finite(values: Sequence[float]) -> np.ndarray:
    data = np.asarray(values, dtype=float)
    return data[np.isfinite(data)]


def _critical_rank(cdf: np.ndarray, level: float) -> int:
    """The largest k with P(stat <= k - 1) <= (1 - level) / 2; 0 when no interval at `level` exists."""
    tail = (1 - level) / 2
    return int(np.searchsorted(cdf, tail, side="right"))


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


def _sign_tails(sorted_values: np.ndarray, transform: Callable[[float], float]) -> Tails:
    """Sign-test p-values against a threshold: P(Bin(n, 1/2) <= #values at or below it) for "above", and the
    mirror for "below" (values equal to the threshold count against the claim: conservative with ties)."""

    def tails(threshold: float) -> tuple[float, float]:
        t = transform(threshold)
        if math.isnan(t):
            return math.nan, math.nan
        n = sorted_values.size
        at_or_below = int(np.searchsorted(sorted_values, t, side="right"))
        at_or_above = n - int(np.searchsorted(sorted_values, t, side="left"))
        return float(binom.cdf(at_or_below, n, 0.5)), float(binom.cdf(at_or_above, n, 0.5))

    return tails


def _log(value: float) -> float:
    return math.log(value) if value > 0 else (-math.inf if value == 0 else math.nan)


def _order_statistic_summary(z: np.ndarray, method: str, level: float, log: bool) -> Summary:
    """Median of `z` (sorted) with its order-statistic interval; exp() of each when `z` holds logs."""
    back = np.exp if log else (lambda v: v)
    point = float(back(np.median(z)))
    k = _median_rank(int(z.size), level)
    need = _median_min_n(level)
    tails = _sign_tails(z, _log if log else float)
    if k < 1:
        return Summary(point, math.nan, math.nan, int(z.size), method, need, tails)
    return Summary(point, float(back(z[k - 1])), float(back(z[z.size - k])), int(z.size), method, need, tails)


def summarize(values: Sequence[float], level: float = LEVEL) -> Summary:
    """The median of independent repeats with its order-statistic interval (NaN bounds below n = 6)."""
    data = np.sort(_finite(values))
    if data.size == 0:
        raise ValueError("no finite values to summarize")
    return _order_statistic_summary(data, METHOD_MEDIAN, level, log=False)


def exact_range(values: Sequence[float]) -> Summary:
    """Exact counts need no interval: the median, and the range every repeat fell in (equal when they agree)."""
    data = _finite(values)
    if data.size == 0:
        raise ValueError("no finite values to summarize")
    return Summary(float(np.median(data)), float(data.min()), float(data.max()), int(data.size), METHOD_EXACT, 1)


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


def _normal_rank(mean: float, sd: float, level: float) -> int:
    z = norm.ppf(1 - (1 - level) / 2)
    return max(0, math.floor(mean - z * sd + 0.5))


def _unpaired_rank(m: int, n: int, level: float) -> int:
    if m * n <= _EXACT_CELLS:
        return _critical_rank(_mann_whitney_cdf(m, n), level)
    return _normal_rank(m * n / 2, math.sqrt(m * n * (m + n + 1) / 12), level)


def min_pairs(level: float = LEVEL) -> int:
    """The smallest number of pairs at which the sign-test interval exists (6 at 95%)."""
    return _median_min_n(level)


@lru_cache(maxsize=256)
def _side_tails(n: int) -> np.ndarray:
    """tail[k - 1] = P(Bin(n, 1/2) <= k - 1): the one-sided miss probability of the order statistic x_(k) as a
    lower bound of a median (and of x_(n+1-k) as an upper bound), k = 1 .. n."""
    return binom.cdf(np.arange(n), n, 0.5)


def _side_rank(n: int, tail: float) -> int:
    """The largest k whose one-sided miss probability is at most `tail`; 0 when even x_(1) misses more often."""
    return int(np.searchsorted(_side_tails(n), tail, side="right"))


def _per_side_tail(level: float) -> float:
    """The one-sided miss probability tau of each side's bound. A bound of the ratio misses when either side's
    bound does: with independent sides, probability 1 - (1 - tau)^2 = 2 tau - tau^2. Solving 2 tau - tau^2 =
    (1 - level) / 2 makes each end of the ratio's interval miss at most (1 - level) / 2, so the interval holds
    with probability >= level and its one-sided p-values decide exactly where it does."""
    return 1 - math.sqrt(1 - (1 - level) / 2)


def _either_misses(tau: float) -> float:
    return 2 * tau - tau * tau


def medians_ratio_has_interval(m: int, n: int, level: float = LEVEL) -> bool:
    tail = _per_side_tail(level)
    return m >= 1 and n >= 1 and _side_rank(m, tail) >= 1 and _side_rank(n, tail) >= 1


def unpaired_has_interval(m: int, n: int, level: float = LEVEL) -> bool:
    """Whether the Hodges-Lehmann ratio has its Moses interval at these sizes (4 + 4 at 95%)."""
    return m >= 1 and n >= 1 and _unpaired_rank(m, n, level) >= 1


def _positive_logs(values: np.ndarray, side: str) -> np.ndarray:
    if values.size == 0:
        raise ValueError(f"ratio needs values in the {side}")
    if np.any(values <= 0):
        raise ValueError(f"ratio {side} has values <= 0: a ratio of medians needs positive values")
    return np.log(values)


def _whole_pairs(numerator: Sequence[float], denominator: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """Element i of each side is one pair (the caller joined them by repeat key); a pair with a side that is not
    finite is dropped whole, so that no value is ever paired with another repeat's partner."""
    num, den = np.asarray(numerator, dtype=float), np.asarray(denominator, dtype=float)
    if num.shape != den.shape:
        raise ValueError(f"paired ratio needs equal counts, got {num.size} and {den.size}")
    whole = np.isfinite(num) & np.isfinite(den)
    return num[whole], den[whole]


def paired_ratio(numerator: Sequence[float], denominator: Sequence[float], level: float = LEVEL) -> Summary:
    """The median of per-repeat ratios numerator[i] / denominator[i] with its sign-test interval (NaN bounds below
    6 pairs). The caller pairs the two sides by repeat key, never by position; a pair missing a side is dropped."""
    num, den = _whole_pairs(numerator, denominator)
    d = np.sort(_positive_logs(num, "numerator") - _positive_logs(den, "denominator"))
    return _order_statistic_summary(d, METHOD_PAIRED, level, log=True)


def _medians_ratio(num: np.ndarray, den: np.ndarray, level: float) -> Summary:
    """Ratio of the two medians; its interval divides each side's order-statistic bounds at one-sided tail
    `_per_side_tail(level)` by the other's (each end holds with probability >= 1 - (1 - level) / 2 when the sides
    are independent, whatever their shapes)."""
    x, y = np.sort(_positive_logs(num, "numerator")), np.sort(_positive_logs(den, "denominator"))
    m, n = int(x.size), int(y.size)
    point = float(np.exp(np.median(x) - np.median(y)))
    tx, ty = _side_tails(m), _side_tails(n)
    taus = np.unique(np.concatenate([tx, ty]))  # the tails at which either side's rank changes

    def bound_at(tau: float, above: bool) -> float:
        """The lower (above=True) or upper bound of the log-ratio with both sides at one-sided tail `tau`."""
        kx, ky = int(np.searchsorted(tx, tau, side="right")), int(np.searchsorted(ty, tau, side="right"))
        if kx < 1 or ky < 1:
            return -math.inf if above else math.inf
        return float(x[kx - 1] - y[n - ky]) if above else float(x[m - kx] - y[ky - 1])

    def tails(threshold: float) -> tuple[float, float]:
        # the smallest per-side tail at which the interval still excludes the threshold, as a one-sided p-value
        # of the pair: either side's bound missing, 2 tau - tau^2; at `level` exactly the interval's own decision
        t = _log(threshold)
        if math.isnan(t):
            return math.nan, math.nan
        out = []
        for above in (True, False):
            ok = [tau for tau in taus if (bound_at(tau, above) > t if above else bound_at(tau, above) < t)]
            tau = min(min(ok) if ok else 0.5, 0.5)  # past the middle ranks the bounds cross: no evidence at all
            out.append(float(_either_misses(tau)))
        return out[0], out[1]

    tail = _per_side_tail(level)
    low, high = bound_at(tail, True), bound_at(tail, False)
    if not (math.isfinite(low) and math.isfinite(high)):
        return Summary(point, math.nan, math.nan, min(m, n), METHOD_UNPAIRED, UNPAIRED_MIN_N, tails)
    return Summary(point, math.exp(low), math.exp(high), min(m, n), METHOD_UNPAIRED, UNPAIRED_MIN_N, tails)


def _hodges_lehmann(num: np.ndarray, den: np.ndarray, level: float) -> Summary:
    x, y = _positive_logs(num, "numerator"), _positive_logs(den, "denominator")
    diffs = np.sort(np.subtract.outer(x, y).ravel())
    point = float(np.exp(np.median(diffs)))
    k = _unpaired_rank(x.size, y.size, level)
    n = int(min(x.size, y.size))
    if k < 1:
        return Summary(point, math.nan, math.nan, n, METHOD_HL, 4)
    low, high = float(np.exp(diffs[k - 1])), float(np.exp(diffs[diffs.size - k]))
    return Summary(point, low, high, n, METHOD_HL, 4)


def ratio_of_medians(numerator: Sequence[float], denominator: Sequence[float], level: float = LEVEL) -> Summary:
    """The ratio of the medians of two independent samples, with an interval that assumes no shape (verdicts use it
    for an unpaired entry): each side's order-statistic bounds at `_per_side_tail(level)`. NaN bounds below 7 + 7."""
    num, den = _finite(numerator), _finite(denominator)
    if num.size == 0 or den.size == 0:
        raise ValueError("ratio needs values on both sides")
    return _medians_ratio(num, den, level)


def ratio(
    numerator: Sequence[float], denominator: Sequence[float], *, paired: bool = False, level: float = LEVEL
) -> Summary:
    """The ratio numerator / denominator of two sets of independent repeats, with its interval.

    `paired=True`: element i of each side was measured in the same repeat (the caller joins them by key): the median
    of per-repeat ratios (`paired_ratio`). Otherwise the two sides are independent samples of any sizes: the
    Hodges-Lehmann ratio with its Moses interval, which matches a Mann-Whitney test and assumes one noise shape on
    both sides (the same benchmark in two runs: compare, change points); `ratio_of_medians` assumes none.
    """
    if paired:
        return paired_ratio(numerator, denominator, level)
    num, den = _finite(numerator), _finite(denominator)
    if num.size == 0 or den.size == 0:
        raise ValueError("ratio needs values on both sides")
    return _hodges_lehmann(num, den, level)


MEDIAN_MIN_N = _median_min_n()
UNPAIRED_MIN_N = next(n for n in range(1, 100) if _side_rank(n, _per_side_tail(LEVEL)) >= 1)
