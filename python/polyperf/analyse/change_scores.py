"""How well detected change points agree with annotated ones (a sheriff's triage, or a simulation's truth): precision,
recall and F1 at a tolerance of k points, the measure of change-point benchmarks (van den Burg and Williams' TCPDBench
uses a margin the same way). Pure: indices in, counts out; `cli/history.py` reads the annotated file.

A detection matches an annotated change within k points; each annotated change is matched at most once (the nearest
unmatched detection first), so two detections of one change count one true and one false.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["Score", "matched", "score"]


@dataclass(frozen=True)
class Score:
    series: int
    truths: int  # annotated changes (valid alerts)
    detections: int
    hits: int  # detections matched to an annotated change within k
    k: int

    @property
    def precision(self) -> float:
        return self.hits / self.detections if self.detections else float("nan")

    @property
    def recall(self) -> float:
        return self.hits / self.truths if self.truths else float("nan")

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r > 0 else 0.0


def matched(detected: Sequence[int], truth: Sequence[int], k: int) -> int:
    """How many detections match a distinct annotated change within `k` points (closest pairs first)."""
    pairs = sorted((abs(d - t), i, j) for i, d in enumerate(detected) for j, t in enumerate(truth) if abs(d - t) <= k)
    used_d: set[int] = set()
    used_t: set[int] = set()
    for _, i, j in pairs:
        if i not in used_d and j not in used_t:
            used_d.add(i)
            used_t.add(j)
    return len(used_d)


def score(series: Iterable[tuple[Sequence[int], Sequence[int]]], k: int) -> Score:
    """The pooled score over (detected, truth) index lists of many series."""
    count = truths = detections = hits = 0
    for detected, truth in series:
        count += 1
        truths += len(truth)
        detections += len(detected)
        hits += matched(detected, truth, k)
    return Score(count, truths, detections, hits, k)
