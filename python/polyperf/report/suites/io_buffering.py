"""Figures for era.co's "Unbuffered I/O can make your Rust programs much slower"."""

from __future__ import annotations

import pandas as pd
from matplotlib.axes import Axes

from polyperf.analyse.stats import summarize
from polyperf.report.figure import Figure, bar_with_ci, new_axes, with_param

SUITE = "io_buffering"


def _time_per_mode(table: pd.DataFrame) -> Figure | None:
    rows = table[(table["case"] == "parse") & (table["metric"] == "seconds")]
    if rows.empty:
        return None
    size = int(with_param(rows, "bytes").max())
    rows = rows[with_param(rows, "bytes") == size]
    groups = {
        f"{impl}\n{variant}": g["value"].tolist()
        for (impl, variant), g in rows.groupby(["implementation", "variant"], sort=True)
    }
    fig, ax = new_axes()
    bar_with_ci(ax, groups, scale=1e3)
    ax.set_yscale("log")
    ax.set_ylabel("ms per parse (median, 95% CI)")
    ax.set_title(f"Parsing a {size:,}-byte GeoJSON file")
    # The same Figure tail as in bson.py's figures: the name, title and caption are each figure's own.
    return Figure(
        "io_time_per_mode",
        "Time per read mode",
        "pytest-benchmark rounds; error bars are order-statistic 95% intervals of the median (none below 6 rounds).",
        fig,
    )


def _sweep(table: pd.DataFrame, case: str, metric: str, *params: str) -> pd.DataFrame:
    """The rows of one sweep and metric, with the named params as columns."""
    rows = table[(table["case"] == case) & (table["metric"] == metric)]
    return rows.assign(**{p: with_param(rows, p) for p in params})


def _capacity_axes(ax: Axes, ylabel: str, title: str) -> None:
    """Log-log axes over the BufReader capacities the sweep tried (powers of two)."""
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("BufReader capacity (bytes)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)


def _syscalls_vs_capacity(table: pd.DataFrame) -> Figure | None:
    rows = _sweep(table, "capacity_sweep", "read_syscalls", "capacity", "bytes")
    if rows.empty:
        return None
    fig, ax = new_axes()
    for size, g in rows.groupby("bytes"):
        points = g.groupby("capacity")["value"].median().sort_index()
        ax.plot(points.index, points.values, "o-", label=f"measured, {int(size):,} B")
        ax.plot(points.index, [size / c for c in points.index], "--", alpha=0.6, label="bytes / capacity")
    _capacity_axes(ax, "read syscalls per parse", "Read syscalls vs buffer capacity")
    ax.legend()
    return Figure(
        "io_syscalls_vs_capacity",
        "Syscalls vs buffer capacity",
        "Counted exactly per call from /proc/thread-self/io; syscalls ∝ bytes / capacity.",
        fig,
    )


# Shaped like _syscalls_vs_capacity (select, plot, capacity axes, Figure): only the plot and words differ.
def _time_vs_capacity(table: pd.DataFrame) -> Figure | None:
    rows = _sweep(table, "capacity_sweep", "seconds", "capacity")
    if rows.empty:
        return None
    fig, ax = new_axes()
    stats = {c: summarize(g["value"].tolist()) for c, g in rows.groupby("capacity")}
    caps = sorted(stats)
    ax.errorbar(
        caps,
        [stats[c].median * 1e3 for c in caps],
        yerr=[
            [(stats[c].median - stats[c].low) * 1e3 for c in caps],
            [(stats[c].high - stats[c].median) * 1e3 for c in caps],
        ],
        fmt="o-",
        capsize=3,
    )
    _capacity_axes(ax, "ms per parse (median, 95% CI)", "Parse time vs buffer capacity")
    return Figure(
        "io_time_vs_capacity",
        "Time vs buffer capacity",
        "Time measured inside Rust; capacities interleaved repeat by repeat.",
        fig,
    )


def _time_vs_size(table: pd.DataFrame) -> Figure | None:
    rows = _sweep(table, "size_sweep", "seconds", "bytes")
    if rows.empty:
        return None
    fig, ax = new_axes()
    for variant, g in rows.groupby("variant"):
        medians = g.groupby("bytes")["value"].median().sort_index()
        ax.plot(medians.index, medians.values * 1e3, "o-", label=variant)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("file size (bytes)")
    ax.set_ylabel("ms per parse (median)")
    ax.set_title("Parse time vs file size, per read mode")
    ax.legend()
    return Figure(
        "io_time_vs_size", "Time vs file size", "Time measured inside Rust; modes interleaved repeat by repeat.", fig
    )


def figures(table: pd.DataFrame) -> list[Figure]:
    table = table[table["suite"] == SUITE]
    makers = (_time_per_mode, _syscalls_vs_capacity, _time_vs_capacity, _time_vs_size)
    return [fig for make in makers if (fig := make(table)) is not None]
