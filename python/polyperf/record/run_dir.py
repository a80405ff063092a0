"""The run directory: every suite writes rows here (schema in `schema.py`), every report reads them.

A run directory holds `results.jsonl` (appended row by row, so a crash keeps what was measured),
`results.parquet` + `results.csv` (written at the end, or rebuilt later from the JSONL), `env.json`,
pytest-benchmark's raw `benchmark.json` and `logs/`.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from polyperf.record.schema import SCHEMA_VERSION, Row, as_frame, params_key, upgrade

__all__ = [
    "RowWriter",
    "finalize_run",
    "load_env",
    "load_run",
    "new_run_dir",
    "point_latest",
    "resolve_run",
]

JSONL = "results.jsonl"
PARQUET = "results.parquet"
CSV = "results.csv"
ENV = "env.json"
LATEST = "latest"


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def new_run_dir(out: Path, run_id: str | None = None) -> Path:
    """Creates `out/runs/<run-id>/` (with `logs/` and an empty `results.jsonl`) and returns it."""
    run_dir = Path(out) / "runs" / (run_id or new_run_id())
    (run_dir / "logs").mkdir(parents=True, exist_ok=False)
    (run_dir / JSONL).touch()  # a run that records nothing is still a run (its log says why)
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
                fh.write(json.dumps(self._as_record(row), sort_keys=True, default=str) + "\n")

    def _as_record(self, row: Row) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "suite": row.suite,
            "case": row.case,
            "implementation": row.implementation,
            "variant": row.variant,
            "driver": row.driver,
            "metric": row.metric,
            "value": float(row.value),
            "unit": row.unit,
            "repeat": int(row.repeat),
            "client_bound": bool(row.client_bound),
            "params": dict(row.params),
            "schema_version": SCHEMA_VERSION,
        }


def _jsonl_records(path: Path) -> list[dict[str, Any]]:
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut short by a crash: keep every complete row
    return records


def _parquet_records(path: Path) -> list[dict[str, Any]]:
    records = pd.read_parquet(path).to_dict("records")
    for rec in records:
        params = rec.get("params")
        if isinstance(params, list | np.ndarray):  # v2: map<string, string of JSON> read back as pairs
            rec["params"] = {k: json.loads(v) for k, v in params}
    return records


def _params_as_map(frame: pd.DataFrame) -> pa.Table:
    table = pa.Table.from_pandas(frame.drop(columns=["params"]), preserve_index=False)
    pairs = [[(k, json.dumps(v, default=str)) for k, v in sorted(p.items())] for p in frame["params"]]
    return table.append_column("params", pa.array(pairs, type=pa.map_(pa.string(), pa.string())))


def finalize_run(run_dir: Path) -> pd.DataFrame:
    """Writes `results.parquet` and `results.csv` from the JSONL rows; returns the table."""
    run_dir = Path(run_dir)
    frame = load_run(run_dir)
    pq.write_table(_params_as_map(frame), run_dir / PARQUET)
    frame.assign(params=frame["params"].map(params_key)).to_csv(run_dir / CSV, index=False)
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
    """The run's tidy table (schema v2, whatever version wrote it); `params` is a dict per row."""
    run_dir = resolve_run(path)
    # The JSONL is the source of truth (rows appended after the last finalize included); the
    # parquet alone is enough when a run directory was shared without it.
    jsonl = run_dir / JSONL
    records = _jsonl_records(jsonl) if jsonl.exists() else _parquet_records(run_dir / PARQUET)
    return as_frame(upgrade(records))


def load_env(path: str | os.PathLike[str] = "reports/latest") -> dict[str, Any]:
    """The run's `env.json` (machine, toolchains, profile, CPU split, interruption), `{}` if absent."""
    env_path = resolve_run(path) / ENV
    if not env_path.exists():
        return {}
    env = json.loads(env_path.read_text(encoding="utf-8"))
    env.setdefault("schema_version", 1)
    env.setdefault("interrupted", None)
    return env
