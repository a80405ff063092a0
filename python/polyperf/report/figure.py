"""The unit a suite hands to the renderer, and plotting helpers shared by the suites' figures."""

from __future__ import annotations

import json
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")  # reports render headless (CI, servers); notebooks pick their own backend

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes

from polyperf.stats import summarize

__all__ = ["Figure", "bar_with_ci", "new_axes", "with_param"]


@dataclass(frozen=True)
class Figure:
    name: str  # file stem of the PNG
    title: str
    caption: str
    figure: matplotlib.figure.Figure


def new_axes(width: float = 7.0, height: float = 4.2) -> tuple[matplotlib.figure.Figure, Axes]:
    fig, ax = plt.subplots(figsize=(width, height), layout="constrained")
    ax.grid(True, which="both", alpha=0.3)
    return fig, ax


def with_param(frame: pd.DataFrame, key: str) -> pd.Series:
    """One key of the JSON `params` column as a Series (NaN where absent)."""
    return frame["params"].map(lambda p: json.loads(p).get(key))


def bar_with_ci(ax: Axes, groups: dict[str, list[float]], scale: float = 1.0) -> None:
    """Median bars with 95% bootstrap CI error bars, one bar per group label."""
    labels, medians, lows, highs = [], [], [], []
    for label, values in groups.items():
        s = summarize(values)
        labels.append(label)
        medians.append(s.median * scale)
        lows.append((s.median - s.low) * scale)
        highs.append((s.high - s.median) * scale)
    ax.bar(labels, medians, yerr=[lows, highs], capsize=4, color="#4C72B0")
    ax.tick_params(axis="x", labelrotation=20)
