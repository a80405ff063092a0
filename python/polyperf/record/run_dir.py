"""The run directory: every suite writes rows here (schema in `schema.py`), every report reads them.

A run directory holds `results.jsonl` (appended row by row, so a crash keeps what was measured),
`results.parquet` + `results.csv` (written at the end, or rebuilt later from the JSONL), `env.json`,
pytest-benchmark's raw `benchmark.json` and `logs/`.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from polyperf.common.atomic import PlantedLink, atomic_path, open_append, safe_dir
from polyperf.common.redact import redact
from polyperf.record.env_record import RunEnv
from polyperf.record.lines import Read, by_kind, lines_text, read_jsonl, read_parquet, rows_held
from polyperf.record.schema import SCHEMA_VERSION, Row, as_frame, params_key
from polyperf.record.suite_files import kept_metrics

__all__ = [
    "RowWriter",
    "UnreadableLines",
    "finalize_run",
    "load_env",
    "load_run",
    "log_line",
    "merge_env",
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
PROGRESS = "progress.json"  # the test under way, for `polyperf run`'s status line
PRODUCERS = "producers.json"  # test node id -> the series it wrote and how many repeats (top-ups read it)
DURATIONS = "durations.json"  # seconds per test, the next run's estimate
OWNER = "owner.pid"  # the one process that writes env.json while the run is under way (the `Run` that made it)
ENV_ADDITIONS = "env.additions.json"  # what other processes add to env.json; the owner merges it when it finishes


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
        # which test wrote which series, and its repeats: a top-up re-runs the tests behind an undecided entry
        self.producer: str | None = None
        self.produced: dict[str, dict[str, set]] = {}
        # tests whose repeats loop over targets a top-up may narrow to those an open entry measures
        self.narrowing: set[str] = set()

    def narrows(self) -> None:
        """The running test's repeats loop over targets that a top-up narrows (`common.repeats.top_up_targets`)."""
        if self.producer is not None:
            self.narrowing.add(self.producer)

    def write(self, rows: Iterable[Row]) -> None:
        with open_append(self._path) as fh:
            for row in rows:
                fh.write(json.dumps(self._as_record(row), sort_keys=True, default=str) + "\n")
                if self.producer is not None:
                    seen = self.produced.setdefault(self.producer, {"series": set(), "repeats": set()})
                    seen["series"].add((row.suite, row.case, row.implementation, row.variant, row.metric))
                    seen["repeats"].add(int(row.repeat))

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


def unreadable_text(count: int) -> str:
    """`1 unreadable line skipped`, `3 unreadable lines skipped`."""
    return f"{count} unreadable line{'' if count == 1 else 's'} skipped"


def unreadable_note(count: int) -> str:
    """What the CLI and the report say about skipped lines; their numbers are in the run's log."""
    return f"{JSONL}: {unreadable_text(count)} (line numbers in {LOG})"


def _lines_text(numbers: Sequence[int], shown: int = 20) -> str:
    return lines_text(numbers, shown)


def _left_out_text(count: int) -> str:
    return f"{count} value{'' if count == 1 else 's'} left out (NaN)"


def skipped_note(table: pd.DataFrame) -> str:
    """One line on what loading a run skipped or left out and why ("" when nothing), for the CLI: the counts,
    the first problem, and where the line numbers are."""
    skipped, left_out = table.attrs.get("unreadable_lines") or [], table.attrs.get("left_out_lines") or []
    if not skipped and not left_out:
        return ""
    counts = [unreadable_text(len(skipped))] if skipped else []
    counts += [_left_out_text(len(left_out))] if left_out else []
    problems = table.attrs.get("problems") or {}
    first = min([*skipped, *left_out])
    why = f"; line {first}: {problems[first]}" if first in problems else ""
    return f"{JSONL}: {', '.join(counts)} (line numbers in {LOG}){why}"


def unreadable_lines(path: str | os.PathLike[str]) -> list[int]:
    """Line numbers of the run's `results.jsonl` that hold no readable row (none when there is no JSONL)."""
    jsonl = resolve_run(path) / JSONL
    return sorted(read_jsonl(jsonl).skipped) if jsonl.exists() else []


_REFUSED: set[str] = set()  # links already refused once, said once


def log_line(run_dir: Path, text: str) -> None:
    """Appends `text` to the run's own log (`logs/polyperf.log`) unless it is already there; never raises, as it
    also reports failures on the way out of a run. A link planted at the log (or its folder) is refused: one line on
    stderr, nothing written through it."""
    path = Path(run_dir) / LOG
    text = redact(text)
    try:
        safe_dir(path.parent)
        with open_append(path, "a+") as fh:
            fh.seek(0)
            if text in fh.read().splitlines():
                return
            fh.write(text + "\n")
    except PlantedLink as exc:
        if str(path) not in _REFUSED:
            _REFUSED.add(str(path))
            print(f"polyperf: error: {exc}", file=sys.stderr)
    except OSError:
        pass


def _params_as_map(frame: pd.DataFrame) -> pa.Table:
    table = pa.Table.from_pandas(frame.drop(columns=["params"]), preserve_index=False)
    pairs = [[(k, json.dumps(v, default=str)) for k, v in sorted(p.items())] for p in frame["params"]]
    return table.append_column("params", pa.array(pairs, type=pa.map_(pa.string(), pa.string())))


def _log_problems(run_dir: Path, frame: pd.DataFrame) -> None:
    bad, left_out = frame.attrs.get("unreadable_lines") or [], frame.attrs.get("left_out_lines") or []
    if bad:
        log_line(run_dir, f"{JSONL}: {unreadable_text(len(bad))}: line {_lines_text(bad, shown=len(bad))}")
    if left_out:
        log_line(run_dir, f"{JSONL}: {_left_out_text(len(left_out))}: line {_lines_text(left_out, len(left_out))}")
    problems = frame.attrs.get("problems") or {}
    for kind, numbers in by_kind(problems).items():
        first = problems[numbers[0]].removeprefix(kind).removeprefix(": ")
        log_line(run_dir, f"{JSONL}: {kind}: line {_lines_text(numbers)}" + (f" (first: {first})" if first else ""))
    if frame.attrs.get("kept"):
        log_line(run_dir, frame.attrs["kept"])


def _write_parquet(frame: pd.DataFrame, tmp: Path) -> None:
    pq.write_table(_params_as_map(frame), tmp)


def _write_csv(frame: pd.DataFrame, tmp: Path) -> None:
    frame.assign(params=frame["params"].map(params_key)).to_csv(tmp, index=False)


def _replace_unless_larger(path: Path, frame: pd.DataFrame, write: Callable[[pd.DataFrame, Path], None]) -> None:
    """Replaces `path` (atomically) with `frame` unless the file holds more rows: a table never shrinks. A file
    that cannot be read is moved aside (`<name>.unreadable`), not overwritten."""
    held = rows_held(path)
    if held is not None and held > len(frame):
        log_line(path.parent, f"{path.name} kept: it holds {held} rows, the rows read now are {len(frame)}")
        return
    if held is None:
        path.replace(path.with_name(path.name + ".unreadable"))
        log_line(path.parent, f"{path.name} could not be read: moved to {path.name}.unreadable, written anew")
    with atomic_path(path) as tmp:
        write(frame, tmp)


def finalize_run(run_dir: Path) -> pd.DataFrame:
    """Writes `results.parquet` and `results.csv` from the JSONL rows (each replaced whole, never by fewer rows
    than it holds); returns the table. Skipped JSONL lines go to the run's log with their numbers and why."""
    run_dir = Path(run_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreadableLines)  # said once, by whoever loads the run
        frame = load_run(run_dir)
    _log_problems(run_dir, frame)
    if frame.attrs.get("read_from") != PARQUET:  # else the parquet is the table: nothing to rewrite
        _replace_unless_larger(run_dir / PARQUET, frame, _write_parquet)
    _replace_unless_larger(run_dir / CSV, frame, _write_csv)
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


def _read_larger(run_dir: Path) -> tuple[Read, str, str]:
    """(the rows, the file they came from, why the parquet was kept over the JSONL or "")."""
    jsonl, parquet = run_dir / JSONL, run_dir / PARQUET
    if not jsonl.exists():
        return read_parquet(parquet), PARQUET, ""
    read = read_jsonl(jsonl)
    if (rows_held(parquet) or 0) <= len(read.records):
        return read, JSONL, ""
    stored = read_parquet(parquet)
    if len(stored.records) <= len(read.records):
        return read, JSONL, ""
    kept = (
        f"{JSONL} gives {len(read.records)} rows, {PARQUET} holds {len(stored.records)}: the larger, {PARQUET}, "
        f"is kept and used (delete it to rebuild the table from {JSONL})"
    )
    # the JSONL's skipped lines are why it is smaller: they stay the ones reported
    return Read(stored.records, read.skipped, read.left_out), PARQUET, kept


def load_run(path: str | os.PathLike[str] = "reports/latest") -> pd.DataFrame:
    """The run's tidy table (schema v2, whatever version wrote it); `params` is a dict per row.

    The JSONL is the source of truth (rows appended after the last finalize included), unless `results.parquet`
    holds more rows than it gives (a JSONL truncated or overwritten): then the parquet is used and
    `table.attrs["kept"]` says why. The parquet alone is enough when a run directory was shared without the JSONL.
    Lines that cannot be a row are skipped (`table.attrs["unreadable_lines"]`), and rows whose value cannot stand
    (NaN, infinite, out of range, a negative time) keep their place with the value NaN
    (`table.attrs["left_out_lines"]`); both are counted with a warning, and why is in `table.attrs["problems"]`
    (line → reason)."""
    run_dir = resolve_run(path)
    kept_metrics(run_dir)  # the metrics its suites declared join this process's catalogue
    read, source, kept = _read_larger(run_dir)
    frame = as_frame(read.records)
    skipped, left_out = sorted(read.skipped), sorted(read.left_out)
    frame.attrs.update(
        unreadable_lines=skipped, left_out_lines=left_out, problems=read.problems, read_from=source, kept=kept
    )
    said = [f"{unreadable_text(len(skipped))} (line {_lines_text(skipped, shown=5)})"] if skipped else []
    said += [f"{_left_out_text(len(left_out))} (line {_lines_text(left_out, shown=5)})"] if left_out else []
    if said:
        warnings.warn(f"{run_dir / JSONL}: {'; '.join(said)}", UnreadableLines, stacklevel=2)
    return frame


def load_env(path: str | os.PathLike[str] = "reports/latest") -> dict[str, Any]:
    """The run's `env.json` (machine, toolchains, profile, CPU split, interruption), `{}` if absent."""
    env_path = resolve_run(path) / ENV
    additions = _additions(env_path.with_name(ENV_ADDITIONS))  # a run whose owner was killed before merging them
    if not env_path.exists() and not additions:
        return {}
    try:
        env = json.loads(env_path.read_text(encoding="utf-8")) if env_path.exists() else {}
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError: say which file
        raise ValueError(f"{env_path}: not readable as JSON ({exc})") from None
    if not isinstance(env, dict):
        raise ValueError(f"{env_path}: expected a JSON object, found {type(env).__name__}")
    env = merge_env(env, additions)
    env.setdefault("schema_version", 1)
    env.setdefault("interrupted", None)
    try:  # every known field typed at the boundary: a run folder may come from anyone
        typed = RunEnv.from_json(env).as_json()
    except ValueError as exc:
        raise ValueError(f"{env_path}: {exc}") from None
    return {**env, **{key: typed[key] for key in env if key in typed and key != "schema_version"}}


def _additions(path: Path) -> dict[str, Any]:
    """env.json additions not yet merged; a file cut short or garbled counts as none (env.json itself holds the
    run's record)."""
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def merge_env(env: Mapping[str, Any], additions: Mapping[str, Any]) -> dict[str, Any]:
    """`env` with `additions` over it: notes are added once each, suite times joined, and the first signal that
    stopped the run stays the one recorded."""
    out = dict(env)
    for key, value in additions.items():
        if key == "notes" and isinstance(value, list) and isinstance(out.get(key, []), list):
            out[key] = list(dict.fromkeys(str(v) for v in [*out.get(key, []), *value]))
        elif key == "suite_seconds" and isinstance(value, dict) and isinstance(out.get(key, {}), dict):
            out[key] = {**out.get(key, {}), **value}
        elif key in ("notes", "suite_seconds"):
            out.setdefault(key, value)  # of the wrong type: typed (and refused) with the rest
        elif key != "interrupted" or not out.get("interrupted"):
            out[key] = value
    return out
