"""Nothing lost, nothing phantom: the rows an app inserted during a run against the POSTs its client saw
acknowledged. `DeviceTable` (I/O, psycopg) takes a table's high-water mark before a run and reads the rows
above it after; `check_rows` (pure) compares them with what the client saw, by id when the client kept
the ids (locust's request logs, the harness's own probe), by count when it could not (oha).

A request without a clear answer (no response, a 5xx, cut off at the end of a run) may or may not have
inserted its row: such requests are counted as `ambiguous`, and only rows beyond them are phantoms.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from polyperf.load.result import LoadResult

__all__ = [
    "DatabaseUnavailable",
    "DeviceTable",
    "Outage",
    "RequestsSeen",
    "RowsCheck",
    "check_rows",
    "load_counts",
    "parse_request_lines",
    "read_request_logs",
    "table_name",
]

Device = tuple[int, str, str]  # (id, mac, firmware)
_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_OHA_ABORTED = "aborted due to deadline"  # in flight when oha was stopped: answered or not, nobody knows


def table_name(run_id: str, app: str, pool: int) -> str:
    """`pp_<run id>_<app>_p<pool>`: one table per run and server, so a user's database keeps every run apart."""
    name = re.sub(r"[^a-z0-9_]", "_", f"pp_{run_id}_{app}_p{pool}".lower())
    if not _IDENTIFIER.fullmatch(name):
        raise ValueError(f"table name {name!r} is not a plain PostgreSQL identifier of at most 63 characters")
    return name


@dataclass(frozen=True)
class RowsCheck:
    """One run's rows against its acknowledged POSTs."""

    acked: int  # 2xx answers the client counted
    found: int  # rows inserted during the run (id above the mark taken before it)
    ambiguous: int  # requests without a clear answer: their row may or may not exist
    lost: int  # acknowledged rows that are missing (by id when ids are known, else by count)
    phantom: int  # rows no acknowledgement or ambiguous request accounts for
    mismatched: int  # rows whose mac or firmware differ from what was sent
    by_id: bool  # every acknowledgement was checked by its id, not only counted

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.phantom == 0 and self.mismatched == 0

    @property
    def mismatch(self) -> int:
        """Every row that is wrong: lost + phantom + mismatched (0 when the check passes)."""
        return self.lost + self.phantom + self.mismatched

    def describe(self) -> str:
        how = "by id" if self.by_id else "by count"
        return (
            f"{self.found} rows found for {self.acked} acknowledged POSTs ({how}; {self.ambiguous} ambiguous): "
            f"{self.lost} lost, {self.phantom} phantom, {self.mismatched} with other contents"
        )


def check_rows(
    found: Sequence[Device],
    *,
    acked_count: int,
    ambiguous: int = 0,
    acked: Sequence[Device] | None = None,
    body: Mapping[str, str] | None = None,
) -> RowsCheck:
    """Compares the rows a run left (`found`) with what its clients saw (pure).

    `acked_count` acknowledged POSTs in all; `acked`: the (id, mac, firmware) of those whose ids a client
    kept (each must exist with what was sent), the rest are checked by count against the rows no id
    claims. `body`: the one body every request of a count-only client sent (oha), which those rows must
    carry. Rows beyond the acknowledged ones are phantoms only past the `ambiguous` requests that may have
    inserted them."""
    sent = {row_id: (mac, firmware) for row_id, mac, firmware in acked or ()}
    rows = {row_id: (mac, firmware) for row_id, mac, firmware in found}
    lost = sum(1 for row_id in sent if row_id not in rows)
    mismatched = sum(1 for row_id, contents in sent.items() if row_id in rows and rows[row_id] != contents)
    others = [contents for row_id, contents in rows.items() if row_id not in sent]
    counted = acked_count - len(sent)  # acknowledgements known by count only
    lost += max(0, counted - len(others))
    phantom = max(0, len(others) - counted - ambiguous)
    if body is not None:
        mismatched += sum(1 for contents in others if contents != (body["mac"], body["firmware"]))
    return RowsCheck(acked_count, len(rows), ambiguous, lost, phantom, mismatched, bool(sent) and counted == 0)


def load_counts(load: LoadResult) -> tuple[int, int]:
    """(acknowledged, ambiguous) from a native driver's counts (oha, wrk: `errors` are requests that got no
    response): 2xx are acknowledged; 5xx, no response and, for oha, requests cut off by the stop are
    ambiguous; a 4xx inserted nothing. (locust's `errors` repeat its 5xx: use its request logs.)"""
    if load.driver == "locust":
        raise ValueError("locust's counts repeat its 5xx among its errors: read its request logs instead")
    acked = sum(n for code, n in load.status_counts.items() if 200 <= code < 300)
    ambiguous = sum(n for code, n in load.status_counts.items() if code >= 500 or code == 0)
    ambiguous += sum(load.errors.values())
    raw = load.extra.get("raw")
    if load.driver == "oha" and raw and Path(raw).exists():
        ambiguous += int(json.loads(Path(raw).read_text()).get("errorDistribution", {}).get(_OHA_ABORTED, 0))
    return acked, ambiguous


@dataclass(frozen=True)
class RequestsSeen:
    """What a client that logs every request saw (locust's POST mode, the harness's probe)."""

    acked: list[Device] = field(default_factory=list)  # (returned id, mac sent, firmware sent) of each 2xx
    ambiguous: int = 0
    records: list[tuple[float, float, int]] = field(default_factory=list)  # (end time, latency s, status)

    def history(self, start: float) -> list[tuple[int, int, float, float]]:
        """Per whole second since `start`: (second, requests, p50 s, p99 s) of the requests that ended in it
        (nearest-rank percentiles; pure)."""
        by_second: dict[int, list[float]] = {}
        for ended, latency, _code in self.records:
            if ended >= start:
                by_second.setdefault(int(ended - start), []).append(latency)
        return [
            (second, len(values), _rank(sorted(values), 0.50), _rank(sorted(values), 0.99))
            for second, values in sorted(by_second.items())
        ]

    def outage(self, down_at: float, up_at: float) -> Outage:
        """What this client saw around a database outage [down_at, up_at] (epoch s; pure): its failed
        requests, the slowest failure (a bound on how long an app made a client wait), and the time from the
        database being back to the first success of a request sent after it."""
        failed = [(end - latency, end, latency) for end, latency, code in self.records if not 200 <= code < 300]
        recovered = [end for end, latency, code in self.records if 200 <= code < 300 and end - latency >= up_at]
        return Outage(
            down_s=up_at - down_at,
            errors=len(failed),
            error_window_s=max(e for _s, e, _l in failed) - min(s for s, _e, _l in failed) if failed else 0.0,
            error_latency_max_s=max((latency for _s, _e, latency in failed), default=0.0),
            recovery_s=min(recovered) - up_at if recovered else math.inf,
        )


@dataclass(frozen=True)
class Outage:
    down_s: float  # the database unreachable (stop + start)
    errors: int  # this client's failed requests over the whole run
    error_window_s: float  # from the first failed request's start to the last one's end
    error_latency_max_s: float  # the slowest failed answer: an app that hangs shows here
    recovery_s: float  # database back -> first success of a request sent after it (inf: none)


def _rank(ordered: Sequence[float], p: float) -> float:
    return ordered[max(0, math.ceil(p * len(ordered)) - 1)]


def parse_request_lines(lines: Iterable[str]) -> RequestsSeen:
    """Request-log lines ([end, latency, status, id, mac, firmware]) -> `RequestsSeen` (pure)."""
    acked: list[Device] = []
    records: list[tuple[float, float, int]] = []
    ambiguous = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            ended, latency, code, row_id, mac, firmware = json.loads(line)
        except ValueError:  # a line cut off by a hard stop: its request's fate is unknown
            ambiguous += 1
            continue
        records.append((float(ended), float(latency), int(code)))
        if 200 <= code < 300 and row_id is not None:
            acked.append((int(row_id), mac, firmware))
        elif not 400 <= code < 500:  # no answer, a 5xx, or a 2xx without an id; a 4xx inserted nothing
            ambiguous += 1
    return RequestsSeen(acked, ambiguous, records)


def read_request_logs(paths: Iterable[str | Path]) -> RequestsSeen:
    lines: list[str] = []
    for path in paths:
        lines += Path(path).read_text(encoding="utf-8").splitlines()
    return parse_request_lines(lines)


class DatabaseUnavailable(Exception):
    """The database did not accept a connection within the wait (a restart that did not come back)."""


class DeviceTable:
    """One app's devices table, read through its own short connections (never the app's pool).

    Every read waits up to `wait_s` for the database to accept connections: a run can end while PostgreSQL is
    still restarting (the restart cases), and its rows are read once it is back, never in the gap."""

    def __init__(self, dsn: str, table: str, *, wait_s: float = 60.0) -> None:
        if not _IDENTIFIER.fullmatch(table):
            raise ValueError(f"{table!r} is not a plain PostgreSQL identifier")
        self.dsn = dsn
        self.table = table
        self.wait_s = wait_s

    def _connect(self) -> Any:
        import psycopg

        deadline = time.monotonic() + self.wait_s
        while True:
            try:
                return psycopg.connect(self.dsn, autocommit=True, connect_timeout=10)
            except psycopg.OperationalError as exc:
                if time.monotonic() >= deadline:
                    first = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
                    raise DatabaseUnavailable(
                        f"table {self.table}: the database accepted no connection for {self.wait_s:g} s ({first})"
                    ) from None
                time.sleep(0.1)

    def _query(self, sql: str, *params: Any) -> list[tuple]:
        from psycopg import sql as pgsql

        statement = pgsql.SQL(sql).format(table=pgsql.Identifier(self.table))
        with self._connect() as conn:
            cur = conn.execute(statement, params or None)
            return cur.fetchall() if cur.description else []

    def high_water(self) -> int:
        """The largest id so far (0 for an empty or missing table): the rows of the next run lie above it."""
        import psycopg

        try:
            return int(self._query("SELECT coalesce(max(id), 0) FROM {table}")[0][0])
        except psycopg.errors.UndefinedTable:
            return 0

    def rows_after(self, mark: int) -> list[Device]:
        return [(int(i), m, f) for i, m, f in self._query("SELECT id, mac, firmware FROM {table} WHERE id > %s", mark)]

    def count(self) -> int:
        return int(self._query("SELECT count(*) FROM {table}")[0][0])

    def delete(self, row_id: int) -> None:
        """Removes one row behind the app's back (the test that proves the check notices)."""
        self._query("DELETE FROM {table} WHERE id = %s", row_id)
