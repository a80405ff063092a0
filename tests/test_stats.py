"""The interval methods of `analyse.stats`: agreement with scipy, the p-values that match each interval, and coverage
by simulation on data shaped like benchmark repeats (tests/stats_sim.py), at every n from the minimum to 50."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import quantile_test
from stats_sim import SCENARIOS, repeats, rounds, truths

from polyperf.analyse import stats
from polyperf.analyse.stats import (
    exact_range,
    medians_ratio_has_interval,
    min_pairs,
    paired_ratio,
    ratio,
    ratio_of_medians,
    summarize,
    unpaired_has_interval,
)

TRIALS = 2000


def test_median_needs_six_repeats_for_an_interval():
    assert not summarize([1.0, 2.0, 3.0, 4.0, 100.0]).has_interval
    assert summarize([5.0]).n == 1 and math.isnan(summarize([5.0]).low)
    s = summarize([1.0, 2.0, 3.0, 4.0, 5.0, 100.0])
    assert (s.median, s.low, s.high, s.n) == (3.5, 1.0, 100.0, 6)
    with pytest.raises(ValueError):
        summarize([])


@pytest.mark.parametrize("n", [6, 7, 10, 17, 30])
def test_median_interval_is_scipys_order_statistic_interval(n):
    rng = np.random.default_rng(n)
    x = rng.lognormal(size=n)
    ci = quantile_test(x, q=float(np.median(x)), p=0.5).confidence_interval(0.95)
    s = summarize(x)
    assert (s.low, s.high) == (ci.low, ci.high)


@pytest.mark.parametrize("n", [6, 9, 20])
def test_paired_ratio_is_the_median_of_ratios_with_scipys_interval_of_their_logs(n):
    rng = np.random.default_rng(n)
    num, den = rng.lognormal(1.0, 0.3, n), rng.lognormal(0.0, 0.05, n)
    logs = np.log(num / den)
    ci = quantile_test(logs, q=float(np.median(logs)), p=0.5).confidence_interval(0.95)
    p = paired_ratio(num, den)
    assert p.median == pytest.approx(float(np.exp(np.median(logs))))
    assert (p.low, p.high) == pytest.approx((math.exp(ci.low), math.exp(ci.high)))
    assert p.low <= p.median <= p.high and p.method == stats.METHOD_PAIRED
    assert ratio(num, den, paired=True) == p


def test_unpaired_ratio_is_the_ratio_of_medians_with_each_sides_interval_at_97_5():
    rng = np.random.default_rng(3)
    num, den = rng.lognormal(2.0, 0.2, 12), rng.lognormal(0.0, 0.2, 9)
    u = ratio_of_medians(num, den)
    assert u.median == pytest.approx(float(np.exp(np.median(np.log(num)) - np.median(np.log(den)))))
    tau = 1 - math.sqrt(0.975)  # either side's bound missing: 2 tau - tau^2 = 2.5%
    per_side = 1 - 2 * tau
    a = quantile_test(num, q=1.0, p=0.5).confidence_interval(per_side)
    b = quantile_test(den, q=1.0, p=0.5).confidence_interval(per_side)
    assert (u.low, u.high) == pytest.approx((a.low / b.high, a.high / b.low))
    assert u.low <= u.median <= u.high


def test_smallest_sizes_with_an_interval():
    assert min_pairs() == 6 and stats.UNPAIRED_MIN_N == 7
    assert not medians_ratio_has_interval(6, 7) and not medians_ratio_has_interval(7, 6)
    assert medians_ratio_has_interval(7, 7)
    assert not unpaired_has_interval(3, 3) and not unpaired_has_interval(3, 4)
    assert unpaired_has_interval(4, 4) and unpaired_has_interval(3, 5)
    assert not ratio([2.0] * 5, [1.0] * 5, paired=True).has_interval
    assert ratio([2.0] * 6, [1.0] * 6, paired=True).has_interval
    assert not ratio_of_medians([2.0] * 6, [1.0] * 9).has_interval
    assert ratio_of_medians([2.0] * 7, [1.0] * 7).has_interval


def _brute_mann_whitney_cdf(m, n):
    us = []
    for xs in itertools.combinations(range(m + n), m):  # ranks held by x
        ys = [r for r in range(m + n) if r not in xs]
        us.append(sum(x > y for x in xs for y in ys))
    return np.array([sum(u <= k for u in us) for k in range(m * n + 1)]) / len(us)


@pytest.mark.parametrize(("m", "n"), [(1, 1), (2, 3), (4, 4), (3, 5)])
def test_mann_whitney_distribution_is_exact(m, n):
    assert np.allclose(stats._mann_whitney_cdf(m, n), _brute_mann_whitney_cdf(m, n))


@pytest.mark.parametrize(("m", "n"), [(1, 100), (8, 61), (30, 40)])
def test_unequal_sizes_use_the_exact_distribution(m, n):
    exact = stats._critical_rank(stats._mann_whitney_cdf(m, n), 0.95)
    assert stats._unpaired_rank(m, n, 0.95) == exact
    assert unpaired_has_interval(m, n) is (exact >= 1)


def test_ratio_estimates_and_errors():
    r = ratio([10.0, 11.0, 9.0, 10.5], [1.0, 1.1, 0.9, 1.05])  # Hodges-Lehmann, for compare and change points
    assert r.median == pytest.approx(10.0) and r.low <= 10.0 <= r.high and r.method == stats.METHOD_HL
    paired = ratio([10.0, 20.0, 30.0, 40.0, 50.0, 60.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], paired=True)
    assert (paired.median, paired.low, paired.high) == pytest.approx((10.0, 10.0, 10.0))
    with pytest.raises(ValueError, match="<= 0"):
        ratio([1.0], [0.0])
    with pytest.raises(ValueError, match="equal counts"):
        ratio([1.0, 2.0], [1.0], paired=True)


def test_exact_range_and_spread():
    e = exact_range([257, 257, 258])
    assert (e.median, e.low, e.high, e.n) == (257, 257, 258, 3)
    assert math.isnan(e.p_above(1.0))
    assert summarize([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).spread == pytest.approx(max(6 / 3.5, 3.5 / 1) - 1)
    assert math.isnan(summarize([1.0]).spread)


@pytest.mark.parametrize("method", ["median", "paired", "unpaired"])
def test_p_values_decide_exactly_where_the_interval_excludes_the_threshold(method):
    """One estimator per number: a one-sided p-value <= 2.5% exactly when the 95% interval lies past the threshold."""
    rng = np.random.default_rng(11)
    for trial in range(150):
        n = int(rng.integers(6, 40))
        num, den = rng.lognormal(0.1, 0.2, n), rng.lognormal(0.0, 0.2, n + trial % 3)
        s = {"median": summarize(num), "paired": paired_ratio(num, den[:n]), "unpaired": ratio_of_medians(num, den)}[
            method
        ]
        near = [b * (1 + e) for b in (s.low, s.high) for e in (-1e-9, 1e-9)]  # either side of each bound
        for t in [*near, (s.low + s.high) / 2, s.low * 0.99, s.high * 1.01, 1.0]:
            assert (s.p_above(t) <= 0.025) is (s.low > t), (n, t, s)
            assert (s.p_below(t) <= 0.025) is (s.high < t), (n, t, s)


def _coverage(scenario: str, n: int, paired: bool) -> float:
    truth = truths(scenario, n)[0 if paired else 1]
    rng = np.random.default_rng(20261124 + n)
    held = 0
    for _ in range(TRIALS):
        num, den = repeats(scenario, rng, n)
        s = ratio(num, den, paired=True) if paired else ratio_of_medians(num, den)
        held += s.low <= truth <= s.high
    return held / TRIALS


def _cells(smallest: int) -> list:
    """Every scenario at n from the method's minimum to 50; n = 20 and 50 are marked slow (2-5 s each)."""
    return [
        pytest.param(s, n, marks=pytest.mark.slow) if n >= 20 else (s, n)
        for s in SCENARIOS
        for n in (smallest, 10, 20, 50)
    ]


@pytest.mark.parametrize(("scenario", "n"), _cells(6))
def test_paired_coverage_holds_on_benchmark_like_data(scenario, n):
    """2,000 seeded runs: the median of paired ratios is inside its 95% interval at least 94% of the time (a method
    that covers 93% would pass with probability 0.04, one that covers 95% would fail with 0.02)."""
    assert TRIALS >= 2000 and _coverage(scenario, n, paired=True) >= 0.94


@pytest.mark.parametrize(("scenario", "n"), _cells(7))
def test_unpaired_coverage_holds_on_benchmark_like_data(scenario, n):
    assert TRIALS >= 2000 and _coverage(scenario, n, paired=False) >= 0.94


def test_rounds_of_one_process_counted_as_repeats_break_the_interval():
    """The negative control: the same simulation fails an interval whose repeats are not independent (5 rounds of each
    of 10 processes counted as 50 pairs), so the coverage tests above can fail."""
    truth = truths("process", 10)[0]
    rng = np.random.default_rng(5)
    held = 0
    for _ in range(500):
        num, den = rounds("process", rng, 10)
        s = ratio(num.ravel(), den.ravel(), paired=True)
        held += s.low <= truth <= s.high
    assert held / 500 < 0.9  # 85% with this seed


def test_a_pair_with_a_missing_side_is_dropped_whole_never_shifted():
    """Pairs are joined by key: a NaN on one side drops its partner. Dropping each side's NaN apart would pair
    repeat 2's numerator with repeat 3's denominator, and so on."""
    num = np.array([2.0, 4.0, np.nan, 8.0, 10.0, 12.0, 14.0, 16.0])
    den = np.array([1.0, 2.0, 3.0, np.nan, 5.0, 6.0, 7.0, 8.0])
    p = paired_ratio(num, den)
    assert p.n == 6 and (p.median, p.low, p.high) == pytest.approx((2.0, 2.0, 2.0))
    assert ratio(num, den, paired=True) == p


def test_the_one_sided_p_value_of_a_ratio_of_medians_bounds_either_side_missing():
    """x above y: the claim "ratio > 1" holds at every per-side tail from P(Bin(7, 1/2) = 0) = 1/128 on. The
    lower bound of the ratio misses when either side's bound does: probability 1 - (1 - tau)^2 = 2 tau - tau^2."""
    x, y = np.linspace(10.0, 11.0, 7), np.linspace(1.0, 2.0, 7)
    tau = 1 / 128
    assert ratio_of_medians(x, y).p_above(1.0) == pytest.approx(2 * tau - tau**2, rel=1e-12)
    assert ratio_of_medians(y, x).p_below(1.0) == pytest.approx(2 * tau - tau**2, rel=1e-12)


def test_every_point_lies_inside_its_own_interval():
    """By construction, for every method: each estimate is the centre order statistic of what its interval's ends
    are order statistics of. Checked on skewed, tied and tiny samples."""
    rng = np.random.default_rng(12)
    for _ in range(300):
        n, m = int(rng.integers(1, 40)), int(rng.integers(1, 40))
        x = np.round(rng.lognormal(0, 0.5, n), int(rng.integers(0, 3))) + 0.5
        y = np.round(rng.lognormal(0.3, 0.2, m), int(rng.integers(0, 3))) + 0.5
        k = min(n, m)
        for s in (summarize(x), ratio(x, y), ratio_of_medians(x, y), paired_ratio(x[:k], y[:k]), exact_range(x)):
            assert not s.has_interval or s.low <= s.median <= s.high, s
