"""A registry entry's rule, and a verdict's two parts, in words for people: "direction: reproduced if the whole interval
is above 1; size: as published within 5.72–22.9 (11.43 ÷/× 2)", "reproduced, 3.7x larger than published (42.8x vs
11.43x)". Pure text from a `Claim` and a `Verdict`."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from polyperf.analyse.judge import band_of, direction_of, num

if TYPE_CHECKING:
    from polyperf.analyse.entries import Claim, Verdict

__all__ = ["headline", "rule_text"]


def rule_text(claim: Claim) -> str:
    """The rule in words: the direction or band, then what counts as the published size."""
    rule = claim.rule
    direction, band = direction_of(rule), band_of(rule, claim.center)
    if direction is not None:
        threshold, side = direction
        text = f"direction: reproduced if the whole interval is {side} {num(threshold)}"
    else:
        lo, hi = band or (math.nan, math.nan)
        factor = rule["kind"] == "within_factor"
        how = f"÷/× {float(rule['factor']):g}" if factor else f"± {num(float(rule['tolerance']))}"
        text = f"reproduced if the interval lies within {num(lo)}–{num(hi)} ({num(claim.center or 0.0)} {how})"
    size = claim.size_band
    if size is not None and not (band is not None and "center" not in rule):
        how = f"÷/× {claim.margin:g}" if claim.margin else f"± {num(claim.margin_abs or 0.0)}"
        text += f"; size: as published within {num(size[0])}–{num(size[1])} ({num(claim.published or 0.0)} {how})"
    if rule.get("why"):
        text += f"; {rule['why']}"
    return text


def _figure(value: float, unit: str, digits: int = 3) -> str:
    """A number for a headline: `63.5x`, `2,009,109 syscalls`, `0.0123 s`."""
    if unit == "x":
        return f"{value:.{digits}g}x"
    text = f"{value:,.0f}" if float(value).is_integer() or abs(value) >= 100 else f"{value:.{digits}g}"
    return f"{text} {unit}"


def _size_words(v: Verdict) -> str:
    c, m, ratio_ = v.claim, v.measured, v.size_ratio
    if m is None or v.size is None or c.published is None:
        return ""
    if c.unit == "x":
        both = f"({_figure(m.median, c.unit)} vs {_figure(c.published, c.unit, 6)})"
    else:
        both = f"({_figure(m.median, c.unit).removesuffix(' ' + c.unit)} vs {_figure(c.published, c.unit, 6)})"
    if v.size in ("larger", "smaller") and ratio_ is not None and ratio_[0] > 0:
        factor = ratio_[0] if v.size == "larger" else 1 / ratio_[0]
        return f"{factor:.2g}x {v.size} than published {both}"
    if v.size == "as published":
        return f"as published {both}"
    return f"size inconclusive {both}"


def headline(v: Verdict) -> str:
    """ "reproduced, 5.6x larger than published (63.5x vs 11.43x)"; the band's verdict where no direction is claimed."""
    if v.measured is None:
        return v.verdict
    if v.direction is not None:
        head = {"opposite": "opposite direction"}.get(v.direction, v.direction)
    else:
        head = v.verdict
        if "center" not in v.claim.rule and v.size is not None:  # the band is the published size itself
            return f"{head}: {_size_words(v)}"
    size = _size_words(v)
    return f"{head}, {size}" if size else f"{head} ({_figure(v.measured.median, v.claim.unit)})"
