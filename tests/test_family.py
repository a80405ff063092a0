"""One family per run: e-BH's, Holm's and Benjamini-Yekutieli's adjusted p-values, against hand-worked values, the
definition and scipy; a part that cannot be declared does not lower the bar for the others."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import false_discovery_control

from polyperf.analyse.family import DEFAULT, Family, adjust, by, control, ebh, holm


def test_holm_by_hand():
    # sorted 0.01, 0.02, 0.03, 0.04 times 4, 3, 2, 1 = 0.04, 0.06, 0.06, 0.04 -> running maximum 0.04, 0.06, 0.06, 0.06
    assert holm([0.03, 0.01, 0.04, 0.02]) == pytest.approx([0.06, 0.04, 0.06, 0.06])
    assert holm([0.9, 0.5]) == pytest.approx([1.0, 1.0])  # 0.5 x 2 capped at 1; 0.9 never below the smaller's 1


def test_untested_entries_stay_out_of_the_family():
    adjusted = holm([math.nan, 0.01, math.nan, 0.02])
    assert math.isnan(adjusted[0]) and math.isnan(adjusted[2])
    assert adjusted[1] == pytest.approx(0.02) and adjusted[3] == pytest.approx(0.02)
    assert all(math.isnan(p) for p in by([math.nan, math.nan])) and holm([]) == []


def test_by_is_scipys_and_bh_times_the_harmonic_sum():
    rng = np.random.default_rng(4)
    p = rng.uniform(0, 0.1, 30)
    assert by(p) == pytest.approx(false_discovery_control(p, method="by"))
    c = sum(1 / i for i in range(1, 31))
    bh = false_discovery_control(p, method="bh")
    assert by(p) == pytest.approx(np.minimum(1.0, bh * c))
    # 30 tests at 12 pairs' largest two-sided sign e-value (1/e = 26/8191 = 0.0032) all stand; at 8 pairs' (0.035)
    # none can
    assert max(by([26 / 8191] * 30)) <= 0.05 and min(by([18 / 511] * 30)) > 0.05


def test_ebh_declares_the_largest_e_values_that_clear_m_over_rate_r():
    """e-BH (Wang & Ramdas 2022), from its definition: R = the largest r such that the r-th largest e-value is at
    least m / (rate r); those R parts are declared. The adjusted values declare exactly them at the rate."""
    rng = np.random.default_rng(5)
    for _ in range(2000):
        m = int(rng.integers(1, 40))
        e = np.where(rng.random(m) < 0.4, rng.uniform(1, 2000, m), rng.uniform(0, 5, m))
        ranked = np.sort(e)[::-1]
        r = max((r for r in range(1, m + 1) if ranked[r - 1] >= m / (0.05 * r)), default=0)
        expected = e >= ranked[r - 1] if r else np.zeros(m, bool)
        inverse = [1 / x if x > 0 else 1.0 for x in e]
        assert ((np.asarray(ebh(inverse)) <= 0.05) == expected).all()
    # no c(m): 30 parts at e = 28.4 (8 pairs, all one way) all stand, where Benjamini-Yekutieli declares none
    assert max(ebh([18 / 511] * 30)) <= 0.05 and DEFAULT == "ebh" and adjust([18 / 511] * 30) == ebh([18 / 511] * 30)
    untested, alone, other = ebh([math.nan, 0.01, math.nan])
    assert math.isnan(untested) and math.isnan(other) and alone == pytest.approx(0.01)  # a NaN is not a test


def test_a_part_that_cannot_be_declared_does_not_lower_the_bar_for_the_others():
    """7 true nulls (uniform p, declarable when their interval decides: p <= 5%) beside 3 parts the noise floor holds
    back with tiny p-values. Fed whole to Benjamini-Hochberg, the 3 count as discoveries and 13% of runs declare a
    false outcome; entered with p = 1 under Benjamini-Yekutieli, at most the rate. (e-BH below.)"""
    rng = np.random.default_rng(31)
    runs, false_bh, false_family = 20_000, 0, 0
    held = [0.001, 0.002, 0.003]
    for _ in range(runs):
        nulls = rng.uniform(size=7).tolist()
        p = held + nulls
        declarable = [False] * 3 + [q <= 0.05 for q in nulls]
        bh = false_discovery_control(p, method="bh")[3:]
        false_bh += any(b <= 0.05 and ok for b, ok in zip(bh, declarable[3:], strict=True))
        adjusted = control(p, declarable, "by")[3:]
        false_family += any(a <= 0.05 for a in adjusted)
    assert false_bh / runs > 0.12  # the defect: 13.3% in the simulation
    assert false_family / runs <= 0.05
    held_back, untested = control([0.001, math.nan], [False, True])
    assert held_back == 1.0 and math.isnan(untested)


def test_under_e_bh_a_part_that_cannot_be_declared_does_not_lower_the_bar_either():
    """Seven parts at e = 25 (their own interval decides) beside three the noise floor holds back at e = 1000. Fed
    whole, e-BH counts ten discoveries and declares the seven (25 >= 10 / (0.05 x 10)); with the three entered at
    p = 1, the seven alone need e >= 10 / (0.05 x 7) = 28.6, and none is declared."""
    inverse = [1 / 1000] * 3 + [1 / 25] * 7
    declarable = [False] * 3 + [True] * 7
    assert max(ebh(inverse)) <= 0.05
    adjusted = control(inverse, declarable)
    assert adjusted[:3] == [1.0] * 3 and min(adjusted[3:]) == pytest.approx(0.04 * 10 / 7) and min(adjusted[3:]) > 0.05
    assert max(control([1 / 1000] * 3 + [1 / 30] * 7, declarable)[3:]) <= 0.05  # e = 30 >= 28.6: the seven stand


def test_family_in_words_and_bad_methods():
    assert (
        Family(41, declarable=12)
        .describe()
        .startswith("41 tests controlled together by e-BH at a false discovery rate of 5%")
    )
    fam = Family(41, "by", 0.05, declarable=12)
    text = fam.describe()
    assert text.startswith("41 tests controlled together by Benjamini-Yekutieli at a false discovery rate of 5%")
    assert "any dependence" in text and "12 decided by their own interval" in text
    record = {"tests": 3, "method": "Holm", "error": "family-wise error rate", "rate": 0.05}
    assert Family(3, "holm").as_record() == record
    assert Family(0).describe().startswith("no statistical test")
    with pytest.raises(ValueError, match="family method must be one of ebh, by, holm"):
        adjust([0.1], "bh")  # Benjamini-Hochberg needs positive dependence, which this family does not have
