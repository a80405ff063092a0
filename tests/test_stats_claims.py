"""Pure statistics and the claim rules."""

from __future__ import annotations

import pytest

from polyperf.analyse.claims import Claim, evaluate, load_claims
from polyperf.analyse.stats import ratio, summarize
from polyperf.record.schema import as_frame


def test_summarize_median_and_interval():
    s = summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert s.median == 3.0
    assert s.low <= s.median <= s.high
    assert summarize([5.0]) == summarize([5.0])
    assert summarize([7.0, 7.0]).low == 7.0
    with pytest.raises(ValueError):
        summarize([])


def test_ratio_of_medians():
    r = ratio([10.0, 11.0, 9.0], [1.0, 1.1, 0.9])
    assert r.median == pytest.approx(10.0)
    assert r.low <= 10.0 <= r.high
    paired = ratio([10.0, 20.0], [1.0, 2.0], paired=True)
    assert paired.low == pytest.approx(10.0) and paired.high == pytest.approx(10.0)
    with pytest.raises(ValueError, match="zero"):
        ratio([1.0], [0.0])


def _frame(rows):
    return as_frame(
        [
            {
                "run_id": "r",
                "suite": "io",
                "case": "parse",
                "implementation": "x",
                "unit": "s",
                "repeat": i,
                **row,
                "params": row.get("params", {}),
            }
            for i, row in enumerate(rows)
        ]
    )


def _claim(**kw):
    base = dict(
        id="c",
        suite="io",
        source="s",
        statement="t",
        published=10.0,
        unit="x",
        measure="ratio",
        metric="seconds",
        select={"case": "parse"},
        numerator={"variant": "slow"},
        denominator={"variant": "fast"},
        rule={"kind": "within_factor", "factor": 2.0},
    )
    return Claim(**{**base, **kw})


@pytest.mark.parametrize(("slow", "verdict"), [(10.0, "reproduced"), (100.0, "not reproduced")])
def test_ratio_claim_verdicts(slow, verdict):
    rows = [{"variant": "slow", "metric": "seconds", "value": slow * f} for f in (0.99, 1.0, 1.01)]
    rows += [{"variant": "fast", "metric": "seconds", "value": f} for f in (0.99, 1.0, 1.01)]
    [v] = evaluate(_frame(rows), [_claim()])
    assert v.verdict == verdict
    assert "95% CI" in v.rule_text


def test_straddling_interval_is_inconclusive():
    rows = [{"variant": "slow", "metric": "seconds", "value": v} for v in (2.0, 25.0, 5.0, 40.0, 10.0)]
    rows += [{"variant": "fast", "metric": "seconds", "value": 1.0}]
    [v] = evaluate(_frame(rows), [_claim()])
    assert v.verdict == "inconclusive"


def test_value_claim_and_param_selection():
    rows = [
        {"variant": "unbuffered", "metric": "read_syscalls", "value": 2009109, "params": {"bytes": 2009108}},
        {"variant": "unbuffered", "metric": "read_syscalls", "value": 5, "params": {"bytes": 4}},
    ]
    claim = _claim(
        measure="value",
        metric="read_syscalls",
        published=2009119,
        select={"case": "parse", "params": {"bytes": 2009108}},
        rule={"kind": "within_abs", "tolerance": 11},
    )
    [v] = evaluate(_frame(rows), [claim])
    assert (v.verdict, v.measured.median) == ("reproduced", 2009109)


def test_missing_rows_are_not_measured():
    [v] = evaluate(_frame([{"variant": "fast", "metric": "seconds", "value": 1.0}]), [_claim()])
    assert v.verdict == "not measured"


def test_registry_loads_and_is_well_formed():
    claims = load_claims()
    assert len({c.id for c in claims}) == len(claims) >= 4
    for c in claims:
        assert c.measure in ("ratio", "value")
        assert c.rule["kind"] in ("within_factor", "within_abs", "less_than", "greater_than")
        if c.measure == "ratio":
            assert c.numerator and c.denominator
