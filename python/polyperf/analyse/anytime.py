"""Anytime-valid evidence for the run's verdicts: an e-process per question, and the confidence sequence it inverts
to. Pure: values in, `Summary` objects (estimate, interval, evidence against a threshold) out.

Why: the main job adds repeats to the entries that are still undecided (`analyse.allocate`), so the number of repeats
depends on the data. A fixed-n sign test looked at after every added repeat no longer holds its level (the
simulation in tests/test_adaptive_family.py shows the excess); evidence that may be looked at after every repeat
must be a test supermartingale (Ville's inequality: P(it ever reaches 1/a) <= a).

The e-process (hand-written: it is a closed form of a few lines; `confseq` on PyPI ships only a C++ source archive,
see `analyse.sequential`):
- For a threshold t and independent repeats z_1..z_n, X_i = 1 when z_i lies beyond t on the claimed side (a value
  equal to t counts against the claim). Under "the median is not beyond t", P(X_i = 1) <= 1/2 whatever the
  distribution of z (no symmetry, no variance assumed).
- E_n = the likelihood ratio of the k = sum X_i successes against p = 1/2, mixed over the alternatives p = 0.6,
  0.75, 0.9 and 0.97 with weights 0.15, 0.25, 0.3 and 0.3: E_n = sum_j w_j (2 p_j)^k (2 (1 - p_j))^(n - k). Each fixed
  p >= 1/2 gives a supermartingale under every null p' <= 1/2 (its expected factor is 2(1-p) + 2p'(2p-1) <= 1), and so
  does their mixture (Shafer's test martingales; the betting view of Waudby-Smith & Ramdas 2024). Why these: a
  benchmark entry the run can decide is one whose repeats nearly all fall on one side, and a mixture weighted there
  gives about 1.5 to 2 times the evidence of a uniform prior on [1/2, 1] for such outcomes (11 of 12 beyond: 77
  against 52; 12 of 12: 1,233 against 630), about the same at 30 of 40; the component at 0.6 keeps evidence growing
  for any share of repeats beyond the bound above 55% (with 0.75 the least alternative, it stopped below 63%).
  All n repeats on the claimed side give 100 at n = 8.
- The two-sided e-value of a direction is E/2 (the mean of the two one-sided e-processes is one, and the other side's
  is >= 0). A band ("inside [lo, hi]") is min(E_above(lo), E_below(hi)) / 2: under "not inside" one of the two is a
  true null, and the minimum is at most that one.
- The interval at level L is {t : E_above(t) < 2/(1-L) and E_below(t) < 2/(1-L)}, order statistics of the
  repeats: it holds for every n at once with probability >= L, so it stays valid when the repeats stop on the data.
  It needs 7 repeats for a 95% interval (6 repeats give at most E = 33 < 40).
- Its p-values are 1/e: an outcome is decided at 95% exactly when its 95% interval clears the bound, and the family
  (`analyse.family`, e-BH) receives the e-values.
For an unpaired ratio (two independent series, a user's claim with `paired = false`): each side's median gets its
sequence at half the error, the ratio's interval divides their bounds, and its evidence is the sequence's own
p-value (the largest error at which the interval still holds the threshold) through the calibrator e = 1/(2 sqrt p)
(Vovk & Wang 2021), a valid e-value for any valid p-value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from polyperf.analyse.stats import LEVEL, Summary

__all__ = [
    "METHOD_MEDIAN",
    "METHOD_PAIRED",
    "METHOD_UNPAIRED",
    "evidence",
    "log_evidence",
    "min_repeats",
    "paired_ratio",
    "ratio_of_medians",
    "repeats_to_reach",
    "summarize",
]

METHOD_MEDIAN = "median, sign e-process confidence sequence (anytime-valid)"
METHOD_PAIRED = "median of paired ratios, sign e-process confidence sequence (anytime-valid)"
METHOD_UNPAIRED = "ratio of medians, each side's sign e-process confidence sequence (anytime-valid)"


# the mixture's shares of repeats beyond the bound, and their weights
ALTERNATIVES = ((0.6, 0.15), (0.75, 0.25), (0.9, 0.3), (0.97, 0.3))


@lru_cache(maxsize=65536)
def log_evidence(k: float, n: int) -> float:
    """log E_n of k repeats of n beyond the threshold (k may be fractional when projecting: see `repeats_to_reach`)."""
    if n <= 0:
        return 0.0
    terms = [math.log(w) + k * math.log(2 * p) + (n - k) * math.log(2 * (1 - p)) for p, w in ALTERNATIVES]
    top = max(terms)
    return top + math.log(sum(math.exp(t - top) for t in terms))


def evidence(k: float, n: int) -> float:
    return math.exp(min(log_evidence(k, n), 700.0))


@lru_cache(maxsize=4096)
def _most_beyond_below(n: int, bound: float) -> int:
    """The largest k in 0..n with E(k, n) < bound; n when even all n fall short (no interval at this n)."""
    for k in range(n + 1):
        if evidence(k, n) >= bound:
            return k - 1
    return n


@lru_cache(maxsize=64)
def min_repeats(level: float = LEVEL) -> int:
    """The fewest repeats whose interval at `level` can exist: all of them beyond a bound reach 2 / (1 - level)."""
    n = 1
    while _most_beyond_below(n, 2.0 / (1.0 - level)) >= n:
        n += 1
    return n


def repeats_to_reach(beyond: float, n: int, target: float, *, limit: int = 400) -> int | None:
    """How many more repeats, each beyond the bound with the share seen so far (shrunk to 1/2 by one repeat each
    way), the one-sided evidence needs to reach `target`; None when not within `limit` (the data sit within the
    noise of the bound). A projection for choosing where repeats go, never a decision."""
    share = (beyond + 0.5) / (n + 1.0)
    if share <= 0.5:
        return None
    for more in range(limit + 1):
        if log_evidence(beyond + share * more, n + more) >= math.log(target):
            return more
    return None


def _sorted_finite(values: Sequence[float]) -> np.ndarray:
    data = np.asarray(values, dtype=float)
    return np.sort(data[np.isfinite(data)])


def _beyond(z: np.ndarray, t: float) -> tuple[int, int]:
    """(repeats strictly above t, strictly below t) of sorted z."""
    return z.size - int(np.searchsorted(z, t, side="right")), int(np.searchsorted(z, t, side="left"))


def _bounds(z: np.ndarray, level: float) -> tuple[float, float]:
    """The sequence's interval [z_(n-k), z_(k+1)] (1-based) with k the most repeats beyond a bound that fall short."""
    n = int(z.size)
    k = _most_beyond_below(n, 2.0 / (1.0 - level))
    if k >= n:
        return math.nan, math.nan
    return float(z[n - k - 1]), float(z[k])


def _sign_summary(z: np.ndarray, method: str, level: float, log: bool) -> Summary:
    back = math.exp if log else float

    def transform(threshold: float) -> float:
        if not log:
            return float(threshold)
        return math.log(threshold) if threshold > 0 else (-math.inf if threshold == 0 else math.nan)

    def evidence_at(threshold: float) -> tuple[float, float]:
        t = transform(threshold)
        if math.isnan(t):
            return math.nan, math.nan
        above, below = _beyond(z, t)
        return evidence(above, z.size) / 2.0, evidence(below, z.size) / 2.0

    def tails(threshold: float) -> tuple[float, float]:
        # one-sided p-values whose double is 1/e: judged at p <= (1 - LEVEL) exactly where the interval decides
        e_above, e_below = evidence_at(threshold)
        if math.isnan(e_above):
            return math.nan, math.nan
        return tuple(min(0.5, 0.5 / e) if e > 0 else 0.5 for e in (e_above, e_below))  # type: ignore[return-value]

    low, high = _bounds(z, level)
    point = float(np.median(z))
    if not math.isnan(low):
        point = min(max(point, low), high)  # the estimate lies inside its own interval
    low_b, high_b = (back(low), back(high)) if not math.isnan(low) else (math.nan, math.nan)
    return Summary(back(point), low_b, high_b, int(z.size), method, min_repeats(level), tails, evidence_at)


def summarize(values: Sequence[float], level: float = LEVEL) -> Summary:
    """The median of independent repeats, with its anytime-valid interval (none below `min_repeats`)."""
    z = _sorted_finite(values)
    if z.size == 0:
        raise ValueError("no finite values to summarize")
    return _sign_summary(z, METHOD_MEDIAN, level, log=False)


def paired_ratio(numerator: Sequence[float], denominator: Sequence[float], level: float = LEVEL) -> Summary:
    """The median of per-repeat ratios (pairs joined by the caller on their repeat key) with its anytime-valid
    interval; a pair with a side that is not finite is dropped whole."""
    num, den = np.asarray(numerator, dtype=float), np.asarray(denominator, dtype=float)
    if num.shape != den.shape:
        raise ValueError(f"paired ratio needs equal counts, got {num.size} and {den.size}")
    whole = np.isfinite(num) & np.isfinite(den)
    num, den = num[whole], den[whole]
    if num.size == 0:
        raise ValueError("ratio needs values on both sides")
    for side, values in (("numerator", num), ("denominator", den)):
        if np.any(values <= 0):
            raise ValueError(f"ratio {side} has values <= 0: a ratio needs positive values")
    return _sign_summary(np.sort(np.log(num) - np.log(den)), METHOD_PAIRED, level, log=True)


def _unpaired_interval(x: np.ndarray, y: np.ndarray, error: float) -> tuple[float, float]:
    """The log-ratio's interval with each side's sequence at error / 2."""
    (xl, xh), (yl, yh) = _bounds(x, 1 - error / 2), _bounds(y, 1 - error / 2)
    return xl - yh, xh - yl


def ratio_of_medians(numerator: Sequence[float], denominator: Sequence[float], level: float = LEVEL) -> Summary:
    """The ratio of the medians of two independent series, with an anytime-valid interval and calibrated evidence."""
    x, y = _sorted_finite(numerator), _sorted_finite(denominator)
    if x.size == 0 or y.size == 0:
        raise ValueError("ratio needs values on both sides")
    for side, values in (("numerator", x), ("denominator", y)):
        if values[0] <= 0:
            raise ValueError(f"ratio {side} has values <= 0: a ratio of medians needs positive values")
    x, y = np.log(x), np.log(y)
    errors = np.unique(np.append(np.geomspace(1e-9, 1.0, 400), 1 - level))  # the level itself decides exactly

    def p_value(t: float, above: bool) -> float:
        for error in errors:  # increasing: the first error at which the interval clears t
            lo, hi = _unpaired_interval(x, y, float(error))
            if (lo > t) if above else (hi < t):
                return float(error)
        return 1.0

    def evidence_at(threshold: float) -> tuple[float, float]:
        if not threshold > 0:
            return math.nan, math.nan
        t = math.log(threshold)
        return tuple(0.5 / math.sqrt(p_value(t, side)) for side in (True, False))  # type: ignore[return-value]

    def tails(threshold: float) -> tuple[float, float]:
        if not threshold > 0:
            return math.nan, math.nan
        t = math.log(threshold)
        return p_value(t, True) / 2, p_value(t, False) / 2

    lo, hi = _unpaired_interval(x, y, 1 - level)
    point = math.exp(float(np.median(x) - np.median(y)))
    n = int(min(x.size, y.size))
    need = min_repeats(1 - (1 - level) / 2)
    if math.isnan(lo) or math.isnan(hi):
        return Summary(point, math.nan, math.nan, n, METHOD_UNPAIRED, need, tails, evidence_at)
    return Summary(point, math.exp(lo), math.exp(hi), n, METHOD_UNPAIRED, need, tails, evidence_at)
