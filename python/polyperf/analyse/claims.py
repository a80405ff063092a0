"""Published claims (claims.toml) turned into verdicts against a run's table.

A claim names the rows that measure it (`select`, plus `numerator`/`denominator` for a ratio) and a
rule with its thresholds; the verdict is `reproduced`, `not reproduced`, `inconclusive` (the
interval straddles the threshold) or `not measured` (this run has no such rows, e.g. a smoke run).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from polyperf.analyse.stats import Summary, ratio, summarize

__all__ = ["Claim", "Verdict", "evaluate", "load_claims"]

CLAIMS_FILE = Path(__file__).with_name("claims.toml")
VERDICTS = ("reproduced", "not reproduced", "inconclusive", "not measured")


@dataclass(frozen=True)
class Claim:
    id: str
    suite: str
    source: str
    statement: str
    published: float
    unit: str
    measure: str  # "ratio" or "value"
    metric: str
    select: Mapping[str, Any]
    rule: Mapping[str, Any]
    numerator: Mapping[str, Any] | None = None
    denominator: Mapping[str, Any] | None = None
    paired: bool = False
    note: str = ""


@dataclass(frozen=True)
class Verdict:
    claim: Claim
    verdict: str
    measured: Summary | None
    rule_text: str

    def as_record(self) -> dict[str, Any]:
        m = self.measured
        return {
            "claim": self.claim.id,
            "suite": self.claim.suite,
            "statement": self.claim.statement,
            "published": self.claim.published,
            "measured": m.median if m else None,
            "ci_low": m.low if m else None,
            "ci_high": m.high if m else None,
            "n": m.n if m else 0,
            "unit": self.claim.unit,
            "verdict": self.verdict,
            "rule": self.rule_text,
            "source": self.claim.source,
        }


def load_claims(path: Path = CLAIMS_FILE) -> list[Claim]:
    data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    return [Claim(**entry) for entry in data.get("claims", [])]


def _matches(frame: pd.DataFrame, spec: Mapping[str, Any]) -> pd.Series:
    mask = pd.Series(True, index=frame.index)
    for column, wanted in spec.items():
        if column == "params":
            for key, value in wanted.items():
                mask &= frame["params"].map(lambda p, k=key, v=value: p.get(k) == v)
        else:
            mask &= frame[column] == wanted
    return mask


def _values(frame: pd.DataFrame, claim: Claim, extra: Mapping[str, Any] | None = None) -> pd.DataFrame:
    spec = {**claim.select, **(extra or {}), "suite": claim.suite, "metric": claim.metric}
    return frame[_matches(frame, spec)].sort_values("repeat")


def _measure(frame: pd.DataFrame, claim: Claim) -> Summary | None:
    if claim.measure == "value":
        rows = _values(frame, claim)
        return summarize(rows["value"].tolist()) if len(rows) else None
    if claim.measure == "ratio":
        num = _values(frame, claim, claim.numerator)
        den = _values(frame, claim, claim.denominator)
        if not len(num) or not len(den):
            return None
        paired = claim.paired and len(num) == len(den)
        return ratio(num["value"].tolist(), den["value"].tolist(), paired=paired)
    raise ValueError(f"claim {claim.id}: unknown measure {claim.measure!r}")


def _num(value: float) -> str:
    """Whole numbers with thousands separators (2,009,108), others to 3 significant digits: for people."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:.3g}"


def _judge(claim: Claim, m: Summary) -> tuple[str, str]:
    """Applies the claim's rule to the measured interval; returns (verdict, rule in words)."""
    rule = claim.rule
    kind = rule["kind"]
    p = claim.published
    if kind == "within_factor":
        f = float(rule["factor"])
        lo, hi = p / f, p * f
        text = f"reproduced if the 95% CI lies within {lo:.3g}–{hi:.3g} (published ÷/× {f:g})"
    elif kind == "within_abs":
        tol = float(rule["tolerance"])
        lo, hi = p - tol, p + tol
        text = f"reproduced if the 95% CI lies within {_num(lo)}–{_num(hi)} (published ± {_num(tol)})"
    elif kind in ("less_than", "greater_than"):
        t = float(rule["threshold"])
        lo, hi = (float("-inf"), t) if kind == "less_than" else (t, float("inf"))
        text = f"reproduced if the whole 95% CI is {'below' if kind == 'less_than' else 'above'} {t:g}"
    else:
        raise ValueError(f"claim {claim.id}: unknown rule kind {kind!r}")
    if rule.get("why"):
        text += f"; {rule['why']}"
    if lo <= m.low and m.high <= hi:
        return "reproduced", text
    if m.high < lo or m.low > hi:
        return "not reproduced", text
    return "inconclusive", text


def evaluate(frame: pd.DataFrame, claims: list[Claim] | None = None) -> list[Verdict]:
    """Verdicts for every claim whose suite appears in `frame` (others are `not measured`)."""
    verdicts = []
    for claim in claims if claims is not None else load_claims():
        measured = _measure(frame, claim)
        if measured is None:
            verdicts.append(Verdict(claim, "not measured", None, "no matching rows in this run"))
            continue
        verdict, text = _judge(claim, measured)
        verdicts.append(Verdict(claim, verdict, measured, text))
    return verdicts


def verdict_table(verdicts: list[Verdict]) -> pd.DataFrame:
    return pd.DataFrame.from_records([v.as_record() for v in verdicts])
