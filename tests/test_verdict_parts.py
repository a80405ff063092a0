"""A verdict in two parts: the direction an entry claims and the size against the published figure, one family per
run, and both in `--json` records and headlines."""

from __future__ import annotations

import numpy as np
import pytest

from polyperf.analyse.claims import Claim, evaluate
from polyperf.analyse.family import adjust, decision_threshold
from polyperf.record.schema import as_frame
from polyperf.report.terminal import answers_text
from polyperf.report.view import verdict_rows

NOISE = (0.97, 1.0, 1.03, 0.99, 1.02, 1.01, 0.98, 1.0)


def _frame(cases: dict[str, tuple[float, tuple[float, ...]]], metric="seconds", unit="s"):
    """case -> (how many times slower `slow` is than `fast`, the noise both share repeat by repeat)."""
    rows = []
    for case, (factor, noise) in cases.items():
        for i, f in enumerate(noise):
            for variant, value in (("slow", factor * f), ("fast", f)):
                rows.append({"variant": variant, "metric": metric, "unit": unit, "value": value, "repeat": i})
                rows[-1] |= {"run_id": "r", "suite": "io", "case": case, "implementation": "x", "params": {}}
    return as_frame(rows)


def _claim(case="parse", **kw):
    base = dict(
        id=case,
        suite="io",
        source="s",
        statement="t",
        unit="x",
        measure="ratio",
        metric="seconds",
        select={"case": case},
        numerator={"variant": "slow"},
        denominator={"variant": "fast"},
        paired=True,
        rule={"kind": "greater_than", "threshold": 1.0},
    )
    return Claim(**{**base, **kw})


def _one(factor, **kw):
    [v] = evaluate(_frame({"parse": (factor, NOISE)}), [_claim(**kw)])
    return v


def test_much_slower_than_published_is_reproduced_and_larger():
    v = _one(63.0, published=11.43, margin=2.0)
    assert (v.verdict, v.direction, v.size) == ("reproduced", "reproduced", "larger")
    assert v.headline == "reproduced, 5.5x larger than published (63x vs 11.43x)"
    r = v.as_record()
    assert r["size_ratio"] == pytest.approx(63 / 11.43) and r["size_ci_low"] == pytest.approx(63 / 11.43)
    assert (r["direction"], r["size"], r["headline"], r["family"]["tests"]) == ("reproduced", "larger", v.headline, 2)


@pytest.mark.parametrize(
    ("factor", "size", "words"),
    [(12.0, "as published", "reproduced, as published (12x vs 11.43x)"), (3.0, "smaller", "reproduced, 3.8x smaller")],
)
def test_size_within_and_below_the_margin(factor, size, words):
    v = _one(factor, published=11.43, margin=2.0)
    assert (v.direction, v.size) == ("reproduced", size) and v.headline.startswith(words)


def test_a_direction_only_claim_shows_no_size():
    v = _one(63.0)
    assert (v.direction, v.size, v.size_ratio, v.headline) == ("reproduced", None, None, "reproduced (63x)")
    r = v.as_record()
    assert (r["size"], r["size_ratio"], r["size_ci_low"], r["size_ci_high"], r["published"]) == (None,) * 5


def test_the_opposite_direction_is_not_reproduced():
    v = _one(0.5, published=0.852, margin=1.25, rule={"kind": "greater_than", "threshold": 1.0})
    assert (v.verdict, v.direction, v.size) == ("not reproduced", "opposite", "smaller")
    assert v.headline == "opposite direction, 1.7x smaller than published (0.5x vs 0.852x)"


def test_a_size_the_interval_straddles_is_inconclusive_but_the_direction_stands():
    wide = (0.7, 1.0, 1.3, 0.9, 1.2, 1.1, 0.8, 1.0)
    rows = _frame({"parse": (1.0, NOISE)})
    rows.loc[rows["variant"] == "slow", "value"] = [10.0 * w for w in wide]  # unshared noise: a wide interval
    [v] = evaluate(rows, [_claim(published=11.43, margin=1.1)])
    assert (v.direction, v.size) == ("reproduced", "inconclusive")
    assert v.headline.startswith("reproduced, size inconclusive (")


def test_one_family_per_run_demotes_what_only_its_own_interval_decided():
    six = NOISE[:6]  # 6 pairs, all in one direction: two-sided sign-test p = 2 x 0.5^6 = 0.031 each
    cases = {f"c{i}": (2.0, six) for i in range(30)}
    claims = [_claim(case) for case in cases]
    holm = evaluate(_frame(cases), claims, family="holm")
    assert {v.verdict for v in holm} == {"inconclusive"} and holm[0].family.tests == 30
    assert "not after the family's control (p = 0.0312, adjusted 0.938; Holm over 30 tests;" in holm[0].reason
    by = evaluate(_frame(cases), claims)  # Benjamini-Yekutieli: 0.031 x c(30) = 0.12, none stands
    assert {v.verdict for v in by} == {"inconclusive"} and "Benjamini-Yekutieli over 30 tests" in by[0].reason
    twelve = NOISE + NOISE[:4]  # 12 pairs: p = 2 x 0.5^12 = 0.00049 each, adjusted 0.00049 x c(30) = 0.0019
    by = evaluate(_frame({case: (2.0, twelve) for case in cases}), claims)
    assert {v.verdict for v in by} == {"reproduced"}
    c30 = sum(1 / i for i in range(1, 31))
    assert by[0].as_record()["p_adjusted"] == {"direction": pytest.approx(2 * 0.5**12 * c30)}


def test_a_part_held_back_by_the_noise_floor_enters_the_family_with_p_one():
    """Ten parts 2x with 12 pairs each: their smallest p-values decide them. Ten more whose estimate lies within
    their min_effect of the threshold bring p = 1: the others' adjusted p-values are those of a family of 20 in
    which only the ten count as discoveries."""
    twelve = NOISE + NOISE[:4]
    cases = {f"c{i}": (2.0, twelve) for i in range(20)}
    claims = [_claim(case, min_effect=1.5 if int(case[1:]) >= 10 else 0.01) for case in cases]
    verdicts = evaluate(_frame(cases), claims)
    held = [v for v in verdicts if v.claim.min_effect == 1.5]
    assert {v.verdict for v in held} == {"inconclusive"} and all("noise" in v.reason for v in held)
    assert all(v.adjusted["direction"] == 1.0 for v in held)
    c20 = sum(1 / i for i in range(1, 21))
    decided = [v for v in verdicts if v.claim.min_effect == 0.01]
    assert decided[0].adjusted["direction"] == pytest.approx(2 * 0.5**12 * 20 / 10 * c20)
    assert decided[0].family.tests == 20 and decided[0].family.declarable == 10


def test_exact_counts_are_not_tests_and_keep_their_published_size():
    rows = as_frame(
        [
            {"run_id": "r", "suite": "io", "case": "count", "implementation": "x", "variant": "u", "params": {}}
            | {"metric": "read_syscalls", "unit": "count", "value": 2009109.0, "repeat": 0}
        ]
    )
    claim = Claim(
        id="sys",
        suite="io",
        source="s",
        statement="t",
        unit="syscalls",
        measure="value",
        metric="read_syscalls",
        select={"case": "count"},
        published=2009119,
        margin_abs=11,
        rule={"kind": "within_abs", "center": 2009109, "tolerance": 1},
    )
    [v] = evaluate(rows, [claim])
    assert (v.verdict, v.direction, v.size) == ("reproduced", None, "as published")
    assert v.headline == "reproduced, as published (2,009,109 vs 2,009,119 syscalls)"
    assert v.family.tests == 0 and v.as_record()["p_values"] == {}


def test_an_answer_the_family_held_back_shows_the_interval_it_agrees_with():
    """The 95% interval of a part the family held back lies clear of the bound; the interval at the family's level
    (1 - its decision threshold) touches it, and a decided part's clears it: the printed answer and its numbers
    agree. Five parts of 12 pairs are declared (p = 0.00049), five of 6 pairs (p = 0.031) are not: BY over 10
    declares at p <= 5 x 0.05 / (10 c(10)) = 0.0085."""
    twelve, six = NOISE + NOISE[:4], NOISE[:6]
    cases = {f"c{i}": (2.0, twelve if i < 5 else six) for i in range(10)}
    verdicts = evaluate(_frame(cases), [_claim(case) for case in cases])
    decided, held = verdicts[:5], verdicts[5:]
    threshold = 5 * 0.05 / (10 * sum(1 / i for i in range(1, 11)))
    assert {v.verdict for v in decided} == {"reproduced"} and {v.verdict for v in held} == {"inconclusive"}
    for v in decided:
        assert v.family_level == pytest.approx(1 - threshold) and v.family_interval.low > 1
    for v in held:
        assert v.measured.low > 1  # its own 95% interval clears 1 ...
        wide = v.family_interval  # ... the family's does not (6 pairs bound none at 99.15%: the whole line)
        assert not wide.has_interval or wide.low <= 1
        assert "at the family's level, 99.15%" in v.reason
        row = verdict_rows([v])[0]
        assert row.family_interval.endswith("at the family's 99.15%")
        assert "at the family's 99.15%" in answers_text([v], done=["io_buffering"], total=7)


@pytest.mark.parametrize("method", ["by", "holm"])
def test_the_decision_threshold_declares_exactly_what_the_family_declares(method):
    rng = np.random.default_rng(3)
    for _ in range(3000):
        m = int(rng.integers(1, 40))
        p = np.where(rng.random(m) < 0.5, rng.random(m) * 0.01, rng.random(m))
        t = decision_threshold(p.tolist(), method)
        assert ((np.asarray(adjust(p.tolist(), method)) <= 0.05) == (p <= t)).all()


def test_a_skewed_interval_clear_of_the_bound_decides_it():
    """The noise floor toward a bound is the interval's half-width on the side that faces it: 12 pairs whose 95%
    interval is 1.2-2.8 (median 1.33) lie above 1. Measured with the wider side as the floor (±111%), the estimate
    read as "within this run's noise of 1" although the interval it printed cleared 1 by 20%."""
    ratios = (1.15, 1.18, 1.2, 1.22, 1.25, 1.3, 1.35, 1.5, 2.0, 2.8, 3.0, 3.2)
    rows = _frame({"parse": (1.0, (1.0,) * 12)})
    rows.loc[rows["variant"] == "slow", "value"] = list(ratios)
    [v] = evaluate(rows, [_claim(min_effect=0.01)])
    assert (v.measured.low, v.measured.high) == (1.2, 2.8)
    assert v.verdict == "reproduced" and "lies above 1" in v.reason
    # and a bound the near side reaches stays inconclusive, whatever the far side
    [near] = evaluate(rows, [_claim(min_effect=0.01, rule={"kind": "greater_than", "threshold": 1.21})])
    assert near.verdict == "inconclusive" and "within this run's noise (±10.4%) of 1.21" in near.reason
