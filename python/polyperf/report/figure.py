"""The unit a suite hands to the renderer, and the one bar-with-interval helper every figure uses."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")  # reports render headless (CI, servers); notebooks pick their own backend

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from polyperf.analyse.stats import Summary, summarize

__all__ = ["COLORS", "Figure", "bar_figure", "bar_with_ci", "error_bar", "grouped_bars", "new_axes", "with_param"]

COLORS = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C"]


@dataclass(frozen=True)
class Figure:
    name: str  # file stem of the PNG: made from rows' names, so kept to a plain file name in the report folder
    title: str
    caption: str
    figure: matplotlib.figure.Figure

    def __post_init__(self) -> None:
        stem = re.sub(r"[^A-Za-z0-9_.=+-]", "-", str(self.name)).lstrip(".")[:150] or "figure"
        object.__setattr__(self, "name", stem)


def new_axes(width: float = 7.0, height: float = 4.2) -> tuple[matplotlib.figure.Figure, Axes]:
    fig, ax = plt.subplots(figsize=(width, height), layout="constrained")
    ax.grid(True, which="both", alpha=0.3)
    return fig, ax


def with_param(frame: pd.DataFrame, key: str) -> pd.Series:
    """One key of the `params` column as a Series (None where absent)."""
    return frame["params"].map(lambda p: p.get(key))


def error_bar(s: Summary, scale: float = 1.0) -> list[list[float]] | None:
    """matplotlib's `yerr` for one bar: distances below and above the median, never negative (rounding, or a
    median outside its interval), None without a finite interval."""
    if not s.has_interval:
        return None
    below, above = (s.median - s.low) * scale, (s.high - s.median) * scale
    if not (math.isfinite(below) and math.isfinite(above)):
        return None
    return [[max(below, 0.0)], [max(above, 0.0)]]


def _group_order(group: object) -> tuple:
    return (group is None, group if isinstance(group, int | float) else str(group))


def grouped_bars(
    ax: Axes,
    data: dict[tuple[str, object], list[float]],
    flags: set[tuple[str, object]] = frozenset(),
    *,
    scale: float = 1.0,
    group_name: str = "",
) -> None:
    """Median bars with distribution-free 95% intervals (no whisker below the n an interval needs): one bar per
    (label, group), one colour per group; bars in `flags` (e.g. client-bound) are hatched and labelled."""
    labels = list(dict.fromkeys(label for label, _g in data))
    groups = sorted({g for _l, g in data}, key=_group_order)
    width = 0.8 / max(len(groups), 1)
    x = np.arange(len(labels))
    for i, group in enumerate(groups):
        for j, label in enumerate(labels):
            values = [v for v in data.get((label, group)) or () if math.isfinite(v)]
            if not values:
                continue
            s = summarize(values)
            bound = (label, group) in flags
            at = x[j] + (i - (len(groups) - 1) / 2) * width
            ax.bar(
                at,
                s.median * scale,
                width,
                yerr=error_bar(s, scale),
                capsize=3,
                color=COLORS[i % len(COLORS)],
                hatch="//" if bound else None,
                edgecolor="black" if bound else None,
                label=(f"{group_name}{group}" if group is not None else None) if j == 0 else None,
            )
            if bound:  # inside the bar's foot, clear of the error bar
                ax.annotate(
                    "client-bound",
                    (at, 0),
                    xytext=(0, 3),
                    textcoords="offset points",
                    ha="center",
                    va="bottom",
                    fontsize=6,
                    rotation=90,
                    bbox={"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8},
                )
    ax.set_xticks(x, labels, fontsize=8)
    if any(g is not None for g in groups):
        ax.legend(fontsize=8)


def bar_figure(
    name: str,
    title: str,
    caption: str,
    data: dict[tuple[str, object], list[float]],
    flags: set[tuple[str, object]] = frozenset(),
    *,
    ylabel: str,
    axes_title: str,
    scale: float = 1.0,
    group_name: str = "",
    log: bool = False,
    size: tuple[float, float] = (8.5, 4.5),
) -> Figure | None:
    """The suites' usual figure: `grouped_bars` of `data` on one axes (a log scale with `log`), its labels, and
    the `Figure` that names and captions it; None when there is nothing to draw."""
    if not data:
        return None
    fig, ax = new_axes(*size)
    grouped_bars(ax, data, flags, scale=scale, group_name=group_name)
    if log:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(axes_title)
    return Figure(name, title, caption, fig)


def bar_with_ci(ax: Axes, groups: dict[str, list[float]], scale: float = 1.0) -> None:
    """One bar per label (no sub-groups)."""
    grouped_bars(ax, {(label, None): values for label, values in groups.items()}, scale=scale)
    ax.tick_params(axis="x", labelrotation=20)
