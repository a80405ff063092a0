"""Anytime-valid verdicts for `polyperf ab`: a confidence sequence for the median paired log-ratio, and the
stop-when-decided rule on it. Pure: values in, intervals and labels out (no I/O, no clocks).

Method (why hand-written: `confseq` on PyPI, 0.0.11, ships only a C++ source archive that pins pybind11 2.6 and
pulls pytest, matplotlib and multiprocess in at run time; its quantile bounds are for the whole empirical process,
and the one boundary needed here is a closed form of a few lines):
- Each pair i (A and B measured back to back in one repeat) gives d_i = log(B_i / A_i). The estimand is the
  median of d; the ratio reported is exp(median), the point of the same estimator whose interval is given.
- At the true median m, the signs 1{d_i <= m} are Bernoulli(1/2) whatever the distribution of d (no symmetry,
  no variance assumed). Their centred sum S_n is a martingale with increments in [-1/2, 1/2], sub-Gaussian with
  variance proxy n/4. The two-sided normal-mixture boundary (Howard, Ramdas, McAuliffe, Sekhon 2021, Annals of
  Statistics, "Time-uniform, nonparametric, nonasymptotic confidence sequences", eq. (14)) gives
  P(exists n: |S_n| >= u(n/4)) <= alpha with u(v) = sqrt((v + rho) log((v + rho) / (rho alpha^2))) (Ville's
  inequality on the mixture martingale). Inverting the sign test at every n: the median lies in
  [d_(k), d_(n+1-k)] with k = floor(n/2 - u) + 1, for all n at once with probability >= 1 - alpha. rho tunes
  where the boundary is tightest (`n_opt` pairs). The running intersection of the intervals is kept (still valid).
- Stop rule with a relative threshold t (band [1/(1+t), 1+t] around a ratio of 1): decided "slower" / "faster"
  when the whole interval lies beyond the band, "no change beyond ±t" when it lies inside it; otherwise more pairs
  are needed. Because the sequence holds at every n, looking after every pair does not inflate false alarms.
- Several series at once: each sequence runs at alpha / k (Bonferroni), so the chance that any of the k ever
  excludes its truth stays <= alpha.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.optimize import minimize_scalar

__all__ = [
    "METHOD",
    "ConfidenceSequence",
    "SequenceState",
    "boundary",
    "decide",
    "median_sequence",
]

METHOD = "sign-test confidence sequence of the median paired log-ratio (normal mixture, Howard et al. 2021)"
SLOWER, FASTER, NO_CHANGE, UNDECIDED = "slower", "faster", "no change", "undecided"


@lru_cache(maxsize=64)
def _rho(alpha: float, n_opt: int) -> float:
    """The mixture's spread that makes the boundary tightest at `n_opt` pairs."""
    v = n_opt / 4

    def width(log_rho: float) -> float:
        rho = math.exp(log_rho)
        return (v + rho) * math.log((v + rho) / (rho * alpha**2))

    return math.exp(minimize_scalar(width, bounds=(-10, 10), method="bounded").x)


def boundary(n: int, alpha: float, n_opt: int = 30) -> float:
    """u(n/4): how far the count of pairs below the median may stray from n/2, uniformly over all n."""
    rho, v = _rho(alpha, n_opt), n / 4
    return math.sqrt((v + rho) * math.log((v + rho) / (rho * alpha**2)))


@dataclass(frozen=True)
class ConfidenceSequence:
    """The interval after `n` pairs, on the ratio scale (B/A); low/high are NaN while none exists (too few pairs)."""

    ratio: float
    low: float
    high: float
    n: int
    alpha: float

    @property
    def has_interval(self) -> bool:
        return not (math.isnan(self.low) or math.isnan(self.high))


def median_sequence(log_ratios: Sequence[float], alpha: float, *, n_opt: int = 30) -> list[ConfidenceSequence]:
    """The confidence sequence after each prefix of `log_ratios` (pairs in the order they were measured), with the
    running intersection applied; element i describes the first i + 1 pairs."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    d = np.asarray(log_ratios, dtype=float)
    if not np.all(np.isfinite(d)):
        raise ValueError("log-ratios must be finite (both sides of every pair positive)")
    out: list[ConfidenceSequence] = []
    low, high = -math.inf, math.inf
    seen: list[float] = []
    for n, value in enumerate(d.tolist(), start=1):
        bisect.insort(seen, value)
        k = math.floor(n / 2 - boundary(n, alpha, n_opt)) + 1
        if k >= 1:
            low, high = max(low, seen[k - 1]), min(high, seen[n - k])
        point = (seen[(n - 1) // 2] + seen[n // 2]) / 2
        if low > high:  # the running intersection emptied (a miss, probability <= alpha): keep both ends' order
            low, high = high, low
        bounds = (math.exp(low), math.exp(high)) if math.isfinite(low) else (math.nan, math.nan)
        out.append(ConfidenceSequence(math.exp(point), *bounds, n, alpha))
    return out


def decide(cs: ConfidenceSequence, threshold: float) -> str:
    """ "slower" or "faster" when the whole interval lies beyond the band [1/(1+t), 1+t]; "no change" when it lies
    inside; "undecided" otherwise (and while no interval exists). Ratios are B/A of a lower-is-better time."""
    if not (math.isfinite(threshold) and threshold >= 0):
        raise ValueError(f"the threshold must be finite and >= 0, got {threshold}")
    if not cs.has_interval:
        return UNDECIDED
    upper, lower = 1 + threshold, 1 / (1 + threshold)
    if cs.low > upper:
        return SLOWER
    if cs.high < lower:
        return FASTER
    if cs.low >= lower and cs.high <= upper:
        return NO_CHANGE
    return UNDECIDED


@dataclass(frozen=True)
class SequenceState:
    """One series' state after its latest pair: the interval, and what it decides."""

    cs: ConfidenceSequence
    verdict: str

    @classmethod
    def of(cls, log_ratios: Sequence[float], alpha: float, threshold: float, n_opt: int = 30) -> SequenceState:
        if len(log_ratios) == 0:
            return cls(ConfidenceSequence(math.nan, math.nan, math.nan, 0, alpha), UNDECIDED)
        cs = median_sequence(log_ratios, alpha, n_opt=n_opt)[-1]
        return cls(cs, decide(cs, threshold))
