"""A verdict in two parts: the direction an entry claims and the size against the published figure, one family per
run, and both in `--json` records and headlines."""

from __future__ import annotations

import numpy as np
import pytest
from toy_claims import ratio_claim

from polyperf.analyse.anytime import evidence, min_repeats
from polyperf.analyse.claims import Claim, evaluate
from polyperf.analyse.family import adjust, decision_threshold
from polyperf.record.schema import as_frame
from polyperf.report.terminal import answers_text
from polyperf.report.view import verdict_rows

NOISE = (0.97, 1.0, 1.03, 0.99, 1.02, 1.01, 0.98, 1.0)
TWELVE = NOISE + NOISE[:4]


WEAK = NOISE[: min_repeats()]  # the fewest pairs whose 95% interval exists: it clears 1, but with little to spare


def _inverse_e(n: int) -> float:
    """1/e of a direction all n pairs agree with: the sign e-process of n of n beyond the bound, halved for a
    two-sided question (tests/test_anytime.py pins its values)."""
    return 2 / evidence(n, n)


def _c(m: int) -> float:
    return sum(1 / i for i in range(1, m + 1))


def _frame(cases: dict[str, tuple[float, tuple[float, ...]]], metric="seconds", unit="s"):
    """case -> (how many times slower `slow` is than `fast`, the noise both share repeat by repeat)."""
    rows = []
    for case, (factor, noise) in cases.items():
        for i, f in enumerate(noise):
            for variant, value in (("slow", factor * f), ("fast", f)):
                rows.append({"variant": variant, "metric": metric, "unit": unit, "value": value, "repeat": i})
                rows[-1] |= {"run_id": "r", "suite": "io", "case": case, "implementation": "x", "params": {}}
    return as_frame(rows)


def _one(factor, **kw):
    [v] = evaluate(_frame({"parse": (factor, NOISE)}), [ratio_claim(**kw)])
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
    wide = (0.7, 1.0, 1.3, 0.9, 1.2, 1.1, 0.8, 1.0, 0.75, 1.25, 0.85, 1.15)
    rows = _frame({"parse": (1.0, TWELVE)})
    rows.loc[rows["variant"] == "slow", "value"] = [10.0 * w for w in wide]  # unshared noise: a wide interval
    [v] = evaluate(rows, [ratio_claim(published=11.43, margin=1.1)])
    assert (v.direction, v.size) == ("reproduced", "inconclusive")
    assert v.headline.startswith("reproduced, size inconclusive (")


def test_one_family_per_run_demotes_what_only_its_own_interval_decided():
    # the fewest pairs that bound a 95% interval, all in one direction: e just over 20 each
    cases = {f"c{i}": (2.0, WEAK) for i in range(30)}
    claims = [ratio_claim(case) for case in cases]
    e = 1 / _inverse_e(len(WEAK))
    assert 20 <= e < 30 / 0.05 and _inverse_e(len(WEAK)) * _c(30) > 0.05  # what makes this family demote them
    holm = evaluate(_frame(cases), claims, family="holm")
    assert {v.verdict for v in holm} == {"inconclusive"} and holm[0].family.tests == 30
    held = f"not after the family's control (e = {e:.3g}, adjusted p = {min(1, 30 / e):.3g}; Holm over 30 tests;"
    assert held in holm[0].reason
    by = evaluate(_frame(cases), claims, family="by")  # Benjamini-Yekutieli: 1/e x c(30) > 0.05, none stands
    assert {v.verdict for v in by} == {"inconclusive"} and "Benjamini-Yekutieli over 30 tests" in by[0].reason
    assert by[0].adjusted["direction"] == pytest.approx(_inverse_e(len(WEAK)) * _c(30))
    twelve = {case: (2.0, TWELVE) for case in cases}  # 12 pairs: 1/e x c(30) well under 0.05
    by = evaluate(_frame(twelve), claims, family="by")
    assert {v.verdict for v in by} == {"reproduced"}
    assert by[0].as_record()["p_adjusted"] == {"direction": pytest.approx(_inverse_e(12) * _c(30))}


def test_e_bh_declares_a_family_of_strong_parts_and_demotes_a_lone_one_among_nulls():
    """e-BH declares the R parts whose e >= m / (rate R): thirty parts each at e >= 20 (their 95% interval clears 1)
    all stand, with no c(m); one such part among 29 that the noise floor holds back (entering with p = 1) needs
    e >= 30 / 0.05 = 600."""
    cases = {f"c{i}": (2.0, WEAK) for i in range(30)}
    claims = [ratio_claim(case) for case in cases]
    e = 1 / _inverse_e(len(WEAK))
    ebh = evaluate(_frame(cases), claims)  # the default family
    assert {v.verdict for v in ebh} == {"reproduced"} and ebh[0].family.method == "ebh"
    assert ebh[0].adjusted["direction"] == pytest.approx(1 / e)
    assert ebh[0].parts["direction"].e_value == pytest.approx(e)
    assert ebh[0].as_record()["e_values"] == {"direction": pytest.approx(e)}
    lone = [ratio_claim(case, min_effect=0.01 if case == "c0" else 1.5) for case in cases]
    [first, *rest] = evaluate(_frame(cases), lone)
    assert all("noise" in v.reason and v.adjusted["direction"] == 1.0 for v in rest)
    assert first.verdict == "inconclusive" and first.measured.low > 1
    held = f"not after the family's control (e = {e:.3g}, adjusted p = {min(1, 30 / e):.3g}; e-BH over 30 tests;"
    assert held in first.reason
    [alone] = evaluate(_frame({"c0": (2.0, WEAK)}), [ratio_claim("c0")])  # the same part, alone: declared
    assert alone.verdict == "reproduced" and alone.family.tests == 1


@pytest.mark.parametrize(("method", "c"), [("by", _c(20)), ("ebh", 1.0)])
def test_a_part_held_back_by_the_noise_floor_enters_the_family_with_p_one(method, c):
    """Ten parts 2x with 12 pairs each: their e-values decide them. Ten more whose estimate lies within their
    min_effect of the threshold bring p = 1: the others' adjusted p-values are those of a family of 20 in which only
    the ten count as discoveries (Benjamini-Yekutieli's carries c(20) on top, e-BH's does not)."""
    cases = {f"c{i}": (2.0, TWELVE) for i in range(20)}
    claims = [ratio_claim(case, min_effect=1.5 if int(case[1:]) >= 10 else 0.01) for case in cases]
    verdicts = evaluate(_frame(cases), claims, family=method)
    held = [v for v in verdicts if v.claim.min_effect == 1.5]
    assert {v.verdict for v in held} == {"inconclusive"} and all("noise" in v.reason for v in held)
    assert all(v.adjusted["direction"] == 1.0 for v in held)
    decided = [v for v in verdicts if v.claim.min_effect == 0.01]
    assert {v.verdict for v in decided} == {"reproduced"}
    assert decided[0].adjusted["direction"] == pytest.approx(_inverse_e(12) * 20 / 10 * c)
    assert decided[0].family.tests == 20 and decided[0].family.declarable == 10


def test_exact_counts_are_not_tests_and_keep_their_published_size():
    rows = as_frame(
        [
            {"run_id": "r", "suite": "io", "case": "count", "implementation": "x", "variant": "u", "params": {}}
            | {"metric": "read_syscalls", "unit": "count", "value": 2009109.0, "repeat": 0}
        ]
    )
    # Spelled out, not toy_claims.ratio_claim: this is a value claim with an absolute margin, not the toy ratio.
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


def _held_back_agrees(decided, held, threshold):
    assert {v.verdict for v in decided} == {"reproduced"} and {v.verdict for v in held} == {"inconclusive"}
    level = f"{1 - threshold:.2%}"
    for v in decided:
        assert v.family_level == pytest.approx(1 - threshold) and v.family_interval.low > 1
    for v in held:
        assert v.measured.low > 1  # its own 95% interval clears 1 ...
        wide = v.family_interval  # ... the family's does not (8 pairs bound none at this level: the whole line)
        assert not wide.has_interval or wide.low <= 1
        assert f"at the family's level, {level}" in v.reason
        row = verdict_rows([v])[0]
        assert row.family_interval.endswith(f"at the family's {level}")
        assert f"at the family's {level}" in answers_text([v], done=["io_buffering"], total=7)


def test_an_answer_the_family_held_back_shows_the_interval_it_agrees_with():
    """The 95% interval of a part the family held back lies clear of the bound; the interval at the family's level
    (1 - its decision threshold) touches it, and a decided part's clears it: the printed answer and its numbers
    agree. Five parts of 12 pairs are declared, five of the fewest pairs with an interval are not: BY over 10
    declares at 1/e <= 5 x 0.05 / (10 c(10)) = 0.0085."""
    cases = {f"c{i}": (2.0, TWELVE if i < 5 else WEAK) for i in range(10)}
    verdicts = evaluate(_frame(cases), [ratio_claim(case) for case in cases], family="by")
    _held_back_agrees(verdicts[:5], verdicts[5:], 5 * 0.05 / (10 * _c(10)))
    assert "at the family's level, 99.15%" in verdicts[5].reason


def test_an_answer_e_bh_held_back_shows_the_interval_it_agrees_with():
    """The same under e-BH, which needs parts it cannot declare to hold any back: five parts of 12 pairs, five of the
    fewest pairs and twenty the noise floor holds back (p = 1). e-BH over 30 declares the five at
    1/e <= 5 x 0.05 / 30 = 0.0083; all ten would need 1/e <= 10 x 0.05 / 30."""
    assert _inverse_e(len(WEAK)) > 10 * 0.05 / 30 and _inverse_e(12) <= 5 * 0.05 / 30
    cases = {f"c{i}": (2.0, WEAK if 5 <= i < 10 else TWELVE) for i in range(30)}
    claims = [ratio_claim(case, min_effect=1.5 if i >= 10 else 0.01) for i, case in enumerate(cases)]
    verdicts = evaluate(_frame(cases), claims)
    assert verdicts[0].family.method == "ebh" and verdicts[0].family.tests == 30
    _held_back_agrees(verdicts[:5], verdicts[5:10], 5 * 0.05 / 30)
    assert "at the family's level, 99.17%" in verdicts[5].reason


@pytest.mark.parametrize("method", ["ebh", "by", "holm"])
def test_the_decision_threshold_declares_exactly_what_the_family_declares(method):
    rng = np.random.default_rng(3)
    for _ in range(3000):
        m = int(rng.integers(1, 40))
        p = np.where(rng.random(m) < 0.5, rng.random(m) * 0.01, rng.random(m))
        t = decision_threshold(p.tolist(), method)
        assert ((np.asarray(adjust(p.tolist(), method)) <= 0.05) == (p <= t)).all()


def test_a_skewed_interval_clear_of_the_bound_decides_it():
    """The noise floor toward a bound is the interval's half-width on the side that faces it: 12 pairs whose 95%
    interval (about 1.2-3) lies above 1, median 1.33. Measured with the wider side as the floor (over ±100%), the
    estimate read as "within this run's noise of 1" although the interval it printed cleared 1 by 15% or more."""
    ratios = (1.15, 1.18, 1.2, 1.22, 1.25, 1.3, 1.35, 1.5, 2.0, 2.8, 3.0, 3.2)
    rows = _frame({"parse": (1.0, (1.0,) * 12)})
    rows.loc[rows["variant"] == "slow", "value"] = list(ratios)
    [v] = evaluate(rows, [ratio_claim(min_effect=0.01)])
    m = v.measured
    assert min(abs(r - m.low) for r in ratios) < 1e-9 and min(abs(r - m.high) for r in ratios) < 1e-9  # order stats
    assert m.low >= 1.15 and m.high / m.median - 1 > 1.0
    assert v.verdict == "reproduced" and "lies above 1" in v.reason
    # and a bound the near side reaches stays inconclusive, whatever the far side
    near = round(m.low * 1.01, 2)
    [close] = evaluate(rows, [ratio_claim(min_effect=0.01, rule={"kind": "greater_than", "threshold": near})])
    floor = m.median / m.low - 1
    assert close.verdict == "inconclusive" and f"within this run's noise (±{floor:.1%}) of {near:.3g}" in close.reason
