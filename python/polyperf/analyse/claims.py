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
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from polyperf.analyse.anytime import paired_ratio, ratio_of_medians, summarize
from polyperf.analyse.claims_file import load_claims
from polyperf.analyse.entries import CLAIMS_FILE, DEFAULT_MIN_EFFECT, KINDS, RULES, VERDICTS, Claim, Verdict
from polyperf.analyse.family import DEFAULT, Family, control, decision_threshold
from polyperf.analyse.headline import headline, rule_text
from polyperf.analyse.judge import MIN_REPEATS, Part, judge_parts, num, tested_part
from polyperf.analyse.stats import METHOD_EXACT as EXACT
from polyperf.analyse.stats import Summary, exact_range
from polyperf.record.catalogue import metric_info

__all__ = [
    "CLAIMS_FILE",
    "DEFAULT_MIN_EFFECT",
    "EXACT",
    "KINDS",
    "RULES",
    "VERDICTS",
    "Claim",
    "Verdict",
    "evaluate",
    "load_claims",
    "per_repeat",
    "selected_rows",
    "verdict_table",
]
__all__ += ["MIN_REPEATS"]


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
