"""Figures for "Making slow Rust code fast" end to end (suite bson_server): rps and server CPU per request for
each deserialization path, the raw/clone ratio in the title, latency at a fixed rate, and locust's view."""

from __future__ import annotations

import pandas as pd

from polyperf.analyse.stats import ratio
from polyperf.report.figure import Figure, new_axes
from polyperf.report.load_figures import DRIVER_NOTES, LOCUST_NOTE, flagged, grouped_bars, pinning, values_by

SUITE = "bson_server"
_PATH_NOTE = (
    "clone: Document::from_reader + clone + from_document (the article's baseline); document: the "
    "clone removed; raw: serde straight from the raw bytes."
)


def _ratio_text(data: dict[tuple[str, object], list[float]], inverse: bool = False) -> str:
    raw = next((v for (label, _g), v in data.items() if label.split("\n")[-1] == "raw"), None)
    clone = next((v for (label, _g), v in data.items() if label.split("\n")[-1] == "clone"), None)
    if not raw or not clone:
        return ""
    r = ratio(clone, raw) if inverse else ratio(raw, clone)
    name = "clone/raw" if inverse else "raw/clone"
    return f" — {name} {r.median:.2f}x (95% CI {r.low:.2f}–{r.high:.2f})"


def _bars(
    table: pd.DataFrame,
    case: str,
    metric: str,
    *,
    scale: float,
    ylabel: str,
    title: str,
    name: str,
    caption: str,
    inverse: bool = False,
) -> Figure | None:
    data = values_by(table, case, metric, "documents")
    if not data:
        return None
    fig, ax = new_axes(7.5, 4.2)
    grouped_bars(ax, data, flagged(table, case, "documents"), scale=scale, group_name="documents ")
    ax.set_ylabel(ylabel)
    ax.set_title(title + _ratio_text({k: v for k, v in data.items() if k[1] == 100}, inverse))
    return Figure(name, title, caption, fig)


def figures(table: pd.DataFrame) -> list[Figure]:
    table = table[table["suite"] == SUITE]
    split = pinning(table)
    made = [
        _bars(
            table,
            "ceiling",
            "rps",
            scale=1e-3,
            ylabel="thousand requests/s (median, 95% CI)",
            title="GET /find ceiling per path",
            name="bson_ceiling_rps",
            caption=f"Driver: {DRIVER_NOTES['oha']}, 64 connections; {split}. {_PATH_NOTE} "
            "Hatched bars were client-bound. Article (wrk -t8 -c100): 12,168 → 23,964 req/s.",
        ),
        _bars(
            table,
            "ceiling",
            "cpu_s_per_request",
            scale=1e6,
            ylabel="server CPU µs per request",
            title="Server CPU per request per path",
            name="bson_cpu_per_request",
            inverse=True,
            caption="CPU seconds of the server process over exactly the measured window / requests "
            f"(ceiling runs). {_PATH_NOTE}",
        ),
        _bars(
            table,
            "fixed_rate",
            "latency_p99_s",
            scale=1e3,
            ylabel="p99 latency, ms",
            title="p99 latency at a fixed rate per path",
            name="bson_latency_p99",
            caption=f"Driver: {DRIVER_NOTES['oha']} with -q (half the slowest path's ceiling) "
            "--latency-correction; the same rate for every path.",
        ),
        # One _bars call per figure, each with its own metric, scale and caption: a table of figures, not shared logic.
        _bars(
            table,
            "locust",
            "rps",
            scale=1e-3,
            ylabel="thousand requests/s (median, 95% CI)",
            title="locust's view per path",
            name="bson_locust_rps",
            caption=f"Driver: {DRIVER_NOTES['locust']}, 32 users, closed model. {LOCUST_NOTE}. "
            "Hatched bars were client-bound: locust, not the server, set the rate.",
        ),
    ]
    return [f for f in made if f is not None]
