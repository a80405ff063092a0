"""The section any suite gets with no report code: for each (case, metric) a figure of medians with 95%
intervals grouped by implementation and variant (one colour per driver), and a table of medians."""

from __future__ import annotations

import pandas as pd

from polyperf.analyse.claims import per_repeat
from polyperf.analyse.stats import summarize
from polyperf.common.units import display_scale, format_value
from polyperf.report.figure import Figure, grouped_bars, new_axes

__all__ = ["default_figures", "median_table"]

MAX_DEFAULT_FIGURES = 24  # a suite with more (case, metric) pairs shows the first ones; the table has all


def _label(implementation: str, variant: str) -> str:
    return f"{implementation}\n{variant}" if variant else implementation


def default_figures(table: pd.DataFrame, suite: str) -> list[Figure]:
    figures = []
    rows = table[table["suite"] == suite]
    for (case, metric, unit), g in list(rows.groupby(["case", "metric", "unit"], sort=True))[:MAX_DEFAULT_FIGURES]:
        data: dict[tuple[str, object], list[float]] = {}
        flags: set[tuple[str, object]] = set()
        for (impl, variant, driver), series in g.groupby(["implementation", "variant", "driver"], sort=True):
            key = (_label(impl, variant), driver or None)
            data[key] = per_repeat(series).tolist()
            if series["client_bound"].any():
                flags.add(key)
        factor, label = display_scale(unit, g["value"])
        fig, ax = new_axes(7.5, 4.0)
        grouped_bars(ax, data, flags, scale=factor, group_name="driver ")
        ax.set_ylabel(f"{metric} ({label})" if label else metric)
        ax.set_title(f"{suite}: {case} — {metric}")
        name = f"{suite}__{case}__{metric}".replace("/", "-")
        figures.append(
            Figure(
                name,
                f"{case}: {metric}",
                "Medians over repeats with distribution-free 95% intervals (none below 6 repeats), by "
                "implementation and variant. Params that differ within a bar are pooled: see the table.",
                fig,
            )
        )
    return figures


def median_table(table: pd.DataFrame, suite: str) -> pd.DataFrame:
    """One line per series of `suite` (case, implementation, variant, driver, metric), params pooled: median
    and 95% interval in human units (none below 6 repeats), and n, the number of independent repeats."""
    rows = table[table["suite"] == suite]
    records = []
    keys = ["case", "implementation", "variant", "driver", "metric", "unit"]
    for key, g in rows.groupby(keys, sort=True):
        s = summarize(per_repeat(g).to_numpy())
        rec = dict(zip(keys, key, strict=True))
        unit = rec.pop("unit")
        records.append(
            {
                **rec,
                "median": format_value(s.median, unit),
                "95% interval": f"{format_value(s.low, unit)} – {format_value(s.high, unit)}"
                if s.has_interval
                else "none at this n",
                "n": s.n,
            }
        )
    return pd.DataFrame.from_records(records)
