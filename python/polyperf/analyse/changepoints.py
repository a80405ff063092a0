"""Change points over a history: where a series' value moved, between which commits, by how much, how surely.

Pure: a table of points (one value per run and series, in commit order) in, a table of changes out.

- Measured values: Apache Otava's E-Divisive means with a Student's t-test (the method of MongoDB's performance
  CI, Daly et al. ICPE 2020, made deterministic by Otava), at p ≤ 0.001 over sliding windows of 50 points. On
  synthetic histories (tests/test_changepoints.py) it finds a 10% step at 3% noise within one commit in about 98%
  of trials, and calls about 0.2 false changes in 200 commits of pure noise.
- Exact counts (syscalls, allocations, rows): every difference from one point to the next is a change.

Each change carries the commits on either side, its size as the Hodges–Lehmann ratio of the points after over the
points before (up to 25 on each side, within the neighbouring changes) with its Moses 95% interval (`stats.ratio`),
and the t-test's p-value. Which way is better comes
from the metric catalogue; a metric it does not know is "unknown", never guessed from its name.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd
from otava.analysis import compute_change_points

from polyperf.analyse.stats import ratio

__all__ = ["MAX_PVALUE", "WINDOW", "Change", "better_of", "find_changes", "label", "p_text", "series_changes"]

MAX_PVALUE = 0.001
WINDOW = 50


@dataclass(frozen=True)
class Change:
    """A change between point `index - 1` and point `index`: `change` is after / before − 1."""

    index: int
    before: float
    after: float
    change: float
    change_low: float
    change_high: float
    p_value: float | None  # None for exact counts: a difference needs no test
    exact: bool


def _size(before: np.ndarray, after: np.ndarray) -> tuple[float, float, float]:
    med_b, med_a = float(np.median(before)), float(np.median(after))
    if np.all(before > 0) and np.all(after > 0):
        summary = ratio(after, before)
        low = summary.low - 1 if summary.has_interval else math.nan
        high = summary.high - 1 if summary.has_interval else math.nan
        return summary.median - 1, low, high
    if med_b == 0:
        return math.nan, math.nan, math.nan
    return med_a / med_b - 1, math.nan, math.nan


def _exact_changes(values: np.ndarray) -> list[Change]:
    changes = []
    for i in np.flatnonzero(values[1:] != values[:-1]) + 1:
        before, after = float(values[i - 1]), float(values[i])
        size = after / before - 1 if before != 0 else math.nan
        changes.append(Change(int(i), before, after, size, size, size, None, True))
    return changes


def find_changes(
    values: Sequence[float],
    *,
    exact: bool = False,
    max_pvalue: float = MAX_PVALUE,
    window: int = WINDOW,
) -> list[Change]:
    """The change points of one series (values in commit order, NaN-free)."""
    data = np.asarray(values, dtype=float)
    if data.size < 2:
        return []
    if exact:
        return _exact_changes(data)
    if np.all(data == data[0]):
        return []
    # Otava takes a list: with a numpy array its split step fails (`ValueError` from an empty side, 0.8.0)
    points, _weak = compute_change_points(data.tolist(), window_len=window, max_pvalue=max_pvalue)
    bounds = [0, *(int(p.index) for p in points), data.size]
    changes = []
    for j, point in enumerate(points, start=1):
        # the size from at most half a window on either side: the step itself, not drifts far from it (and the
        # exact rank distribution stays small: a 150 x 150 one takes 0.4 s to build, a 25 x 25 one milliseconds)
        side = max(window // 2, 2)
        before = data[max(bounds[j - 1], bounds[j] - side) : bounds[j]]
        after = data[bounds[j] : min(bounds[j + 1], bounds[j] + side)]
        size, low, high = _size(before, after)
        changes.append(
            Change(
                bounds[j],
                float(np.median(before)),
                float(np.median(after)),
                size,
                low,
                high,
                float(point.stats.pvalue),
                False,
            )
        )
    return changes


def better_of(metric: str, lookup: Callable[[str], Any] | None) -> str:
    """ "higher", "lower" or "none" from the metric catalogue; "unknown" for a metric it does not list."""
    info = lookup(metric) if lookup is not None else None
    better = getattr(info, "better", None)
    return better if better in ("higher", "lower", "none") else "unknown"


def p_text(p_value: float) -> str:
    """`p = 3e-05`; `p < 1e-300` where the t-test's p-value underflows to 0."""
    return f"p = {p_value:.1g}" if p_value > 0 else "p < 1e-300"


def label(change: float, better: str) -> str:
    """regression / improvement where the catalogue says which way is better, else "change"."""
    if not math.isfinite(change) or change == 0 or better not in ("higher", "lower"):
        return "change"
    worse = change > 0 if better == "lower" else change < 0
    return "regression" if worse else "improvement"


def series_changes(
    points: pd.DataFrame,
    *,
    key: Sequence[str] = ("series_id",),
    exact_column: str | None = None,
    metric_info: Callable[[str], Any] | None = None,
    max_pvalue: float = MAX_PVALUE,
    window: int = WINDOW,
) -> pd.DataFrame:
    """Every change of every series in `points` (columns: `key`, `value`, `git_commit`, `run_id`, optionally
    `metric`; rows in commit order within a series). A series is exact when the catalogue marks its metric exact,
    or, for values the catalogue cannot name (a claim's measured value), when the caller's `exact_column` (itself
    read from the catalogue) says so for all its points. Whole numbers alone never make a series exact."""
    records: list[dict[str, Any]] = []
    # numpy slices per series rather than a pandas group each: a thousand series must take seconds, not minutes
    frame = points[np.isfinite(points["value"].to_numpy(dtype=float))]
    codes = frame.groupby(list(key), sort=False).ngroup().to_numpy()
    order = np.argsort(codes, kind="stable")
    bounds = np.flatnonzero(np.diff(codes[order])) + 1
    values_all = frame["value"].to_numpy(dtype=float)[order]
    commits_all = frame["git_commit"].to_numpy(dtype=object)[order]
    runs_all = frame["run_id"].to_numpy(dtype=object)[order]
    keys_all = [frame[k].to_numpy(dtype=object)[order] for k in key]
    metrics_all = frame["metric"].to_numpy(dtype=object)[order] if "metric" in frame else None
    exact_all = (
        frame[exact_column].to_numpy(dtype=bool)[order] if exact_column is not None and exact_column in frame else None
    )
    for lo, hi in zip([0, *bounds], [*bounds, len(frame)], strict=True):
        if hi - lo < 2:
            continue
        metric = str(metrics_all[lo]) if metrics_all is not None else ""
        info = metric_info(metric) if metric_info is not None and metric else None
        exact = bool(getattr(info, "exact", False)) or (exact_all is not None and bool(exact_all[lo:hi].all()))
        better = better_of(metric, metric_info)
        gated = bool(getattr(info, "gated", True))  # the catalogue may keep a metric out of every gate
        values = values_all[lo:hi]
        for change in find_changes(values, exact=exact, max_pvalue=max_pvalue, window=window):
            i = lo + change.index
            record = {k: column[lo] for k, column in zip(key, keys_all, strict=True)}
            record.update(
                {
                    "metric": metric,
                    "commit_before": commits_all[i - 1],
                    "commit_after": commits_all[i],
                    "run_before": runs_all[i - 1],
                    "run_after": runs_all[i],
                    "points_after": hi - i,
                    "better": better,
                    "gated": gated,
                    "label": label(change.change, better),
                    **asdict(change),
                }
            )
            records.append(record)
    return pd.DataFrame.from_records(records, columns=_COLUMNS(key))


def _COLUMNS(key: Sequence[str]) -> list[str]:
    fields = [f for f in Change.__dataclass_fields__ if f != "index"]
    return [
        *key,
        "metric",
        "commit_before",
        "commit_after",
        "run_before",
        "run_after",
        "points_after",
        "better",
        "gated",
        "label",
        "index",
        *fields,
    ]
