"""Perfherder's published change detection, re-implemented from its description to compare against polyperf's on
the same annotated series (a reference for the README's figures, not part of polyperf): at each point the points
before it (12 to 24) and the 12 from it on are compared with a Welch t statistic; a point whose t is at least 7 and
the largest within 12 points either side, with a change of the means of at least 2%, is an alert. Mozilla's own
service also weights and tunes windows per series; those settings are not in the public data, so this is the
method at its defaults.

Run: python tests/perfherder_method.py FOLDER_OR_CSV   (scores it as `polyperf history evaluate` scores polyperf)
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MIN_BACK, MAX_BACK, FORE = 12, 24, 12
T_MIN = 7.0
MIN_CHANGE = 0.02


def _welch_t(before: np.ndarray, after: np.ndarray) -> float:
    spread = np.sqrt(before.var(ddof=1) / before.size + after.var(ddof=1) / after.size)
    gap = abs(before.mean() - after.mean())
    if spread > 0:
        return float(gap / spread)
    return float("inf") if gap > 0 else 0.0


def alerts(values: np.ndarray) -> list[int]:
    """The indices Perfherder's method alerts at: a change between point i - 1 and point i."""
    n = values.size
    t = np.zeros(n)
    for i in range(MIN_BACK, n - FORE + 1):
        t[i] = _welch_t(values[max(0, i - MAX_BACK) : i], values[i : i + FORE])
    found = []
    for i in np.flatnonzero(t >= T_MIN):
        if t[i] < t[max(0, i - FORE) : i + FORE].max():
            continue
        before, after = values[max(0, i - MAX_BACK) : i].mean(), values[i : i + FORE].mean()
        if before != 0 and abs(after / before - 1) >= MIN_CHANGE:
            found.append(int(i))
    return found


@dataclass(frozen=True)
class _Alert:
    index: int
    state: str = "confirmed"


def main(path: Path) -> None:
    import polyperf.report.history_eval as history_eval

    frame = history_eval.read_annotated(path)
    # score it with the same code that scores polyperf's detections
    history_eval.find_changes = lambda values: [_Alert(i) for i in alerts(np.asarray(values, dtype=float))]
    result = history_eval.evaluate_annotated(frame, 5)
    s, push = result.detector, result.by_push
    assert push is not None
    print(
        f"Perfherder's method at its defaults: precision {s.precision:.2f}, recall {s.recall:.2f} "
        f"({s.hits} of {s.detections} changes, {s.truths} valid); by push: precision {push.precision:.2f} "
        f"({push.hits} of {push.detections})"
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
