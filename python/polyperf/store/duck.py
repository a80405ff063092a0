"""The default store: one DuckDB file beside the runs (`reports/history.duckdb`), no server, no setup.

DuckDB lets one process write a file at a time, and no process read it while another writes. Two CI jobs that
end together therefore take turns: a lock file beside the store (`fcntl.flock`: shared to read, exclusive to
write) queues them for up to `POLYPERF_STORE_WAIT` seconds (120 by default). It is hand-written because the
maintained lock libraries offer only exclusive locks, and readers should not queue behind each other.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from polyperf.store.records import RunRecord, StoreError
from polyperf.store.schema import MIGRATIONS, POSTGRESQL_ONLY, SCHEMA_VERSION, newer_text
from polyperf.store.sql import SqlStore, frame_for, insert_run_sql, run_row

__all__ = ["DuckDBStore"]

DEFAULT_WAIT = 120.0
COMPACT_AFTER = 200_000  # points (200 runs of 1,000 series)


def _wait_seconds() -> float:
    try:
        return float(os.environ.get("POLYPERF_STORE_WAIT", DEFAULT_WAIT))
    except ValueError:
        return DEFAULT_WAIT


@contextlib.contextmanager
def _locked(lock_path: Path, exclusive: bool, wait: float) -> Iterator[None]:
    mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
    with lock_path.open("a") as fh:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fh, mode | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise StoreError(
                        f"{lock_path.with_suffix('')}: another polyperf held the history store for {wait:g} s; "
                        "nothing was changed (POLYPERF_STORE_WAIT sets the wait)"
                    ) from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _version(con: duckdb.DuckDBPyConnection) -> int:
    try:  # (information_schema takes 40 ms here; a missing table answers at once)
        row = con.execute("SELECT MAX(version) FROM schema_version").fetchone()
    except duckdb.CatalogException:
        return 0
    return int(row[0] or 0) if row else 0


def _config(write: bool) -> dict[str, Any]:
    """A store may be someone else's file: opened for reading, its SQL (views, macros) can reach no other file and
    no network, load no extension, and cannot turn that back on."""
    if write:
        return {}
    return {"enable_external_access": False, "autoload_known_extensions": False, "lock_configuration": True}


class DuckDBStore(SqlStore):
    """A history in one DuckDB file; every call opens it, does its work and closes it (so other processes get
    their turn)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.url = str(self.path)
        self._lock = self.path.with_name(self.path.name + ".lock")
        self._held: duckdb.DuckDBPyConnection | None = None
        self._known: set[int] = set()  # series ids this session has seen stored

    @contextlib.contextmanager
    def batch(self, write: bool = True) -> Iterator[None]:
        """Holds the store (its lock and one connection) across many calls: opening the file costs 50-100 ms and
        its first scan reads from disk, which adding a thousand runs or drawing a page of series would pay every
        time. Other processes wait for it meanwhile (`POLYPERF_STORE_WAIT`)."""
        if self._held is not None:
            yield
            return
        with self._connect(write=write) as con:
            self._held = con
            try:
                yield
            finally:
                self._held = None
                self._known.clear()

    @contextlib.contextmanager
    def _connect(self, write: bool) -> Iterator[duckdb.DuckDBPyConnection]:
        if self._held is not None:
            yield self._held
            return
        if not write and not self.path.exists():
            raise StoreError(
                f"{self.path}: no history store here yet (a finished `polyperf run` adds itself; "
                "`polyperf store add RUN` adds older runs)"
            )
        if write:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        with _locked(self._lock, write, _wait_seconds()):
            try:
                con = duckdb.connect(str(self.path), read_only=not write, config=_config(write))
            except duckdb.Error as exc:
                raise StoreError(f"{self.path}: cannot open the history store ({exc})") from None
            try:
                version = _version(con)
                if version > SCHEMA_VERSION:
                    raise StoreError(newer_text(str(self.path), version))
                if write and version < SCHEMA_VERSION:
                    self._migrate(con, version)
                yield con
            except duckdb.Error as exc:  # a write rolled back (a full disk, say): one line, the store as it was
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise StoreError(f"{self.path}: the history store failed ({first}); nothing was changed") from None
            finally:
                con.close()

    def _migrate(self, con: duckdb.DuckDBPyConnection, version: int) -> None:
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            for number in range(version + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[number]:
                    if not statement.startswith(POSTGRESQL_ONLY):
                        con.execute(statement)
                con.execute("INSERT INTO schema_version VALUES (?)", [number])
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise

    def _query(self, sql: str, params: Sequence[Any] = ()) -> pd.DataFrame:
        with self._connect(write=False) as con:
            if _version(con) == 0:
                raise StoreError(f"{self.path}: not a polyperf history store (no schema_version table)")
            return con.execute(sql, list(params)).df()

    def _add(self, record: RunRecord) -> bool:
        with self._connect(write=True) as con:
            con.execute("BEGIN TRANSACTION")
            try:
                added = con.execute(insert_run_sql(), run_row(record)).fetchall()
                if not added:  # stored before: the same run twice is stored once
                    con.execute("ROLLBACK")
                    return False
                for table in ("series", "samples", "points", "verdicts"):
                    frame = frame_for(record, table)
                    if table == "series":
                        frame = frame[~frame["series_id"].isin(self._known)]
                    if frame.empty:
                        continue
                    con.register("incoming", frame)
                    columns = ", ".join(f'"{c}"' for c in frame.columns)
                    if table == "series":
                        con.execute(f"INSERT INTO series SELECT {columns} FROM incoming ON CONFLICT DO NOTHING")
                    else:
                        sql = f"INSERT INTO {table} (run_id, {columns}) SELECT ?, {columns} FROM incoming"
                        con.execute(sql, [record.run_id])
                    con.unregister("incoming")
                con.execute("COMMIT")
            except Exception:
                con.execute("ROLLBACK")
                raise
            self._compact_if_due(con)
        if self._held is not None:
            self._known.update(record.series["series_id"])
        return True

    def _compact_if_due(self, con: duckdb.DuckDBPyConnection) -> None:
        """Rewrites `points` in series order once the points added since the last rewrite reach a quarter of the
        table (at least `COMPACT_AFTER`): DuckDB then skips every row group but one series' own, which took one
        series' history from 300 ms to 100 ms cold at a million points (a rewrite of them takes about 3 s)."""
        row = con.execute("SELECT value FROM store_state WHERE name = 'sorted_points'").fetchone()
        done = int(row[0]) if row else 0
        total = int(con.execute("SELECT COUNT(*) FROM points").fetchone()[0])
        if total - done < max(COMPACT_AFTER, done // 4):
            return
        con.execute("BEGIN TRANSACTION")
        try:
            ddl = next(x for x in MIGRATIONS[1] if x.startswith("CREATE TABLE points ("))
            con.execute(ddl.replace("CREATE TABLE points (", "CREATE TABLE points_sorted (", 1))
            con.execute("INSERT INTO points_sorted SELECT * FROM points ORDER BY series_id, run_id")
            con.execute("DROP TABLE points")
            con.execute("ALTER TABLE points_sorted RENAME TO points")
            con.execute(
                "INSERT INTO store_state VALUES ('sorted_points', ?) ON CONFLICT (name) DO UPDATE SET value = ?",
                [total, total],
            )
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise
