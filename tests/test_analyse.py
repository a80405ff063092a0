"""Facts of analyse/ with exact values (what `nox -s mutants` asks of its tests):
exact Summary fields on small samples, the minimum n of each interval, every error message, the normal
approximations above the exact limit against the exact null distributions; the claims file's format and
refusals, and a verdict's record."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from polyperf.analyse import claims as claims_mod
from polyperf.analyse import compare as compare_mod
from polyperf.analyse import judge as judge_mod
from polyperf.analyse import stats
from polyperf.analyse.claims import Claim, Verdict, evaluate, load_claims
from polyperf.analyse.compare import (
    compare,
    to_markdown,
    too_few_samples,
    verdict_changes,
    worst_regression,
)
from polyperf.analyse.stats import Summary, exact_range, min_pairs, ratio, summarize, unpaired_has_interval
from polyperf.analyse.verdict_records import judge
from polyperf.record.schema import as_frame
from polyperf.report import compare_figure as compare_figure_mod
from polyperf.report.compare_figure import compare_figure


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
            stats._hodges_lehmann(*args, 0.95)
    with pytest.raises(ValueError, match=r"^ratio denominator has values <= 0: a ratio of medians needs positive"):
        ratio([1.0], [0.0])
    with pytest.raises(ValueError, match=r"^paired ratio needs equal counts, got 2 and 1$"):
        ratio([1.0, 2.0], [1.0], paired=True)


def test_minimum_sizes_of_the_ratio_intervals():
    assert min_pairs() == 6 and min_pairs(0.99) == 8
    assert stats.medians_ratio_has_interval(7, 7) and not stats.medians_ratio_has_interval(6, 7)
    assert not stats.medians_ratio_has_interval(7, 6)
    assert unpaired_has_interval(4, 4) and not unpaired_has_interval(3, 4) and not unpaired_has_interval(4, 3)
    assert unpaired_has_interval(1, 50) and unpaired_has_interval(50, 1)  # C(51, 1) = 51 orderings
    assert not unpaired_has_interval(0, 100) and not unpaired_has_interval(100, 0)
    tau = stats._per_side_tail(0.95)  # either side's bound missing: 2 tau - tau^2 = 2.5% at each end
    assert 2 * tau - tau**2 == pytest.approx(0.025)


def test_paired_ratio_is_the_median_of_the_log_ratios_with_the_sign_test_interval():
    num = [2.0, 3.0, 5.0, 7.0, 11.0, 13.0, 17.0, 19.0]
    den = [1.0, 2.0, 2.0, 3.0, 5.0, 5.0, 7.0, 8.0]
    d = np.sort(np.log(num) - np.log(den))
    k = 1  # 8 pairs at 95%: P(Bin(8, 1/2) <= 0) = 0.0039 <= 0.025 < P(<= 1) = 0.035, so [d_(1), d_(8)]
    assert stats._median_rank(8, 0.95) == k
    _same(
        ratio(num, den, paired=True),
        Summary(float(np.exp(np.median(d))), float(np.exp(d[k - 1])), float(np.exp(d[-k])), 8, stats.METHOD_PAIRED, 6),
    )
    few = ratio(num[:5], den[:5], paired=True)
    assert math.isnan(few.low) and (few.n, few.min_n, few.method) == (5, 6, stats.METHOD_PAIRED)
    assert few.median == pytest.approx(float(np.exp(np.median(np.log(num[:5]) - np.log(den[:5])))))
    assert few.p_above(1.0) == pytest.approx(0.5**5)  # no ratio at or below 1 among 5: the sign test's smallest p


def test_unpaired_ratio_below_its_minimum_keeps_the_estimate_and_the_smaller_n():
    few = stats.ratio_of_medians([2.0, 4.0, 8.0, 16.0], [1.0, 2.0, 4.0])
    _same(few, Summary(math.sqrt(32.0) / 2.0, math.nan, math.nan, 3, stats.METHOD_UNPAIRED, 7))
    hl = ratio([2.0, 4.0, 8.0, 16.0], [1.0, 2.0, 4.0])  # C(7, 3) = 35 orderings: none as rare as 2.5%
    _same(hl, Summary(2.0**1.5, math.nan, math.nan, 3, stats.METHOD_HL, 4))


@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_normal_approximations_above_the_exact_limit_agree_with_the_exact_distributions(level):
    m = stats._EXACT_CELLS // 8 + 1
    exact_unpaired = stats._critical_rank(stats._mann_whitney_cdf(m, 8), level)
    assert abs(stats._unpaired_rank(m, 8, level) - exact_unpaired) <= max(1, 0.03 * exact_unpaired)  # unbalanced:
    # the approximation is coarser there
    side = math.isqrt(stats._EXACT_CELLS) + 1
    exact_square = stats._critical_rank(stats._mann_whitney_cdf(side, side), level)
    assert abs(stats._unpaired_rank(side, side, level) - exact_square) <= max(1, 0.01 * exact_square)
    assert stats._normal_rank(100.0, 10.0, 0.95) == math.floor(100 - 1.959963984540054 * 10 + 0.5)
    assert stats._normal_rank(1.0, 10.0, 0.95) == 0


# --- claims: the registry format and a verdict's record --------------------------------------------------

ENTRY = """
[[claims]]
id = "{id}"
suite = "io"
source = "article"
statement = "slow is twice fast"
unit = "x"
measure = "ratio"
metric = "seconds"
select = {{ case = "parse" }}
numerator = {{ variant = "slow" }}
denominator = {{ variant = "fast" }}
published = 2.0
rule = {{ kind = "within_factor", factor = 1.5 }}
{extra}
"""


def _claims_file(tmp_path, text):
    path = tmp_path / "claims.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_claims_file_loads_with_its_defaults(tmp_path):
    [claim] = load_claims(_claims_file(tmp_path, ENTRY.format(id="a", extra="")))
    assert (claim.id, claim.kind, claim.paired, claim.note, claim.requires) == ("a", "claim", False, "", "")
    assert claim.min_effect == 0.01 and claim.center == 2.0 and not claim.direction_only
    assert dict(claim.numerator) == {"variant": "slow"} and dict(claim.select) == {"case": "parse"}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('colour = "red"', "colour: unknown field (known: "),
        ('kind = "guess"', "kind: must be one of claim, check, derived, not 'guess'"),
    ],
)
def test_a_claims_file_with_a_bad_field_is_refused_in_one_line(tmp_path, extra, message):
    path = _claims_file(tmp_path, ENTRY.format(id="a", extra=extra))
    with pytest.raises(ValueError) as info:
        load_claims(path)
    assert str(info.value).startswith(f"claims file {path}: entry 'a': {message}")


def _refusal(tmp_path, text):
    path = _claims_file(tmp_path, text)
    with pytest.raises(ValueError) as info:
        load_claims(path)
    return str(info.value).removeprefix(f"claims file {path}: ")


def test_every_malformed_entry_names_itself_and_what_is_wrong(tmp_path):
    entry = ENTRY.format(id="a", extra="")
    assert _refusal(tmp_path, entry.replace('suite = "io"\n', "")) == "entry 'a': suite: missing (required)"
    assert _refusal(tmp_path, entry.replace('"ratio"', '"mean"')) == (
        "entry 'a': measure: must be one of ratio, value, not 'mean'"
    )
    assert _refusal(tmp_path, entry.replace('denominator = { variant = "fast" }\n', "")) == (
        "entry 'a': denominator: a ratio needs it"
    )
    assert _refusal(tmp_path, entry.replace('"within_factor"', '"about"')) == (
        "entry 'a': rule.kind: must be one of within_factor, within_abs, less_than, greater_than, found text 'about'"
    )
    assert _refusal(tmp_path, entry.replace("published = 2.0\n", "")) == (
        "entry 'a': rule: a within_factor rule needs `published` or `rule.center` (its centre)"
    )
    assert _refusal(tmp_path, entry.replace("factor = 1.5", "tolerance = 1")) == (
        "entry 'a': rule: a within_factor rule needs rule.factor; "
        "rule.tolerance: unknown key of a within_factor rule (known: center, factor, kind, why)"
    )
    assert _refusal(tmp_path, entry.replace('kind = "within_factor", factor = 1.5', 'kind = "less_than"')) == (
        "entry 'a': rule: a less_than rule needs rule.threshold"
    )
    assert _refusal(tmp_path, entry + ENTRY.format(id="a", extra="")) == "ids used twice: a"
    assert _refusal(tmp_path, "[[claims]\n").startswith("not valid TOML: ")
    assert load_claims(_claims_file(tmp_path, "")) == []


def test_a_verdict_record_has_every_field(tmp_path):
    [claim] = load_claims(_claims_file(tmp_path, ENTRY.format(id="a", extra='note = "n"')))
    measured = Summary(2.0, 1.5, 2.5, 6, stats.METHOD_PAIRED, 6)
    record = Verdict(claim, "reproduced", measured, "within ×1.5 of 2", "ok", 0.25, 6, 6).as_record()
    assert record == {
        "claim": "a",
        "suite": "io",
        "kind": "claim",
        "verdict": "reproduced",
        "reason": "ok",
        "measured": 2.0,
        "ci_low": 1.5,
        "ci_high": 2.5,
        "level": 0.95,
        "family_level": None,
        "family_ci_low": None,
        "family_ci_high": None,
        "n": 6,
        "n_numerator": 6,
        "n_denominator": 6,
        "noise_floor": 0.25,
        "method": stats.METHOD_PAIRED,
        "statement": "slow is twice fast",
        "published": 2.0,
        "direction_only": False,
        "unit": "x",
        "rule": "within ×1.5 of 2",
        "source": "article",
        "direction": None,
        "size": None,
        "size_ratio": None,
        "size_ci_low": None,
        "size_ci_high": None,
        "margin": None,
        "margin_abs": None,
        "headline": "reproduced",
        "p_values": {},
        "e_values": {},
        "p_adjusted": {},
        "family": None,
    }
    sized = Verdict(claim, "reproduced", measured, "r", size="as published", headline="h").as_record()
    assert (sized["size_ratio"], sized["size_ci_low"], sized["size_ci_high"], sized["headline"]) == (
        1.0,
        0.75,
        1.25,
        "h",
    )
    exact = Verdict(claim, "reproduced", Summary(3.0, 3.0, 3.0, 2, stats.METHOD_EXACT, 1), "r").as_record()
    assert exact["level"] is None and (exact["ci_low"], exact["ci_high"], exact["noise_floor"]) == (3.0, 3.0, None)
    none = Verdict(claim, "inconclusive", Summary(2.0, math.nan, math.nan, 3), "r", noise_floor=math.inf).as_record()
    assert (none["ci_low"], none["ci_high"], none["level"], none["noise_floor"], none["n"]) == (
        None,
        None,
        None,
        None,
        3,
    )
    missing = Verdict(claim, "not measured", None, "r").as_record()
    assert (missing["measured"], missing["n"], missing["method"], missing["ci_low"]) == (None, 0, "", None)


# --- compare: the verdicts that changed between two runs --------------------------------------------------


def _run(run_id: str, slow: float, suite: str = "io"):
    rng = np.random.default_rng(7)
    rows = []
    for variant, center in (("slow", slow), ("fast", 1.0)):
        for repeat in range(16):  # an unpaired ratio is declared from about 15 repeats per side
            value = center * float(rng.uniform(0.99, 1.01))
            rows.append(
                {"run_id": run_id, "suite": suite, "case": "parse", "implementation": "x", "variant": variant}
                | {"metric": "seconds", "value": value, "unit": "s", "repeat": repeat, "params": {}}
            )
    return as_frame(rows)


def test_verdict_changes_lists_only_entries_whose_verdict_moved(tmp_path):
    """From the records each run wrote: an entry only one run judged reads "not measured" in the other."""
    claims = load_claims(_claims_file(tmp_path, ENTRY.format(id="a", extra="") + ENTRY.format(id="b", extra="")))
    a, b = _run("A", 2.0), _run("B", 8.0)
    [ra, rb] = [judge(frame, claims)[0] for frame in (a, b)]
    changes = verdict_changes(ra, rb)
    assert list(changes.columns) == ["claim", "kind", "verdict_a", "verdict_b", "measured_a", "measured_b", "reason_b"]
    assert changes["claim"].tolist() == ["a", "b"] and set(changes["kind"]) == {"claim"}
    [before, after] = [evaluate(frame, claims[:1])[0] for frame in (a, b)]
    row = changes.iloc[0]
    assert (row["verdict_a"], row["verdict_b"]) == (before.verdict, after.verdict) and before.verdict != after.verdict
    assert row["measured_a"] == before.measured.median and row["measured_b"] == after.measured.median
    assert row["reason_b"] == after.reason
    assert verdict_changes(ra, judge(_run("C", 2.0), claims)[0]).empty
    gone = verdict_changes(ra, [])
    assert gone["verdict_b"].tolist() == ["not measured"] * 2 and gone["measured_b"].isna().all()


def _series_rows(run: str, seed: int, parse: float, serve: float) -> list[dict]:
    """Two synthetic runs with one series of each kind of result: regressed, improved (one client-bound),
    no change, exact counts, too few samples, and series only one run has."""
    rng = np.random.default_rng(seed)
    out: list[dict] = []

    def add(case, metric, unit, values, *, driver="", client_bound=False, params=None):
        for repeat, value in enumerate(values):
            out.append(
                {"run_id": run, "suite": "io", "case": case, "implementation": "rust", "variant": "", "driver": driver}
                | {"metric": metric, "value": float(value), "unit": unit, "repeat": repeat}
                | {"client_bound": client_bound, "params": params or {}}
            )

    first = parse == 1
    add("parse", "seconds", "s", 0.010 * parse * rng.uniform(0.99, 1.01, 8))
    add("serve", "rps", "1/s", 2000 * serve * rng.uniform(0.99, 1.01, 8), driver="oha", params={"connections": 64})
    add("same", "seconds", "s", 0.5 * rng.uniform(0.99, 1.01, 8))
    add("syscalls", "read_syscalls", "count", [4] * 3 if first else [5] * 3)
    add("bound", "rps", "1/s", 500 * serve * rng.uniform(0.99, 1.01, 8), driver="wrk", client_bound=not first)
    add("old" if first else "new", "seconds", "s", [1.0, 1.1] if first else [2.0])
    add("few", "seconds", "s", [1.0, 2.0] if first else [3.0, 4.0])
    return out


def test_the_comparison_table_is_frozen_by_a_golden_file():
    table = compare(as_frame(_series_rows("A", 1, 1.0, 1.0)), as_frame(_series_rows("B", 2, 1.5, 1.2)))
    golden = (Path(__file__).parent / "testdata" / "compare_golden.md").read_text()
    assert to_markdown(table) + "\n" == golden
    changes = to_markdown(table, only_changes=True)
    assert changes + "\n" == "".join(line for line in golden.splitlines(keepends=True) if "no change" not in line)
    assert table.attrs == {"run_a": "A", "run_b": "B", "alpha": 0.05, "family": "holm"}
    assert worst_regression(table) == pytest.approx(table.loc[table["case"] == "parse", "change"].item())
    assert to_markdown(table.iloc[0:0]) == "_no series to compare_"
    assert to_markdown(table[table["label"] == "no change"], only_changes=True) == "_no series changed_"


# --- claims: the rule in words, and each way a verdict is reached ------------------------------------------


def _entry(rule: dict, **kw) -> Claim:
    base = {"id": "c", "suite": "io", "source": "s", "statement": "t", "unit": "x", "measure": "value"}
    return Claim(**{**base, "metric": "seconds", "select": {"case": "parse"}, "rule": rule, **kw})


def test_each_rule_in_words_and_its_bounds():
    text = claims_mod.rule_text
    assert text(_entry({"kind": "within_factor", "factor": 2}, published=2_009_108.0)) == (
        "reproduced if the interval lies within 1,004,554–4,018,216 (2,009,108 ÷/× 2)"
    )
    assert text(_entry({"kind": "within_abs", "tolerance": 0.5, "center": 3, "why": "rounding"})) == (
        "reproduced if the interval lies within 2.5–3.5 (3 ± 0.5); rounding"
    )
    assert (
        text(_entry({"kind": "less_than", "threshold": 1})) == "direction: reproduced if the whole interval is below 1"
    )
    assert text(_entry({"kind": "greater_than", "threshold": 1.25}, published=2.0, margin=1.25)) == (
        "direction: reproduced if the whole interval is above 1.25; size: as published within 1.6–2.5 (2 ÷/× 1.25)"
    )
    assert judge_mod.band_of({"kind": "within_abs", "tolerance": 0.5}, 3.0) == (2.5, 3.5)
    assert judge_mod.direction_of({"kind": "less_than", "threshold": 1}) == (1.0, "below")
    assert judge_mod.size_band(10.0, None, 11.0, {"kind": "less_than"}) == (-1.0, 21.0)
    assert judge_mod.size_band(None, 2.0, None, {"kind": "less_than"}) is None
    assert judge_mod.num(2.0) == "2" and judge_mod.num(1234.5678) == "1.23e+03" and judge_mod.num(0.5) == "0.5"


def _parts(rule: dict, m: Summary, size=None, center=None):
    parts, floor = judge_mod.judge_parts(m, rule, center, size, 0.01)
    return {k: (p.outcome, p.reason) for k, p in parts.items()}, floor


def test_exact_counts_are_judged_on_every_repeat():
    within = {"kind": "within_abs", "tolerance": 0, "center": 4}
    agree = Summary(4.0, 4.0, 4.0, 3, stats.METHOD_EXACT, 1)
    assert _parts(within, agree, center=4.0) == (
        {"band": ("inside", "every repeat (n = 3) counted 4, judged exactly")},
        0.0,
    )
    assert _parts(within, Summary(5.0, 5.0, 5.0, 3, stats.METHOD_EXACT, 1), center=4.0)[0]["band"][0] == "above"
    assert _parts(within, Summary(3.0, 3.0, 3.0, 3, stats.METHOD_EXACT, 1), center=4.0)[0]["band"][0] == "below"
    mixed = Summary(4.0, 4.0, 5.0, 3, stats.METHOD_EXACT, 1)
    assert _parts(within, mixed, center=4.0)[0]["band"] == (
        "inconclusive",
        "repeats disagree: every repeat (n = 3) counted 4–5, judged exactly",
    )
    more = {"kind": "greater_than", "threshold": 1.0}
    counts = Summary(7.4, 7.4, 7.5, 2, stats.METHOD_EXACT, 1)
    parts, _ = _parts(more, counts, size=(5.0, 7.0))
    assert (parts["direction"][0], parts["size"][0]) == ("reproduced", "larger")


def test_sampled_measurements_against_a_rule():
    rule = {"kind": "within_factor", "factor": 2.0}  # accepts 5..20
    few = Summary(10.0, math.nan, math.nan, 2, stats.METHOD_UNPAIRED, 7)
    assert _parts(rule, few, center=10.0) == (
        {"band": ("inconclusive", "too few samples (n = 2; needs ≥ 7 per side)")},
        None,
    )
    three = Summary(10.0, 9.0, 11.0, 2, stats.METHOD_MEDIAN, 1)
    assert _parts(rule, three, center=10.0)[0]["band"] == ("inconclusive", "too few samples (n = 2; needs ≥ 3)")
    inside = summarize([9.0, 9.5, 9.8, 10.0, 10.2, 10.5, 11.0])
    parts, floor = _parts(rule, inside, center=10.0)
    assert parts["band"] == ("inside", f"95% interval 9–11 (n = 7, {stats.METHOD_MEDIAN}) lies inside the band 5–20")
    assert floor == pytest.approx(0.1111111)
    outside = summarize([38.0, 39.0, 40.0, 40.0, 41.0, 42.0])
    assert _parts(rule, outside, center=10.0)[0]["band"][0] == "above"
    assert _parts(rule, summarize([1.9, 2.0, 2.0, 2.05, 2.1, 2.1]), center=10.0)[0]["band"][0] == "below"
    across = summarize([12.0, 15.0, 18.0, 18.0, 25.0, 30.0])  # a bound inside the interval is within its noise
    assert _parts(rule, across, center=10.0)[0]["band"] == ("inconclusive", "within this run's noise (±66.7%) of 20")
    signed = summarize([-1.0, -0.5, 0.2, 0.8, 0.9, 1.0])  # a bound at 0 has no relative distance
    assert _parts({"kind": "less_than", "threshold": 0}, signed)[0]["direction"][0] == "inconclusive"
    near = summarize([20.0, 20.05, 20.1, 20.1, 20.15, 20.2])
    assert _parts(rule, near, center=10.0) == (
        {"band": ("inconclusive", "within this run's noise (±1.0%) of 20")},
        0.01,
    )
    opposite = summarize([2.0, 2.1, 2.2, 2.3, 2.4, 2.5])
    assert _parts({"kind": "less_than", "threshold": 1}, opposite)[0]["direction"][0] == "opposite"


def test_why_an_entry_measured_nothing():
    frame = as_frame(
        [
            {"run_id": "r", "suite": "io", "case": "parse", "implementation": "x", "variant": "v", "metric": "seconds"}
            | {"value": 1.0, "unit": "s", "repeat": 0, "client_bound": True, "params": {}}
        ]
    )
    other = _entry({"kind": "less_than", "threshold": 1}, suite="net")
    assert claims_mod.evaluate(frame, [other])[0].reason == "suite net has no rows in this run"
    renamed = _entry({"kind": "less_than", "threshold": 1}, select={"case": "read"})
    [v] = claims_mod.evaluate(frame, [renamed])
    assert (v.verdict, v.reason) == (
        "not measured",
        "no rows match case = 'read' (suite io ran; a renamed case or a smaller profile?)",
    )
    tool = _entry({"kind": "less_than", "threshold": 1}, select={"case": "read"}, requires="wrk")
    assert claims_mod.evaluate(frame, [tool])[0].reason == (
        "needs wrk, which this run did not use (no rows match case = 'read' (suite io ran; a renamed case or a "
        "smaller profile?))"
    )
    bound = _entry({"kind": "less_than", "threshold": 1}, select={"case": "parse", "client_bound": False})
    assert claims_mod.evaluate(frame, [bound])[0].reason == (
        "every row (1) was client-bound: left out, they measure the load generator"
    )
    side = _entry(
        {"kind": "less_than", "threshold": 1},
        measure="ratio",
        numerator={"variant": "v"},
        denominator={"variant": "w"},
    )
    assert claims_mod.evaluate(frame, [side])[0].reason == (
        "no denominator rows match variant = 'w' (suite io ran; a renamed case or a smaller profile?)"
    )


def test_the_comparison_figure_draws_each_changed_series_with_its_interval(tmp_path, monkeypatch):
    from matplotlib.colors import to_rgba
    from matplotlib.container import ErrorbarContainer
    from matplotlib.figure import Figure

    drawn = []
    save = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **k: (drawn.append(fig), save(fig, *a, **k))[1])
    table = compare(as_frame(_series_rows("A", 1, 1.0, 1.0)), as_frame(_series_rows("B", 2, 1.5, 1.2)))
    assert compare_figure(table, tmp_path / "c.png") == tmp_path / "c.png"
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
    [fig] = drawn
    [ax] = fig.axes
    shown = table[table["change"].notna()].assign(size=lambda t: t["change"].abs()).sort_values("size")
    assert [p.get_width() for p in ax.patches] == pytest.approx((shown["change"] * 100).tolist())
    colours = compare_figure_mod._COLOURS
    assert [p.get_facecolor() for p in ax.patches] == [to_rgba(colours[label]) for label in shown["label"]]
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "same rust seconds",
        "bound rust wrk rps",
        'serve rust oha rps {"connections":64}',
        "syscalls rust read_syscalls",
        "parse rust seconds",
        "few rust seconds",
    ]
    [errorbars] = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    whiskers = errorbars.lines[2][0].get_segments()
    for (start, end), row in zip(whiskers, shown.itertuples(), strict=True):
        low = row.change_low if math.isfinite(row.change_low) else row.change
        high = row.change_high if math.isfinite(row.change_high) else row.change
        assert (start[0], end[0]) == pytest.approx((low * 100, high * 100))
    assert ax.get_title() == "B vs A" and ax.get_xlabel().startswith("change of the median, B vs A (%)")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "improved",
        "regressed",
        "no change",
        "too few samples",
    ]
    assert tuple(fig.get_size_inches()) == pytest.approx((9, 1.5 + 0.3 * 6))
    compare_figure(table, tmp_path / "two.png", max_rows=2)
    assert [t.get_text() for t in drawn[-1].axes[0].get_yticklabels()] == ["parse rust seconds", "few rust seconds"]
    compare_figure(table.iloc[0:0], tmp_path / "none.png")
    assert tuple(drawn[-1].get_size_inches()) == pytest.approx((9, 1.8))


# --- compare: the small rules ----------------------------------------------------------------------------------


def test_benchstat_sample_rule_and_directions():
    assert too_few_samples(3, 3) and too_few_samples(3, 4) and not too_few_samples(4, 4)  # 2/35 >= 5% > 2/70
    assert not too_few_samples(3, 5)  # 2 / 56
    assert too_few_samples(0, 10) and too_few_samples(10, 0) and too_few_samples(2, 2, alpha=0.3)
    assert not too_few_samples(3, 3, alpha=0.2)  # 2 / C(6, 3) = 0.1
    assert compare_mod.direction("rps", "1/s") == compare_mod.HIGHER
    assert compare_mod.direction("latency_p99_s", "s") == compare_mod.LOWER
    assert compare_mod.direction("binary_bytes", "bytes") == compare_mod.LOWER
    assert compare_mod.direction("rows_found", "count") == compare_mod.UNKNOWN
    assert compare_mod.is_deterministic_name("read_syscalls") and compare_mod.is_deterministic_name("rows_acked")
    assert not compare_mod.is_deterministic_name("rps")
    assert compare_mod.is_per_request_count("allocations_per_request", "count")
    assert not compare_mod.is_per_request_count("allocations_per_request", "ratio")
    assert not compare_mod.is_per_request_count("allocations", "count")


def test_series_keys_ignore_per_run_params_and_old_tables_get_neutral_columns():
    assert compare_mod._canonical_params('{"b": 1, "slot": 2, "a": [1, 2]}') == '{"a":[1,2],"b":1}'
    assert compare_mod._canonical_params("  ") == "{}" and compare_mod._canonical_params(math.nan) == "{}"
    assert compare_mod._canonical_params({"p": Path("/x")}) == '{"p":"/x"}'
    old = pd.DataFrame({"run_id": ["r"], "suite": ["s"], "case": ["c"], "metric": ["m"], "value": [1.0], "unit": ["s"]})
    tidy = compare_mod._tidy(old)
    assert tidy[["driver", "variant", "implementation", "params"]].iloc[0].tolist() == ["", "", "", "{}"]
    assert tidy["client_bound"].tolist() == [False] and "driver" not in old
    gaps = old.assign(driver=[None], variant=[None], implementation=[None], client_bound=[None], params=['{"a":1}'])
    tidy = compare_mod._tidy(gaps)
    assert tidy[["driver", "variant", "implementation", "params"]].iloc[0].tolist() == ["", "", "", '{"a":1}']
    assert tidy["client_bound"].dtype == bool and tidy["client_bound"].tolist() == [False]
    assert compare_mod._run_id(pd.DataFrame({"run_id": ["b", "a", "b", None]})) == "a,b"
    assert compare_mod._run_id(pd.DataFrame({"x": [1]})) == ""


def test_changes_of_counts_and_of_non_positive_medians():
    same = np.array([4.0, 4.0, 4.0])
    assert compare_mod._change(np.array([0.0, 0.0]), np.array([0.0, 0.0]))[0] == 0.0
    assert math.isnan(compare_mod._change(np.array([0.0, 0.0]), same)[0])
    change, low, high = compare_mod._change(np.array([-1.0, 2.0, 2.0]), same)
    assert change == 1.0 and math.isnan(low) and math.isnan(high)
    label = compare_mod._count_label
    assert label(same, same, "read_syscalls", "count", compare_mod.LOWER) == "equal"
    assert label(same, same + 1, "read_syscalls", "count", compare_mod.LOWER) == "regressed"
    assert label(same + 1, same, "read_syscalls", "count", compare_mod.LOWER) == "improved"
    assert label(same, same + 1, "rows_found", "count", compare_mod.UNKNOWN) == "differs"
    per = "allocations_per_request"
    assert label(np.array([10.0]), np.array([10.4]), per, "count", compare_mod.LOWER) == "equal"  # within half a count
    assert label(np.array([100.0]), np.array([101.9]), per, "count", compare_mod.LOWER) == "equal"  # within 2%
    assert label(np.array([100.0]), np.array([102.5]), per, "count", compare_mod.LOWER) == "regressed"
    assert label(np.array([10.0]), np.array([9.4]), per, "count", compare_mod.LOWER) == "improved"


def test_labels_of_sampled_series():
    a = np.array([1.0, 1.1, 1.2, 1.3, 1.4])
    assert compare_mod._label(a, a * 2, "seconds", "s", compare_mod.LOWER, 0.05)[0] == "regressed"
    assert compare_mod._label(a, a * 2, "rps", "1/s", compare_mod.HIGHER, 0.05)[0] == "improved"
    assert compare_mod._label(a, a * 2, "thing", "ratio", compare_mod.UNKNOWN, 0.05)[0] == "changed"
    assert compare_mod._label(a, a, "seconds", "s", compare_mod.LOWER, 0.05)[0] == "no change"
    flat = np.array([2.5, 2.5, 2.5, 2.5])
    assert compare_mod._label(flat, flat, "seconds", "s", compare_mod.LOWER, 0.05) == ("no change", 1.0)
    label, p = compare_mod._label(a[:2], a[:2] * 2, "seconds", "s", compare_mod.LOWER, 0.05)
    assert label == "too few samples" and math.isnan(p)
    whole = np.array([3.0, 3.0, 3.0])  # whole numbers of a metric the catalogue does not call exact: sampled
    assert compare_mod._label(whole, whole + 1, "things", "count", compare_mod.UNKNOWN, 0.05)[0] == "too few samples"
    p_value = compare_mod._label(a, a * 2, "seconds", "s", compare_mod.LOWER, 0.05)[1]
    assert p_value == pytest.approx(2 / math.comb(10, 5))


def _tidy_rows(specs: list[tuple[str, str, list[float], int]]) -> pd.DataFrame:
    """(variant, metric/unit as "metric:unit", values, first repeat) → a frame of suite io, case parse."""
    rows = []
    for variant, metric_unit, values, start in specs:
        metric, unit = metric_unit.split(":")
        for i, value in enumerate(values):
            rows.append(
                {"run_id": "r", "suite": "io", "case": "parse", "implementation": "x", "variant": variant}
                | {"metric": metric, "value": value, "unit": unit, "repeat": start + i, "params": {}}
            )
    return as_frame(rows)


def _ratio_entry(metric: str, paired: bool) -> Claim:
    return _entry(
        {"kind": "less_than", "threshold": 10},
        measure="ratio",
        metric=metric,
        numerator={"variant": "n"},
        denominator={"variant": "d"},
        paired=paired,
    )


def test_measurements_that_cannot_be_made_say_why():
    apart = _tidy_rows([("n", "seconds:s", [1.0] * 6, 0), ("d", "seconds:s", [1.0] * 6, 10)])
    [v] = evaluate(apart, [_ratio_entry("seconds", paired=True)])
    assert (v.verdict, v.reason, v.n_numerator, v.n_denominator) == (
        "not measured",
        "numerator and denominator share no repeat to pair",
        6,
        6,
    )
    zero = _tidy_rows([("n", "write_syscalls:count", [4.0, 4.0], 0), ("d", "write_syscalls:count", [2.0, 0.0], 0)])
    [v] = evaluate(zero, [_ratio_entry("write_syscalls", paired=True)])
    assert (v.verdict, v.reason) == ("inconclusive", "no ratio can be formed: a denominator count is 0")
    negative = _tidy_rows([("n", "seconds:s", [1.0] * 4, 0), ("d", "seconds:s", [-1.0] * 4, 0)])
    [v] = evaluate(negative, [_ratio_entry("seconds", paired=False)])
    assert v.verdict == "inconclusive" and v.reason.startswith("no ratio can be formed: ratio denominator has values")
    blank = _tidy_rows([("v", "seconds:s", [math.nan] * 3, 0)])
    [v] = evaluate(blank, [_entry({"kind": "less_than", "threshold": 1})])
    assert (v.verdict, v.reason) == ("inconclusive", "no valid values (every selected value is NaN)")


def test_exact_paired_counts_are_a_ratio_per_repeat_and_repeats_are_medians_of_their_samples():
    counts = _tidy_rows([("n", "write_syscalls:count", [8.0, 12.0], 0), ("d", "write_syscalls:count", [2.0, 4.0], 0)])
    [v] = evaluate(counts, [_ratio_entry("write_syscalls", paired=True)])
    assert (v.measured.low, v.measured.high, v.measured.method, v.n_numerator) == (3.0, 4.0, stats.METHOD_EXACT, 2)
    samples = _tidy_rows([("v", "seconds:s", [value], 0) for value in (1.0, 3.0, 100.0, 5.0)])  # one repeat
    assert claims_mod.per_repeat(samples).tolist() == [4.0] and claims_mod.per_repeat(samples).index.tolist() == [0]
    [v] = evaluate(samples, [_entry({"kind": "less_than", "threshold": 1})])
    assert v.measured.n == 1 and v.measured.median == 4.0
    per_request = _tidy_rows([("v", "allocations_per_request:count", [2.5, 2.5, 2.5], 0)])
    assert claims_mod._is_exact(per_request)
    assert not claims_mod._is_exact(_tidy_rows([("v", "things:count", [2.5], 0)]))
    assert not claims_mod._is_exact(_tidy_rows([("v", "things:s", [2.0], 0)]))
    assert not claims_mod._is_exact(_tidy_rows([("v", "things:count", [2.0, 3.0], 0)]))  # whole, not catalogued
