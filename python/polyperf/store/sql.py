"""The queries both back ends share: one SQL dialect (`?` placeholders; PostgreSQL's driver gets `%s`), so the
DuckDB file and a team's PostgreSQL hold the same tables and answer the same questions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from polyperf.store.records import SERIES_KEY, RunRecord

__all__ = ["RUN_COLUMNS", "SqlStore"]

RUN_COLUMNS = [
    "run_id",
    "git_commit",
    "commit_time",
    "branch",
    "machine",
    "cpu_model",
    "cores",
    "kernel",
    "cpu_budget",
    "profile",
    "polyperf_version",
    "suites",
    "report",
    "env",
]
SAMPLE_COLUMNS = ["run_id", "series_id", "repeat", "value", "client_bound"]
POINT_COLUMNS = ["run_id", "series_id", "n", "value", "low", "high", "client_bound", "exact"]
VERDICT_COLUMNS = [
    "run_id",
    "claim",
    "suite",
    "kind",
    "verdict",
    "measured",
    "ci_low",
    "ci_high",
    "n",
    "unit",
    "reason",
]
# Runs of a history in commit order; runs of one commit by their start (the run id begins with its time).
ORDER = "r.commit_time NULLS LAST, r.run_id"
_RUN_FIELDS = "r.run_id, r.git_commit, r.commit_time, r.branch, r.machine, r.profile, r.report"


def quoted(column: str) -> str:
    return f'"{column}"' if column in ("case", "repeat") else column


def _filters(
    machine: str | None, suite: str | None, since: str | None, profile: str | None, alias: str = "s"
) -> tuple[str, list[Any]]:
    where, params = ["TRUE"], []
    for column, value in (("r.machine", machine), (f"{alias}.suite", suite), ("r.profile", profile)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    if since is not None:  # a date: commits made since (runs made since, for a run with no commit time)
        where.append("(r.commit_time >= ? OR (r.commit_time IS NULL AND r.run_id >= ?))")
        stamp = int(pd.Timestamp(since, tz="UTC").timestamp())
        params += [stamp, since.replace("-", "")]
    return " AND ".join(where), params


class SqlStore:
    """The shared half of both back ends: the reads, and the order of a run's writes. A back end provides
    `_query(sql, params) -> DataFrame` and `_add(record) -> bool` (one transaction)."""

    url: str

    def _query(self, sql: str, params: Sequence[Any] = ()) -> pd.DataFrame:
        raise NotImplementedError

    def _add(self, record: RunRecord) -> bool:
        raise NotImplementedError

    def add_run(self, record: RunRecord) -> bool:
        """Stores the run in one transaction; False (and nothing written) when its id is already stored."""
        return self._add(record)

    def has_run(self, run_id: str) -> bool:
        return not self._query("SELECT 1 FROM runs WHERE run_id = ?", [run_id]).empty

    def stored_commits(self, *, machine: str | None = None, profile: str | None = None) -> set[str]:
        where, params = _filters(machine, None, None, profile)
        frame = self._query(f"SELECT DISTINCT r.git_commit FROM runs r WHERE {where}", params)
        return {c for c in frame["git_commit"] if c}

    def runs(self, *, machine: str | None = None, since: str | None = None) -> pd.DataFrame:
        """Every stored run's key, in commit order."""
        where, params = _filters(machine, None, since, None)
        return self._query(f"SELECT r.* FROM runs r WHERE {where} ORDER BY {ORDER}", params)

    def series(self, *, suite: str | None = None) -> pd.DataFrame:
        where, params = ("suite = ?", [suite]) if suite else ("TRUE", [])
        columns = ", ".join(quoted(c) for c in SERIES_KEY)
        return self._query(f"SELECT series_id, {columns} FROM series WHERE {where} ORDER BY {columns}", params)

    # These signatures repeat the Store protocol (store/__init__.py) by design: that is the interface, this its SQL.
    def points(
        self,
        *,
        series_id: int | None = None,
        machine: str | None = None,
        suite: str | None = None,
        since: str | None = None,
        profile: str | None = None,
    ) -> pd.DataFrame:
        """Points (one per run and series) with their run's key and their series' key, in commit order."""
        where, params = _filters(machine, suite, since, profile)
        if series_id is not None:
            where += " AND p.series_id = ?"
            params.append(int(series_id))
        keys = ", ".join(f"s.{quoted(c)}" for c in SERIES_KEY)
        sql = (
            f"SELECT {_RUN_FIELDS}, p.series_id, {keys}, p.n, p.value, p.low, p.high, p.client_bound, p.exact "
            f"FROM points p JOIN runs r ON r.run_id = p.run_id JOIN series s ON s.series_id = p.series_id "
            f"WHERE {where} ORDER BY p.series_id, {ORDER}"
        )
        return self._query(sql, params)

    def samples(self, *, series_id: int, machine: str | None = None) -> pd.DataFrame:
        where, params = _filters(machine, None, None, None)
        sql = (
            f'SELECT {_RUN_FIELDS}, x."repeat", x.value, x.client_bound FROM samples x JOIN runs r '
            f'ON r.run_id = x.run_id WHERE {where} AND x.series_id = ? ORDER BY {ORDER}, x."repeat"'
        )
        return self._query(sql, [*params, int(series_id)])

    def verdicts(
        self,
        *,
        machine: str | None = None,
        suite: str | None = None,
        since: str | None = None,
        profile: str | None = None,
    ) -> pd.DataFrame:
        """Every claim's verdict and measured value per run, in commit order."""
        where, params = _filters(machine, suite, since, profile, alias="v")
        sql = (
            f"SELECT {_RUN_FIELDS}, v.claim, v.suite, v.kind, v.verdict, v.measured, v.ci_low, v.ci_high, v.n, "
            f"v.unit, v.reason FROM verdicts v JOIN runs r ON r.run_id = v.run_id WHERE {where} "
            f"ORDER BY v.claim, {ORDER}"
        )
        return self._query(sql, params)

    def machines(self) -> pd.DataFrame:
        """Each fingerprint with its testbed and how many runs it holds, the busiest first."""
        return self._query(
            "SELECT machine, MIN(cpu_model) AS cpu_model, MIN(cores) AS cores, MIN(kernel) AS kernel, "
            "MIN(cpu_budget) AS cpu_budget, COUNT(*) AS runs, MAX(run_id) AS newest FROM runs "
            "GROUP BY machine ORDER BY runs DESC, newest DESC"
        )


def run_row(record: RunRecord) -> list[Any]:
    return [record.meta.get(c) for c in RUN_COLUMNS]


def insert_run_sql(placeholder: str = "?") -> str:
    marks = ", ".join([placeholder] * len(RUN_COLUMNS))
    return (
        f"INSERT INTO runs ({', '.join(RUN_COLUMNS)}) VALUES ({marks}) ON CONFLICT (run_id) DO NOTHING RETURNING run_id"
    )


def frame_for(record: RunRecord, table: str) -> pd.DataFrame:
    """The record's rows for `table` in the table's column order, without `run_id` (the insert adds it as one
    parameter: a column of a thousand equal strings costs more to hand over than the numbers). Series are sorted by
    id, so concurrent writers take the same keys in the same order and PostgreSQL never deadlocks on them."""
    if table == "series":
        return record.series[["series_id", *SERIES_KEY]].sort_values("series_id")
    columns = {"samples": SAMPLE_COLUMNS, "points": POINT_COLUMNS, "verdicts": VERDICT_COLUMNS}[table][1:]
    frame = getattr(record, table)
    return pd.DataFrame(columns=columns) if frame.empty else frame[columns]
