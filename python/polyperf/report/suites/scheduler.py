"""Figures for "Making the Tokio scheduler 10x faster" (suite scheduler): each microbenchmark on the old thread
pool, today's runtimes and Go, beside the article's 2019 old → new figures."""

from __future__ import annotations

import pandas as pd

from polyperf.report.figure import Figure, bar_figure

SUITE = "scheduler"
# ns per iteration published in 2019 (old thread pool → new scheduler)
PUBLISHED_NS = {
    "chained_spawn": (2_019_796, 168_854),
    "ping_pong": (1_279_948, 562_659),
    "spawn_many": (10_283_608, 7_320_737),
    "yield_many": (21_450_748, 14_638_563),
}
_ORDER = [("tokio 0.1", "old_threadpool"), ("tokio", "multi_thread"), ("tokio", "current_thread")]


def _label(implementation: str, variant: str) -> str:
    return f"{implementation}\n{variant}"


def _shapes(table: pd.DataFrame) -> Figure | None:
    rows = table[table["metric"] == "seconds"]
    if rows.empty:
        return None
    data: dict[tuple[str, object], list[float]] = {}
    for shape in PUBLISHED_NS:
        shape_rows = rows[rows["case"] == shape]
        series = [
            *_ORDER,
            *sorted(
                {(i, v) for i, v in zip(shape_rows["implementation"], shape_rows["variant"], strict=True) if i == "go"}
            ),
        ]
        for impl, variant in series:
            values = shape_rows[(shape_rows["implementation"] == impl) & (shape_rows["variant"] == variant)]["value"]
            if len(values):
                data[(shape, _label(impl, variant))] = values.tolist()
        old, new = PUBLISHED_NS[shape]
        data[(shape, "2019 article\nold")] = [old * 1e-9]
        data[(shape, "2019 article\nnew")] = [new * 1e-9]
    return bar_figure(
        "scheduler_shapes",
        "Old vs new vs Go, beside the 2019 figures",
        "Every criterion sample (time per iteration) of every round for Tokio's runtimes and the 2019 thread "
        "pool (tokio-threadpool 0.1.18), one go test -bench result per round for Go at each GOMAXPROCS. The "
        "article's bars are its published single figures on its own, larger machine: compare the ratios, "
        "not the heights.",
        data,
        scale=1e3,
        ylabel="ms per iteration (median, 95% CI; log scale)",
        axes_title="Scheduler microbenchmarks: old thread pool, today's Tokio, Go — and the 2019 figures",
        log=True,
        size=(10, 4.8),
    )


def figures(table: pd.DataFrame) -> list[Figure]:
    made = _shapes(table[table["suite"] == SUITE])
    return [made] if made else []
