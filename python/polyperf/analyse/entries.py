"""What a claims file holds and what judging it gives: an entry of the registry (`Claim`: an article's claim,
polyperf's restatement of one, or a check of its own) and its verdict on a run (`Verdict`, with the record the
report, the store and `verdicts.json` keep). Pure data: `claims_file` reads entries, `claims` judges them."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from polyperf.analyse.family import Family
from polyperf.analyse.judge import Part, size_band
from polyperf.analyse.stats import LEVEL, Summary
from polyperf.analyse.stats import METHOD_EXACT as EXACT

__all__ = ["CLAIMS_FILE", "DEFAULT_MIN_EFFECT", "KINDS", "RULES", "VERDICTS", "Claim", "Verdict"]

CLAIMS_FILE = Path(__file__).with_name("claims.toml")
VERDICTS = ("reproduced", "not reproduced", "inconclusive", "not measured")
# derived: polyperf's restatement of an article's claim, in a quantity the article did not measure
KINDS = ("claim", "check", "derived")
RULES = ("within_factor", "within_abs", "less_than", "greater_than")
DEFAULT_MIN_EFFECT = 0.01


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
