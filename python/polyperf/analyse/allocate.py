"""Where the run's next repeats go. Pure: the verdicts so far, each entry's cost per repeat and the budget left in;
the entry to measure again (and how many repeats), and a one-line reason for every entry left undecided, out.

The rule, so that a reader can redo it:
- Only an entry whose verdict is still open and whose evidence is an e-process (`analyse.anytime`) can gain from
  more repeats; exact counts are judged on every repeat, and a decided entry keeps its answer.
- For an open entry, the bound its estimate has to clear is the one it lies beyond or nearest (a direction's
  threshold, a band's edge; both edges of a band it lies inside, the one needing more repeats counting), moved out by
  `min_effect`; k of its n repeats lie beyond it. The projection assumes the
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

from polyperf.analyse.anytime import evidence, repeats_to_reach
from polyperf.analyse.claims import Verdict
from polyperf.analyse.judge import band_of, direction_of

__all__ = [
    "MIN_BATCH",
    "Need",
    "Open",
    "choose",
    "declared",
    "family_target",
    "first_batch_floor",
    "need_of",
    "needs",
    "open_of",
]

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
    priority: int = 0  # 0: the verdict (direction or band); 1: the size against the published figure


@dataclass(frozen=True)
class Need:
    """An open entry: the repeats projected to decide it (None: not within `LIMIT`), and why it is still open."""

    claim: str
    more: int | None
    why: str
    priority: int = 0


def family_target(tests: int, declared: int, rate: float) -> float:
    """The two-sided e-value e-BH needs for one more declared part: m / (rate (R + 1))."""
    return max(1.0, tests / (rate * (declared + 1)))


def _bounds_to_clear(entry: Open) -> list[tuple[float, str, float]]:
    """The bounds the estimate must clear (each moved out by min_effect, on the data's scale), with the side and the
    rule's own bound: the nearest one, or, for an estimate inside a band, both edges (an answer "inside" needs the
    interval clear of each)."""
    z = sorted(v for v in entry.sample if math.isfinite(v))
    if not z or not entry.bounds:
        return []
    point = z[len(z) // 2] if len(z) % 2 else (z[len(z) // 2 - 1] + z[len(z) // 2]) / 2
    scale = sorted(math.log(b) if entry.log else b for b in entry.bounds if (b > 0 or not entry.log))
    if not scale:
        return []
    inside = len(scale) == 2 and scale[0] < point < scale[1]
    chosen = scale if inside else [min(scale, key=lambda b: abs(point - b))]
    out = []
    for bound in chosen:
        side = "above" if point > bound else "below"
        step = math.log1p(entry.min_effect) if entry.log else abs(bound) * entry.min_effect
        moved = bound + step if side == "above" else bound - step
        out.append((moved, side, math.exp(bound) if entry.log else bound))
    return out


def need_of(entry: Open, target: float) -> Need | None:
    """None for an entry that more repeats cannot change (decided, or not an e-process). Where two bounds must be
    cleared, the one that needs more repeats is the projection."""
    if entry.decided or not entry.sequential:
        return None
    found = _bounds_to_clear(entry)
    if not found:
        return None
    z = [v for v in entry.sample if math.isfinite(v)]
    worst: Need | None = None
    for bound, side, rule_bound in found:
        beyond = sum(1 for v in z if (v > bound if side == "above" else v < bound))
        more = repeats_to_reach(beyond, len(z), 2 * target, limit=LIMIT)
        shown = math.exp(bound) if entry.log else bound
        where = f"{beyond} of {len(z)} repeats lie {side} {shown:.3g}"
        if more is None:
            why = f"within the noise of {rule_bound:.3g} ({where}): would need more than {LIMIT} more repeats"
            return Need(entry.claim, None, why, entry.priority)
        need = Need(entry.claim, more, f"{where}: about {more} more repeats would decide it", entry.priority)
        if worst is None or (worst.more is not None and more > worst.more):
            worst = need
    return worst


def needs(entries: Iterable[Open], target: float) -> list[Need]:
    """One need per entry: its verdict's while that is open, else its size's."""
    out: dict[str, Need] = {}
    for entry in sorted(entries, key=lambda e: e.priority):
        if entry.claim not in out and (need := need_of(entry, target)) is not None:
            out[entry.claim] = need
    return list(out.values())


def choose(
    open_needs: Iterable[Need], cost_s: Mapping[str, float], remaining_s: float, overhead_s: float
) -> tuple[list[tuple[str, int]], dict[str, str]]:
    """The entries to measure in the next batch with their repeats, cheapest projected seconds first, as many as
    fit the budget left together (one batch pays `overhead_s` once); and the reason each other open entry gets
    none. `cost_s`: seconds per repeat of each entry that can be measured again (absent: it cannot). An entry of
    `priority` 1 (a size, after its verdict is decided) comes after every entry of priority 0 that fits."""
    reasons: dict[str, str] = {}
    candidates: list[tuple[int, float, str, int]] = []
    for need in open_needs:
        if need.claim not in cost_s:
            reasons[need.claim] = f"{need.why}; its tests cannot be run again in this run"
            continue
        if need.more is None:
            reasons[need.claim] = need.why
            continue
        batch = max(MIN_BATCH, need.more)
        seconds = batch * cost_s[need.claim]
        if seconds + overhead_s > remaining_s:
            reasons[need.claim] = (
                f"the budget: {need.why} (≈ {seconds + overhead_s:.0f} s; {max(remaining_s, 0):.0f} s were left)"
            )
            continue
        candidates.append((need.priority, seconds, need.claim, batch))
    chosen: list[tuple[str, int]] = []
    spent = overhead_s
    for _, seconds, claim, batch in sorted(candidates):
        if spent + seconds <= remaining_s and claim not in dict(chosen):
            chosen.append((claim, batch))
            spent += seconds
    return chosen, reasons


def open_of(verdict: Verdict) -> list[Open]:
    """What allocation reads of a verdict: its verdict (the direction, or the band) while inconclusive, and its size
    against the published figure while that is inconclusive (second in line)."""
    claim, m = verdict.claim, verdict.measured
    bounds: list[float] = []
    if (direction := direction_of(claim.rule)) is not None:
        bounds = [direction[0]]
    elif (band := band_of(claim.rule, claim.center)) is not None:
        bounds = list(band)
    sequential = m is not None and m.evidence is not None and bool(verdict.sample)
    log = claim.measure == "ratio" and claim.paired
    common = {"sample": verdict.sample, "log": log, "min_effect": claim.min_effect, "sequential": sequential}
    out = [Open(claim.id, verdict.verdict != "inconclusive", bounds=bounds, **common)]
    if verdict.size is not None and claim.size_band is not None:
        out.append(Open(claim.id, verdict.size != "inconclusive", bounds=list(claim.size_band), priority=1, **common))
    return out


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


def first_batch_floor(n: int, tests: int, declared_parts: int, rate: float = 0.05) -> int | None:
    """The fewest of a first batch's `n` repeats that must lie beyond a bound for the part to be declared at the
    family's level, with `declared_parts` other parts of the `tests` declared (e-BH: e >= m / (rate (R + 1)));
    None when not even all `n` do: that entry is decided only by the repeats a top-up adds."""
    target = 2 * family_target(tests, declared_parts, rate)
    return next((k for k in range(n + 1) if evidence(k, n) >= target), None)
