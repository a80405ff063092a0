"""One family per run: Holm's and Benjamini-Hochberg's adjusted p-values, against hand-worked values and scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import false_discovery_control

from polyperf.analyse.family import Family, adjust, bh, holm


def test_holm_by_hand():
    # sorted 0.01, 0.02, 0.03, 0.04 times 4, 3, 2, 1 = 0.04, 0.06, 0.06, 0.04 -> running maximum 0.04, 0.06, 0.06, 0.06
    assert holm([0.03, 0.01, 0.04, 0.02]) == pytest.approx([0.06, 0.04, 0.06, 0.06])
    assert holm([0.9, 0.5]) == pytest.approx([1.0, 1.0])  # 0.5 x 2 capped at 1; 0.9 never below the smaller's 1


def test_untested_entries_stay_out_of_the_family():
    adjusted = holm([math.nan, 0.01, math.nan, 0.02])
    assert math.isnan(adjusted[0]) and math.isnan(adjusted[2])
    assert adjusted[1] == pytest.approx(0.02) and adjusted[3] == pytest.approx(0.02)
    assert all(math.isnan(p) for p in bh([math.nan, math.nan])) and holm([]) == []


def test_bh_is_scipys_and_never_stricter_than_holm():
    rng = np.random.default_rng(4)
    p = rng.uniform(0, 0.1, 30)
    assert bh(p) == pytest.approx(false_discovery_control(p, method="bh"))
    assert all(b <= h + 1e-12 for b, h in zip(bh(p), holm(p), strict=True))
    # at the bounds of a quick run: 30 tests at the sign test's smallest p for 6 pairs (0.031) all stand under BH,
    # none under Holm
    tied = [2 * 0.5**6] * 30
    assert max(bh(tied)) <= 0.05 and min(holm(tied)) > 0.05


def test_family_in_words_and_bad_methods():
    fam = Family(41, "bh", 0.05)
    assert fam.describe().startswith("41 tests controlled together by Benjamini-Hochberg at a false discovery rate")
    record = {"tests": 3, "method": "Holm", "error": "family-wise error rate", "rate": 0.05}
    assert Family(3, "holm").as_record() == record
    assert Family(0).describe().startswith("no statistical test")
    with pytest.raises(ValueError, match="family method must be one of bh, holm"):
        adjust([0.1], "bonferroni")
