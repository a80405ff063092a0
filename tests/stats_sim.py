"""Synthetic benchmark data for the coverage tests of `analyse.stats`: four kinds of trouble real repeats have. Each
moves the paired ratio itself, not only both sides alike (a factor shared by both sides of a pair cancels in the
ratio and would test nothing):

- "shapes": the numerator's noise is right-skewed (occasional slow repeats), the denominator's tight;
- "drift": the ratio itself drifts, from 3% below its middle to 3% above over the run (B warms up differently from
  A, say), on top of a machine speed shared by both sides (drifting 20% and AR(1), rho 0.8) and the shapes above;
  pairs stay independent, not identically distributed: the truth is the median of the run's pooled ratios;
- "process": each repeat is a fresh process with its own speed (shared, sd 10%) and a per-side effect (sd 3%, which
  does not cancel), inside which 5 rounds are summarised by their median;
- "ties": a coarse timer: both sides read in whole milliseconds (A about 7 ms, B about 19.5 ms, each with its own
  8% noise), so that many pairs share one ratio (61 distinct ratios in 40,000 pairs) and many repeats one value.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.signal import lfilter

SCENARIOS = ("shapes", "drift", "process", "ties")
TRUTH = 3.0


def _skewed(rng: np.random.Generator, size) -> np.ndarray:
    return 1 + 0.05 * rng.lognormal(0.0, 1.0, size)


def _tight(rng: np.random.Generator, size) -> np.ndarray:
    return np.exp(0.005 * rng.standard_normal(size))


def _ar1(rng: np.random.Generator, n: int, rho: float, sd: float) -> np.ndarray:
    e = rng.standard_normal(n) * sd
    e[0] /= np.sqrt(1 - rho**2)  # start in the stationary distribution
    return lfilter([1.0], [1.0, -rho], e)


def rounds(scenario: str, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(numerator, denominator), shape (n, rounds): one row per repeat."""
    if scenario == "shapes":
        return TRUTH * _skewed(rng, (n, 1)), _tight(rng, (n, 1))
    if scenario == "drift":
        shared = np.exp(0.2 * np.linspace(0, 1, n) + _ar1(rng, n, 0.8, 0.05))
        moving = np.exp(np.linspace(-0.03, 0.03, n))  # the paired ratio's own drift: it does not cancel
        num = TRUTH * moving * shared * _skewed(rng, n)
        den = shared * _tight(rng, n)
        return num[:, None], den[:, None]
    if scenario == "ties":
        machine = rng.lognormal(0.0, 0.05, n)
        num = np.round(19.5 * machine * rng.lognormal(0.0, 0.08, n))
        den = np.round(7 * machine * rng.lognormal(0.0, 0.08, n))
        return num[:, None], den[:, None]
    process = rng.lognormal(0.0, 0.1, n)
    num = TRUTH * (process * rng.lognormal(0.0, 0.03, n))[:, None] * _skewed(rng, (n, 5))
    den = (process * rng.lognormal(0.0, 0.03, n))[:, None] * _tight(rng, (n, 5))
    return num, den


def repeats(scenario: str, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """One value per repeat: the median of its rounds."""
    num, den = rounds(scenario, rng, n)
    return np.median(num, axis=1), np.median(den, axis=1)


@lru_cache(maxsize=64)
def truths(scenario: str, n: int, draws: int = 4000) -> tuple[float, float]:
    """(median of per-repeat ratios, ratio of the two medians) of this generator at this n, from `draws` runs."""
    rng = np.random.default_rng(7)
    pairs = [repeats(scenario, rng, n) for _ in range(max(1, draws * 10 // n))]
    num = np.log(np.concatenate([p[0] for p in pairs]))
    den = np.log(np.concatenate([p[1] for p in pairs]))
    return float(np.exp(np.median(num - den))), float(np.exp(np.median(num) - np.median(den)))
