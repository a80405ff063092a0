"""Writes tests/testdata/claims_golden.jsonl.gz: the rows of quick runs that the built-in registry's entries
select, so that a test can prove every entry still selects rows (a renamed case then fails a test instead of
falling silently to "not measured"). Regenerate after a quick run of every suite:

    python tests/make_claims_golden.py reports/latest [MORE_RUN_DIRS ...]   (a suite comes from the last run with it)
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pandas as pd

from polyperf.analyse.claims import load_claims, selected_rows
from polyperf.record import load_run

GOLDEN = Path(__file__).with_name("testdata") / "claims_golden.jsonl.gz"


def main(runs: list[str]) -> int:
    tables = [load_run(run) for run in runs]
    # a suite comes from the last run that has it
    latest = {suite: i for i, t in enumerate(tables) for suite in set(t["suite"])}
    table = pd.concat([t[t["suite"].map(latest) == i] for i, t in enumerate(tables)], ignore_index=True)
    keep = pd.Series(False, index=table.index)
    for claim in load_claims():
        for rows in selected_rows(table, claim):
            keep[rows.index] = True
    golden = table[keep].drop(columns=["schema_version"], errors="ignore")
    with gzip.open(GOLDEN, "wt", encoding="utf-8") as fh:
        for record in golden.to_dict(orient="records"):
            fh.write(json.dumps({**record, "schema_version": 2}, sort_keys=True, default=str) + "\n")
    print(f"{GOLDEN}: {len(golden)} rows of {len(table)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:] or ["reports/latest"]))
