"""The tidy result schema and the run directory: every suite writes rows here, every report reads them.

A run directory holds `results.jsonl` (appended row by row, so a crash keeps what was measured),
`results.parquet` + `results.csv` (written at the end, or rebuilt later from the JSONL), `env.json`,
pytest-benchmark's raw `benchmark.json` and `logs/`.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = [
    "COLUMNS",
    "SCHEMA_VERSION",
    "Row",
    "RowWriter",
    "finalize_run",
    "load_run",
    "new_run_dir",
    "resolve_run",
]

# Bump when a column changes meaning; `load_run` upgrades older tables.
SCHEMA_VERSION = 1
COLUMNS = ["run_id", "suite", "case", "implementation", "variant", "metric", "value", "unit", "repeat", "params"]

JSONL = "results.jsonl"
PARQUET = "results.parquet"
CSV = "results.csv"
LATEST = "latest"


@dataclass(frozen=True)
class Row:
    """One measured value. `params` holds what else identifies it (sizes, capacities, CPUs...)."""

    suite: str
    case: str
    implementation: str
    variant: str
    metric: str
    value: float
    unit: str
    repeat: int = 0
    params: Mapping[str, Any] = field(default_factory=dict)


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def new_run_dir(out: Path, run_id: str | None = None) -> Path:
    """Creates `out/runs/<run-id>/` (with `logs/`) and returns it."""
    run_dir = Path(out) / "runs" / (run_id or new_run_id())
    (run_dir / "logs").mkdir(parents=True, exist_ok=False)
    return run_dir


def point_latest(run_dir: Path) -> None:
    """Points `<out>/latest` at `run_dir` (a relative symlink, replaced atomically)."""
    out = run_dir.parent.parent
    tmp = out / f".{LATEST}.{os.getpid()}"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(run_dir.relative_to(out))
    tmp.replace(out / LATEST)


class RowWriter:
    """Appends rows to the run's JSONL file, flushing each one so partial results survive."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.run_id = self.run_dir.name
        self._path = self.run_dir / JSONL

    def write(self, rows: Iterable[Row]) -> None:
        with self._path.open("a", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(self._as_record(row), sort_keys=True) + "\n")

    def _as_record(self, row: Row) -> dict[str, Any]:
        if not isinstance(row.value, int | float):
            raise TypeError(f"{row.metric}: value must be a number, got {row.value!r}")
        return {
            "run_id": self.run_id,
            "suite": row.suite,
            "case": row.case,
            "implementation": row.implementation,
            "variant": row.variant,
            "metric": row.metric,
            "value": float(row.value),
            "unit": row.unit,
            "repeat": int(row.repeat),
            "params": json.dumps(dict(row.params), sort_keys=True),
            "schema_version": SCHEMA_VERSION,
        }


def _read_jsonl(path: Path) -> pd.DataFrame:
    records = []
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    continue  # a line cut short by a crash: keep every complete row
    frame = pd.DataFrame.from_records(records, columns=[*COLUMNS, "schema_version"])
    return _upgrade(frame)


def _upgrade(frame: pd.DataFrame) -> pd.DataFrame:
    """Brings a table of any schema version to the current columns and dtypes."""
    if "schema_version" not in frame.columns:
        frame["schema_version"] = 1
    frame = frame.reindex(columns=[*COLUMNS, "schema_version"])
    frame["value"] = pd.to_numeric(frame["value"], errors="coerce")
    frame["repeat"] = pd.to_numeric(frame["repeat"], errors="coerce").fillna(0).astype("int64")
    frame["params"] = frame["params"].fillna("{}").astype(str)
    frame["schema_version"] = SCHEMA_VERSION
    return frame


def finalize_run(run_dir: Path) -> pd.DataFrame:
    """Writes `results.parquet` and `results.csv` from the JSONL rows; returns the table."""
    run_dir = Path(run_dir)
    frame = _read_jsonl(run_dir / JSONL)
    frame.to_parquet(run_dir / PARQUET, index=False)
    frame.to_csv(run_dir / CSV, index=False)
    return frame


def resolve_run(path: str | os.PathLike[str]) -> Path:
    """Accepts a run directory, a results file inside one, or an output dir (meaning its `latest`)."""
    path = Path(path)
    if path.is_file():
        path = path.parent
    if (path / LATEST).exists() and not (path / JSONL).exists():
        path = path / LATEST
    if not (path / JSONL).exists() and not (path / PARQUET).exists():
        raise FileNotFoundError(f"{path}: not a polyperf run directory (no {JSONL} or {PARQUET})")
    return path.resolve()


def load_run(path: str | os.PathLike[str] = "reports/latest") -> pd.DataFrame:
    """The run's tidy table as a DataFrame (params stay JSON text: `json.loads` them)."""
    run_dir = resolve_run(path)
    # The JSONL is the source of truth (rows appended after the last finalize included); the
    # parquet alone is enough when a run directory was shared without it.
    if (run_dir / JSONL).exists():
        return _read_jsonl(run_dir / JSONL)
    return _upgrade(pd.read_parquet(run_dir / PARQUET))
