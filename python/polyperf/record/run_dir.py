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
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from polyperf.common.atomic import atomic_path
from polyperf.record.schema import SCHEMA_VERSION, Row, as_frame, params_key, upgrade

__all__ = [
    "RowWriter",
    "UnreadableLines",
    "finalize_run",
    "load_env",
    "load_run",
    "log_line",
    "new_run_dir",
    "point_latest",
    "resolve_run",
    "unreadable_lines",
    "unreadable_note",
    "unreadable_text",
]

JSONL = "results.jsonl"
PARQUET = "results.parquet"
CSV = "results.csv"
ENV = "env.json"
LATEST = "latest"
LOG = "logs/polyperf.log"  # the harness's own messages about the run (unreadable lines, failed env.json updates)


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


def _jsonl_read(path: Path) -> tuple[list[dict[str, Any]], list[int]]:
    """(records, 1-based numbers of the lines that are not a JSON object). A line cut short by a crash, or
    garbled in the middle of the file, loses only itself, and is counted."""
    records: list[dict[str, Any]] = []
    unreadable: list[int] = []
    for number, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            record = None
        if isinstance(record, dict):
            records.append(record)
        else:
            unreadable.append(number)
    return records, unreadable


def unreadable_text(count: int) -> str:
    """`1 unreadable line skipped`, `3 unreadable lines skipped`."""
    return f"{count} unreadable line{'' if count == 1 else 's'} skipped"


def unreadable_note(count: int) -> str:
    """What the CLI and the report say about skipped lines; their numbers are in the run's log."""
    return f"{JSONL}: {unreadable_text(count)} (line numbers in {LOG})"


def _lines_text(numbers: Sequence[int], shown: int = 20) -> str:
    more = f" and {len(numbers) - shown} more" if len(numbers) > shown else ""
    return ", ".join(map(str, numbers[:shown])) + more


def unreadable_lines(path: str | os.PathLike[str]) -> list[int]:
    """Line numbers of the run's `results.jsonl` that hold no readable row (none when there is no JSONL)."""
    jsonl = resolve_run(path) / JSONL
    return _jsonl_read(jsonl)[1] if jsonl.exists() else []


def log_line(run_dir: Path, text: str) -> None:
    """Appends `text` to the run's own log (`logs/polyperf.log`) unless it is already there; never raises, as it
    also reports failures on the way out of a run."""
    path = Path(run_dir) / LOG
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and text in path.read_text(encoding="utf-8", errors="replace").splitlines():
            return
        with path.open("a", encoding="utf-8") as fh:
            fh.write(text + "\n")
    except OSError:
        pass


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
    """Writes `results.parquet` and `results.csv` from the JSONL rows (each replaced whole); returns the table.
    Unreadable JSONL lines go to the run's log with their numbers."""
    run_dir = Path(run_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreadableLines)  # said once, by whoever loads the run
        frame = load_run(run_dir)
    bad = frame.attrs.get("unreadable_lines") or []
    if bad:
        log_line(run_dir, f"{JSONL}: {unreadable_text(len(bad))}: line {_lines_text(bad, shown=len(bad))}")
    with atomic_path(run_dir / PARQUET) as tmp:
        pq.write_table(_params_as_map(frame), tmp)
    with atomic_path(run_dir / CSV) as tmp:
        frame.assign(params=frame["params"].map(params_key)).to_csv(tmp, index=False)
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


class UnreadableLines(UserWarning):
    """Some lines of a run's `results.jsonl` held no readable row and were skipped."""


def load_run(path: str | os.PathLike[str] = "reports/latest") -> pd.DataFrame:
    """The run's tidy table (schema v2, whatever version wrote it); `params` is a dict per row. Unreadable JSONL
    lines are skipped with a warning that counts them; their numbers are in `table.attrs["unreadable_lines"]`."""
    run_dir = resolve_run(path)
    # The JSONL is the source of truth (rows appended after the last finalize included); the
    # parquet alone is enough when a run directory was shared without it.
    jsonl = run_dir / JSONL
    bad: list[int] = []
    if jsonl.exists():
        records, bad = _jsonl_read(jsonl)
    else:
        records = _parquet_records(run_dir / PARQUET)
    frame = as_frame(upgrade(records))
    frame.attrs["unreadable_lines"] = bad
    if bad:
        warnings.warn(
            f"{jsonl}: {unreadable_text(len(bad))} (line {_lines_text(bad, shown=5)})", UnreadableLines, stacklevel=2
        )
    return frame


def load_env(path: str | os.PathLike[str] = "reports/latest") -> dict[str, Any]:
    """The run's `env.json` (machine, toolchains, profile, CPU split, interruption), `{}` if absent."""
    env_path = resolve_run(path) / ENV
    if not env_path.exists():
        return {}
    try:
        env = json.loads(env_path.read_text(encoding="utf-8"))
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError: say which file
        raise ValueError(f"{env_path}: not readable as JSON ({exc})") from None
    if not isinstance(env, dict):
        raise ValueError(f"{env_path}: expected a JSON object, found {type(env).__name__}")
    env.setdefault("schema_version", 1)
    env.setdefault("interrupted", None)
    return env
