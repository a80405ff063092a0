"""The interval methods of `analyse.stats`: exact null distributions, agreement with scipy, and coverage by
simulation at the smallest n each method allows."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import quantile_test

from polyperf.analyse import stats
from polyperf.analyse.stats import exact_range, min_pairs, ratio, summarize, unpaired_has_interval


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


def _brute_signed_rank_cdf(n):
    sums = [sum(c) for r in range(n + 1) for c in itertools.combinations(range(1, n + 1), r)]
    return np.array([sum(s <= w for s in sums) for w in range(n * (n + 1) // 2 + 1)]) / 2**n


def _brute_mann_whitney_cdf(m, n):
    us = []
    for xs in itertools.combinations(range(m + n), m):  # ranks held by x
        ys = [r for r in range(m + n) if r not in xs]
        us.append(sum(x > y for x in xs for y in ys))
    return np.array([sum(u <= k for u in us) for k in range(m * n + 1)]) / len(us)


@pytest.mark.parametrize("n", [1, 4, 7])
def test_signed_rank_distribution_is_exact(n):
    assert np.allclose(stats._signed_rank_cdf(n), _brute_signed_rank_cdf(n))


@pytest.mark.parametrize(("m", "n"), [(1, 1), (2, 3), (4, 4), (3, 5)])
def test_mann_whitney_distribution_is_exact(m, n):
    assert np.allclose(stats._mann_whitney_cdf(m, n), _brute_mann_whitney_cdf(m, n))


def test_smallest_sizes_with_an_interval():
    assert min_pairs() == 6
    assert not unpaired_has_interval(3, 3) and not unpaired_has_interval(3, 4)
    assert unpaired_has_interval(4, 4) and unpaired_has_interval(3, 5)
    assert not ratio([2.0] * 5, [1.0] * 5, paired=True).has_interval
    assert ratio([2.0] * 6, [1.0] * 6, paired=True).has_interval


def test_ratio_estimates_and_errors():
    r = ratio([10.0, 11.0, 9.0, 10.5], [1.0, 1.1, 0.9, 1.05])
    assert r.median == pytest.approx(10.0) and r.low <= 10.0 <= r.high
    paired = ratio([10.0, 20.0, 30.0, 40.0, 50.0, 60.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], paired=True)
    assert (paired.median, paired.low, paired.high) == pytest.approx((10.0, 10.0, 10.0))
    with pytest.raises(ValueError, match="<= 0"):
        ratio([1.0], [0.0])
    with pytest.raises(ValueError, match="equal counts"):
        ratio([1.0, 2.0], [1.0], paired=True)


def test_exact_range_and_spread():
    e = exact_range([257, 257, 258])
    assert (e.median, e.low, e.high, e.n) == (257, 257, 258, 3)
    assert summarize([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).spread == pytest.approx(max(6 / 3.5, 3.5 / 1) - 1)
    assert math.isnan(summarize([1.0]).spread)


def _noise(kind, rng, size):
    if kind == "lognormal":
        return rng.lognormal(0.0, 0.3, size)
    return np.exp(0.1 * rng.standard_t(2, size))  # heavy tails on a log scale


@pytest.mark.parametrize("kind", ["lognormal", "heavy-tailed"])
def test_coverage_at_the_smallest_n(kind):
    """2,000 synthetic runs per method at the smallest n that has an interval: the truth is inside >= 93%."""
    rng = np.random.default_rng(20261124)
    trials, truth = 2000, 2.0
    held = {"median": 0, "unpaired": 0, "paired": 0}
    for _ in range(trials):
        x = _noise(kind, rng, 6)
        s = summarize(x)
        held["median"] += s.low <= 1.0 <= s.high  # both noises have median 1
        u = ratio(truth * _noise(kind, rng, 4), _noise(kind, rng, 4))
        held["unpaired"] += u.low <= truth <= u.high
        shared = rng.lognormal(0.0, 0.5, 6)  # drift a repeat shares between the pair
        p = ratio(truth * shared * _noise(kind, rng, 6), shared * _noise(kind, rng, 6), paired=True)
        held["paired"] += p.low <= truth <= p.high
    for method, count in held.items():
        assert count / trials >= 0.93, f"{method}: {count / trials:.3f}"


@pytest.mark.parametrize(("m", "n"), [(1, 100), (8, 61), (30, 40)])
def test_unequal_sizes_use_the_exact_distribution(m, n):
    exact = stats._critical_rank(stats._mann_whitney_cdf(m, n), 0.95)
    assert stats._unpaired_rank(m, n, 0.95) == exact
    assert unpaired_has_interval(m, n) is (exact >= 1)
