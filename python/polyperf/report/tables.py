"""Summary tables of a run: one line per measured series, median and 95% CI (pure; no I/O)."""

from __future__ import annotations

import pandas as pd

from polyperf.stats import summarize

SERIES = ["suite", "case", "implementation", "variant", "metric", "unit", "params"]


def summary_table(table: pd.DataFrame) -> pd.DataFrame:
    records = []
    for key, group in table.groupby(SERIES, sort=True, dropna=False):
        s = summarize(group["value"].tolist())
        records.append({**dict(zip(SERIES, key, strict=True)), "median": s.median, "ci_low": s.low,
                        "ci_high": s.high, "n": s.n})
    return pd.DataFrame.from_records(records, columns=[*SERIES, "median", "ci_low", "ci_high", "n"])
