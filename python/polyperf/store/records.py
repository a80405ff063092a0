"""What the store keeps of one run: its key (commit, branch, machine fingerprint, profile, polyperf version), one
value per repeat of every series, one point per series (median with its interval) and every claim's verdict.

`read_run` builds it from a run folder and refuses (one line) a run that was interrupted or is half-written. The
verdicts are those the run wrote (verdicts.json): storing never judges a run again.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from polyperf.analyse.stats import _median_rank
from polyperf.common.paths import REPO_ROOT
from polyperf.errors import PolyperfError
from polyperf.record.env_record import is_commit
from polyperf.record.run_dir import UnreadableLines, load_env, load_run, resolve_run
from polyperf.record.schema import series_params_key

__all__ = ["SERIES_KEY", "RunRecord", "StoreError", "fingerprint", "points_of", "read_run", "series_id", "tidy_samples"]

SERIES_KEY = ["suite", "case", "implementation", "variant", "driver", "metric", "unit", "params"]


class StoreError(PolyperfError):
    """The store cannot be opened, read or written; `str(exc)` is one line and the store is unchanged."""


@dataclass(frozen=True)
class RunRecord:
    """One run as stored: `meta` (one row of `runs`), `samples` (run, series, repeat, value, client_bound),
    `series` (the key of every series it measured), `points` and `verdicts`."""

    meta: dict[str, Any]
    series: pd.DataFrame
    samples: pd.DataFrame
    points: pd.DataFrame
    verdicts: pd.DataFrame = field(default_factory=pd.DataFrame)
    verdicts_note: str = ""  # empty when the verdicts are those the run wrote; else how they were come by

    @property
    def run_id(self) -> str:
        return str(self.meta["run_id"])


def fingerprint(env: dict[str, Any]) -> str:
    """The testbed, as a short stable id: CPU model, cores, kernel and the servers' CPU budget. Runs compare over
    commits only on one fingerprint."""
    parts = [env.get("cpu_model"), env.get("cpu_count"), env.get("kernel"), cpu_budget(env)]
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:12]


def cpu_budget(env: dict[str, Any]) -> str:
    """The CPUs a run could use: how many its process was allowed (a container's or taskset's cpuset), and a CPU
    quota where env.json records one. The servers' own budget under load is in every load row's params, so series
    measured under different budgets never mix whatever this says."""
    parts = []
    if env.get("cpu_affinity"):
        parts.append(f"cpus={len(env['cpu_affinity'])}")
    for key in ("server_cpu_quota", "cpu_quota"):
        if env.get(key) not in (None, ""):
            parts.append(f"quota={env[key]}")
            break
    return ",".join(parts) or "none"


def series_id(key: tuple) -> int:
    """A series' id: 63 bits of the SHA-256 of its key, the same in every store (no sequence to coordinate
    between concurrent writers; a collision needs about 3·10^9 series)."""
    digest = hashlib.sha256(json.dumps(list(key), separators=(",", ":")).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def _commit_time(commit: str | None) -> int | None:
    """The commit's committer time (seconds since the epoch), which orders runs of a history; None off git."""
    text = _git("show", "-s", "--format=%ct", "--end-of-options", commit) if is_commit(commit) else None
    return int(text) if text and text.isdigit() else None


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def _branch(env: dict[str, Any]) -> str | None:
    """The branch the run recorded, else the checkout's own when it is still at the run's commit (a run added as
    it ends); unknown for an old run added later at another commit."""
    if env.get("git_branch"):
        return str(env["git_branch"])
    if env.get("git_commit") and _git("rev-parse", "--verify", "HEAD") == env["git_commit"]:
        branch = _git("rev-parse", "--abbrev-ref", "--verify", "HEAD")
        return None if branch == "HEAD" else branch
    return None


def tidy_samples(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(series, samples): each series' key with its id, and one value per repeat (the median of the samples a
    repeat holds, as claims and reports count n)."""
    rows = frame.copy()
    for column in ("driver", "variant", "implementation", "case"):
        rows[column] = rows[column].fillna("").astype(str)
    rows["params"] = rows["params"].map(lambda p: series_params_key(p if isinstance(p, dict) else {}))
    rows["client_bound"] = rows["client_bound"].fillna(False).astype(bool)
    keys = rows[SERIES_KEY].drop_duplicates().reset_index(drop=True)
    keys["series_id"] = [series_id(tuple(k)) for k in keys.itertuples(index=False)]
    rows = rows.merge(keys, on=SERIES_KEY)
    samples = rows.groupby(["series_id", "repeat"], as_index=False).agg(
        value=("value", "median"), client_bound=("client_bound", "any")
    )
    return keys, samples


def points_of(samples: pd.DataFrame, exact: frozenset[int] = frozenset()) -> pd.DataFrame:
    """One point per series: the median of its repeats with the order-statistic 95% interval (NaN below n = 6,
    as `analyse.stats.summarize`), vectorised because a run holds thousands of series. `exact`: the series whose
    metric the catalogue declares an exact count (whole numbers are no evidence of it)."""
    data = samples[np.isfinite(samples["value"])].sort_values(["series_id", "value"])
    group = data.groupby("series_id")["value"]
    pos = group.cumcount().to_numpy() + 1
    n = group.transform("size").to_numpy()
    ranks = {int(m): _median_rank(int(m)) for m in np.unique(n)}
    k = np.array([ranks[int(m)] for m in n])
    data = data.assign(is_low=(k >= 1) & (pos == k), is_high=(k >= 1) & (pos == n + 1 - k))
    out = data.groupby("series_id").agg(
        n=("value", "size"), value=("value", "median"), client_bound=("client_bound", "any")
    )
    out["exact"] = out.index.isin(list(exact))
    out["low"] = data[data["is_low"]].set_index("series_id")["value"]
    out["high"] = data[data["is_high"]].set_index("series_id")["value"]
    return out.reset_index()[["series_id", "n", "value", "low", "high", "client_bound", "exact"]]


def _exact_series(series: pd.DataFrame) -> frozenset[int]:
    from polyperf.record.catalogue import metric_info

    exact = [bool(getattr(metric_info(str(m)), "exact", False)) for m in series["metric"]]
    return frozenset(series.loc[exact, "series_id"])


VERDICT_COLUMNS = ["claim", "suite", "kind", "verdict", "measured", "ci_low", "ci_high", "n", "unit", "reason"]


def _verdicts(run_dir: Path, frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The verdicts the run wrote (verdicts.json), never judged again here: a run stored after the claims changed
    keeps what it printed. A run older than the file is judged now against the built-in claims, and the note
    returned says so. Entries not measured are not stored."""
    from polyperf.analyse.verdict_records import judged_now
    from polyperf.record.verdicts_file import VerdictsFileError, read_verdicts

    try:
        answers = read_verdicts(run_dir)
    except VerdictsFileError as exc:
        raise StoreError(f"{exc}; not stored") from None
    if answers is None:
        try:
            answers = judged_now(frame, run_dir)
        except ValueError as exc:  # a registry being edited into a bad state costs the run its verdicts, not its series
            return pd.DataFrame(columns=VERDICT_COLUMNS), f"no verdicts.json, and none judged now: {exc}"
    table = pd.DataFrame.from_records(list(answers.records))
    if table.empty:
        return pd.DataFrame(columns=VERDICT_COLUMNS), answers.note
    table = table[table["verdict"] != "not measured"]
    for column in VERDICT_COLUMNS:  # a field a file lacks is unknown, not an error
        if column not in table:
            table[column] = None
    return table[VERDICT_COLUMNS].reset_index(drop=True), answers.note


def read_run(path: str | Path) -> RunRecord:
    """The record of a finished run folder; StoreError (one line) for a run interrupted, still running or
    half-written, which would bend a history."""
    try:
        run_dir = resolve_run(path)
    except FileNotFoundError as exc:
        raise StoreError(str(exc)) from None
    try:
        env = load_env(run_dir)
    except (OSError, ValueError) as exc:
        raise StoreError(f"{run_dir}: env.json cannot be read ({exc}); not stored") from None
    if env.get("git_commit") is not None and not is_commit(env.get("git_commit")):
        raise StoreError(f"{run_dir}: env.json's git_commit is no commit id (40 hexadecimal characters); not stored")
    if env.get("interrupted"):
        raise StoreError(f"{run_dir}: the run was interrupted ({env['interrupted']}); not stored")
    if not (run_dir / "results.parquet").exists():
        raise StoreError(f"{run_dir}: half-written (no results.parquet: still running, or never finished); not stored")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreadableLines)
        frame = load_run(run_dir)
    if frame.attrs.get("unreadable_lines"):
        raise StoreError(f"{run_dir}: results.jsonl has unreadable lines (a write cut short); not stored")
    if frame.empty:
        raise StoreError(f"{run_dir}: the run recorded no rows; not stored")
    series, samples = tidy_samples(frame)
    samples.insert(0, "run_id", run_dir.name)
    points = points_of(samples, _exact_series(series))
    points.insert(0, "run_id", run_dir.name)
    verdicts, note = _verdicts(run_dir, frame)
    verdicts.insert(0, "run_id", run_dir.name)
    return RunRecord(_meta(run_dir, env), series, samples, points, verdicts, note)


def _meta(run_dir: Path, env: dict[str, Any]) -> dict[str, Any]:
    commit = env.get("git_commit")
    report = run_dir / "report.html"
    return {
        "run_id": run_dir.name,
        "git_commit": commit,
        "commit_time": _commit_time(commit),
        "branch": _branch(env),
        "machine": fingerprint(env),
        "cpu_model": env.get("cpu_model"),
        "cores": env.get("cpu_count"),
        "kernel": env.get("kernel"),
        "cpu_budget": cpu_budget(env),
        "profile": env.get("profile"),
        "polyperf_version": env.get("polyperf_version"),
        "suites": ",".join(env.get("suites") or []),
        "report": str(report) if report.exists() else None,
        "env": json.dumps(env, sort_keys=True, default=str),
    }
