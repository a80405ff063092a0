"""Claims (an article said it) and checks (polyperf's own expectation) from a TOML registry, turned into verdicts
against a run's table. Pure: a table and entries in, verdicts out.

How a verdict is reached, so that a careful reader can redo it:
1. The rows an entry selects are summarised to one value per independent repeat (the `repeat` column: a load
   run or a benchmark round); samples inside a repeat are not independent, so their median stands for it.
2. A ratio of paired repeats joins numerator and denominator on the repeat, never by position: a repeat that
   one side lacks (a client-bound run left out, say) drops its partner too. The number of pairs is n.
3. `stats` gives the estimate and its 95% interval, or none below the n its method needs: then the verdict is
   "inconclusive: too few samples". Exact counts (unit `count`, whole numbers) need no interval: every
   repeat is judged, on any n.
4. The noise floor is the smallest relative difference this run could resolve: the interval's half-width, and
   never less than the entry's `min_effect` (criterion's noise threshold is 1%). An estimate within the floor of
   a boundary of the rule is "inconclusive (within this run's noise)", never decided.
5. "reproduced" when the whole interval lies where the rule accepts, "not reproduced" when it lies wholly where
   the rule rejects, else "inconclusive".
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from polyperf.analyse.stats import LEVEL, Summary, exact_range, ratio, summarize
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
KINDS = ("claim", "check")
RULES = ("within_factor", "within_abs", "less_than", "greater_than")
DEFAULT_MIN_EFFECT = 0.01
MIN_REPEATS = 3  # below this no verdict is decided, whatever a method's interval would allow


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

    def as_record(self) -> dict[str, Any]:
        m = self.measured
        interval = m is not None and m.has_interval

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
    return claim


def load_claims(path: Path | str = CLAIMS_FILE) -> list[Claim]:
    """Entries of a claims file (`[[claims]]` tables); a user's file has the same format as the built-in one."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"claims file {path}: not valid TOML: {exc}") from None
    entries = data.get("claims", [])
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
    """Counts: whole numbers of unit `count`, or counts the metric catalogue declares exact (counts per request
    among them: a fixed number of requests counted, where background work spreads only a fraction of a count over
    them, as `compare` treats them)."""
    rows = pd.concat(groups)
    if not (rows["unit"] == "count").all():
        return False
    if all((info := metric_info(str(name))) is not None and info.exact for name in rows["metric"].unique()):
        return True
    values = rows["value"].to_numpy(dtype=float)
    return bool(np.all(np.isfinite(values) & (values == np.round(values))))


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
            return _Measured(None, "every selected value is missing (NaN)", unjudgeable=True)
        return _Measured(exact_range(values) if _is_exact(rows) else summarize(values.to_numpy()))
    (num, _), (den, _) = selected
    a, b = per_repeat(num), per_repeat(den)
    if claim.paired:
        joined = pd.concat({"num": a, "den": b}, axis=1, join="inner")
        if joined.empty:
            return _Measured(None, "numerator and denominator share no repeat to pair", len(a), len(b))
        a, b = joined["num"], joined["den"]
    try:
        if _is_exact(num, den) and claim.paired:
            if not (b > 0).all():
                raise ValueError("a denominator count is 0")
            summary = exact_range((a / b).to_numpy())
        else:
            summary = ratio(a.to_numpy(), b.to_numpy(), paired=claim.paired)
    except ValueError as exc:
        return _Measured(None, f"no ratio can be formed: {exc}", len(a), len(b), unjudgeable=True)
    return _Measured(summary, "", len(a), len(b))


def _num(value: float) -> str:
    """Whole numbers with thousands separators (2,009,108), others to 3 significant digits: for people."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:.3g}"


def _bounds(claim: Claim) -> tuple[float, float, str]:
    """(lowest, highest accepted value, the rule in words)."""
    rule, kind = claim.rule, claim.rule["kind"]
    if kind == "within_factor":
        f, c = float(rule["factor"]), claim.center or 0.0
        lo, hi = c / f, c * f
        text = f"reproduced if the interval lies within {lo:.3g}–{hi:.3g} ({_num(c)} ÷/× {f:g})"
    elif kind == "within_abs":
        tol, c = float(rule["tolerance"]), claim.center or 0.0
        lo, hi = c - tol, c + tol
        text = f"reproduced if the interval lies within {_num(lo)}–{_num(hi)} ({_num(c)} ± {_num(tol)})"
    else:
        t = float(rule["threshold"])
        lo, hi = (-math.inf, t) if kind == "less_than" else (t, math.inf)
        text = f"reproduced if the whole interval is {'below' if kind == 'less_than' else 'above'} {_num(t)}"
    if rule.get("why"):
        text += f"; {rule['why']}"
    return lo, hi, text


def _interval_text(m: Summary) -> str:
    return f"{_num(m.low)}–{_num(m.high)}" if m.low != m.high else _num(m.low)


def _judge_exact(m: Summary, lo: float, hi: float) -> tuple[str, str]:
    where = f"every repeat (n = {m.n}) counted {_interval_text(m)}, judged exactly"
    if lo <= m.low and m.high <= hi:
        return "reproduced", where
    if m.high < lo or m.low > hi:
        return "not reproduced", where
    return "inconclusive", f"repeats disagree: {where}"


def _judge(claim: Claim, m: Summary) -> tuple[str, str, float | None]:
    """(verdict, reason, noise floor) of a measurement against the claim's rule."""
    lo, hi, _ = _bounds(claim)
    if m.method == EXACT:
        verdict, reason = _judge_exact(m, lo, hi)
        return verdict, reason, 0.0
    if not m.has_interval or m.n < MIN_REPEATS:
        need = max(m.min_n, MIN_REPEATS)
        per = " per side" if m.method.startswith("Hodges-Lehmann ratio,") else ""
        return "inconclusive", f"too few samples (n = {m.n}; needs ≥ {need}{per})", None
    floor = claim.min_effect if math.isnan(m.spread) else max(m.spread, claim.min_effect)
    for boundary in (lo, hi):
        near = math.isfinite(boundary) and boundary > 0 and m.median > 0
        if near and abs(math.log(m.median / boundary)) <= math.log1p(floor):
            return "inconclusive", f"within this run's noise (±{floor:.1%}) of {_num(boundary)}", floor
    interval = f"{LEVEL:.0%} interval {_interval_text(m)} (n = {m.n}, {m.method})"
    if lo <= m.low and m.high <= hi:
        return "reproduced", f"{interval} lies where the rule accepts", floor
    if m.high < lo or m.low > hi:
        return "not reproduced", f"{interval} lies where the rule rejects", floor
    return "inconclusive", f"{interval} straddles a bound of the rule", floor


def evaluate(frame: pd.DataFrame, claims: Iterable[Claim] | None = None) -> list[Verdict]:
    """A verdict for every entry (those whose suite did not run are "not measured")."""
    verdicts = []
    for claim in claims if claims is not None else load_claims():
        _, _, rule_text = _bounds(claim)
        measured = _measure(frame, claim)
        if measured.summary is None:
            verdict = "inconclusive" if measured.unjudgeable else "not measured"
            verdicts.append(
                Verdict(
                    claim,
                    verdict,
                    None,
                    rule_text,
                    measured.missing,
                    n_numerator=measured.n_numerator,
                    n_denominator=measured.n_denominator,
                )
            )
            continue
        verdict, reason, floor = _judge(claim, measured.summary)
        verdicts.append(
            Verdict(
                claim,
                verdict,
                measured.summary,
                rule_text,
                reason,
                floor,
                measured.n_numerator,
                measured.n_denominator,
            )
        )
    return verdicts


def verdict_table(verdicts: Iterable[Verdict]) -> pd.DataFrame:
    return pd.DataFrame.from_records([v.as_record() for v in verdicts])
