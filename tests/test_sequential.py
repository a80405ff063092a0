"""The A/B gate's confidence sequence: its miss rate is the exact value a dynamic programme over the sign process
gives (simulated, and enumerated), where a fixed-n interval re-checked after every pair cries wolf; its point lies
inside its interval; an emptied intersection is "inconsistent", never swapped; a decision is never flipped; and
its stop rule decides real changes."""

from __future__ import annotations

import itertools
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
    miss_probability,
    verdicts,
)

ALPHA = 0.05
RUNS, PAIRS = 400, 120


def _ever_excludes(log_ratios: np.ndarray, truth: float, alpha: float = ALPHA) -> bool:
    return any(
        cs.inconsistent or (cs.has_interval and not (cs.low <= truth <= cs.high))
        for cs in median_sequence(log_ratios, alpha)
    )


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


def test_the_miss_rate_is_the_exact_value_of_the_sign_process():
    """The sequence uses only the signs of d_i - median, so its chance of ever excluding the truth over 120 pairs is
    exact to compute: 1.98% at alpha 5% (Ville's bound: <= 5%). 6,000 simulated runs must land within 0.5
    percentage points of it; a sequence run at alpha 10% (4.6%) or 2.5% (0.85%) would not."""
    exact = miss_probability(PAIRS, ALPHA)
    assert exact == pytest.approx(0.0198, abs=5e-4)
    runs = 6000
    data = np.random.default_rng(20260).normal(0, 0.03, (runs, PAIRS))  # any continuous noise: only signs count
    simulated = sum(_ever_excludes(row, 1.0) for row in data) / runs
    assert abs(simulated - exact) <= 0.005, (simulated, exact)
    for other in (2 * ALPHA, ALPHA / 2):
        assert abs(miss_probability(PAIRS, other) - exact) > 0.01


def test_the_exact_miss_rate_is_the_implementations_own_over_every_sign_pattern():
    """Enumerated, not sampled: all 2^14 sign patterns of 14 pairs (alpha 0.3, so that intervals start early), each
    weighted 2^-14, give the dynamic programme's value to the last digit."""
    pairs, alpha = 14, 0.3
    sizes = np.random.default_rng(3).uniform(0.5, 1.5, pairs)
    missed = 0
    for pattern in itertools.product((-1.0, 1.0), repeat=pairs):
        missed += _ever_excludes(np.array(pattern) * sizes, 1.0, alpha)
    assert missed / 2**pairs == pytest.approx(miss_probability(pairs, alpha), abs=1e-12)
    assert miss_probability(pairs, alpha) > 0.03  # the enumeration reaches pairs where intervals exist


def test_the_point_lies_inside_its_interval_at_every_pair():
    """On iid pairs the plain median fell outside the running intersection at some step in 73 of 600 runs."""
    data = np.random.default_rng(8).normal(0, 0.01, (300, PAIRS))
    for row in data:
        for cs in median_sequence(row, ALPHA):
            assert not cs.has_interval or cs.low <= cs.ratio <= cs.high, cs


def test_an_emptied_intersection_is_inconsistent_never_an_interval():
    """The paired median drifts from 0% to +6% over 150 pairs (sd 1%): the pairs share no median. The old code
    swapped the ends and decided on a one-point interval in every run."""
    rng = np.random.default_rng(6)
    for _ in range(20):
        d = np.log(np.linspace(1.0, 1.06, 150)) + rng.normal(0, 0.01, 150)
        sequence = median_sequence(d, ALPHA)
        assert sequence[-1].inconsistent and not sequence[-1].has_interval
        first = next(i for i, cs in enumerate(sequence) if cs.inconsistent)
        assert all(cs.inconsistent for cs in sequence[first:])  # kept from then on
        assert all(not cs.has_interval or cs.low <= cs.high for cs in sequence)
        assert verdicts(d, ALPHA, 0.02)[-1] == "inconsistent"


def test_a_decided_series_keeps_its_decision_or_is_inconsistent():
    """No change for 40 pairs, then +5% for 80 more: decided "no change" early, it is never read as "slower"."""
    rng = np.random.default_rng(17)
    for _ in range(20):
        d = np.concatenate([rng.normal(0, 0.003, 40), math.log(1.05) + rng.normal(0, 0.003, 80)])
        said = verdicts(d, ALPHA, 0.02)
        first = next(v for v in said if v != "undecided")
        assert first == "no change"
        after = said[said.index(first) :]
        assert set(after) <= {first, "inconsistent"} and after[-1] == "inconsistent"
    state = SequenceState.of(d, ALPHA, 0.02)
    assert state.verdict == "inconsistent" and 10 <= state.decided_at <= 40


def test_a_fixed_n_interval_peeked_at_after_every_pair_cries_wolf():
    """The reason for the sequence: the same data, judged by a 95% interval re-checked at every n."""
    rng = np.random.default_rng(7)
    data = rng.normal(0, 0.03, (200, PAIRS))
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
