"""Stage "store": every finished run kept in one history, keyed by commit, branch, machine fingerprint, profile
and polyperf version, for change detection over commits (`analyse.changepoints`) and the history page.

One interface (`Store`), two back ends: a DuckDB file beside the runs by default (`reports/history.duckdb`), or
a team's PostgreSQL (`--store postgresql://…`, or `POLYPERF_STORE`). `open_store` picks one.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Protocol

import pandas as pd

from polyperf.store.records import RunRecord, StoreError, fingerprint, read_run
from polyperf.store.schema import SCHEMA_VERSION

__all__ = [
    "DEFAULT_FILE",
    "ENV_VAR",
    "SCHEMA_VERSION",
    "RunRecord",
    "Store",
    "StoreError",
    "add_runs",
    "default_store_url",
    "fingerprint",
    "open_store",
    "read_run",
]

ENV_VAR = "POLYPERF_STORE"
DEFAULT_FILE = "history.duckdb"


class Store(Protocol):
    """What polyperf asks of a history store; every method either completes or raises StoreError (one line)."""

    url: str

    def add_run(self, record: RunRecord) -> bool: ...
    def has_run(self, run_id: str) -> bool: ...
    def stored_commits(self, *, machine: str | None = None, profile: str | None = None) -> set[str]: ...
    def runs(self, *, machine: str | None = None, since: str | None = None) -> pd.DataFrame: ...
    def series(self, *, suite: str | None = None) -> pd.DataFrame: ...
    # Keyword-only filters repeat across methods on purpose: each query takes just the filters it can apply.
    def points(
        self,
        *,
        series_id: int | None = None,
        machine: str | None = None,
        suite: str | None = None,
        since: str | None = None,
        profile: str | None = None,
    ) -> pd.DataFrame: ...
    def samples(self, *, series_id: int, machine: str | None = None) -> pd.DataFrame: ...
    def verdicts(
        self,
        *,
        machine: str | None = None,
        suite: str | None = None,
        since: str | None = None,
        profile: str | None = None,
    ) -> pd.DataFrame: ...
    def machines(self) -> pd.DataFrame: ...
    def batch(self, write: bool = True) -> contextlib.AbstractContextManager[None]: ...


def default_store_url(out: str | os.PathLike[str] = "reports") -> str:
    """`POLYPERF_STORE` when set, else the DuckDB file beside the runs (`<out>/history.duckdb`)."""
    return os.environ.get(ENV_VAR) or str(Path(out) / DEFAULT_FILE)


def open_store(url: str | os.PathLike[str] | None = None, *, out: str | os.PathLike[str] = "reports") -> Store:
    """A PostgreSQL store for a `postgresql://` (or `postgres://`) URL, else a DuckDB file at that path."""
    text = str(url) if url else default_store_url(out)
    if text.startswith(("postgresql://", "postgres://")):
        from polyperf.store.pg import PostgresStore

        return PostgresStore(text)
    if "://" in text:
        raise StoreError(f"{text.split('://')[0]}://: not a history store (a postgresql:// URL or a DuckDB file path)")
    from polyperf.store.duck import DuckDBStore

    return DuckDBStore(text)


def add_runs(store: Store, paths: list[str | os.PathLike[str]]) -> list[tuple[str, str]]:
    """Adds each run folder; returns (path, outcome) with outcome "added" (followed by "; " and a note when a run
    without verdicts.json had its verdicts judged now), "already stored" or the one-line reason it was refused. A run
    that cannot be read does not stop the others; a store that cannot be written (unreachable, newer) raises
    StoreError."""
    outcomes = []
    with store.batch():
        for path in paths:
            try:
                record = read_run(path)
            except StoreError as exc:
                outcomes.append((str(path), f"not stored: {exc}"))
                continue
            added = store.add_run(record)
            outcome = "added" if added else "already stored"
            if added and record.verdicts_note:  # an older run: its verdicts were judged when stored, and it says so
                outcome += f"; {record.verdicts_note}"
            outcomes.append((str(path), outcome))
    return outcomes
