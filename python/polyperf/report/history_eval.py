"""`polyperf history evaluate`: change detection scored against an annotated history (a table of series whose points
carry the alerts people triaged), beside the alerts' own valid share, so the two read on one sample.

The annotated table: columns `series`, `value` and `alert`, rows in commit order within each series; `alert` is empty,
`valid` (a change people confirmed: the truth) or `invalid` (an alert people dismissed as noise). Other columns are
ignored. Scoring is `analyse.change_scores`; detection is `analyse.changepoints.find_changes` as `polyperf history`
calls it, counting what the page shows (confirmed and pending changes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from polyperf.analyse.change_scores import Score, score
from polyperf.analyse.changepoints import find_changes

__all__ = ["ALERTS", "Evaluation", "evaluate_annotated", "read_annotated"]

ALERTS = ("", "valid", "invalid")


@dataclass(frozen=True)
class Evaluation:
    detector: Score  # polyperf's detections against the valid alerts
    valid_alerts: int
    invalid_alerts: int
    series_with_invalid: int
    series_without_alerts: int

    @property
    def alerts_valid_share(self) -> float:
        """The annotated alerts' own precision: valid over all triaged alerts."""
        alerts = self.valid_alerts + self.invalid_alerts
        return self.valid_alerts / alerts if alerts else math.nan


def read_annotated(path: Path) -> pd.DataFrame:
    """The table, checked: ValueError with one line naming the file and what is wrong."""
    try:
        frame = pd.read_csv(path, dtype={"series": str, "alert": str}, keep_default_na=False)
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not a CSV table ({str(exc).splitlines()[0]})") from None
    missing = [c for c in ("series", "value", "alert") if c not in frame]
    if missing:
        raise ValueError(f"{path}: missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
    values = pd.to_numeric(frame["value"], errors="coerce")
    if values.isna().any() or not np.isfinite(values).all():
        row = int(np.flatnonzero(~np.isfinite(values.fillna(np.inf)))[0]) + 2
        raise ValueError(f"{path}: line {row}: value {frame['value'].iloc[row - 2]!r} is not a finite number")
    unknown = sorted(set(frame["alert"]) - set(ALERTS))
    if unknown:
        raise ValueError(f"{path}: alert {unknown[0]!r} is not one of: empty, valid, invalid")
    return frame.assign(value=values.astype(float))


def evaluate_annotated(frame: pd.DataFrame, k: int) -> Evaluation:
    pairs = []
    with_invalid = without = 0
    for _, rows in frame.groupby("series", sort=False):
        alerts = rows["alert"].to_numpy()
        detected = [c.index for c in find_changes(rows["value"].to_numpy(dtype=float))]
        pairs.append((detected, list(np.flatnonzero(alerts == "valid"))))
        with_invalid += bool((alerts == "invalid").any())
        without += not (alerts != "").any()
    return Evaluation(
        score(pairs, k),
        int((frame["alert"] == "valid").sum()),
        int((frame["alert"] == "invalid").sum()),
        with_invalid,
        without,
    )
