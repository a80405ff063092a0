"""A measurement against one registry entry, in two parts: the direction the entry claims, and the size against the
published figure. Pure: a `Summary` and the entry's rule in, the parts (each with its test's p-value) out.

- Direction (rule less_than / greater_than): "reproduced" when the whole interval lies on the claimed side of the
  threshold, "opposite" when it lies wholly on the other, else "inconclusive".
- Size (an entry with a published figure): measured ÷ published with its interval; "as published" when the interval
  lies inside the entry's equivalence margin (`margin`, a factor, or `margin_abs`, in the entry's unit; a within_*
  rule centred on the published figure is its own margin), "larger" / "smaller" when it lies wholly outside, else
  "inconclusive".
- Band (rule within_factor / within_abs): "inside" / "above" / "below" the rule's band; the verdict of an entry that
  claims a value rather than a direction (a syscall count, generators that agree).
An estimate within the noise floor (the interval's half-width on the side facing the boundary, at least
`min_effect`) of a boundary is never decided: the interval, widened by `min_effect`, reaches it.
Each decided outcome carries the two-sided p-value of its test, the one whose inversion is the interval, so that the
run's outcomes can be controlled together (`analyse.family`); exact counts are judged on every repeat, not tested.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from polyperf.analyse.stats import LEVEL, METHOD_EXACT, Summary

__all__ = ["Part", "band_of", "direction_of", "judge_parts", "size_band", "tested_part"]

ALPHA = 1 - LEVEL
MIN_REPEATS = 3  # below this no verdict is decided, whatever a method's interval would allow


@dataclass(frozen=True)
class Part:
    """One judged question: its outcome, why, and the two-sided p-value of its test (NaN when nothing was tested:
    exact counts, too few samples). `decided_by_interval` keeps what the interval alone said, before the family."""

    outcome: str
    reason: str
    p_value: float = math.nan
    decided_by_interval: bool = False
    e_value: float = math.nan  # the evidence the family (e-BH) receives; 1 / p_value for the sign e-process

    @property
    def family_p(self) -> float:
        """What the family adjusts: 1/e, a valid p-value at any stopping time (NaN: not a test)."""
        if math.isnan(self.p_value):
            return math.nan
        if math.isnan(self.e_value):  # a summary without e-values: its p-value calibrated (e = 1 / (2 sqrt p))
            return min(1.0, 2.0 * math.sqrt(self.p_value))
        return min(1.0, 1.0 / self.e_value) if self.e_value > 0 else 1.0

    @property
    def held_back(self) -> bool:
        """Its own interval decided it, the family's control did not."""
        return self.decided_by_interval and self.outcome == "inconclusive"


def num(value: float) -> str:
    """Whole numbers with thousands separators (2,009,108), others to 3 significant digits: for people."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:.3g}"


def direction_of(rule: dict[str, Any]) -> tuple[float, str] | None:
    """(threshold, "above" | "below") of a direction rule; None for a band rule."""
    kind = rule["kind"]
    if kind not in ("less_than", "greater_than"):
        return None
    return float(rule["threshold"]), "above" if kind == "greater_than" else "below"


def band_of(rule: dict[str, Any], center: float | None) -> tuple[float, float] | None:
    """(low, high) accepted by a within_* rule; None for a direction rule."""
    kind = rule["kind"]
    if kind == "within_factor":
        f, c = float(rule["factor"]), center or 0.0
        return c / f, c * f
    if kind == "within_abs":
        t, c = float(rule["tolerance"]), center or 0.0
        return c - t, c + t
    return None


def size_band(
    published: float | None, margin: float | None, margin_abs: float | None, rule: dict[str, Any]
) -> tuple[float, float] | None:
    """The values "as published" covers: published ÷/× margin, published ± margin_abs, or a within_* band centred
    on the published figure; None without a published figure or a margin."""
    if published is None:
        return None
    if margin is not None:
        return published / margin, published * margin
    if margin_abs is not None:
        return published - margin_abs, published + margin_abs
    if "center" not in rule:
        return band_of(rule, published)
    return None


def _reach(m: Summary, boundary: float, min_effect: float) -> float:
    """The noise floor toward `boundary`: the interval's half-width on the side that faces it (an interval of
    skewed data is wider on one side, and only the side facing a bound can reach it), at least `min_effect`."""
    if m.has_interval and m.low > 0 and m.median > 0:
        side = m.median / m.low - 1 if boundary < m.median else m.high / m.median - 1
        return max(side, min_effect)
    return max(m.spread, min_effect) if not math.isnan(m.spread) else min_effect


def _near(m: Summary, boundary: float, reach: float) -> bool:
    if not (math.isfinite(boundary) and boundary > 0 and m.median > 0):
        return False
    return abs(math.log(m.median / boundary)) <= math.log1p(reach)


def _past(m: Summary, threshold: float, side: str) -> tuple[bool, float, float]:
    """(whether the estimand is shown `side` of threshold, the two-sided p-value of that test, its e-value). A
    summary made without its test (no `tails`) is judged by its interval alone, and carries no p-value into the
    family; one without e-values (`evidence`) carries NaN, and the family calibrates its p-value."""
    if m.tails is None:
        return (m.low >= threshold if side == "above" else m.high <= threshold), math.nan, math.nan
    one = m.p_above(threshold) if side == "above" else m.p_below(threshold)
    p = 1.0 if math.isnan(one) else min(1.0, 2 * one)
    e = math.nan
    if m.evidence is not None:
        e_above, e_below = m.evidence(threshold)
        e = e_above if side == "above" else e_below
        e = 0.0 if math.isnan(e) else e
    return p <= ALPHA, p, e


def _least(*tests: tuple[float, float]) -> tuple[float, float]:
    """(p, e) of the strongest of several (p, e) tests; NaN when none was tested."""
    tested = [t for t in tests if not math.isnan(t[0])]
    return min(tested, key=lambda t: t[0]) if tested else (math.nan, math.nan)


def _inside(lo: tuple[bool, float, float], hi: tuple[bool, float, float]) -> tuple[bool, float, float]:
    """Both one-sided tests of an equivalence: decided when both are; p the larger, e the smaller."""
    return lo[0] and hi[0], max(lo[1], hi[1]), min(lo[2], hi[2]) if not math.isnan(lo[2] + hi[2]) else math.nan


def _interval_text(m: Summary) -> str:
    return f"{num(m.low)}–{num(m.high)}" if m.low != m.high else num(m.low)


def _where(m: Summary) -> str:
    return f"{LEVEL:.0%} interval {_interval_text(m)} (n = {m.n}, {m.method})"


def _direction(m: Summary, threshold: float, side: str, min_effect: float) -> Part:
    if m.method == METHOD_EXACT:
        where = f"every repeat (n = {m.n}) counted {_interval_text(m)}, judged exactly"
        if (m.low > threshold) if side == "above" else (m.high < threshold):
            return Part("reproduced", where)
        if (m.high < threshold) if side == "above" else (m.low > threshold):
            return Part("opposite", where)
        return Part("inconclusive", f"repeats disagree or equal the threshold: {where}")
    flip = "below" if side == "above" else "above"
    (claimed, *t_claimed), (other, *t_other) = _past(m, threshold, side), _past(m, threshold, flip)
    if _near(m, threshold, floor := _reach(m, threshold, min_effect)):
        reason = f"within this run's noise (±{floor:.1%}) of {num(threshold)}"
        return _part("inconclusive", reason, _least(tuple(t_claimed), tuple(t_other)))
    if claimed:
        return _part("reproduced", f"{_where(m)} lies {side} {num(threshold)}", tuple(t_claimed), True)
    if other:
        return _part("opposite", f"{_where(m)} lies {flip} {num(threshold)}", tuple(t_other), True)
    return _part("inconclusive", f"{_where(m)} straddles {num(threshold)}", _least(tuple(t_claimed), tuple(t_other)))


def _part(outcome: str, reason: str, test: tuple[float, float], decided: bool = False) -> Part:
    return Part(outcome, reason, test[0], decided, test[1])


def _band(m: Summary, lo: float, hi: float, min_effect: float, what: str) -> Part:
    """inside / above / below the band [lo, hi]; `what` names the band in the reason."""
    if m.method == METHOD_EXACT:
        where = f"every repeat (n = {m.n}) counted {_interval_text(m)}, judged exactly"
        if lo <= m.low and m.high <= hi:
            return Part("inside", where)
        if m.low > hi or m.high < lo:
            return Part("above" if m.low > hi else "below", where)
        return Part("inconclusive", f"repeats disagree: {where}")
    (above, *t_above), (below, *t_below) = _past(m, hi, "above"), _past(m, lo, "below")
    inside, *t_inside = _inside(_past(m, lo, "above"), _past(m, hi, "below"))
    tests = (tuple(t_above), tuple(t_below), tuple(t_inside))
    for boundary in (lo, hi):
        if _near(m, boundary, floor := _reach(m, boundary, min_effect)):
            reason = f"within this run's noise (±{floor:.1%}) of {num(boundary)}"
            return _part("inconclusive", reason, _least(*tests))
    span = f"{what} {num(lo)}–{num(hi)}"
    if inside:
        return _part("inside", f"{_where(m)} lies inside {span}", tests[2], True)
    if above:
        return _part("above", f"{_where(m)} lies above {span}", tests[0], True)
    if below:
        return _part("below", f"{_where(m)} lies below {span}", tests[1], True)
    return _part("inconclusive", f"{_where(m)} straddles a bound of {span}", _least(*tests))


SIZE_WORDS = {"inside": "as published", "above": "larger", "below": "smaller", "inconclusive": "inconclusive"}


def judge_parts(
    m: Summary,
    rule: dict[str, Any],
    center: float | None,
    size: tuple[float, float] | None,
    min_effect: float,
) -> tuple[dict[str, Part], float | None]:
    """The parts of one measured entry ("direction" or "band", and "size" when there is a published figure to
    compare with), and the noise floor. Outcomes of "size" are as published / larger / smaller / inconclusive."""
    parts: dict[str, Part] = {}
    direction, band = direction_of(rule), band_of(rule, center)
    if m.method != METHOD_EXACT and (not m.has_interval or m.n < MIN_REPEATS):
        need = max(m.min_n, MIN_REPEATS)
        per = " per side" if m.method.startswith("ratio of medians") else ""
        few = Part("inconclusive", f"too few samples (n = {m.n}; needs ≥ {need}{per})")
        parts["direction" if direction else "band"] = few
        if size is not None:
            parts["size"] = few
        return parts, None
    floor = 0.0 if m.method == METHOD_EXACT else max(m.spread, min_effect) if not math.isnan(m.spread) else min_effect
    if direction is not None:
        parts["direction"] = _direction(m, *direction, min_effect)
    elif band is not None:
        parts["band"] = _band(m, *band, min_effect, "the band")
    if size is not None:
        judged = _band(m, *size, min_effect, "the published figure's margin")
        reason = judged.reason.replace(f"{_where(m)} ", "", 1) if m.method != METHOD_EXACT else judged.reason
        parts["size"] = replace(judged, outcome=SIZE_WORDS[judged.outcome], reason=reason)
    return parts, floor


def tested_part(part: Part, adjusted: float, family_text: str, rate: float) -> Part:
    """A part after the family's adjustment: an outcome its interval decided stays decided only if its adjusted
    p-value is within the family's rate."""
    if not part.decided_by_interval or adjusted <= rate:
        return part
    p = f"e = {1 / part.family_p:.3g}, adjusted p = {adjusted:.3g}"
    reason = f"{part.reason}, but not after the family's control ({p}; {family_text})"
    return Part("inconclusive", reason, part.p_value, True, part.e_value)
