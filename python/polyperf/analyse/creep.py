"""Creep: a slow drift over the newest commits that no single step explains, and that change points miss by design
(a 0.3% step per commit is never one change). Pure, like `changepoints`, its neighbour.

The Mann-Kendall trend test is Kendall's tau between commit order and value (`scipy.stats.kendalltau`, exact for
small n without ties, tie-corrected otherwise), and Sen's slope is the Theil-Sen estimator with its interval
(`scipy.stats.theilslopes`): both are in scipy, so no trend package is needed. Both run on log-values: the slope is a
relative change per commit. A drift is reported at p <= 0.005 when the Sen slope over the window adds up to at least
1%. On noise (tests/test_change_rates.py) that flags under 1% of series per check; a 0.3%-per-commit creep over 30
commits at 3% noise is flagged in about 90% of trials.

A confirmed change inside the window explains a trend by itself, so one step is never creep. A strong creep is also
carved by change detection into a staircase of steps; two or more confirmed changes in the window, all in the
drift's direction, are reported as creep as well as changes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import kendalltau, theilslopes

__all__ = ["CREEP_COMMITS", "CREEP_PVALUE", "MIN_DRIFT", "Creep", "find_creep", "series_creep"]

CREEP_COMMITS = 30  # the newest commits the trend test looks at
CREEP_PVALUE = 0.005
MIN_DRIFT = 0.01  # the Sen slope over the window must add up to at least 1%
MIN_POINTS = 10  # fewer points since the last change: no trend test


@dataclass(frozen=True)
class Creep:
    """A drift over points `start`..`stop - 1`: `slope` is the relative change per commit (Sen), `drift` over them."""

    start: int
    stop: int
    slope: float
    slope_low: float
    slope_high: float
    drift: float
    p_value: float


def find_creep(
    values: Sequence[float],
    *,
    commits: int = CREEP_COMMITS,
    steps: Sequence[tuple[int, float]] = (),
    max_pvalue: float = CREEP_PVALUE,
    min_drift: float = MIN_DRIFT,
) -> Creep | None:
    """The drift over the newest `commits` points, or None when there is none or too few points to tell. `steps`:
    the series' confirmed changes as (index, relative size)."""
    data = np.asarray(values, dtype=float)
    start = max(data.size - commits, 0)
    window = data[start:]
    inside = [size for index, size in steps if start < index < data.size]
    if window.size < MIN_POINTS or not np.all(window > 0) or np.all(window == window[0]):
        return None
    logs, order = np.log(window), np.arange(window.size, dtype=float)
    test = kendalltau(order, logs)
    p_value = float(test.pvalue)
    if not math.isfinite(p_value) or p_value > max_pvalue:
        return None
    slope, _intercept, low, high = theilslopes(logs, order, 0.95)
    drift = math.expm1(slope * (window.size - 1))
    if abs(drift) < min_drift or len(inside) == 1:
        return None
    if inside and not all(np.sign(size) == np.sign(drift) for size in inside):
        return None  # steps both ways: no single drift
    return Creep(start, data.size, math.expm1(slope), math.expm1(low), math.expm1(high), drift, p_value)


def series_creep(
    points: pd.DataFrame,
    changes: pd.DataFrame,
    *,
    key: Sequence[str] = ("series_id",),
    metric_info: Callable[[str], Any] | None = None,
    commits: int = CREEP_COMMITS,
) -> pd.DataFrame:
    """The creep of every measured series in `points` (columns: `key`, `value`, `git_commit`, optionally `metric`;
    rows in commit order within a series), judged with its confirmed changes in `changes`. Exact counts are left
    out: any difference of theirs is already a change."""
    from polyperf.analyse.changepoints import better_of, label

    steps: dict[tuple, list[tuple[int, float]]] = {}
    if not changes.empty:
        confirmed = changes[changes["state"] == "confirmed"] if "state" in changes else changes
        if "kind" in confirmed:  # a slope is itself a drift, not a step that explains one away
            confirmed = confirmed[confirmed["kind"] != "slope"]
        for row in confirmed.itertuples(index=False):
            steps.setdefault(tuple(getattr(row, k) for k in key), []).append((int(row.index), float(row.change)))
    records = []
    for ident, group in points.groupby(list(key), sort=False):
        ident = ident if isinstance(ident, tuple) else (ident,)
        metric = str(group["metric"].iloc[0]) if "metric" in group else ""
        info = metric_info(metric) if metric_info is not None and metric else None
        if getattr(info, "exact", False):
            continue
        values = group["value"].to_numpy(dtype=float)
        values = values[np.isfinite(values)]
        found = find_creep(values, commits=commits, steps=steps.get(ident, ()))
        if found is None:
            continue
        commits_of = group["git_commit"].to_numpy(dtype=object)[np.isfinite(group["value"].to_numpy(dtype=float))]
        better = better_of(metric, metric_info)
        records.append(
            {
                **dict(zip(key, ident, strict=True)),
                "metric": metric,
                "commit_first": commits_of[found.start],
                "commit_last": commits_of[found.stop - 1],
                "points": found.stop - found.start,
                "better": better,
                "label": label(found.drift, better),
                **asdict(found),
            }
        )
    columns = [*key, "metric", "commit_first", "commit_last", "points", "better", "label", *Creep.__dataclass_fields__]
    return pd.DataFrame.from_records(records, columns=columns)
