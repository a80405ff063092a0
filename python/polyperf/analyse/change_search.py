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
from scipy.stats import spearmanr

from polyperf.analyse.reference_detectors import NormalMean

__all__ = ["BINSEG_PENALTY", "SEARCH", "candidates", "locate", "long_run_factor", "noise_parts", "noise_sd"]

SEARCH = "both"  # or "binseg", "otava"
BINSEG_PENALTY = 2.0  # times log n, in units of the point-to-point noise sd
LONG_RUN = True  # the noise sd allows for points that follow each other (`long_run_factor`)
MAX_PHI = 0.99
PHI_MARGIN = 1.5  # standard errors below the estimate


def noise_parts(logs: np.ndarray, bounds: Sequence[int]) -> tuple[float, float]:
    """A robust sd of one point (the median absolute successive difference within segments, / (0.6745 sqrt 2)), and
    the `long_run_factor` of those differences (1 when the points are independent)."""
    steps = [np.diff(logs[lo:hi]) for lo, hi in itertools.pairwise(bounds) if hi - lo >= 2]
    diffs = np.concatenate(steps) if steps else np.zeros(1)
    sd = float(np.median(np.abs(diffs))) / (0.6745 * math.sqrt(2))
    return sd, long_run_factor(diffs) if LONG_RUN else 1.0


def noise_sd(logs: np.ndarray, bounds: Sequence[int]) -> float:
    """The noise a shift must stand out from: the point sd times the long-run factor (`noise_parts`)."""
    sd, factor = noise_parts(logs, bounds)
    return sd * factor


def long_run_factor(diffs: np.ndarray) -> float:
    """How much more a level wanders than its points' noise says: sqrt((1 + phi) / (1 - phi)), the long-run sd of an
    AR(1) series over its innovation sd, with phi the lag-1 autocorrelation of the points. Read from the successive
    differences, which a step or a slope barely moves: their lag-1 correlation is -(1 - phi) / 2 (-0.5 for
    independent points). Spearman's rank correlation (robust to outliers and jumps) is turned into Pearson's for
    normal data (2 sin(pi rho / 6)), and phi is taken at its lower bound, 2 standard errors (about 2 / sqrt(m) on
    the correlation) below the estimate, so independent noise keeps a factor of 1. Without it, a smooth series
    (each point close to the last) passed every wander as a change."""
    if diffs.size < 10 or np.ptp(diffs) == 0:
        return 1.0
    rho_s = float(spearmanr(diffs[:-1], diffs[1:]).statistic)
    if not math.isfinite(rho_s):
        return 1.0
    rho = 2 * math.sin(math.pi * rho_s / 6)
    phi = min(max(1 + 2 * (rho - PHI_MARGIN / math.sqrt(diffs.size - 1)), 0.0), MAX_PHI)
    return math.sqrt((1 + phi) / (1 - phi))


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


def locate(logs: np.ndarray, lo: int, hi: int, guess: int, reach: int = 5) -> int:
    """The single-step maximum-likelihood split of logs[lo:hi] within `reach` of `guess`."""
    segment = logs[lo:hi]
    n, best, best_score = segment.size, guess, -1.0
    for i in range(max(lo + 1, guess - reach), min(hi - 1, guess + reach) + 1):
        k = i - lo
        score = abs(segment[:k].mean() - segment[k:].mean()) * math.sqrt(k * (n - k) / n)
        if score > best_score:
            best, best_score = i, score
    return best
