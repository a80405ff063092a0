"""The figure of `polyperf compare`: each series' relative change with its interval, coloured by its label
(`analyse.compare` makes the table)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from polyperf.common.atomic import atomic_path

__all__ = ["compare_figure"]


_COLOURS = {
    "improved": "#2ca02c",
    "regressed": "#d62728",
    "changed": "#ff7f0e",
    "no change": "#7f7f7f",
    "too few samples": "#c7c7c7",
}


def compare_figure(df: pd.DataFrame, path: Path, *, max_rows: int = 60) -> Path:
    """Horizontal bars of each series' relative change (%) with its interval as whiskers, coloured by label;
    exact-count and one-sided series are left out, and only the `max_rows` largest changes are drawn."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    shown = df[df["label"].isin(list(_COLOURS)) & df["change"].notna()]
    shown = shown.loc[shown["change"].abs().sort_values(ascending=False).index[:max_rows]].iloc[::-1]
    fig = Figure(figsize=(9, 1.5 + 0.3 * max(len(shown), 1)), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    change = shown["change"].to_numpy() * 100
    low = np.nan_to_num(change - shown["change_low"].to_numpy() * 100)
    high = np.nan_to_num(shown["change_high"].to_numpy() * 100 - change)
    labels = [
        " ".join(
            str(part)
            for part in (r.case, r.implementation, r.variant, r.driver, r.metric, "" if r.params == "{}" else r.params)
            if part
        )
        for r in shown.itertuples()
    ]
    ax.barh(
        range(len(shown)),
        change,
        xerr=[np.maximum(low, 0), np.maximum(high, 0)],
        capsize=3,
        color=[_COLOURS[label] for label in shown["label"]],
    )
    ax.set_yticks(range(len(shown)), labels, fontsize=8)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel("change of the median, B vs A (%), 95% Hodges-Lehmann interval")
    ax.set_title(f"{df.attrs.get('run_b', 'B')} vs {df.attrs.get('run_a', 'A')}", fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    present = [label for label in _COLOURS if label in set(shown["label"])]
    ax.legend(handles=[Patch(color=_COLOURS[label], label=label) for label in present], fontsize=8)
    path = Path(path)
    with atomic_path(path) as tmp:  # a link planted in a run folder is refused, never written through
        fig.savefig(tmp, dpi=120, format="png")
    return path
