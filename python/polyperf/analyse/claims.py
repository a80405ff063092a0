"""Claims (an article said it) and checks (polyperf's own expectation) from a TOML registry, turned into verdicts
against a run's table. Pure: a table and entries in, verdicts out.

How a verdict is reached, so that a careful reader can redo it:
1. The rows an entry selects are summarised to one value per independent repeat (the `repeat` column: a load
   run or a benchmark round); samples inside a repeat are not independent, so their median stands for it.
2. A ratio of paired repeats joins numerator and denominator on the repeat, never by position: a repeat that
   one side lacks (a client-bound run left out, say) drops its partner too. The number of pairs is n.
3. `anytime` gives the estimate and its 95% interval, a confidence sequence valid however many repeats the run
   added on the data (`analyse.allocate`), or none below the n it needs (7): then the verdict is
   "inconclusive: too few samples". Exact counts (unit `count`, whole numbers) need no interval: every
   repeat is judged, on any n.
4. The noise floor is the smallest relative difference this run could resolve: the interval's half-width, and
   never less than the entry's `min_effect` (criterion's noise threshold is 1%). An estimate within the floor of
   a boundary of the rule (the half-width on the side facing it) is "inconclusive (within this run's noise)",
   never decided.
5. Two parts (`analyse.judge`): the direction the entry claims (reproduced / opposite / inconclusive), and, where
   the article published a figure, the size: measured ÷ published, "as published" inside the entry's equivalence
   margin, "larger" / "smaller" wholly outside it, else inconclusive. An entry that claims a value, not a direction
   (a within_* rule), is judged inside / outside its band.
6. One family per run: every part that was tested (exact counts are not) enters one family, controlled together
   (`analyse.family`, e-BH on the parts' e-values at a 5% false discovery rate, valid under any dependence, unless told
   otherwise; a part held back by the noise floor enters with p = 1, since it cannot be declared); an outcome decided by
   its own interval but not after the family's adjustment is "inconclusive", and says so.
The verdict (stable: reproduced / not reproduced / inconclusive / not measured) is the direction, or the band for an
entry without one; `headline` says both parts in words: "reproduced, 5.6x larger than published (63.5x vs 11.43x)".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from polyperf.analyse.anytime import paired_ratio, ratio_of_medians, summarize
from polyperf.analyse.family import DEFAULT, Family, control, decision_threshold
from polyperf.analyse.headline import headline, rule_text
from polyperf.analyse.judge import MIN_REPEATS, Part, judge_parts, num, size_band, tested_part
from polyperf.analyse.stats import LEVEL, Summary, exact_range
from polyperf.analyse.stats import METHOD_EXACT as EXACT
from polyperf.record.catalogue import metric_info

__all__ = [
    "CLAIMS_FILE",
    "EXACT",
    "KINDS",
    "VERDICTS",
    "Claim",
    "Verdict",
    "evaluate",
    "load_claims",
    "per_repeat",
    "selected_rows",
    "verdict_table",
]

CLAIMS_FILE = Path(__file__).with_name("claims.toml")
VERDICTS = ("reproduced", "not reproduced", "inconclusive", "not measured")
# derived: polyperf's restatement of an article's claim, in a quantity the article did not measure
KINDS = ("claim", "check", "derived")
RULES = ("within_factor", "within_abs", "less_than", "greater_than")
DEFAULT_MIN_EFFECT = 0.01
__all__ += ["MIN_REPEATS"]


@dataclass(frozen=True)
class Claim:
    """One registry entry. `published` is the article's own figure, absent for a direction-only claim or a
    check; a rule centred on a value that is not published names it as `rule.center`."""

    id: str
    suite: str
    source: str
    statement: str
    unit: str
    measure: str  # "ratio" or "value"
    metric: str
    select: Mapping[str, Any]
    rule: Mapping[str, Any]
    published: float | None = None
    numerator: Mapping[str, Any] | None = None
    denominator: Mapping[str, Any] | None = None
    paired: bool = False
    note: str = ""
    kind: str = "claim"
    min_effect: float = DEFAULT_MIN_EFFECT
    requires: str = ""  # an optional tool without which the entry cannot be measured (e.g. "wrk")
    margin: float | None = None  # size "as published" within published ÷/× margin
    margin_abs: float | None = None  # ... or within published ± margin_abs, in the entry's unit
    # the article's own conditions (input, machine, versions) and what the suite measures on (`measured_on`),
    # printed beside the verdict; `claims_file.CONDITIONS` names the keys
    conditions: Mapping[str, str] = field(default_factory=dict)

    @property
    def size_band(self) -> tuple[float, float] | None:
        """The values the size part calls "as published"; None without a published figure (direction only)."""
        return size_band(self.published, self.margin, self.margin_abs, self.rule)

    @property
    def center(self) -> float | None:
        center = self.rule.get("center", self.published)
        return None if center is None else float(center)

    @property
    def direction_only(self) -> bool:
        return self.rule["kind"] in ("less_than", "greater_than") and self.published is None


@dataclass(frozen=True)
class Verdict:
    claim: Claim
    verdict: str
    measured: Summary | None
    rule_text: str
    reason: str = ""
    noise_floor: float | None = None
    n_numerator: int | None = None
    n_denominator: int | None = None
    direction: str | None = None  # reproduced / opposite / inconclusive; None where no direction is claimed
    size: str | None = None  # as published / larger / smaller / inconclusive; None without a published figure
    headline: str = ""  # both parts in words
    parts: Mapping[str, Part] = field(default_factory=dict)  # "direction" or "band", and "size"
    adjusted: Mapping[str, float] = field(default_factory=dict)  # each tested part's p-value after the family's
    family: Family | None = None
    family_interval: Summary | None = None  # the estimate at the family's level: decided exactly where it clears
    family_level: float | None = None  # that level, 1 - the family's decision threshold
    sample: tuple[float, ...] = field(default=(), compare=False, repr=False)  # for allocation (`analyse.allocate`)

    @property
    def size_ratio(self) -> tuple[float, float, float] | None:
        """measured ÷ published: (estimate, interval low, interval high); NaN bounds without an interval."""
        m, published = self.measured, self.claim.published
        if m is None or self.size is None or not published or published <= 0:
            return None
        low, high = (m.low, m.high) if m.has_interval else (math.nan, math.nan)
        return m.median / published, low / published, high / published

    def as_record(self) -> dict[str, Any]:
        m = self.measured
        interval = m is not None and m.has_interval
        size_ratio = self.size_ratio or (None, None, None)

        def number(value: float | None) -> float | None:
            return None if value is None or not math.isfinite(value) else float(value)

        return {
            "claim": self.claim.id,
            "suite": self.claim.suite,
            "kind": self.claim.kind,
            "verdict": self.verdict,
            "reason": self.reason,
            "measured": number(m.median) if m else None,
            "ci_low": number(m.low) if interval else None,
            "ci_high": number(m.high) if interval else None,
            "level": LEVEL if interval and m.method != EXACT else None,
            "family_level": self.family_level,
            "family_ci_low": number(self.family_interval.low) if self.family_interval else None,
            "family_ci_high": number(self.family_interval.high) if self.family_interval else None,
            "n": m.n if m else 0,
            "n_numerator": self.n_numerator,
            "n_denominator": self.n_denominator,
            "noise_floor": number(self.noise_floor),
            "method": m.method if m else "",
            "statement": self.claim.statement,
            "published": self.claim.published,
            "direction_only": self.claim.direction_only,
            "unit": self.claim.unit,
            "rule": self.rule_text,
            "source": self.claim.source,
            "direction": self.direction,
            "size": self.size,
            "size_ratio": number(size_ratio[0]),
            "size_ci_low": number(size_ratio[1]),
            "size_ci_high": number(size_ratio[2]),
            "margin": self.claim.margin,
            "margin_abs": self.claim.margin_abs,
            "headline": self.headline or self.verdict,
            "p_values": {k: number(p.p_value) for k, p in self.parts.items() if not math.isnan(p.p_value)},
            "e_values": {k: number(p.e_value) for k, p in self.parts.items() if not math.isnan(p.e_value)},
            "p_adjusted": {k: number(v) for k, v in self.adjusted.items()},
            "family": self.family.as_record() if self.family else None,
        }


_FIELDS = {f.name for f in fields(Claim)}
_REQUIRED = {f.name for f in fields(Claim) if f.default is MISSING and f.default_factory is MISSING}


def _claim(entry: Mapping[str, Any], where: str) -> Claim:
    name = f"{where}: entry {entry.get('id', '?')!r}"
    unknown = sorted(set(entry) - _FIELDS)
    if unknown:
        raise ValueError(f"{name}: unknown field(s) {', '.join(unknown)} (known: {', '.join(sorted(_FIELDS))})")
    missing = sorted(_REQUIRED - set(entry))
    if missing:
        raise ValueError(f"{name}: missing field(s) {', '.join(missing)}")
    claim = Claim(**entry)
    if claim.kind not in KINDS:
        raise ValueError(f"{name}: kind must be one of {', '.join(KINDS)}, not {claim.kind!r}")
    if claim.measure not in ("ratio", "value"):
        raise ValueError(f"{name}: measure must be 'ratio' or 'value', not {claim.measure!r}")
    if claim.measure == "ratio" and (claim.numerator is None or claim.denominator is None):
        raise ValueError(f"{name}: a ratio needs numerator and denominator")
    kind = claim.rule.get("kind")
    if kind not in RULES:
        raise ValueError(f"{name}: rule.kind must be one of {', '.join(RULES)}, not {kind!r}")
    if kind in ("within_factor", "within_abs") and claim.center is None:
        raise ValueError(f"{name}: a {kind} rule needs `published` or `rule.center`")
    needs = {"within_factor": "factor", "within_abs": "tolerance"}.get(kind, "threshold")
    if needs not in claim.rule:
        raise ValueError(f"{name}: a {kind} rule needs rule.{needs}")
    _check_margin(claim, name)
    return claim


def _check_margin(claim: Claim, name: str) -> None:
    if claim.margin is not None and claim.margin_abs is not None:
        raise ValueError(f"{name}: give `margin` (a factor) or `margin_abs` (in the entry's unit), not both")
    if claim.margin is not None and not claim.margin > 1:
        raise ValueError(f"{name}: margin is a factor above 1 (1.25 = within 25% of the published figure)")
    if claim.margin_abs is not None and not claim.margin_abs >= 0:
        raise ValueError(f"{name}: margin_abs must be 0 or more")
    # a published figure without a margin (files written before sizes were judged) still loads: its size is not
    # judged; every built-in entry with a published figure has one (tests/test_claims.py)


def load_claims(path: Path | str = CLAIMS_FILE) -> list[Claim]:
    """Entries of a claims file (`[[claims]]` tables); a user's file has the same format as the built-in one."""
    from polyperf.analyse.claims_file import read_claims_file  # every key and value checked, errors in one line

    path = Path(path)
    entries = read_claims_file(path, known=_FIELDS)
    claims = [_claim(entry, f"claims file {path}") for entry in entries]
    ids = [c.id for c in claims]
    doubled = sorted({i for i in ids if ids.count(i) > 1})
    if doubled:
        raise ValueError(f"claims file {path}: ids used twice: {', '.join(doubled)}")
    return claims


def _column_mask(frame: pd.DataFrame, column: str, wanted: Any) -> pd.Series:
    if column == "params":
        mask = pd.Series(True, index=frame.index)
        for key, value in wanted.items():
            mask &= frame["params"].map(lambda p, k=key, v=value: isinstance(p, Mapping) and p.get(k) == v)
        return mask
    if column not in frame:
        return pd.Series(False, index=frame.index)
    return frame[column] == wanted


def _select(frame: pd.DataFrame, spec: Mapping[str, Any]) -> tuple[pd.DataFrame, str]:
    """The rows matching every item of `spec`, and, when none do, the first item that left nothing."""
    rows = frame
    for column, wanted in spec.items():
        rows = rows[_column_mask(rows, column, wanted)]
        if rows.empty:
            return rows, f"{column} = {wanted!r}"
    return rows, ""


def per_repeat(rows: pd.DataFrame) -> pd.Series:
    """One value per independent repeat (the `repeat` column: a load run, a benchmark round): the median of the
    samples a repeat holds, which are not independent of each other. Reports count n the same way."""
    return rows.groupby("repeat")["value"].median()


def _is_exact(*groups: pd.DataFrame) -> bool:
    """Counts the metric catalogue declares exact (counts per request among them: a fixed number of requests
    counted, where background work spreads only a fraction of a count over them, as `compare` treats them). Whole
    numbers are no evidence: integer milliseconds carry noise."""
    rows = pd.concat(groups)
    if not (rows["unit"] == "count").all():
        return False
    return all((info := metric_info(str(name))) is not None and info.exact for name in rows["metric"].unique())


def selected_rows(frame: pd.DataFrame, claim: Claim) -> list[pd.DataFrame]:
    """The rows an entry selects: one frame for a value, numerator and denominator for a ratio."""
    return [_select(frame, spec)[0] for spec in _specs(claim)]


def _specs(claim: Claim) -> list[dict[str, Any]]:
    base = {**claim.select, "suite": claim.suite, "metric": claim.metric}
    if claim.measure == "value":
        return [base]
    return [{**base, **(side or {})} for side in (claim.numerator, claim.denominator)]


@dataclass(frozen=True)
class _Measured:
    summary: Summary | None
    missing: str = ""
    n_numerator: int | None = None
    n_denominator: int | None = None
    unjudgeable: bool = False  # rows exist, but no estimate can be made of them
    at_level: Callable[[float], Summary] | None = None  # the same estimate with its interval at another level
    sample: tuple[float, ...] = ()  # the repeats the estimate is a median of (log-ratios for a paired ratio)


def _missing_reason(frame: pd.DataFrame, claim: Claim, side: str, why: str, spec: Mapping[str, Any]) -> str:
    if not (frame.get("suite", pd.Series(dtype=object)) == claim.suite).any():
        return f"suite {claim.suite} has no rows in this run"
    if "client_bound" in spec:
        unbound, _ = _select(frame, {k: v for k, v in spec.items() if k != "client_bound"})
        if not unbound.empty:
            return f"every {side}row ({len(unbound)}) was client-bound: left out, they measure the load generator"
    text = f"no {side}rows match {why} (suite {claim.suite} ran; a renamed case or a smaller profile?)"
    if claim.requires:
        text = f"needs {claim.requires}, which this run did not use ({text})"
    return text


def _measure(frame: pd.DataFrame, claim: Claim) -> _Measured:
    specs = _specs(claim)
    selected = [_select(frame, spec) for spec in specs]
    sides = [""] if claim.measure == "value" else ["numerator ", "denominator "]
    for (rows, why), spec, side in zip(selected, specs, sides, strict=True):
        if rows.empty:
            return _Measured(None, _missing_reason(frame, claim, side, why, spec))
    if claim.measure == "value":
        rows = selected[0][0]
        values = per_repeat(rows).dropna()
        if values.empty:
            return _Measured(None, "no valid values (every selected value is NaN)", unjudgeable=True)
        if _is_exact(rows):
            return _Measured(exact_range(values))
        data = values.to_numpy()
        return _Measured(summarize(data), at_level=lambda level: summarize(data, level), sample=tuple(data))
    (num, _), (den, _) = selected
    for rows, side in ((num, "numerator"), (den, "denominator")):
        if rows["value"].isna().all():  # left out when loaded (NaN, out of range, negative), or measured as NaN
            return _Measured(None, f"no valid values (every {side} value is NaN)", unjudgeable=True)
    a, b = per_repeat(num), per_repeat(den)
    if claim.paired:
        joined = pd.concat({"num": a, "den": b}, axis=1, join="inner").dropna()  # by key; a half pair is none
        if joined.empty:
            return _Measured(None, "numerator and denominator share no repeat to pair", len(a), len(b))
        a, b = joined["num"], joined["den"]
    at_level = None
    try:
        if _is_exact(num, den) and claim.paired:
            if not (b > 0).all():
                raise ValueError("a denominator count is 0")
            summary = exact_range((a / b).to_numpy())
        else:
            pair = (a.to_numpy(), b.to_numpy())
            estimate = paired_ratio if claim.paired else ratio_of_medians
            summary = estimate(*pair)
            at_level = lambda level: estimate(*pair, level=level)  # noqa: E731
    except ValueError as exc:
        return _Measured(None, f"no ratio can be formed: {exc}", len(a), len(b), unjudgeable=True)
    sample = tuple(np.log(a.to_numpy() / b.to_numpy())) if claim.paired and (a > 0).all() and (b > 0).all() else ()
    return _Measured(summary, "", len(a), len(b), at_level=at_level, sample=sample)


_VERDICT_OF = {"reproduced": "reproduced", "inside": "reproduced", "inconclusive": "inconclusive"}
_VERDICT_OF |= dict.fromkeys(("opposite", "above", "below"), "not reproduced")


def _family(
    judged: list[tuple[Claim, _Measured, dict[str, Part], float | None]], method: str, rate: float
) -> tuple[Family, list[dict[str, float]], float]:
    """Adjusts every tested part of the run together; returns the family, each entry's adjusted p-values and the
    family's decision threshold (`family.decision_threshold`)."""
    keys = [(i, name) for i, (_, _, parts, _) in enumerate(judged) for name, part in parts.items()]
    parts = [judged[i][2][name] for i, name in keys]
    pvalues = [part.family_p for part in parts]
    declarable = [part.decided_by_interval for part in parts]
    adjusted = control(pvalues, declarable, method)
    entered = [p if ok or math.isnan(p) else 1.0 for p, ok in zip(pvalues, declarable, strict=True)]
    tested = [part for part in parts if not math.isnan(part.p_value)]
    family = Family(len(tested), method, rate, sum(part.decided_by_interval for part in tested))
    out: list[dict[str, float]] = [{} for _ in judged]
    for (i, name), p in zip(keys, adjusted, strict=True):
        if not math.isnan(p):
            out[i][name] = p
    return family, out, decision_threshold(entered, method, rate)


def _family_interval(measured: _Measured, parts: Mapping[str, Part], threshold: float) -> Summary | None:
    """The estimate's interval at the family's level (1 - threshold), for an entry with a tested part: it excludes
    a bound exactly when the family declares, so it is the interval a decision after the family agrees with."""
    tested = any(not math.isnan(p.p_value) for p in parts.values())
    if measured.at_level is None or not tested or not 0 < threshold < 1:
        return None
    return measured.at_level(1 - threshold)  # NaN bounds: its n bounds no interval at that level


def evaluate(
    frame: pd.DataFrame, claims: Iterable[Claim] | None = None, *, family: str = DEFAULT, rate: float = 0.05
) -> list[Verdict]:
    """A verdict for every entry (those whose suite did not run are "not measured"); the tested parts of all of
    them form one family, controlled by `family` ("by" or "holm") at `rate`."""
    judged = []
    for claim in claims if claims is not None else load_claims():
        measured = _measure(frame, claim)
        parts: dict[str, Part] = {}
        floor = None
        if measured.summary is not None:
            parts, floor = judge_parts(measured.summary, claim.rule, claim.center, claim.size_band, claim.min_effect)
        judged.append((claim, measured, parts, floor))
    fam, adjusted, threshold = _family(judged, family, rate)
    verdicts = []
    for (claim, measured, parts, floor), adj in zip(judged, adjusted, strict=True):
        wide = _family_interval(measured, parts, threshold)
        short = f"{fam.name} over {fam.tests} tests"
        if wide is not None:
            short += f"; at the family's level, {1 - threshold:.2%}, " + (
                f"the interval is {num(wide.low)}–{num(wide.high)}"
                if wide.has_interval
                else f"n = {wide.n} bounds no interval"
            )
        parts = {k: tested_part(p, adj.get(k, math.nan), short, rate) for k, p in parts.items()}
        level = 1 - threshold if wide is not None else None
        verdict = _verdict(claim, measured, parts, floor, adj, fam)
        verdicts.append(replace(verdict, family_interval=wide, family_level=level, sample=measured.sample))
    return verdicts


def _verdict(
    claim: Claim, measured: _Measured, parts: dict[str, Part], floor: float | None, adj: dict[str, float], fam: Family
) -> Verdict:
    n_sides = {"n_numerator": measured.n_numerator, "n_denominator": measured.n_denominator}
    if measured.summary is None:
        verdict = "inconclusive" if measured.unjudgeable else "not measured"
        return Verdict(claim, verdict, None, rule_text(claim), measured.missing, **n_sides, headline=verdict)
    main = parts.get("direction") or parts["band"]
    size = parts.get("size")
    reason = main.reason
    if size is not None and size.reason != main.reason:
        reason += f"; size: {size.reason}"
    v = Verdict(
        claim,
        _VERDICT_OF[main.outcome],
        measured.summary,
        rule_text(claim),
        reason,
        floor,
        **n_sides,
        direction=parts["direction"].outcome if "direction" in parts else None,
        size=size.outcome if size is not None else None,
        parts=parts,
        adjusted=adj,
        family=fam,
    )
    return replace(v, headline=headline(v))


def verdict_table(verdicts: Iterable[Verdict]) -> pd.DataFrame:
    return pd.DataFrame.from_records([v.as_record() for v in verdicts])
