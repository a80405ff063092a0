"""Regime changes: level shifts that are large against how much the series varies within its segments, found by the
change-point literature's reference search and kept when they hold. Pure; `changepoints` adds them to the changes it
confirms on its own.

Why: polyperf's own confirmation measures noise from one point to the next and, where points follow each other,
scales it by a long-run factor. On a performance history (independent noise around flat levels) that is right. On a
series that wanders (each value close to the last: a price, an emission count, a smooth sensor), the factor grows
so large that no shift stands out, and without it every wander is a change. The literature's default answers the
question differently: binary segmentation of the series scaled to mean 0 and sd 1, a change in mean with a Normal
cost, the MBIC penalty (3 log n a change) and at most 5 changes (R's `changepoint`, as the Turing change-point
benchmark runs it). Its scale is the whole series' spread, so wandering neither hides a regime shift nor splits one.

Each change that search finds is kept only when
- a rank test between the points on either side (up to `SIDE` each, within its neighbours) gives p <= `REGIME_PVALUE`:
  a single outlier, or a level held for a few points, cannot pass it;
- its Hodges-Lehmann shift is at least `REGIME_SPREADS` times the robust sd of the points around their own segment's
  median (the spread within segments: wander and noise together, never the shift itself);
- and, for positive values, at least 2% (`changepoints.MIN_CHANGE`);
- with at least `CONFIRM_POINTS` points after it (a change at the newest points stays with polyperf's own search,
  pending).
`REGIME_SPREADS` was chosen on performance histories only: on the noise families of tests/test_change_rates.py (200
series of 500 commits each) no candidate passed the rank test and the 2% floor at any multiple, except on AR(1) noise
with phi = 0.5, where 17, 9, 1 and 0 passed at 1, 1.5, 2 and 2.5 spreads; 2.5 is the smallest that let none through.
`REGIME_PVALUE` is polyperf's own confirmation level.

`hold_in_wander` applies the same yardstick to every change of a series whose points, around the fitted levels,
follow each other (`WANDER_PHI`, `WANDER_STEPS` say when and why).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
from scipy.stats import mannwhitneyu, spearmanr

from polyperf.analyse.change_search import PHI_MARGIN

__all__ = ["MAX_REGIMES", "REGIME_PVALUE", "REGIME_SPREADS", "hold_in_wander", "mbic_binseg", "regime_changes"]

MAX_REGIMES = 5  # R changepoint's default Q for binary segmentation
REGIME_SPREADS = 2.5  # the shift a regime change needs, in robust sds of the points within their segments
REGIME_PVALUE = 1e-4  # the rank test it must pass (as polyperf's own confirmation)
# steps of one series before `hold_in_wander` judges them: one step on a slope leaves residuals that follow each
# other just as a wander does, and dropping it lost the slope's place (tests/changepoint_families.py: Cover 0.895
# to 0.880 with any number of steps)
WANDER_STEPS = 2
# how much the points around the fitted levels must follow each other (lag-1 correlation, its lower bound) before
# `hold_in_wander` judges the changes: 1/3, a level whose long-run variance is at least twice its points'. On the
# Perfherder-like sample (spikes, two modes, whole milliseconds) the bound reached 0.23, and with any bound above 0 a
# true 5% step of a two-mode series was dropped
WANDER_PHI = 1 / 3


def _best_split(sums: np.ndarray, lo: int, hi: int) -> tuple[float, int]:
    """(cost reduction, split) of the best single split of x[lo:hi] under the Normal mean cost (sum of squares)."""
    n = hi - lo
    if n < 2:
        return -math.inf, lo
    ks = np.arange(1, n)
    left = sums[lo + ks] - sums[lo]
    total = sums[hi] - sums[lo]
    right = total - left
    # sse(whole) - sse(left) - sse(right) = left^2/k + right^2/(n-k) - total^2/n
    gain = left * left / ks + right * right / (n - ks) - total * total / n
    best = int(np.argmax(gain))
    return float(gain[best]), lo + int(ks[best])


# Written here rather than through ruptures (which `reference_detectors.binseg_default` runs): with the Normal-mean
# cost of R's changepoint, ruptures evaluates a Python cost object at every candidate split, 2.1 ms per 500-point
# series on the 2-core VM against 0.06 ms from cumulative sums, and `history` runs this on every series it holds.
# The splits are the same (tests/test_changepoints.py compares the two).
def mbic_binseg(values: np.ndarray, max_changes: int = MAX_REGIMES) -> list[int]:
    """Binary segmentation at the literature's defaults: the series scaled to mean 0 and sd 1, each greedy split kept
    while it lowers the Normal cost by at least 3 log n (the MBIC penalty for a change in mean), at most
    `max_changes` (the same answer as `reference_detectors.binseg_default`, from cumulative sums)."""
    x = np.asarray(values, dtype=float)
    sd = float(x.std()) if x.size >= 2 else 0.0
    if sd == 0:
        return []
    z = (x - x.mean()) / sd
    sums = np.concatenate([[0.0], np.cumsum(z)])
    penalty = 3 * math.log(z.size)
    splits = {(0, z.size): _best_split(sums, 0, z.size)}
    found: list[int] = []
    while len(found) < min(max_changes, z.size - 1):
        (lo, hi), (gain, at) = max(splits.items(), key=lambda item: item[1][0])
        if gain < penalty:
            break
        found.append(at)
        del splits[(lo, hi)]
        splits[(lo, at)] = _best_split(sums, lo, at)
        splits[(at, hi)] = _best_split(sums, at, hi)
    return sorted(found)


def _within_sd(logs: np.ndarray, bounds: list[int]) -> float:
    """The robust sd (1.4826 MAD) of the points around their own segment's median; where ties make it 0 (whole
    numbers), the plain sd of those deviations."""
    resid = np.concatenate([logs[a:b] - np.median(logs[a:b]) for a, b in itertools.pairwise(bounds) if b > a])
    sd = 1.4826 * float(np.median(np.abs(resid)))
    return sd if sd > 0 else float(np.std(resid))


def regime_changes(
    logs: np.ndarray, min_shift: float, confirm_points: int, side: int, taken: Sequence[int] = (), reach: int = 5
) -> list[tuple[int, float]]:
    """(index, rank-test p) of the regime changes of `logs` (log-values of a positive series, else the values) that
    hold (module note) and lie more than `reach` points from every change in `taken` (found already). Each is
    weighed between its neighbours among both: binary segmentation at the whole series' scale may place a change a
    few points off one found already, and weighed alone it took that change's shift for its own (a Perfherder-like
    series then had a staircase, 83, 90 and 189, where its two steps were)."""
    found = [i for i in mbic_binseg(logs) if logs.size - i >= confirm_points]
    if not found:
        return []
    spread = _within_sd(logs, [0, *found, logs.size])
    new = [i for i in found if all(abs(i - j) > reach for j in taken)]
    bounds = sorted({0, logs.size, *found, *taken})
    kept = []
    for i in new:
        k = bounds.index(i)
        before = logs[max(bounds[k - 1], i - side) : i]
        after = logs[i : min(bounds[k + 1], i + side)]
        if before.size < 2 or after.size < 2 or np.ptp(np.r_[before, after]) == 0:
            continue
        method = "exact" if min(before.size, after.size) < 8 else "auto"
        p_value = float(mannwhitneyu(after, before, alternative="two-sided", method=method).pvalue)
        shift = abs(float(np.median(np.subtract.outer(after, before))))
        if p_value <= REGIME_PVALUE and shift >= min_shift and shift >= REGIME_SPREADS * spread:
            kept.append((i, p_value))
    return kept


def _fitted(logs: np.ndarray, steps: list[int], ramps: list) -> np.ndarray:
    """A least-squares line through each stretch between changes (and along each slope): a gentle drift or a slope
    the changes cut is not taken for points that follow each other."""
    n = logs.size
    cuts = sorted({*steps, *(r.start for r in ramps), *(min(r.stop, n) for r in ramps)} - {0, n})
    fit = np.empty(n)
    for a, b in itertools.pairwise([0, *cuts, n]):
        x = np.arange(b - a, dtype=float)
        fit[a:b] = np.polyval(np.polyfit(x, logs[a:b], 1), x) if b - a >= 3 else np.median(logs[a:b])
    return fit


def hold_in_wander(
    logs: np.ndarray, steps: list[int], ramps: list, min_shift: float, side: int
) -> tuple[list[int], list]:
    """The steps and slopes that hold when the points around the fitted levels follow each other (their lag-1 rank
    correlation, `PHI_MARGIN` standard errors below its estimate, is `WANDER_PHI` or more): then each must also be a
    regime change's size against the spread within segments. Where the points are independent, the point-to-point
    noise is the right scale and every change stays. Why: on a series whose level wanders or cycles, each swing
    passed as a step (the long-run factor reads point-to-point differences, which a smooth swing under independent
    noise leaves independent)."""
    if len(steps) + len(ramps) < WANDER_STEPS or logs.size < 10:
        return steps, ramps
    resid = logs - _fitted(logs, steps, ramps)
    if np.ptp(resid) == 0:
        return steps, ramps
    rho = float(spearmanr(resid[:-1], resid[1:]).statistic)
    if not math.isfinite(rho) or rho - PHI_MARGIN / math.sqrt(resid.size - 1) < WANDER_PHI:
        return steps, ramps
    spread = 1.4826 * float(np.median(np.abs(resid))) or float(np.std(resid))
    cuts = sorted({0, logs.size, *steps, *(r.start for r in ramps), *(min(r.stop, logs.size) for r in ramps)})

    def holds(start: int, stop: int) -> bool:
        lo, hi = (
            cuts[cuts.index(start) - 1] if start > 0 else 0,
            cuts[cuts.index(stop) + 1] if stop < logs.size else stop,
        )
        before, after = logs[max(lo, start - side) : start], logs[stop : min(hi, stop + side)]
        if before.size == 0 or after.size == 0:
            return True  # a slope still moving at the newest point: nothing after it to weigh
        return abs(float(np.median(np.subtract.outer(after, before)))) >= max(min_shift, REGIME_SPREADS * spread)

    return [i for i in steps if holds(i, i)], [r for r in ramps if holds(r.start, min(r.stop, logs.size))]
