"""Change points over a history: where a series' value moved, between which commits, by how much, how surely.

Pure: a table of points (one value per run and series, in commit order) in, a table of changes out.

- Measured values, in three steps:
  1. candidates: Apache Otava's E-Divisive means with a Student's t-test (the method of MongoDB's performance CI,
     Daly et al. ICPE 2020, made deterministic by Otava) at p <= 0.001 over sliding windows of 50 points;
  2. confirmation: each candidate must pass a Mann-Whitney test between the points before and after it (up to 25 a
     side, within its neighbours) at p <= 1e-4, and move by at least 2 times the series' own point-to-point noise
     (a robust sd from the median absolute successive difference of the log-values) and by at least 2% (Perfherder's
     default alert threshold). Candidates that fail are dropped one at a time, the weakest first, so a spurious
     neighbour does not starve a true change of points.
  A rank test is one that a single outlier cannot pass; the t-test alone is not: it called a single 4-sigma point a
  change. Tuning Otava alone (p <= 1e-5 or 1e-6) reached 0.95-1.3 false changes per 500 commits on noise with 2%
  outliers; with the confirmation step every noise family in tests/test_change_rates.py stays under 0.05. The noise
  multiple of 2 is the largest that still finds a 10% step at 3% noise in 95% of 60-commit histories (2.5: 87%).
  The location is then refined to the single-step maximum-likelihood split (the largest standardised difference of
  means) within 5 points of Otava's, between the neighbouring changes.
  3. shapes a performance sheriff dismisses as noise, which made most of the false detections on Mozilla's Perfherder
     series (the README's figures): a level left again back the way it came within 5 points, fewer than a change needs
     after it to be confirmed (an excursion: both of its changes go), and a run of 4 or more changes that swing back
     and forth between two levels, each about as large as the one before (a series with two modes). A regression and
     its fix (two changes) stay; so do two steps the same way.
- Pending: a candidate with fewer than `CONFIRM_POINTS` points after it cannot be judged yet (the rank test needs
  them); it is reported as pending, never gated by default.
- Exact counts (the catalogue's exact metrics: syscalls, allocations, rows): every difference from one point to the
  next is a change, confirmed at once (a run reproduces them).

Each change carries the commits on either side, its size as the Hodges–Lehmann ratio of the points after over the
points before (up to 25 on each side, within the neighbouring changes) with its Moses 95% interval (`stats.ratio`),
and the t-test's p-value. Which way is better comes from the metric catalogue; a metric it does not know is
"unknown", never guessed from its name.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd
from otava.analysis import compute_change_points
from scipy.stats import mannwhitneyu

from polyperf.analyse.stats import ratio

__all__ = [
    "CONFIRM_POINTS",
    "CONFIRM_PVALUE",
    "MAX_PVALUE",
    "MIN_NOISE_MULTIPLE",
    "WINDOW",
    "Change",
    "better_of",
    "find_changes",
    "label",
    "p_text",
    "series_changes",
]

MAX_PVALUE = 0.001  # Otava's candidates
WINDOW = 50
CONFIRM_PVALUE = 1e-4  # the rank test a candidate must pass
MIN_NOISE_MULTIPLE = 2.0  # and its Hodges-Lehmann shift must exceed this many point-to-point noise sds
MIN_CHANGE = 0.02  # and 2% of the value: Perfherder's default alert threshold
CONFIRM_POINTS = 5  # fewer points after a candidate: pending (with 25 before, 5 after can reach p = 1.4e-5)
# a level left again, back towards where it came from, before it held as many points as a change needs after it to
# be confirmed: an excursion (a six-point regression and its fix, which sheriffs confirmed, stays two changes)
EXCURSION_POINTS = CONFIRM_POINTS
FLIP_FLOP = 4  # this many changes in a row back and forth between two levels: a series with two modes, not changes
SIDE = 25  # points on either side that size and confirm a change


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
    state: str = "confirmed"  # or "pending": too few points after it to be judged yet
    confirm_p: float | None = None  # the rank test's p-value (None: exact, or pending)


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


def _noise_sd(logs: np.ndarray, bounds: Sequence[int]) -> float:
    """A robust sd of one point: the median absolute successive difference within segments, / (0.6745 sqrt 2)."""
    steps = [np.abs(np.diff(logs[lo:hi])) for lo, hi in itertools.pairwise(bounds) if hi - lo >= 2]
    diffs = np.concatenate(steps) if steps else np.zeros(1)
    return float(np.median(diffs)) / (0.6745 * math.sqrt(2))


def _judge(logs: np.ndarray, points: list[int], min_shift: float) -> list[tuple[float, float]]:
    """(rank-test p-value, |shift| in noise sds) of each candidate between its neighbours; a shift under `min_shift`
    (log units) counts as no shift at all."""
    bounds = [0, *points, logs.size]
    noise = _noise_sd(logs, bounds)
    out = []
    for j, i in enumerate(points, start=1):
        before = logs[max(bounds[j - 1], i - SIDE) : i]
        after = logs[i : min(bounds[j + 1], i + SIDE)]
        if before.size < 2 or after.size < 2:
            out.append((1.0, 0.0))
            continue
        # a side of under 8 points takes the exact rank distribution even with ties: the normal approximation scipy
        # falls back to when values tie put 6 points above all 25 before them at p = 2e-4 instead of 3e-6, and a
        # seven-point regression and its fix failed the test (ties only narrow the distribution: exact is conservative)
        method = "exact" if min(before.size, after.size) < 8 else "auto"
        p_value = float(mannwhitneyu(after, before, alternative="two-sided", method=method).pvalue)
        shift = abs(float(np.median(np.subtract.outer(after, before))))
        if shift < min_shift:
            out.append((p_value, 0.0))
            continue
        out.append((p_value, shift / noise if noise > 0 else math.inf))
    return out


def _confirm(
    logs: np.ndarray, points: list[int], max_p: float, min_noise: float, min_shift: float
) -> tuple[list[int], list[float]]:
    """Backward elimination: while a candidate fails, drop the one that fails worst and judge the rest again."""
    points = sorted(points)
    while points:
        judged = _judge(logs, points, min_shift)
        failing = [
            (p if size >= min_noise else 1.0 + (min_noise - size), k)
            for k, (p, size) in enumerate(judged)
            if p > max_p or size < min_noise
        ]
        if not failing:
            return points, [p for p, _ in judged]
        del points[max(failing)[1]]
    return [], []


def _locate(logs: np.ndarray, lo: int, hi: int, guess: int, reach: int = 5) -> int:
    """The single-step maximum-likelihood split of logs[lo:hi] within `reach` of `guess`."""
    segment = logs[lo:hi]
    n, best, best_score = segment.size, guess, -1.0
    for i in range(max(lo + 1, guess - reach), min(hi - 1, guess + reach) + 1):
        k = i - lo
        score = abs(segment[:k].mean() - segment[k:].mean()) * math.sqrt(k * (n - k) / n)
        if score > best_score:
            best, best_score = i, score
    return best


def _returns(levels: Sequence[float], j: int) -> bool:
    """Whether change j+1 goes back: the level after it lies nearer the level before change j than the one it left."""
    start, between, end = levels[j], levels[j + 1], levels[j + 2]
    return abs(end - start) < abs(end - between)


def _drop_excursions(logs: np.ndarray, points: list[int], reach: int) -> list[int]:
    """Drop pairs of changes where a level is held for fewer than `reach` points and then left back the way it came."""
    points = list(points)
    while True:
        bounds = [0, *points, logs.size]
        levels = [float(np.median(logs[lo:hi])) for lo, hi in itertools.pairwise(bounds)]
        short = [j for j in range(len(points) - 1) if points[j + 1] - points[j] < reach and _returns(levels, j)]
        if not short:
            return points
        del points[short[0] : short[0] + 2]


def _drop_flip_flops(logs: np.ndarray, points: list[int], run: int) -> list[int]:
    """Drop every change of a run of at least `run` changes that go back and forth between the same two levels."""
    bounds = [0, *points, logs.size]
    levels = [float(np.median(logs[lo:hi])) for lo, hi in itertools.pairwise(bounds)]
    # change j steps from levels[j] to levels[j + 1]; it swings back when it goes the other way by about as much as
    # the change before it (within a factor of 2): a regression that later grows, or a partial fix, does not
    steps = np.diff(levels)
    returning = [
        j > 0 and steps[j] * steps[j - 1] < 0 and abs(steps[j - 1]) / 2 <= abs(steps[j]) <= 2 * abs(steps[j - 1])
        for j in range(len(points))
    ]
    dropped: set[int] = set()
    j = 0
    while j < len(points):
        end = j + 1
        while end < len(points) and returning[end]:
            end += 1
        if end - j >= run:
            dropped.update(range(j, end))
        j = end
    return [p for k, p in enumerate(points) if k not in dropped]


def find_changes(
    values: Sequence[float],
    *,
    exact: bool = False,
    max_pvalue: float = MAX_PVALUE,
    window: int = WINDOW,
    confirm_pvalue: float = CONFIRM_PVALUE,
    min_noise_multiple: float = MIN_NOISE_MULTIPLE,
    min_change: float = MIN_CHANGE,
    confirm_points: int = CONFIRM_POINTS,
    excursion_points: int = EXCURSION_POINTS,
    flip_flop: int = FLIP_FLOP,
) -> list[Change]:
    """The change points of one series (values in commit order, NaN-free): confirmed, and pending at the end."""
    data = np.asarray(values, dtype=float)
    if data.size < 2:
        return []
    if exact:
        return _exact_changes(data)
    if np.all(data == data[0]):
        return []
    # Otava takes a list: with a numpy array its split step fails (`ValueError` from an empty side, 0.8.0)
    candidates, _weak = compute_change_points(data.tolist(), window_len=window, max_pvalue=max_pvalue)
    t_test = {int(p.index): float(p.stats.pvalue) for p in candidates}
    positive = bool(np.all(data > 0))
    logs = np.log(data) if positive else data
    pending = [i for i in t_test if data.size - i < confirm_points]
    # a relative floor needs values of one sign; a series with zero or negative values is judged on its noise alone
    min_shift = math.log1p(min_change) if positive else 0.0
    candidates_judged = [i for i in t_test if i not in pending]
    judged, confirm_ps = _confirm(logs, candidates_judged, confirm_pvalue, min_noise_multiple, min_shift)
    bounds = [0, *judged, data.size]
    located = [_locate(logs, bounds[j - 1], bounds[j + 1], i) for j, i in enumerate(judged, start=1)]
    judged_at = dict(zip(located, zip(judged, confirm_ps, strict=True), strict=True))
    shown = _drop_flip_flops(logs, _drop_excursions(logs, located, excursion_points), flip_flop)
    kept = [(i, t_test[judged_at[i][0]], "confirmed", judged_at[i][1]) for i in shown]
    kept += [(i, t_test[i], "pending", None) for i in sorted(pending)]
    bounds = [0, *(i for i, *_ in kept), data.size]
    changes = []
    for j, (index, p_value, state, confirm_p) in enumerate(kept, start=1):
        # the size from at most half a window on either side: the step itself, not drifts far from it (and the
        # exact rank distribution stays small: a 150 x 150 one takes 0.4 s to build, a 25 x 25 one milliseconds)
        before = data[max(bounds[j - 1], index - SIDE) : index]
        after = data[index : min(bounds[j + 1], index + SIDE)]
        size, low, high = _size(before, after)
        changes.append(
            Change(
                index,
                float(np.median(before)),
                float(np.median(after)),
                size,
                low,
                high,
                p_value,
                False,
                state,
                confirm_p,
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
    confirm_points: int = CONFIRM_POINTS,
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
        found = find_changes(values, exact=exact, max_pvalue=max_pvalue, window=window, confirm_points=confirm_points)
        for change in found:
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
