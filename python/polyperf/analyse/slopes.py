"""A slope among change points: a level that moves steadily for many commits (memory that grows release after
release) is one thing — where it starts, where it stops and its rate per commit, which is creep — and not the
staircase of steps that a piecewise-constant search cuts it into. Pure; `changepoints` calls it on its confirmed
changes.

Each run of two or more consecutive changes the same way is fitted again over the segments around it by a ramp: a
level, a straight line from commit t1 to commit t2, a level (continuous, 4 parameters). The ramp replaces the steps
when it explains the span at least as well by the Bayesian information criterion (n log(SSE / n) + parameters x
log n): a staircase of k steps costs 2k + 1 parameters, so a ramp wins when the steps lie on a line, and two steps
with a flat level between them stay two steps.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Slope", "find_slopes"]

RAMP_PARAMETERS = 4  # two levels, two knots
GRID = 24  # knot positions tried on each side before a refinement around the best


@dataclass(frozen=True)
class Slope:
    """A ramp over points `start`..`stop` (the level moves from point `start` to point `stop`), replacing the changes
    `first`..`last` (positions in the list of changes it was fitted on)."""

    start: int
    stop: int
    first: int
    last: int
    rate: float  # relative change per commit (log-linear), or the change per commit for values of either sign


def _sse_steps(y: np.ndarray, cuts: Sequence[int]) -> float:
    bounds = [0, *cuts, y.size]
    return float(sum(((y[a:b] - y[a:b].mean()) ** 2).sum() for a, b in itertools.pairwise(bounds) if b > a))


def _ramp_fit(y: np.ndarray, t1: int, t2: int) -> tuple[float, float]:
    """(SSE, slope per point) of a + b * clip(i - t1, 0, t2 - t1) by least squares."""
    x = np.clip(np.arange(y.size, dtype=float) - t1, 0, t2 - t1)
    xc = x - x.mean()
    den = float(xc @ xc)
    if den == 0:
        return float(((y - y.mean()) ** 2).sum()), 0.0
    b = float(xc @ (y - y.mean())) / den
    resid = y - y.mean() - b * xc
    return float(resid @ resid), b


def _best_ramp(y: np.ndarray, first: int, last: int) -> tuple[float, int, int, float]:
    """The ramp with t1 at or before `first` and t2 at or after `last` (indices into y) of least SSE."""

    def grid(lo: int, hi: int) -> list[int]:
        return sorted({round(float(v)) for v in np.linspace(lo, hi, min(GRID, hi - lo + 1))})

    best = (math.inf, first, last, 0.0)
    for t1, t2 in itertools.product(grid(0, first), grid(last, y.size)):
        if t2 > t1:
            sse, b = _ramp_fit(y, t1, t2)
            best = min(best, (sse, t1, t2, b))
    _, c1, c2, _ = best
    reach = max(1, first // GRID, (y.size - last) // GRID)
    for t1, t2 in itertools.product(
        range(max(0, c1 - reach), min(first, c1 + reach) + 1), range(c2 - reach, c2 + reach + 1)
    ):
        if last <= t2 <= y.size and t2 > t1:
            sse, b = _ramp_fit(y, t1, t2)
            best = min(best, (sse, t1, t2, b))
    return best


def _bic(sse: float, n: int, parameters: int) -> float:
    return n * math.log(max(sse, 1e-300) / n) + parameters * math.log(n)


def find_slopes(y: np.ndarray, points: Sequence[int], relative: bool = True) -> list[Slope]:
    """The ramps among the changes at `points` (sorted) of the series `y` (log-values when `relative`)."""
    points = list(points)
    if len(points) < 2:
        return []
    bounds = [0, *points, y.size]
    levels = [float(np.median(y[a:b])) for a, b in itertools.pairwise(bounds)]
    signs = np.sign(np.diff(levels))
    slopes: list[Slope] = []
    j = 0
    while j < len(points):
        end = j
        while end + 1 < len(points) and signs[end + 1] == signs[j] != 0:
            end += 1
        if end > j:
            slopes += _fit_run(y, points, bounds, j, end, relative)
        j = end + 1
    return slopes


def _fit_run(y: np.ndarray, points: list[int], bounds: list[int], j: int, end: int, relative: bool) -> list[Slope]:
    """The ramp over changes j..end, if it beats their staircase; else the best ramp over a shorter run inside it."""
    lo, hi = bounds[j], bounds[end + 2]
    span = y[lo:hi]
    cuts = [p - lo for p in points[j : end + 1]]
    steps = len(cuts)
    staircase = _bic(_sse_steps(span, cuts), span.size, 2 * steps + 1)
    sse, t1, t2, b = _best_ramp(span, cuts[0], cuts[-1])
    if _bic(sse, span.size, RAMP_PARAMETERS) <= staircase:
        rate = math.expm1(b) if relative else b
        return [Slope(lo + t1, lo + t2, j, end, rate)]
    if end - j >= 2:  # three or more steps that are not one ramp: try each side without its outermost step
        left = _fit_run(y, points, bounds, j, end - 1, relative)
        return left if left else _fit_run(y, points, bounds, j + 1, end, relative)
    return []
