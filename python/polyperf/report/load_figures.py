"""Plot helpers shared by the load suites' figures (http_frameworks, bson_server): grouped median bars
with 95% CIs where client-bound results are hatched and labelled, locust's rps-over-time, and the
captions that say which driver made a number, how the CPUs were split and how latency was rounded.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from polyperf.stats import summarize

__all__ = ["DRIVER_NOTES", "LOCUST_NOTE", "flagged", "grouped_bars", "label_of", "locust_history", "pinning", "rows",
           "values_by"]

LOCUST_NOTE = ("locust rounds response times to whole milliseconds below 100 ms (coarser above), so its "
               "percentiles are step values")
DRIVER_NOTES = {
    "oha": "oha (native Rust generator)",
    "wrk": "wrk (native C generator)",
    "locust": "locust FastHttpUser (Python; ~10x below a native generator's ceiling)",
}
_COLORS = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860"]


def rows(table: pd.DataFrame, case: str, metric: str) -> pd.DataFrame:
    return table[(table["case"] == case) & (table["metric"] == metric)]


def label_of(implementation: str, variant: str) -> str:
    return f"{implementation}\n{variant}"


def _key_params(params: str, keys: Sequence[str]) -> tuple:
    decoded = json.loads(params)
    return tuple(decoded.get(k) for k in keys)


def values_by(table: pd.DataFrame, case: str, metric: str, group_param: str | None = None,
              ) -> dict[tuple[str, object], list[float]]:
    """{(bar label, group value): values over repeats}; the group is one params key (e.g. connections)."""
    out: dict[tuple[str, object], list[float]] = {}
    for _, r in rows(table, case, metric).iterrows():
        group = _key_params(r["params"], [group_param])[0] if group_param else None
        out.setdefault((label_of(r["implementation"], r["variant"]), group), []).append(float(r["value"]))
    return out


def flagged(table: pd.DataFrame, case: str, group_param: str | None = None) -> set[tuple[str, object]]:
    """Bars any of whose repeats was client-bound (shown hatched: not the server's capacity)."""
    return {key for key, values in values_by(table, case, "client_bound", group_param).items() if max(values) >= 0.5}


def pinning(table: pd.DataFrame) -> str:
    """"server CPUs 0, client CPUs 1" from the rows' params (the CPU split of the run)."""
    for params in table["params"]:
        decoded = json.loads(params)
        if "server_cpus" in decoded:
            return f"server pinned to CPU {decoded['server_cpus']}, load generator to CPU {decoded['client_cpus']}"
    return "CPU split not recorded"


def grouped_bars(ax: Axes, data: dict[tuple[str, object], list[float]], flags: set[tuple[str, object]],
                 *, scale: float = 1.0, group_name: str = "") -> None:
    """Median bars with 95% bootstrap CIs, one colour per group; client-bound bars hatched."""
    labels = list(dict.fromkeys(label for label, _g in data))
    groups = sorted({g for _l, g in data}, key=lambda g: (g is None, g if isinstance(g, int | float) else str(g)))
    width = 0.8 / max(len(groups), 1)
    x = np.arange(len(labels))
    for i, group in enumerate(groups):
        for j, label in enumerate(labels):
            values = data.get((label, group))
            if not values:
                continue
            s = summarize(values)
            bound = (label, group) in flags
            ax.bar(x[j] + (i - (len(groups) - 1) / 2) * width, s.median * scale, width,
                   yerr=[[(s.median - s.low) * scale], [(s.high - s.median) * scale]], capsize=3,
                   color=_COLORS[i % len(_COLORS)], hatch="//" if bound else None,
                   edgecolor="black" if bound else None,
                   label=(f"{group_name}{group}" if group is not None else None) if j == 0 else None)
            if bound:  # inside the bar's foot, clear of the error bar
                ax.annotate("client-bound", (x[j] + (i - (len(groups) - 1) / 2) * width, 0), xytext=(0, 3),
                            textcoords="offset points", ha="center", va="bottom", fontsize=6, rotation=90,
                            bbox={"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8})
    ax.set_xticks(x, labels, fontsize=8)
    if any(g is not None for g in groups):
        ax.legend(fontsize=8)


def locust_history(ax: Axes, table: pd.DataFrame) -> bool:
    """Requests/s per second of the first locust repeat per target, users on a second axis."""
    hist = table[table["case"] == "locust_history"]
    if hist.empty:
        return False
    users_ax = ax.twinx()
    for i, ((impl, variant), g) in enumerate(hist.groupby(["implementation", "variant"], sort=True)):
        g = g.assign(second=g["params"].map(lambda p: json.loads(p).get("second")))
        rps = g[g["metric"] == "history_rps"].sort_values("second")
        users = g[g["metric"] == "history_users"].sort_values("second")
        color = _COLORS[i % len(_COLORS)]
        ax.plot(rps["second"], rps["value"], "o-", color=color, label=f"{impl} {variant}")
        users_ax.plot(users["second"], users["value"], ":", color=color, alpha=0.6)
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("requests/s (solid)")
    users_ax.set_ylabel("users (dotted)")
    ax.legend(fontsize=7)
    return True
