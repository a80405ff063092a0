"""Counts per request in a load suite's section, beside its throughput and CPU figures: allocations and
read/write-family syscalls per request over a fixed number of requests (one at a time, and pipelined where
measured), the syscalls per request of every timed window by load generator (does a generator's batching
change the server's work?), and every syscall by name where perf or strace counted them."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.patches import Patch

from polyperf.report.figure import COLORS, Figure, grouped_bars

__all__ = ["count_figures"]

COUNT_CASES = ("counts", "counts_pipelined")
_CASE_LABEL = {"counts": "one at a time", "counts_pipelined": "pipelined"}


def _label(row: pd.Series) -> str:
    return f"{row['implementation']}\n{row['variant']}" if row["variant"] else str(row["implementation"])


def _by(frame: pd.DataFrame, group: str) -> dict[tuple[str, object], list[float]]:
    """{(bar label, group): values}; `group` is a column, or `depth` (the pipeline depth in params)."""
    out: dict[tuple[str, object], list[float]] = {}
    for _, row in frame.iterrows():
        key = row["params"].get("pipeline_depth") if group == "depth" else row[group]
        key = f"depth {key}" if group == "depth" else _CASE_LABEL.get(str(key), key)
        out.setdefault((_label(row), key), []).append(float(row["value"]))
    return out


def _per_request(table: pd.DataFrame) -> Figure | None:
    counts = table[table["case"].isin(COUNT_CASES)]
    timed = table[~table["case"].isin(COUNT_CASES) & (table["metric"] == "syscalls_per_request")]
    panels = [
        ("allocations per request", counts[counts["metric"] == "allocations_per_request"], "depth"),
        ("read+write syscalls per request", counts[counts["metric"] == "syscalls_per_request"], "depth"),
        ("… in the timed runs, by generator", timed, "driver"),
    ]
    panels = [p for p in panels if not p[1].empty]
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.4), layout="constrained", squeeze=False)
    for ax, (title, frame, group) in zip(axes[0], panels, strict=True):
        data = _by(frame, group)
        grouped_bars(ax, data)
        ax.set_title(title)
        ax.grid(True, axis="y", alpha=0.3)
        # grouped_bars names a colour at the first label only; here a group may be missing there
        groups = sorted({str(g) for _label, g in data})
        ax.legend(handles=[Patch(color=COLORS[i % len(COLORS)], label=g) for i, g in enumerate(groups)], fontsize=8)
    requests = sorted({p.get("requests") for p in counts["params"] if p.get("requests")})
    return Figure(
        "counts_per_request",
        "Counts per request",
        f"Allocations (each server's own counter: the Rust apps' counting build, the Go runtime's Mallocs) and "
        f"read/write-family syscalls (/proc/PID/io syscr + syscw; recv/send calls are not in them) per request, "
        f"over {', '.join(map(str, requests)) or 'a fixed number of'} requests after a warm-up on one connection "
        f"(pipelined: 16 per write); right: the same syscalls over every timed run, by load generator.",
        fig,
    )


def _by_name(table: pd.DataFrame) -> Figure | None:
    rows = table[(table["metric"] == "syscalls_per_request_by_name") & (table["case"] == "counts")]
    if rows.empty:
        return None
    rows = rows.assign(label=rows.apply(_label, axis=1), syscall=rows["params"].map(lambda p: p.get("syscall")))
    wide = rows.pivot_table(index="label", columns="syscall", values="value", aggfunc="median").fillna(0.0)
    wide = wide[wide.sum().sort_values(ascending=False).index]
    fig, ax = plt.subplots(figsize=(7.5, 4.4), layout="constrained")
    bottom = pd.Series(0.0, index=wide.index)
    for i, name in enumerate(wide.columns):
        ax.bar(wide.index, wide[name], bottom=bottom, label=name, color=COLORS[i % len(COLORS)])
        bottom += wide[name]
    ax.set_ylabel("syscalls per request")
    ax.legend(fontsize=7, ncol=2)
    tracer = ", ".join(sorted({p.get("tracer", "") for p in rows["params"]}))
    overhead = table[table["metric"] == "syscall_trace_overhead"]["value"]
    return Figure(
        "syscalls_by_name",
        "Every syscall per request, by name",
        f"Counted by {tracer} over one extra, untimed batch of the same requests (its slowdown of the batch: "
        f"median {overhead.median():.2f}x); colours repeat after eight names.",
        fig,
    )


def count_figures(table: pd.DataFrame, suite: str) -> list[Figure]:
    """The count figures of `suite` (none when it recorded no counts)."""
    table = table[table["suite"] == suite]
    return [fig for make in (_per_request, _by_name) if (fig := make(table)) is not None]
