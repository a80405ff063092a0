"""Reading a run's rows back: `results.jsonl` line by line and `results.parquet` row by row, each record checked by
`schema.check_record`. What cannot be a row is skipped and counted with its line number and why; a value that
cannot stand (NaN, negative time, out of range) keeps its row with NaN. `run_dir.load_run` builds the table from
this, and keeps whichever of the two files holds more rows, so a truncated JSONL never shrinks a table."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from polyperf.record.schema import BadRecord, check_record

__all__ = ["Read", "by_kind", "lines_text", "read_jsonl", "read_parquet", "rows_held", "valid_rows"]


@dataclass
class Read:
    """Checked records of one file, with what was skipped (`skipped`: line → why there is no row) and what was
    left out (`left_out`: line → why the row's value is NaN). Lines count from 1 (parquet: rows from 1)."""

    records: list[dict[str, Any]] = field(default_factory=list)
    skipped: dict[int, str] = field(default_factory=dict)
    left_out: dict[int, str] = field(default_factory=dict)

    @property
    def bad_lines(self) -> list[int]:
        """Every line that gave no valid value: skipped, or kept with its value left out."""
        return sorted({*self.skipped, *self.left_out})

    @property
    def problems(self) -> dict[int, str]:
        return dict(sorted({**self.skipped, **self.left_out}.items()))

    def add(self, number: int, record: Any) -> None:
        try:
            checked, problem = check_record(record)
        except BadRecord as exc:
            self.skipped[number] = str(exc)
            return
        if checked is None:
            return  # dropped on purpose by an upgrade (a v1 flag row)
        if problem:
            self.left_out[number] = problem
        self.records.append(checked)


def by_kind(problems: Mapping[int, str]) -> dict[str, list[int]]:
    """Line numbers grouped by the kind of problem (the text before the first colon), in first-seen order."""
    kinds: dict[str, list[int]] = {}
    for number, why in sorted(problems.items()):
        kinds.setdefault(why.split(":", 1)[0], []).append(number)
    return kinds


def _regular_file(path: Path) -> Path:
    if path.is_dir():
        raise ValueError(f"{path}: is a folder, not a file")
    return path


def _decoded(raw: bytes) -> tuple[Any, str]:
    """(the line's JSON value, "") or (None, why it is not JSON)."""
    try:
        return json.loads(raw.decode("utf-8")), ""
    except UnicodeDecodeError:
        return None, "not JSON: not UTF-8 text"
    except RecursionError:
        return None, "not JSON: nested too deeply"
    except ValueError as exc:  # JSONDecodeError, and numbers Python refuses (integers of more than 4,300 digits)
        kind = "not JSON" if isinstance(exc, json.JSONDecodeError) else "a number Python refuses"
        return None, f"{kind}: {str(exc)[:80]}"


def read_jsonl(path: Path) -> Read:
    """The checked records of a `results.jsonl`. A line cut short by a crash, or garbled in the middle of the
    file, loses only itself, and is counted; blank lines are not counted."""
    read = Read()
    for number, raw in enumerate(_regular_file(Path(path)).read_bytes().split(b"\n"), start=1):
        if not raw.strip():
            continue
        value, why = _decoded(raw)
        if why:
            read.skipped[number] = why
        else:
            read.add(number, value)
    return read


def _params(value: Any) -> Any:
    if isinstance(value, list | np.ndarray):  # v2: map<string, string of JSON> read back as (key, value) pairs
        return {k: json.loads(v) for k, v in value}
    return value


def _plain(value: Any) -> Any:
    """numpy scalars → Python ones, so the checks see what the JSONL would hold."""
    return value.item() if isinstance(value, np.generic) else value


def read_parquet(path: Path) -> Read:
    """The checked records of a `results.parquet` (row numbers from 1 stand for line numbers)."""
    read = Read()
    frame = pd.read_parquet(_regular_file(Path(path)))
    for number, rec in enumerate(frame.to_dict("records"), start=1):
        rec = {k: _plain(v) for k, v in rec.items()}
        try:
            rec["params"] = _params(rec.get("params"))
        except (ValueError, TypeError) as exc:
            read.skipped[number] = f"wrong type: params not readable: {str(exc)[:60]}"
            continue
        for key in ("variant", "driver", "run_id"):  # a missing text read back as NaN
            if isinstance(rec.get(key), float) and rec[key] != rec[key]:
                rec[key] = None
        read.add(number, rec)
    return read


def rows_held(path: Path) -> int | None:
    """How many rows a `results.parquet` or `results.csv` holds: 0 when absent, None when it cannot be read."""
    path = Path(path)
    if not path.exists():
        return 0
    try:
        if path.suffix == ".parquet":
            return int(pq.read_metadata(path).num_rows)
        return len(pd.read_csv(path, usecols=[0]))
    except (OSError, ValueError, pd.errors.ParserError, pd.errors.EmptyDataError):
        return None


def lines_text(numbers: Iterable[int], shown: int = 20) -> str:
    """`4, 5, 6` or `1, 2, 3, 4, 5 and 1 more`."""
    numbers = list(numbers)
    more = f" and {len(numbers) - shown} more" if len(numbers) > shown else ""
    return ", ".join(map(str, numbers[:shown])) + more


def valid_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The rows whose value can stand: without those kept with the value NaN (left out when loaded, or measured
    as NaN), for figures, medians and comparisons. Verdicts take the whole table, so that a series with no
    valid value reads as such rather than as not measured."""
    values = pd.to_numeric(table["value"], errors="coerce").to_numpy(dtype=float)
    return table[np.isfinite(values)]
