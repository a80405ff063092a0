"""The store's one schema, for DuckDB and PostgreSQL alike, as numbered migrations. `schema_version` holds the
versions applied; a store whose version is newer than this polyperf knows is refused, never written."""

from __future__ import annotations

__all__ = ["MIGRATIONS", "POSTGRESQL_ONLY", "SCHEMA_VERSION", "newer_text"]

POSTGRESQL_ONLY = "-- postgresql only\n"
# Each entry brings a store from the previous version to its own; never edit one that has shipped, add the next.
MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            git_commit TEXT,
            commit_time BIGINT,
            branch TEXT,
            machine TEXT NOT NULL,
            cpu_model TEXT,
            cores INTEGER,
            kernel TEXT,
            cpu_budget TEXT,
            profile TEXT,
            polyperf_version TEXT,
            suites TEXT,
            report TEXT,
            env TEXT
        )""",
        """CREATE TABLE series (
            series_id BIGINT PRIMARY KEY,
            suite TEXT NOT NULL,
            "case" TEXT NOT NULL,
            implementation TEXT NOT NULL,
            variant TEXT NOT NULL,
            driver TEXT NOT NULL,
            metric TEXT NOT NULL,
            unit TEXT NOT NULL,
            params TEXT NOT NULL
        )""",
        # one value per independent repeat (the median of the samples a repeat holds)
        """CREATE TABLE samples (
            run_id TEXT NOT NULL,
            series_id BIGINT NOT NULL,
            "repeat" INTEGER NOT NULL,
            value DOUBLE PRECISION,
            client_bound BOOLEAN NOT NULL
        )""",
        # one point per run and series: the median of its repeats, its 95% order-statistic interval
        """CREATE TABLE points (
            run_id TEXT NOT NULL,
            series_id BIGINT NOT NULL,
            n INTEGER NOT NULL,
            value DOUBLE PRECISION,
            low DOUBLE PRECISION,
            high DOUBLE PRECISION,
            client_bound BOOLEAN NOT NULL,
            exact BOOLEAN NOT NULL
        )""",
        """CREATE TABLE verdicts (
            run_id TEXT NOT NULL,
            claim TEXT NOT NULL,
            suite TEXT,
            kind TEXT,
            verdict TEXT NOT NULL,
            measured DOUBLE PRECISION,
            ci_low DOUBLE PRECISION,
            ci_high DOUBLE PRECISION,
            n INTEGER,
            unit TEXT,
            reason TEXT
        )""",
        # how many points lie in series order (DuckDB: `DuckDBStore` rewrites `points` sorted now and then)
        "CREATE TABLE store_state (name TEXT PRIMARY KEY, value BIGINT NOT NULL)",
        # DuckDB scans a column faster than it keeps these up to date (it never used them for one series' points)
        POSTGRESQL_ONLY + "CREATE INDEX points_series ON points (series_id)",
        POSTGRESQL_ONLY + "CREATE INDEX samples_run ON samples (run_id)",
        POSTGRESQL_ONLY + "CREATE INDEX verdicts_run ON verdicts (run_id)",
    ),
}
SCHEMA_VERSION = max(MIGRATIONS)


def newer_text(where: str, version: int) -> str:
    return (
        f"{where}: this history store has schema {version}, made by a newer polyperf (this one reads up to "
        f"{SCHEMA_VERSION}); upgrade polyperf, the store is left unchanged"
    )
