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
- The point printed is the median of the pairs, clamped into the running intersection: the sample median lies
  inside each prefix's own interval, but not always inside the intersection (on iid pairs it fell outside at some
  step in 73 of 600 runs, e.g. 1.0087 beside [1.0090, 1.0161]); clamped, every point lies inside its interval.
- The running intersection can empty. It assumes one fixed median for every pair; when the paired median drifts
  (0% to +6% over 150 pairs at sd 1%) it empties in every run. That is its own outcome, "inconsistent": the pairs
  do not share one median (drift, or a change during the session), and it is kept from then on, never swapped into
  an interval. Under a fixed median it happens only when the truth was excluded, probability <= alpha.
- Stop rule with a relative threshold t (band [1/(1+t), 1+t] around a ratio of 1): decided "slower" / "faster"
  when the whole interval lies beyond the band, "no change beyond ±t" when it lies inside it; otherwise more pairs
  are needed. Because the sequence holds at every n, looking after every pair does not inflate false alarms. The
  intersection only narrows, so a decided series keeps its decision while more pairs come (its stopping time is
  `decided_at`); the only way out of a decision is the intersection emptying: "inconsistent", never a flip.
- Several series at once: each sequence runs at alpha / k (Bonferroni), so the chance that any of the k ever
  excludes its truth stays <= alpha.
- A sequence may be continued: pairs of a later session of the same revisions on the same machine are appended
  (`polyperf.gate.sequences`), and the guarantee holds over the whole concatenation, as it does at any stopping time.
- The miss rate is exact to compute, since the sequence uses only the signs of d_i - m: `miss_probability` runs a
  dynamic programme over the count of pairs below the median (1.98% over 120 pairs at alpha 5%, where Ville's
  bound says <= 5%); tests/test_sequential.py checks the implementation's simulated rate against it.
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
    "INCONSISTENT",
    "METHOD",
    "ConfidenceSequence",
    "SequenceState",
    "boundary",
    "decide",
    "median_sequence",
    "miss_probability",
    "verdicts",
]

METHOD = "sign-test confidence sequence of the median paired log-ratio (normal mixture, Howard et al. 2021)"
SLOWER, FASTER, NO_CHANGE, UNDECIDED = "slower", "faster", "no change", "undecided"
INCONSISTENT = "inconsistent"
DECIDED = (SLOWER, FASTER, NO_CHANGE)


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


@lru_cache(maxsize=256)
def _rank(n: int, alpha: float, n_opt: int) -> int:
    """k of the interval [d_(k), d_(n+1-k)] after n pairs; < 1 while none exists."""
    return math.floor(n / 2 - boundary(n, alpha, n_opt)) + 1


@dataclass(frozen=True)
class ConfidenceSequence:
    """The running interval after `n` pairs, on the ratio scale (B/A), with the point inside it; low/high are NaN
    while none exists (too few pairs) and once the running intersection has emptied (`inconsistent`)."""

    ratio: float
    low: float
    high: float
    n: int
    alpha: float
    inconsistent: bool = False

    @property
    def has_interval(self) -> bool:
        return not (math.isnan(self.low) or math.isnan(self.high))


def median_sequence(log_ratios: Sequence[float], alpha: float, *, n_opt: int = 30) -> list[ConfidenceSequence]:
    """The confidence sequence after each prefix of `log_ratios` (pairs in the order they were measured), with the
    running intersection applied; element i describes the first i + 1 pairs. Once the intersection empties, every
    later element is `inconsistent` (no interval; the point is the pairs' median)."""
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
        k = _rank(n, alpha, n_opt)
        if k >= 1:
            low, high = max(low, seen[k - 1]), min(high, seen[n - k])
        median = (seen[(n - 1) // 2] + seen[n // 2]) / 2
        if low > high:  # the pairs do not share one median: no interval from here on
            out.append(ConfidenceSequence(math.exp(median), math.nan, math.nan, n, alpha, inconsistent=True))
            continue
        if not math.isfinite(low):
            out.append(ConfidenceSequence(math.exp(median), math.nan, math.nan, n, alpha))
            continue
        point = min(max(median, low), high)  # clamped: the point lies inside the interval it is printed with
        out.append(ConfidenceSequence(math.exp(point), math.exp(low), math.exp(high), n, alpha))
    return out


def decide(cs: ConfidenceSequence, threshold: float) -> str:
    """ "slower" or "faster" when the whole interval lies beyond the band [1/(1+t), 1+t]; "no change" when it lies
    inside; "inconsistent" once the running intersection has emptied; "undecided" otherwise (and while no interval
    exists). Ratios are B/A of a lower-is-better time."""
    if not (math.isfinite(threshold) and threshold >= 0):
        raise ValueError(f"the threshold must be finite and >= 0, got {threshold}")
    if cs.inconsistent:
        return INCONSISTENT
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


def verdicts(log_ratios: Sequence[float], alpha: float, threshold: float, n_opt: int = 30) -> list[str]:
    """The verdict after each prefix of pairs. A decided verdict stays until the intersection empties (nested
    intervals): element i is never a decision other than the first one, only that one or "inconsistent"."""
    return [decide(cs, threshold) for cs in median_sequence(log_ratios, alpha, n_opt=n_opt)]


def miss_probability(pairs: int, alpha: float, n_opt: int = 30) -> float:
    """The exact chance that the sequence excludes the true median at some n <= `pairs` (pairs independent, the
    truth a median of a continuous distribution): a dynamic programme over S_n, the count of pairs below the
    median, Binomial(n, 1/2) step by step; the truth is excluded at n when S_n <= k - 1 or n - S_n <= k - 1."""
    alive = np.zeros(pairs + 1)
    alive[0] = 1.0
    missed = 0.0
    for n in range(1, pairs + 1):
        alive[1 : n + 1] = 0.5 * (alive[1 : n + 1] + alive[:n])
        alive[0] *= 0.5
        k = _rank(n, alpha, n_opt)
        if k >= 1:
            s = np.arange(n + 1)
            out = (s <= k - 1) | (n - s <= k - 1)
            missed += float(alive[: n + 1][out].sum())
            alive[: n + 1][out] = 0.0
    return missed


@dataclass(frozen=True)
class SequenceState:
    """One series' state after its latest pair: the interval, what it decides, and the pairs at which it was first
    decided (its stopping time; 0 while undecided, and for a series that emptied before any decision)."""

    cs: ConfidenceSequence
    verdict: str
    decided_at: int = 0

    @classmethod
    def of(cls, log_ratios: Sequence[float], alpha: float, threshold: float, n_opt: int = 30) -> SequenceState:
        if len(log_ratios) == 0:
            return cls(ConfidenceSequence(math.nan, math.nan, math.nan, 0, alpha), UNDECIDED)
        sequence = median_sequence(log_ratios, alpha, n_opt=n_opt)
        said = [decide(cs, threshold) for cs in sequence]
        first = next((i + 1 for i, v in enumerate(said) if v in DECIDED), 0)
        return cls(sequence[-1], said[-1], first)
