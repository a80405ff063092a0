"""Creep: a slow drift over the newest commits that no single step explains, and that change points miss by design
(a 0.3% step per commit is never one change). Pure, like `changepoints`, its neighbour.

The Mann-Kendall trend test is Kendall's tau between commit order and value (`scipy.stats.kendalltau`, exact for
small n without ties, tie-corrected otherwise), and Sen's slope is the Theil-Sen estimator with its interval
(`scipy.stats.theilslopes`): both are in scipy, so no trend package is needed. Both run on log-values: the slope is a
relative change per commit. A drift is reported at p <= 0.005 when the Sen slope over the window adds up to at least
1%. On noise (tests/test_change_rates.py) that flags under 1% of series per check; a 0.3%-per-commit creep over 30
commits at 3% noise is flagged in about 90% of trials.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import kendalltau, theilslopes

__all__ = ["CREEP_COMMITS", "CREEP_PVALUE", "MIN_DRIFT", "Creep", "find_creep"]

CREEP_COMMITS = 30  # the newest commits the trend test looks at
CREEP_PVALUE = 0.005
MIN_DRIFT = 0.01  # the Sen slope over the window must add up to at least 1%
MIN_POINTS = 10  # fewer points since the last change: no trend test


@dataclass(frozen=True)
class Creep:
    """A drift over points `start`..`stop - 1`: `slope` is the relative change per commit (Sen), `drift` over them."""

    start: int
    stop: int
    slope: float
    slope_low: float
    slope_high: float
    drift: float
    p_value: float


def find_creep(
    values: Sequence[float],
    *,
    commits: int = CREEP_COMMITS,
    after: int = 0,
    max_pvalue: float = CREEP_PVALUE,
    min_drift: float = MIN_DRIFT,
) -> Creep | None:
    """The drift over the newest `commits` points (and after index `after`: a confirmed step is no creep), or
    None when there is none or too few points to tell."""
    data = np.asarray(values, dtype=float)
    start = max(data.size - commits, after, 0)
    window = data[start:]
    if window.size < MIN_POINTS or not np.all(window > 0) or np.all(window == window[0]):
        return None
    logs, order = np.log(window), np.arange(window.size, dtype=float)
    test = kendalltau(order, logs)
    p_value = float(test.pvalue)
    if not math.isfinite(p_value) or p_value > max_pvalue:
        return None
    slope, _intercept, low, high = theilslopes(logs, order, 0.95)
    drift = math.expm1(slope * (window.size - 1))
    if abs(drift) < min_drift:
        return None
    return Creep(start, data.size, math.expm1(slope), math.expm1(low), math.expm1(high), drift, p_value)
