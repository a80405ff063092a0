"""Change points over a history: where a series' value moved, between which commits, by how much, how surely.

Pure: a table of points (one value per run and series, in commit order) in, a table of changes out.

- Measured values, in four steps:
  1. candidates from two searches, together: binary segmentation (`ruptures`) of the log-values in units of the
     series' point-to-point noise (a robust sd from the median absolute successive difference), each split kept while
     it lowers the sum of squares by 2 log n; and Apache Otava's E-Divisive means with a Student's t-test at
     p <= 0.001 over windows of 50 points (the method of MongoDB's performance CI). Chosen on performance histories
     only: the pair found both ends of a 15% regression fixed 5-10 commits later in 99% of 300 histories (either
     alone 91-96%); PELT and Bayesian online detection were too slow (docs/changepoints.md has the comparison).
  2. confirmation: each candidate must pass a Mann-Whitney test between the points before and after it (up to 25 a
     side, within its neighbours) at p <= 1e-4, and move by at least 2 times the series' own noise and by at least
     2% (Perfherder's default alert threshold); failures are dropped one at a time, the weakest first. A rank test
     is one that a single outlier cannot pass (a t-test called a single 4-sigma point a change). With it every noise
     family of tests/test_change_rates.py stays under 0.05 false changes per 500 commits. The noise multiple of 2 is
     the largest that still finds a 10% step at 3% noise in 95% of 60-commit histories. Where points follow each
     other (autocorrelated noise), the noise and the test's z allow for it (`change_search.long_run_factor`). The
     location is then refined to the maximum-likelihood split within 5 points.
     Regime changes (`change_regimes`) join them: the literature's default binary segmentation at the scale of
     the whole series, each change kept when it is large against the spread within segments.
  3. shapes a sheriff dismisses as noise: a level left again back the way it came within 5 points (an excursion),
     and 4 or more changes back and forth between two levels (two modes).
  4. slopes (`slopes`): a run of steps the same way that a ramp explains better is one slope, with its start, its
     end and its rate per commit (creep), not a staircase. Where the points around the fitted levels follow each
     other (a level that wanders), each change must also be a regime change's size (`change_regimes`).
- Pending: a candidate with fewer than `CONFIRM_POINTS` points after it, reported, never gated by default.
- Exact counts (the catalogue's exact metrics: syscalls, allocations, rows): every difference from one point to the
  next is a change, confirmed at once (a run reproduces them).

Each change carries the commits on either side, its size as the Hodges-Lehmann ratio of the points after over the
points before (up to 25 on each side, within the neighbouring changes) with its Moses 95% interval (`stats.ratio`),
and the rank test's p-value. Which way is better comes from the metric catalogue; a metric it does not know is
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
from scipy.stats import mannwhitneyu, norm

from polyperf.analyse.change_regimes import hold_in_wander, regime_changes
from polyperf.analyse.change_search import SEARCH, candidates, locate, noise_parts
from polyperf.analyse.slopes import find_slopes
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
BATCH = 40  # more failing candidates than this: drop several a round


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
    kind: str = "step"  # or "slope": the level moves steadily from point `index` to point `stop`
    stop: int | None = None  # a slope's last point (None for a step)
    rate: float | None = None  # a slope's relative change per commit: creep (None for a step)


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


def _judge(logs: np.ndarray, points: list[int], min_shift: float) -> list[tuple[float, float]]:
    """(rank-test p-value, |shift| in noise sds) of each candidate between its neighbours; a shift under `min_shift`
    (log units) counts as no shift at all."""
    bounds = [0, *points, logs.size]
    point_sd, factor = noise_parts(logs, bounds)
    noise = point_sd * factor
    out = []
    for j, i in enumerate(points, start=1):
        before = logs[max(bounds[j - 1], i - SIDE) : i]
        after = logs[i : min(bounds[j + 1], i + SIDE)]
        if before.size < 2 or after.size < 2:
            out.append((1.0, 0.0))
            continue
        # a side of under 8 points takes the exact rank distribution even with ties (conservative): scipy's normal
        # approximation put 6 tied points above all 25 before them at p = 2e-4, not 3e-6, and lost a 7-point excursion
        method = "exact" if min(before.size, after.size) < 8 else "auto"
        p_value = float(mannwhitneyu(after, before, alternative="two-sided", method=method).pvalue)
        if factor > 1:  # points that follow each other: the test's z shrinks by the long-run factor
            p_value = float(2 * norm.sf(norm.isf(p_value / 2) / factor))
        shift = abs(float(np.median(np.subtract.outer(after, before))))
        if shift < min_shift:
            out.append((p_value, 0.0))
            continue
        out.append((p_value, shift / noise if noise > 0 else math.inf))
    return out


def _confirm(
    logs: np.ndarray, points: list[int], max_p: float, min_noise: float, min_shift: float
) -> tuple[list[int], list[float]]:
    """Backward elimination: while a candidate fails, drop the one that fails worst and judge the rest again. With
    more than `BATCH` failing, the worst quarter of them go at once: a smooth signal (scaled by its tiny
    point-to-point noise) can give a thousand candidates, and one at a time took minutes on 1,500 points."""
    points = sorted(points)
    while points:
        judged = _judge(logs, points, min_shift)
        failing = sorted(
            (p if size >= min_noise else 1.0 + (min_noise - size), k)
            for k, (p, size) in enumerate(judged)
            if p > max_p or size < min_noise
        )
        if not failing:
            return points, [p for p, _ in judged]
        drop = {k for _, k in failing[-max(1, len(failing) // 4) :]} if len(failing) > BATCH else {failing[-1][1]}
        points = [i for k, i in enumerate(points) if k not in drop]
    return [], []


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


def _rank_p(logs: np.ndarray, lo: int, index: int, hi: int) -> float | None:
    before, after = logs[max(lo, index - SIDE) : index], logs[index : min(hi, index + SIDE)]
    if before.size < 1 or after.size < 1 or np.ptp(np.r_[before, after]) == 0:
        return None
    return float(mannwhitneyu(after, before, alternative="two-sided").pvalue)


def find_changes(
    values: Sequence[float],
    *,
    exact: bool = False,
    search: str = SEARCH,
    max_pvalue: float = MAX_PVALUE,
    window: int = WINDOW,
    confirm_pvalue: float = CONFIRM_PVALUE,
    min_noise_multiple: float = MIN_NOISE_MULTIPLE,
    min_change: float = MIN_CHANGE,
    confirm_points: int = CONFIRM_POINTS,
    excursion_points: int = EXCURSION_POINTS,
    flip_flop: int = FLIP_FLOP,
    slopes: bool = True,
    regimes: bool = True,
) -> list[Change]:
    """One series' change points (values in commit order, NaN-free): confirmed steps and slopes, pending at the end."""
    data = np.asarray(values, dtype=float)
    if data.size < 2:
        return []
    if exact:
        return _exact_changes(data)
    if np.all(data == data[0]):
        return []
    positive = bool(np.all(data > 0))
    logs = np.log(data) if positive else data
    found = candidates(data, logs, search, window, max_pvalue)
    pending = [i for i in found if data.size - i < confirm_points]
    # a relative floor needs values of one sign; a series with zero or negative values is judged on its noise alone
    min_shift = math.log1p(min_change) if positive else 0.0
    judged, confirm_ps = _confirm(
        logs, [i for i in found if i not in pending], confirm_pvalue, min_noise_multiple, min_shift
    )
    bounds = [0, *judged, data.size]
    located = [locate(logs, bounds[j - 1], bounds[j + 1], i) for j, i in enumerate(judged, start=1)]
    confirm_at = dict(zip(located, confirm_ps, strict=True))
    # shifts large against the spread within segments, where the point-to-point noise misjudges a wandering series
    for i, p in regime_changes(logs, min_shift, confirm_points, SIDE, [*located, *pending]) if regimes else []:
        located, confirm_at[i] = [*located, i], p
    # two neighbours refined to one point (each moves up to 5 towards the other) are one change
    shown = _drop_flip_flops(logs, _drop_excursions(logs, sorted(set(located)), excursion_points), flip_flop)
    ramps = find_slopes(logs, shown, relative=positive) if slopes else []
    in_ramp = {k for r in ramps for k in range(r.first, r.last + 1)}
    steps = [i for k, i in enumerate(shown) if k not in in_ramp]
    steps, ramps = hold_in_wander(logs, steps, ramps, min_shift, SIDE) if regimes else (steps, ramps)
    kept = [(i, "confirmed", confirm_at[i], None) for i in steps]
    # a slope still rising at the newest commit is creep under way, confirmed once its start has the points a step needs
    kept += [(r.start, "confirmed" if data.size - r.start >= confirm_points else "pending", None, r) for r in ramps]
    kept += [(i, "pending", None, None) for i in sorted(pending)]
    kept.sort(key=lambda item: item[0])
    edges = [0, *(r.stop if r is not None else i for i, _, _, r in kept), data.size]
    starts = [i for i, *_ in kept]
    changes = []
    for j, (index, state, confirm_p, ramp) in enumerate(kept):
        lo, hi = edges[j], (starts[j + 1] if j + 1 < len(starts) else data.size)
        stop = ramp.stop if ramp is not None else index
        # the size from at most half a window on either side: the step itself, not drifts far from it (and the
        # exact rank distribution stays small: a 150 x 150 one takes 0.4 s to build, a 25 x 25 one milliseconds)
        before = data[max(lo, index - SIDE) : index] if index > lo else data[max(0, index - 1) : index + 1]
        after = data[stop : min(hi, stop + SIDE)] if hi > stop else data[stop - 1 : stop]
        size, low, high = _size(before, after)
        p_value = confirm_p if confirm_p is not None else _rank_p(logs, lo, index, hi)
        changes.append(
            Change(
                index,
                float(np.median(before)),
                float(np.median(after)),
                size,
                low,
                high,
                p_value if p_value is not None else 1.0,
                False,
                state,
                confirm_p,
                "slope" if ramp is not None else "step",
                ramp.stop if ramp is not None else None,
                ramp.rate if ramp is not None else None,
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
                    # a slope's end: the first commit on its final level (the newest one while it still moves)
                    "commit_stop": None if change.stop is None else commits_all[min(lo + change.stop, hi - 1)],
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
        "commit_stop",
        "run_before",
        "run_after",
        "points_after",
        "better",
        "gated",
        "label",
        "index",
        *fields,
    ]
