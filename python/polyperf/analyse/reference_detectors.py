"""The change-point literature's reference detectors at their published defaults, to score polyperf's beside them on
the same series: binary segmentation and PELT as the Turing change-point benchmark (TCPDBench, van den Burg and
Williams 2020) runs them by default — R's `changepoint` with a change in mean, a Normal cost, the MBIC penalty and, for
binary segmentation, at most 5 changes — on the series scaled to mean 0 and sd 1; and the detector that never reports
a change. Built on `ruptures` (its search methods, with the cost of R's normal-mean model); pure, no I/O.

Indices are the first point of each new segment, as `changepoints.Change.index` is (R reports the last point of the
old one: one point earlier, well inside the scores' 5-point margin).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import ruptures
from ruptures.base import BaseCost

__all__ = ["REFERENCES", "NormalMean", "binseg_default", "pelt_default", "zero"]

MAX_BINSEG_CHANGES = 5  # R changepoint's default Q for binary segmentation


class NormalMean(BaseCost):
    """Twice the negative log-likelihood of a normal mean with unit variance (the sum of squared deviations), from
    cumulative sums; with `mbic`, plus the log of the segment's length (the MBIC's term per segment)."""

    model = "polyperf_normal_mean"
    min_size = 1

    def __init__(self, mbic: bool = False) -> None:
        self.mbic = mbic

    def fit(self, signal: np.ndarray) -> NormalMean:
        x = np.asarray(signal, dtype=float).reshape(-1)
        self.signal = x.reshape(-1, 1)  # ruptures reads the length from it
        self.sums = np.concatenate([[0.0], np.cumsum(x)])
        self.squares = np.concatenate([[0.0], np.cumsum(x * x)])
        return self

    def error(self, start: int, end: int) -> float:
        n = end - start
        total = self.sums[end] - self.sums[start]
        sse = max(self.squares[end] - self.squares[start] - total * total / n, 0.0)
        return sse + (math.log(n) if self.mbic else 0.0)


def _scaled(values: Sequence[float]) -> np.ndarray | None:
    x = np.asarray(values, dtype=float)
    sd = x.std()
    return (x - x.mean()) / sd if x.size >= 2 and sd > 0 else None


def zero(values: Sequence[float]) -> list[int]:
    """No change, ever: the baseline every detector must beat."""
    return []


def binseg_default(values: Sequence[float]) -> list[int]:
    """Binary segmentation, at most 5 changes, each kept while its cost reduction is at least the MBIC penalty
    (3 log n for a change in mean)."""
    x = _scaled(values)
    if x is None or x.size < 2:
        return []
    penalty = 3 * math.log(x.size)
    algo = ruptures.Binseg(custom_cost=NormalMean(), min_size=1, jump=1).fit(x)
    cost = NormalMean().fit(x)
    kept: list[int] = []
    previous = cost.error(0, x.size)
    for k in range(1, min(MAX_BINSEG_CHANGES, x.size - 1) + 1):
        bkps = algo.predict(n_bkps=k)
        bounds = [0, *bkps]
        total = sum(cost.error(a, b) for a, b in itertools.pairwise(bounds))
        if previous - total < penalty:
            break
        kept, previous = bkps[:-1], total
    return kept


def pelt_default(values: Sequence[float]) -> list[int]:
    """PELT with the normal-mean cost and the MBIC penalty (3 log n per change, log of each segment's length)."""
    x = _scaled(values)
    if x is None or x.size < 2:
        return []
    algo = ruptures.Pelt(custom_cost=NormalMean(mbic=True), min_size=1, jump=1).fit(x)
    bkps = algo.predict(pen=3 * math.log(x.size))
    return [int(b) for b in bkps[:-1]]


REFERENCES = {"binseg": binseg_default, "pelt": pelt_default, "zero": zero}
