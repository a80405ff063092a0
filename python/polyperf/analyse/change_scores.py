"""How well detected change points agree with annotated ones (a sheriff's triage, or a simulation's truth): precision,
recall and F1 at a tolerance of k points, the measure of change-point benchmarks (van den Burg and Williams' TCPDBench
uses a margin the same way). Pure: indices in, counts out; `cli/history.py` reads the annotated file.

A detection matches an annotated change within k points; each annotated change is matched at most once (the nearest
unmatched detection first), so two detections of one change count one true and one false.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["Score", "cover", "f1_margin", "matched", "score"]


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


# The change-point literature's scores over several annotators (van den Burg and Williams, "An evaluation of change
# point detection algorithms", 2020: the Turing benchmark TCPD). Both sets take the start of the series (point 0) as
# a change, so a series nobody marked scores 1 for a detector that reports nothing there. A change point is the first
# point of a new segment.


def _hits_of(truth: Iterable[int], detected: Iterable[int], margin: int) -> set[int]:
    """The annotated points matched within `margin` by a distinct detection, each taking its nearest free one."""
    free = sorted(set(detected))
    hits = set()
    for t in sorted(set(truth)):
        near = [(abs(t - d), d) for d in free if abs(t - d) <= margin]
        if near:
            hits.add(t)
            free.remove(min(near)[1])
    return hits


def f1_margin(annotations: Sequence[Sequence[int]], detected: Sequence[int], margin: int = 5) -> float:
    """F1 over annotators: precision against the union of their points, recall averaged over annotators."""
    if not annotations:
        raise ValueError("F1 needs at least one annotator's set of change points")
    found = {0, *detected}
    sets = [{0, *points} for points in annotations]
    union = set().union(*sets)
    precision = len(_hits_of(union, found, margin)) / len(found)
    recall = sum(len(_hits_of(points, found, margin)) / len(points) for points in sets) / len(sets)
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def _segments(points: Iterable[int], n: int) -> list[tuple[int, int]]:
    cuts = [0, *sorted({p for p in points if 0 < p < n}), n]
    return list(itertools.pairwise(cuts))


def cover(annotations: Sequence[Sequence[int]], detected: Sequence[int], n: int) -> float:
    """Segment covering averaged over annotators: each annotated segment weighted by its length, with the best
    Jaccard overlap of a detected segment."""
    if not annotations or n < 1:
        raise ValueError("Cover needs at least one annotator and a series of at least one point")
    found = _segments(detected, n)
    covers = []
    for points in annotations:
        total = 0.0
        for lo, hi in _segments(points, n):
            best = max(max(0, min(hi, b) - max(lo, a)) / (max(hi, b) - min(lo, a)) for a, b in found)
            total += (hi - lo) * best
        covers.append(total / n)
    return sum(covers) / len(covers)
