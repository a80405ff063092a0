"""A team's store: the same schema in PostgreSQL (`--store postgresql://…` or `POLYPERF_STORE`), written by many
CI jobs at once. Each run is one transaction; `ON CONFLICT DO NOTHING` makes a run added twice (even at the same
moment) land once; series keys are taken in id order so concurrent writers never deadlock; migrations run under
an advisory lock so two first writers do not both create the tables."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pandas as pd
import psycopg

from polyperf.common.redact import redact, register_secret
from polyperf.store.records import RunRecord, StoreError
from polyperf.store.schema import MIGRATIONS, SCHEMA_VERSION, newer_text
from polyperf.store.sql import SqlStore, frame_for, insert_run_sql, quoted, run_row

__all__ = ["PostgresStore", "redact"]

_MIGRATION_LOCK = 0x706F6C79  # "poly": the advisory lock key the migrations hold
_CONNECT_TIMEOUT = 10


class PostgresStore(SqlStore):
    def __init__(self, url: str) -> None:
        self.url = url
        self._checked = False
        register_secret(urlsplit(url).password)  # masked wherever the store's errors are said
        if urlsplit(url).netloc.count("@") > 1:  # libpq would take what follows the first `@` for the host
            raise StoreError(f"{redact(url)}: the password holds an `@`: write it as %40")
        for key, value in parse_qsl(urlsplit(url).query):
            if key in ("password", "sslpassword"):
                register_secret(value)

    def __repr__(self) -> str:
        return f"PostgresStore({redact(self.url)!r})"

    def _fail(self, exc: Exception) -> StoreError:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return StoreError(f"{redact(self.url)}: the PostgreSQL history store failed ({first}); nothing was changed")

    @contextlib.contextmanager
    def _connect(self) -> Iterator[psycopg.Connection]:
        try:
            con = psycopg.connect(self.url, connect_timeout=_CONNECT_TIMEOUT, autocommit=True)
        except psycopg.Error as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StoreError(f"{redact(self.url)}: cannot reach the PostgreSQL history store ({first})") from None
        try:
            if not self._checked:
                self._migrate(con)
                self._checked = True
            yield con
        except psycopg.Error as exc:
            raise self._fail(exc) from None
        finally:
            con.close()

    def _migrate(self, con: psycopg.Connection) -> None:
        with con.transaction():
            con.execute("SELECT pg_advisory_xact_lock(%s)", [_MIGRATION_LOCK])
            con.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            row = con.execute("SELECT MAX(version) FROM schema_version").fetchone()
            version = int(row[0] or 0) if row else 0
            if version > SCHEMA_VERSION:
                raise StoreError(newer_text(redact(self.url), version))
            for number in range(version + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[number]:
                    con.execute(statement)
                con.execute("INSERT INTO schema_version VALUES (%s)", [number])

    def _query(self, sql: str, params: Sequence[Any] = ()) -> pd.DataFrame:
        with self._connect() as con, con.cursor() as cur:
            cur.execute(sql.replace("?", "%s"), list(params))
            columns = [d.name for d in cur.description or []]
            return pd.DataFrame(cur.fetchall(), columns=columns)

    def _add(self, record: RunRecord) -> bool:
        with self._connect() as con, con.transaction(), con.cursor() as cur:
            cur.execute(insert_run_sql("%s"), run_row(record))
            if cur.fetchone() is None:  # stored before, or by a writer that committed first
                raise _AlreadyStored
            for table in ("series", "samples", "points", "verdicts"):
                frame = frame_for(record, table)
                if frame.empty:
                    continue
                columns = ", ".join(quoted(c) for c in frame.columns)
                rows = frame.astype(object).where(frame.notna(), None).itertuples(index=False, name=None)
                if table == "series":
                    marks = ", ".join(["%s"] * len(frame.columns))
                    cur.executemany(f"INSERT INTO series ({columns}) VALUES ({marks}) ON CONFLICT DO NOTHING", rows)
                    continue
                with cur.copy(f"COPY {table} (run_id, {columns}) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row((record.run_id, *row))
        return True

    @contextlib.contextmanager
    def batch(self, write: bool = True) -> Iterator[None]:
        """Nothing to hold: PostgreSQL serves many writers, each run is its own transaction."""
        yield

    def add_run(self, record: RunRecord) -> bool:
        try:
            return self._add(record)
        except _AlreadyStored:  # the transaction rolled back: nothing of this attempt stays
            return False


class _AlreadyStored(Exception):
    pass
