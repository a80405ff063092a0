"""Plot helpers shared by the load suites' figures: grouped median bars
with 95% CIs where client-bound results are hatched and labelled, locust's rps-over-time, and the
captions that say which driver made a number, how the CPUs were split and how latency was rounded.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from matplotlib.axes import Axes

from polyperf.report.figure import COLORS, grouped_bars

__all__ = [
    "DRIVER_NOTES",
    "LOCUST_NOTE",
    "flagged",
    "grouped_bars",
    "label_of",
    "locust_history",
    "pinning",
    "rows",
    "values_by",
]

LOCUST_NOTE = (
    "locust rounds response times to whole milliseconds below 100 ms (coarser above), so its "
    "percentiles are step values"
)
DRIVER_NOTES = {
    "oha": "oha (native Rust generator)",
    "wrk": "wrk (native C generator)",
    "locust": "locust FastHttpUser (Python; ~10x below a native generator's ceiling)",
}


def rows(table: pd.DataFrame, case: str, metric: str) -> pd.DataFrame:
    return table[(table["case"] == case) & (table["metric"] == metric)]


def label_of(implementation: str, variant: str) -> str:
    return f"{implementation}\n{variant}" if variant else implementation


def _key_params(params: dict, keys: Sequence[str]) -> tuple:
    return tuple(params.get(k) for k in keys)


def values_by(
    table: pd.DataFrame,
    case: str,
    metric: str,
    group_param: str | None = None,
) -> dict[tuple[str, object], list[float]]:
    """{(bar label, group value): values over repeats}; the group is one params key (e.g. connections)."""
    out: dict[tuple[str, object], list[float]] = {}
    for _, r in rows(table, case, metric).iterrows():
        group = _key_params(r["params"], [group_param])[0] if group_param else None
        out.setdefault((label_of(r["implementation"], r["variant"]), group), []).append(float(r["value"]))
    return out


def flagged(table: pd.DataFrame, case: str, group_param: str | None = None) -> set[tuple[str, object]]:
    """Bars any of whose repeats was client-bound (shown hatched: not the server's capacity)."""
    bound = table.assign(value=table["client_bound"].astype(float), metric="client_bound_flag")
    return {
        key
        for key, values in values_by(bound[table["metric"] == "rps"], case, "client_bound_flag", group_param).items()
        if max(values) >= 0.5
    }


def pinning(table: pd.DataFrame) -> str:
    """ "server CPUs 0, client CPUs 1" from the rows' params (the CPU split of the run)."""
    for params in table["params"]:
        if "server_cpus" in params:
            return f"server pinned to CPU {params['server_cpus']}, load generator to CPU {params['client_cpus']}"
    return "CPU split not recorded"


def locust_history(ax: Axes, table: pd.DataFrame) -> bool:
    """Requests/s per second of the first locust repeat per target, users on a second axis."""
    hist = table[table["case"] == "locust_history"]
    if hist.empty:
        return False
    users_ax = ax.twinx()
    for i, ((impl, variant), g) in enumerate(hist.groupby(["implementation", "variant"], sort=True)):
        g = g.assign(second=g["params"].map(lambda p: p.get("second")))
        rps = g[g["metric"] == "history_rps"].sort_values("second")
        users = g[g["metric"] == "history_users"].sort_values("second")
        color = COLORS[i % len(COLORS)]
        ax.plot(rps["second"], rps["value"], "o-", color=color, label=f"{impl} {variant}")
        users_ax.plot(users["second"], users["value"], ":", color=color, alpha=0.6)
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("requests/s (solid)")
    users_ax.set_ylabel("users (dotted)")
    ax.legend(fontsize=7)
    return True
