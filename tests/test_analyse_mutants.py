"""Facts of analyse/stats.py that its own tests left unchecked (each kills mutants `nox -s mutants` found
surviving): exact Summary fields on small samples, the minimum n of each interval, every error message, and
the normal approximations above the exact limit against the exact null distributions."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from polyperf.analyse import stats
from polyperf.analyse.stats import Summary, exact_range, min_pairs, ratio, summarize, unpaired_has_interval


def _same(got: Summary, want: Summary) -> None:
    assert got.method == want.method and got.n == want.n and got.min_n == want.min_n
    for name in ("median", "low", "high"):
        a, b = getattr(got, name), getattr(want, name)
        assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-12), (name, a, b)


def test_summaries_of_small_samples_field_by_field():
    _same(summarize([3, 1, 2]), Summary(2.0, math.nan, math.nan, 3, stats.METHOD_MEDIAN, 6))
    _same(summarize([6, 1, 5, 2, 4, 3]), Summary(3.5, 1.0, 6.0, 6, stats.METHOD_MEDIAN, 6))
    _same(
        summarize(["1", 2, 3, 4, 5, 6, 7, 8, 9, 10, float("nan")]), Summary(5.5, 2.0, 9.0, 10, stats.METHOD_MEDIAN, 6)
    )
    _same(exact_range([3, 1, 2, math.inf]), Summary(2.0, 1.0, 3.0, 3, stats.METHOD_EXACT, 1))
    assert stats.MEDIAN_MIN_N == 6 and stats._median_min_n() == 6 and stats._median_min_n(0.99) == 8


def test_every_empty_or_non_positive_input_is_refused_by_name():
    for summary in (summarize, exact_range):
        with pytest.raises(ValueError, match=r"^no finite values to summarize$"):
            summary([math.nan])
    with pytest.raises(ValueError, match=r"^ratio needs values on both sides$"):
        ratio([1.0], [])
    empty, one = np.array([]), np.array([1.0])
    for side, args in (("numerator", (empty, one)), ("denominator", (one, empty))):
        with pytest.raises(ValueError, match=rf"^ratio needs values in the {side}$"):
            stats._unpaired(*args, 0.95)
    with pytest.raises(ValueError, match=r"^ratio denominator has values <= 0: a ratio of medians needs positive"):
        ratio([1.0], [0.0])
    with pytest.raises(ValueError, match=r"^paired ratio needs equal counts, got 2 and 1$"):
        ratio([1.0, 2.0], [1.0], paired=True)


def test_minimum_sizes_of_the_ratio_intervals():
    assert min_pairs() == 6 and min_pairs(0.99) == 8
    assert unpaired_has_interval(4, 4) and not unpaired_has_interval(3, 4) and not unpaired_has_interval(4, 3)
    assert unpaired_has_interval(1, 50) and unpaired_has_interval(50, 1)  # C(51, 1) = 51 orderings
    assert not unpaired_has_interval(0, 100) and not unpaired_has_interval(100, 0)


def test_paired_ratio_is_hodges_lehmann_of_the_log_ratios_with_the_signed_rank_interval():
    num = [2.0, 3.0, 5.0, 7.0, 11.0, 13.0, 17.0, 19.0]
    den = [1.0, 2.0, 2.0, 3.0, 5.0, 5.0, 7.0, 8.0]
    d = np.log(num) - np.log(den)
    walsh = np.sort([(a + b) / 2 for a, b in itertools.combinations_with_replacement(d, 2)])
    k = 4  # the signed-rank critical value for 8 pairs at 95% is 3 (tables): the 4th Walsh average from each end
    assert stats._paired_rank(8, 0.95) == k
    _same(
        ratio(num, den, paired=True),
        Summary(
            float(np.exp(np.median(walsh))),
            float(np.exp(walsh[k - 1])),
            float(np.exp(walsh[-k])),
            8,
            stats.METHOD_PAIRED,
            6,
        ),
    )
    few = ratio(num[:5], den[:5], paired=True)
    assert (
        math.isnan(few.low) and math.isnan(few.high) and (few.n, few.min_n, few.method) == (5, 6, stats.METHOD_PAIRED)
    )
    assert few.median == pytest.approx(
        float(
            np.exp(
                np.median(
                    walsh[:0]
                    if False
                    else np.sort([(a + b) / 2 for a, b in itertools.combinations_with_replacement(d[:5], 2)])
                )
            )
        )
    )


def test_unpaired_ratio_below_its_minimum_keeps_the_estimate_and_the_smaller_n():
    few = ratio([2.0, 4.0, 8.0, 16.0], [1.0, 2.0, 4.0])  # C(7, 3) = 35 orderings: none as rare as 2.5%
    _same(few, Summary(2.0**1.5, math.nan, math.nan, 3, stats.METHOD_UNPAIRED, 4))


@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_normal_approximations_above_the_exact_limit_agree_with_the_exact_distributions(level):
    n = stats._EXACT_LIMIT + 1
    exact_paired = stats._critical_rank(stats._signed_rank_cdf(n), level)
    assert abs(stats._paired_rank(n, level) - exact_paired) <= max(1, 0.01 * exact_paired)  # the ranks, not
    # their tail probabilities, are compared: 1% of the rank is far finer than any wrong mean or variance
    exact_unpaired = stats._critical_rank(stats._mann_whitney_cdf(n, 8), level)
    assert abs(stats._unpaired_rank(n, 8, level) - exact_unpaired) <= max(1, 0.03 * exact_unpaired)  # unbalanced:
    # the approximation is coarser there (107 for 110 at 99%)
    exact_square = stats._critical_rank(stats._mann_whitney_cdf(n, n), level)
    assert abs(stats._unpaired_rank(n, n, level) - exact_square) <= max(1, 0.01 * exact_square)
    assert stats._normal_rank(100.0, 10.0, 0.95) == math.floor(100 - 1.959963984540054 * 10 + 0.5)
    assert stats._normal_rank(1.0, 10.0, 0.95) == 0
