"""Where the run's next repeats go. Pure: the verdicts so far, each entry's cost per repeat and the budget left in;
the entry to measure again (and how many repeats), and a one-line reason for every entry left undecided, out.

The rule, so that a reader can redo it:
- Only an entry whose verdict is still open and whose evidence is an e-process (`analyse.anytime`) can gain from
  more repeats; exact counts are judged on every repeat, and a decided entry keeps its answer.
- For an open entry, the bound its estimate has to clear is the one it lies beyond or nearest (a direction's
  threshold, a band's edge), moved out by `min_effect`; k of its n repeats lie beyond it. The projection assumes the
  next repeats fall beyond it at the share seen so far, shrunk toward a coin by one repeat each way, and counts the
  repeats until the one-sided e-process reaches what e-BH needs with one more declared part: m / (rate (R + 1)),
  doubled for a two-sided question (`anytime.repeats_to_reach`). Its interval then clears the bound by the same
  construction. The projection only chooses where time goes; the answer is always the e-process's at the end.
- Each time, the entry with the fewest projected seconds (repeats x its cost per repeat) goes next, and gets those
  repeats in one batch (at least `MIN_BATCH`, since every batch pays for a pytest session and its servers).
- No repeats go to an entry the data cannot decide (the share beyond the bound is a coin's: "within the noise"),
  nor to one whose projected cost exceeds the budget left: each says so, with the repeats it would need.
Re-allocating after every batch on the data is allowed because the evidence is anytime-valid; the simulation in
tests/test_adaptive_family.py measures the false discovery rate of the whole loop, as built.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from polyperf.analyse.anytime import repeats_to_reach
from polyperf.analyse.claims import Verdict
from polyperf.analyse.judge import band_of, direction_of

__all__ = ["MIN_BATCH", "Need", "Open", "choose", "declared", "family_target", "need_of", "needs", "open_of"]

MIN_BATCH = 2
LIMIT = 400  # repeats past which an entry is called undecidable by this run's data


@dataclass(frozen=True)
class Open:
    """What allocation reads of one entry: its id, whether it is decided, its repeats (logs for a ratio), the rule's
    bounds, `min_effect` and whether its evidence is an e-process."""

    claim: str
    decided: bool
    sample: Sequence[float]
    log: bool
    bounds: Sequence[float]
    min_effect: float
    sequential: bool


@dataclass(frozen=True)
class Need:
    """An open entry: the repeats projected to decide it (None: not within `LIMIT`), and why it is still open."""

    claim: str
    more: int | None
    why: str


def family_target(tests: int, declared: int, rate: float) -> float:
    """The two-sided e-value e-BH needs for one more declared part: m / (rate (R + 1))."""
    return max(1.0, tests / (rate * (declared + 1)))


def _bound_and_side(entry: Open) -> tuple[float, str] | None:
    """The bound the estimate must clear (moved out by min_effect, on the data's scale) and on which side."""
    z = sorted(v for v in entry.sample if math.isfinite(v))
    if not z or not entry.bounds:
        return None
    point = z[len(z) // 2] if len(z) % 2 else (z[len(z) // 2 - 1] + z[len(z) // 2]) / 2
    scale = [math.log(b) if entry.log else b for b in entry.bounds if (b > 0 or not entry.log)]
    if not scale:
        return None
    nearest = min(scale, key=lambda b: abs(point - b))
    side = "above" if point > nearest else "below"
    step = math.log1p(entry.min_effect) if entry.log else abs(nearest) * entry.min_effect
    return (nearest + step, side) if side == "above" else (nearest - step, side)


def need_of(entry: Open, target: float) -> Need | None:
    """None for an entry that more repeats cannot change (decided, or not an e-process)."""
    if entry.decided or not entry.sequential:
        return None
    found = _bound_and_side(entry)
    if found is None:
        return None
    bound, side = found
    z = [v for v in entry.sample if math.isfinite(v)]
    beyond = sum(1 for v in z if (v > bound if side == "above" else v < bound))
    more = repeats_to_reach(beyond, len(z), 2 * target, limit=LIMIT)
    shown = math.exp(bound) if entry.log else bound
    where = f"{beyond} of {len(z)} repeats lie {side} {shown:.3g}"
    if more is None:
        return Need(entry.claim, None, f"within the noise of {shown:.3g} ({where}): more than {LIMIT} repeats")
    return Need(entry.claim, more, f"{where}: about {more} more repeats would decide it")


def needs(entries: Iterable[Open], target: float) -> list[Need]:
    return [n for e in entries if (n := need_of(e, target)) is not None]


def choose(
    open_needs: Iterable[Need], cost_s: Mapping[str, float], remaining_s: float, overhead_s: float
) -> tuple[tuple[str, int] | None, dict[str, str]]:
    """(the entry to measure next and how many repeats, or None), and the reason each other open entry gets none.
    `cost_s`: seconds per repeat of each entry that can be measured again (absent: it cannot)."""
    reasons: dict[str, str] = {}
    candidates: list[tuple[float, str, int]] = []
    for need in open_needs:
        if need.claim not in cost_s:
            reasons[need.claim] = f"{need.why}; its tests cannot be run again in this run"
            continue
        if need.more is None:
            reasons[need.claim] = need.why
            continue
        batch = max(MIN_BATCH, need.more)
        seconds = batch * cost_s[need.claim] + overhead_s
        if seconds > remaining_s:
            reasons[need.claim] = f"the budget: {need.why} (≈ {seconds:.0f} s; {max(remaining_s, 0):.0f} s were left)"
            continue
        candidates.append((seconds, need.claim, batch))
    if not candidates:
        return None, reasons
    _, claim, batch = min(candidates)
    return (claim, batch), reasons


def open_of(verdict: Verdict) -> Open:
    """What allocation reads of a verdict: open while its verdict (the direction, or the band) is inconclusive."""
    claim, m = verdict.claim, verdict.measured
    bounds: list[float] = []
    if (direction := direction_of(claim.rule)) is not None:
        bounds = [direction[0]]
    elif (band := band_of(claim.rule, claim.center)) is not None:
        bounds = list(band)
    sequential = m is not None and m.evidence is not None and m.method.startswith(("median", "ratio"))
    return Open(
        claim.id,
        verdict.verdict != "inconclusive",
        verdict.sample,
        claim.measure == "ratio" and claim.paired,
        bounds,
        claim.min_effect,
        sequential and bool(verdict.sample),
    )


def declared(verdicts: Iterable[Verdict]) -> tuple[int, int]:
    """(tests in the run's family, parts it declared)."""
    verdicts = list(verdicts)
    tests = next((v.family.tests for v in verdicts if v.family is not None), 0)
    done = sum(
        1
        for v in verdicts
        for name, part in v.parts.items()
        if part.decided_by_interval and part.outcome != "inconclusive" and name in v.adjusted
    )
    return tests, done
