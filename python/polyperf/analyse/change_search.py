"""Where change points may lie in a series: the candidates `changepoints` then confirms or drops. Pure.

Binary segmentation (`ruptures`) and Apache Otava's E-Divisive means, together by default (`changepoints`' module
note says why), or either alone to compare.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import ruptures
from otava.analysis import compute_change_points

from polyperf.analyse.reference_detectors import NormalMean

__all__ = ["BINSEG_PENALTY", "SEARCH", "candidates", "noise_sd"]

SEARCH = "both"  # or "binseg", "otava"
BINSEG_PENALTY = 2.0  # times log n, in units of the point-to-point noise sd


def noise_sd(logs: np.ndarray, bounds: Sequence[int]) -> float:
    """A robust sd of one point: the median absolute successive difference within segments, / (0.6745 sqrt 2)."""
    steps = [np.abs(np.diff(logs[lo:hi])) for lo, hi in itertools.pairwise(bounds) if hi - lo >= 2]
    diffs = np.concatenate(steps) if steps else np.zeros(1)
    return float(np.median(diffs)) / (0.6745 * math.sqrt(2))


def _binseg(logs: np.ndarray, penalty: float) -> list[int]:
    """Candidates: binary segmentation of the values in units of their point-to-point noise, each split kept while it
    lowers the sum of squares by at least `penalty` times log n."""
    noise = noise_sd(logs, [0, logs.size])
    if noise == 0:
        noise = float(np.std(logs)) or 1.0
    z = (logs - logs.mean()) / noise
    algo = ruptures.Binseg(custom_cost=NormalMean(), min_size=2, jump=1).fit(z)
    return [int(b) for b in algo.predict(pen=penalty * math.log(logs.size))[:-1]]


def candidates(data: np.ndarray, logs: np.ndarray, search: str, window: int, max_pvalue: float) -> list[int]:
    if search == "binseg":
        return _binseg(logs, BINSEG_PENALTY)
    if search == "both":
        return sorted(set(_binseg(logs, BINSEG_PENALTY)) | set(candidates(data, logs, "otava", window, max_pvalue)))
    if search == "otava":
        # Otava takes a list: with a numpy array its split step fails (`ValueError` from an empty side, 0.8.0)
        found, _weak = compute_change_points(data.tolist(), window_len=window, max_pvalue=max_pvalue)
        return sorted(int(p.index) for p in found)
    raise ValueError(f"change-point search {search!r} is not one of: binseg, otava")
