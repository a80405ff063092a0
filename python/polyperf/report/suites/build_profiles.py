"""Figures for the actix-web build-settings article (suite build_profiles): what each setting buys under load,
as a ratio to the release build 'R' beside the article's, and what it costs (clean build time, binary size)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure as MplFigure

from polyperf.analyse.stats import ratio
from polyperf.report.figure import COLORS, Figure, grouped_bars, new_axes
from polyperf.report.load_figures import flagged, pinning, values_by

SUITE = "build_profiles"
VARIANTS = ("dev", "release", "release-lto", "native", "native-mimalloc")
BASELINE = "release-lto"  # the article's 'R'
# The article's Drill runs, 500 concurrent, 50,000 requests: req/s per build (no plain release, no 'D' at 100k)
ARTICLE_RPS = {"dev": 701.45, "release-lto": 1849.95, "native": 1937.80, "native-mimalloc": 1873.65}
ARTICLE_TABLE = (
    "Article (Drill, 500 concurrent, 50k requests): D 71.3 s / 701.45 req/s; R 27.0 s / 1,849.95; "
    "ROpt 25.8 s / 1,937.80; ROptMimAlloc 26.7 s / 1,873.65 (100k: R 1,918.27, ROpt 1,934.59, "
    "ROptMimAlloc 1,955.07)."
)


def _series(table: pd.DataFrame, case: str, metric: str, driver: str) -> dict[str, list[float]]:
    sel = table[(table["case"] == case) & (table["metric"] == metric) & (table["driver"] == driver)]
    return {v: sel[sel["variant"] == v]["value"].tolist() for v in VARIANTS if (sel["variant"] == v).any()}


def _ratios(table: pd.DataFrame) -> Figure | None:
    rps = _series(table, "ceiling", "rps", "oha")
    if BASELINE not in rps:
        return None
    fig, ax = new_axes(8.5, 4.5)
    for i, (variant, values) in enumerate(rps.items()):
        r = ratio(values, rps[BASELINE], paired=len(values) == len(rps[BASELINE]))
        ax.bar(
            i - 0.2,
            r.median,
            0.4,
            yerr=[[r.median - r.low], [r.high - r.median]],
            capsize=3,
            color=COLORS[0],
            label="measured (oha ceiling)" if i == 0 else None,
        )
        if variant in ARTICLE_RPS:
            ax.bar(
                i + 0.2,
                ARTICLE_RPS[variant] / ARTICLE_RPS[BASELINE],
                0.4,
                color=COLORS[1],
                label="article (Drill)" if variant == BASELINE else None,
            )
    ax.set_xticks(range(len(rps)), list(rps), fontsize=8)
    ax.legend(fontsize=8)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_yscale("log")
    ax.set_ylabel(f"requests/s relative to {BASELINE} ('R')")
    ax.set_title("What each build setting buys: throughput relative to the release build 'R'")
    return Figure(
        "build_ratio_to_release",
        "Throughput relative to the release build",
        "Measured: ratio of oha ceilings (64 connections) to release-lto, repeats paired, bar = median, whiskers = "
        f"95% interval of the ratio. {ARTICLE_TABLE} {pinning(table)}.",
        fig,
    )


def _throughput(table: pd.DataFrame) -> Figure | None:
    data = values_by(table, "ceiling", "rps", "connections")
    shape = values_by(table, "article_shape", "rps", "connections")
    if not data and not shape:
        return None
    fig, ax = new_axes(8.5, 4.5)
    merged = {
        **{(k[0], f"ceiling, {k[1]} connections"): v for k, v in data.items()},
        **{(k[0], f"article shape, {k[1]} clients"): v for k, v in shape.items()},
    }
    bound = {(k[0], f"ceiling, {k[1]} connections") for k in flagged(table, "ceiling", "connections")}
    grouped_bars(ax, merged, bound)
    ax.set_yscale("log")
    ax.set_ylabel("requests/s (median, 95% CI; log scale)")
    ax.set_title(f"POST /matrix-multiplication per build variant (n = {_param(table, 'n')})")
    return Figure(
        "build_rps",
        "Requests/s per build variant",
        "oha, closed model: a timed ceiling at 64 connections, and the article's shape (many concurrent clients, "
        f"a fixed request count, bounded in time for the dev build). {ARTICLE_TABLE}",
        fig,
    )


def _cost(table: pd.DataFrame) -> Figure | None:
    builds = table[table["case"] == "build"]
    if builds.empty:
        return None
    fig, (ax_time, ax_size) = _two_axes()
    for ax, metric, scale, label in (
        (ax_time, "build_seconds", 1.0, "clean build, s"),
        (ax_size, "binary_bytes", 1e-6, "binary, MB"),
    ):
        rows = builds[builds["metric"] == metric]
        grouped_bars(
            ax,
            {(v, None): rows[rows["variant"] == v]["value"].tolist() for v in VARIANTS if (rows["variant"] == v).any()},
            scale=scale,
        )
        ax.set_ylabel(label)
        ax.tick_params(axis="x", labelrotation=25)
    cached = builds["params"].map(lambda p: bool(p.get("cached"))).any()
    fig.suptitle("What each build setting costs")
    return Figure(
        "build_cost",
        "Build time and binary size per variant",
        "Each variant is built in a cargo target directory of its own, emptied first, so its time is a clean "
        "build with those settings on this machine (dependencies included). "
        + ("Some times are from the cache: the build that made the binary, in an earlier run." if cached else ""),
        fig,
    )


def _two_axes() -> tuple[MplFigure, tuple[Axes, Axes]]:
    fig, axes = plt.subplots(1, 2, figsize=(9, 4.0), layout="constrained")
    return fig, (axes[0], axes[1])


def _param(table: pd.DataFrame, key: str) -> object:
    values = table["params"].map(lambda p: p.get(key)).dropna()
    return values.iloc[0] if len(values) else "?"


def figures(table: pd.DataFrame) -> list[Figure]:
    table = table[table["suite"] == SUITE]
    return [f for f in (_ratios(table), _throughput(table), _cost(table)) if f is not None]
