"""The A/B gate's confidence sequence: it holds its level however often it is looked at (simulated), where a
fixed-n interval re-checked after every pair does not; and its stop rule decides real changes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom

from polyperf.analyse.sequential import (
    ConfidenceSequence,
    SequenceState,
    boundary,
    decide,
    median_sequence,
)

ALPHA = 0.05
RUNS, PAIRS = 400, 120


def _noise(kind: str, rng: np.random.Generator, size: tuple[int, int]) -> np.ndarray:
    """Paired log-ratios with median 0: symmetric, heavy-tailed, and skewed (no symmetry to lean on)."""
    if kind == "normal":
        return rng.normal(0, 0.03, size)
    if kind == "t2":
        return 0.02 * rng.standard_t(2, size)
    skewed = rng.exponential(0.03, size)
    return skewed - 0.03 * math.log(2)  # the exponential's median is scale * ln 2


def _ever_excludes(log_ratios: np.ndarray, truth: float) -> bool:
    return any(cs.has_interval and not (cs.low <= truth <= cs.high) for cs in median_sequence(log_ratios, ALPHA))


def _naive_ever_excludes(d: np.ndarray, truth: float) -> bool:
    """The fixed-n 95% sign-test (order-statistic) interval, recomputed after every pair from n = 6."""
    for n in range(6, d.size + 1):
        seen = np.sort(d[:n])
        k = int(binom.ppf(ALPHA / 2, n, 0.5))  # P(X < k) <= alpha / 2
        while binom.cdf(k - 1, n, 0.5) > ALPHA / 2:
            k -= 1
        if k >= 1 and not (math.exp(seen[k - 1]) <= truth <= math.exp(seen[n - k])):
            return True
    return False


@pytest.mark.parametrize("kind", ["normal", "t2", "skewed"])
def test_false_alarms_stay_below_alpha_when_looked_at_after_every_pair(kind):
    rng = np.random.default_rng(20260 + len(kind))
    data = _noise(kind, rng, (RUNS, PAIRS))
    misses = sum(_ever_excludes(row, 1.0) for row in data)
    # true rate <= 5%; at 400 runs the count would exceed 30 with probability < 1% if the rate were 5%
    assert misses / RUNS <= ALPHA + 0.025, misses


def test_a_fixed_n_interval_peeked_at_after_every_pair_cries_wolf():
    """The reason for the sequence: the same data, judged by a 95% interval re-checked at every n."""
    rng = np.random.default_rng(7)
    data = _noise("normal", rng, (200, PAIRS))
    naive = sum(_naive_ever_excludes(row, 1.0) for row in data) / 200
    sequential = sum(_ever_excludes(row, 1.0) for row in data) / 200
    assert naive > 2 * ALPHA > sequential


def test_a_ten_percent_slowdown_is_decided_within_thirty_pairs_at_three_percent_noise():
    rng = np.random.default_rng(11)
    d = math.log(1.10) + rng.normal(0, 0.03, 60)
    states = [decide(cs, 0.03) for cs in median_sequence(d, ALPHA)]
    assert "slower" in states[:30]
    assert "faster" not in states and "no change" not in states


def test_no_change_is_decided_inside_the_band_and_a_speed_up_is_faster():
    rng = np.random.default_rng(12)
    flat = rng.normal(0, 0.005, 80)
    assert SequenceState.of(flat, ALPHA, 0.03).verdict == "no change"
    assert SequenceState.of(flat - math.log(1.2), ALPHA, 0.03).verdict == "faster"


def test_the_interval_is_the_sign_test_inversion_at_the_boundary():
    d = np.linspace(-0.1, 0.1, 41)  # sorted already, so order statistics are the values themselves
    cs = median_sequence(d[np.random.default_rng(1).permutation(41)], ALPHA)[-1]
    k = math.floor(41 / 2 - boundary(41, ALPHA)) + 1
    assert k >= 1
    # the running intersection can only narrow the last interval
    assert math.exp(d[k - 1]) <= cs.low <= cs.ratio <= cs.high <= math.exp(d[41 - k])
    assert cs.ratio == pytest.approx(1.0)


def test_no_interval_before_ten_pairs_at_five_percent():
    cs = median_sequence(np.zeros(9), ALPHA)
    assert not any(c.has_interval for c in cs)
    assert median_sequence(np.zeros(10), ALPHA)[-1].has_interval
    assert decide(cs[-1], 0.02) == "undecided"


@pytest.mark.parametrize("bad", [0.0, 1.0, -1.0, math.nan])
def test_alpha_outside_zero_one_is_refused(bad):
    with pytest.raises(ValueError, match="alpha"):
        median_sequence([0.0] * 12, bad)


@pytest.mark.parametrize("bad", [-0.01, math.nan, math.inf])
def test_a_negative_or_non_finite_threshold_is_refused(bad):
    with pytest.raises(ValueError, match="threshold"):
        decide(ConfidenceSequence(1.0, 0.9, 1.1, 20, ALPHA), bad)
