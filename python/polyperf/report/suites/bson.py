"""Figures for "Making slow Rust code fast" (BSON deserialization): the article's paths in time and allocations, and
polyperf's decoder against pymongo's."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from polyperf.analyse.stats import summarize
from polyperf.report.figure import Figure, bar_with_ci, new_axes, with_param

__all__ = ["figures"]

SUITE = "bson"
PATHS = ("clone", "document", "raw", "raw_borrowed")
DECODERS = ("pymongo", "polyperf", "pymongo_raw")
# The article's criterion means for Collection::find of 10,000 documents (ms), relative to its baseline.
ARTICLE_MS = {"clone": 55.66, "document": 47.84, "raw": 30.72}


def _rows(table: pd.DataFrame, case: str, metric: str) -> pd.DataFrame:
    rows = table[(table["case"] == case) & (table["metric"] == metric)]
    return rows.assign(dataset=with_param(rows, "dataset"), documents=with_param(rows, "documents"))


def _grouped_bars(
    ax: Axes, groups: dict[str, dict[str, list[float]]], order: tuple[str, ...], scale: float = 1.0
) -> None:
    """Median bars with 95% CI per (group on the x axis, series in `order`)."""
    labels = list(groups)
    series = [s for s in order if any(s in g for g in groups.values())]
    width = 0.8 / max(len(series), 1)
    x = np.arange(len(labels))
    for i, name in enumerate(series):
        stats = [summarize(groups[g][name]) if groups[g].get(name) else None for g in labels]
        medians = [s.median * scale if s else np.nan for s in stats]
        errors = [
            [(s.median - s.low) * scale if s else 0 for s in stats],
            [(s.high - s.median) * scale if s else 0 for s in stats],
        ]
        ax.bar(x + (i - (len(series) - 1) / 2) * width, medians, width, yerr=errors, capsize=3, label=name)
    ax.set_xticks(x, labels)
    ax.legend(fontsize="small")


def _time_per_path(table: pd.DataFrame) -> Figure | None:
    rows = _rows(table, "deserialize", "seconds")
    rows = rows[rows["dataset"] == "find"]
    if rows.empty:
        return None
    documents = int(rows["documents"].max())
    groups = {path: rows[rows["variant"] == path]["value"].tolist() for path in PATHS}
    fig, ax = new_axes()
    bar_with_ci(ax, {p: v for p, v in groups.items() if v}, scale=1e3)
    ax.set_ylabel("ms per reply (median, 95% CI)")
    ax.set_title(f"Deserializing a {documents:,}-document find reply, per path")
    return Figure(
        "bson_time_per_path",
        "Time per deserialization path",
        "pytest-benchmark rounds of `deserialize_reply` (bson 2.x); error bars are distribution-free 95% "
        "intervals of the median.",
        fig,
    )


def _relative_to_clone(table: pd.DataFrame) -> Figure | None:
    rows = _rows(table, "deserialize_interleaved", "cpu_seconds")
    if rows.empty:
        return None
    groups: dict[str, dict[str, list[float]]] = {}
    for dataset, g in rows.groupby("dataset", sort=False):
        clone = g[g["variant"] == "clone"]["value"].median()
        groups[str(dataset)] = {p: (g[g["variant"] == p]["value"] / clone).tolist() for p in PATHS}
    fig, ax = new_axes()
    _grouped_bars(ax, groups, PATHS)
    if "find" in groups:
        x = list(groups).index("find")
        for i, path in enumerate(ARTICLE_MS):
            ax.plot(
                x + (i - 1.5) * 0.2,
                ARTICLE_MS[path] / ARTICLE_MS["clone"],
                "k_",
                markersize=18,
                label="article (find, incl. round trip)" if i == 0 else None,
            )
        ax.legend(fontsize="small")
    ax.set_ylabel("time relative to the clone path (median)")
    ax.set_title("Each path's time relative to the article's baseline, per dataset")
    return Figure(
        "bson_relative_to_clone",
        "Paths relative to the clone baseline",
        "Thread CPU time per call, paths interleaved repeat by repeat; black marks: the article's "
        "ratios (−14.8% without the clone, −35.8% more from raw bytes), which include a "
        "server round trip.",
        fig,
    )


# Each figure repeats the select-group-plot shape with its own metric and labels: a table of figures.
def _allocations_per_path(table: pd.DataFrame) -> Figure | None:
    rows = _rows(table, "deserialize", "allocations")
    if rows.empty:
        return None
    groups = {
        str(d): {p: g[g["variant"] == p]["value"].tolist() for p in PATHS}
        for d, g in rows.groupby("dataset", sort=False)
    }
    fig, ax = new_axes()
    _grouped_bars(ax, groups, PATHS)
    ax.set_yscale("log")
    ax.set_ylabel("heap allocations per reply (exact)")
    ax.set_title("Allocations per deserialization path")
    return Figure(
        "bson_allocations_per_path",
        "Allocations per path",
        "Counted exactly by the extension's counting global allocator on the calling thread.",
        fig,
    )


def _decoder_throughput(table: pd.DataFrame) -> Figure | None:
    rows = _rows(table, "decode_all_interleaved", "cpu_seconds")
    if rows.empty:
        return None
    rows = rows.assign(value=with_param(rows, "bytes") / rows["value"] / 1e6)
    groups = {
        str(d): {v: g[g["variant"] == v]["value"].tolist() for v in DECODERS}
        for d, g in rows.groupby("dataset", sort=False)
    }
    fig, ax = new_axes()
    _grouped_bars(ax, groups, DECODERS)
    for x, per in enumerate(groups.values()):
        if per.get("pymongo") and per.get("polyperf"):
            ratio = np.median(per["polyperf"]) / np.median(per["pymongo"])
            ax.annotate(
                f"{ratio:.2f}x",
                (x, np.median(per["polyperf"])),
                ha="center",
                va="bottom",
                xytext=(0, 8),
                textcoords="offset points",
                fontsize="small",
            )
    ax.set_yscale("log")
    ax.set_ylabel("MB/s (bytes / CPU time, MB = 10^6 B)")
    ax.set_title("decode_all throughput: polyperf vs pymongo's C decoder")
    return Figure(
        "bson_decoder_throughput",
        "Decoder throughput vs pymongo",
        "Scored as the MongoDB driver benchmark spec does (bytes / time), on thread CPU time of "
        "decoders interleaved repeat by repeat; labels: polyperf / pymongo (median). "
        "pymongo_raw (RawBSONDocument) only slices the bytes: context, not a rival.",
        fig,
    )


def figures(table: pd.DataFrame) -> list[Figure]:
    table = table[table["suite"] == SUITE]
    makers = (_time_per_path, _relative_to_clone, _allocations_per_path, _decoder_throughput)
    return [fig for make in makers if (fig := make(table)) is not None]
