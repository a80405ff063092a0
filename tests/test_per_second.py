"""per_second: whole seconds binned by when requests were due, nearest-rank percentiles, the last short second
left out, the spike ratio; and oha's own per-request sqlite read back (the schema of its `--db-url`)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from polyperf.measure.per_second import MIN_SECONDS, Request, Second, per_second, read_oha_requests, spike_ratio


def _steady(seconds: int, per_second_: int, latency: float) -> list[Request]:
    return [Request(s + i / per_second_, latency, 200) for s in range(seconds) for i in range(per_second_)]


def test_bins_by_due_time_and_keeps_sub_millisecond_latencies() -> None:
    requests = _steady(4, 100, 0.000_37)
    requests[150] = Request(requests[150].start, 0.25, 200)  # one slow request in second 1
    seconds = per_second(requests)
    assert [s.second for s in seconds] == [0, 1, 2, 3]
    assert all(s.requests == 100 for s in seconds)
    assert seconds[0].p50 == seconds[0].p99 == 0.000_37  # not rounded to 0 or 1 ms
    assert seconds[1].p99 == 0.000_37  # 1 of 100 is above the 99th percentile by nearest rank...
    requests[151] = Request(requests[151].start, 0.30, 200)
    assert per_second(requests)[1].p99 == 0.25  # ...2 of 100 are not


def test_a_short_last_second_is_left_out() -> None:
    requests = [*_steady(3, 100, 0.001), *(Request(3.0 + i / 100, 0.5, 200) for i in range(30))]
    assert [s.second for s in per_second(requests)] == [0, 1, 2]
    assert per_second([]) == []


def test_spike_ratio_is_the_worst_second_over_the_median_second() -> None:
    flat = [Second(i, 100, 0.001, 0.002) for i in range(5)]
    assert spike_ratio(flat) == 1.0
    spiky = [*flat[:4], Second(4, 100, 0.001, 0.020)]
    assert spike_ratio(spiky) == pytest.approx(10.0)
    assert spike_ratio(spiky[: MIN_SECONDS - 1]) is None
    assert spike_ratio([Second(i, 100, 0.0, 0.0) for i in range(4)]) is None


def _oha_db(path: Path, rows: list[tuple]) -> Path:
    # the table oha 1.x writes with --db-url (src/db.rs)
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE oha (url TEXT NOT NULL, start REAL NOT NULL, start_latency_correction REAL, "
            "end REAL NOT NULL, duration REAL NOT NULL, status INTEGER NOT NULL, len_bytes INTEGER NOT NULL, "
            "run INTEGER NOT NULL)"
        )
        conn.executemany("INSERT INTO oha VALUES ('http://x/', ?, ?, ?, ?, ?, 10, 1)", rows)
    return path


def test_reads_oha_rows_from_the_due_time_when_corrected(tmp_path: Path) -> None:
    path = _oha_db(tmp_path / "r.sqlite", [(0.5, 0.4, 0.6, 0.2, 200), (0.1, None, 0.15, 0.05, 503)])
    got = read_oha_requests(path)
    assert [(r.start, r.status) for r in got] == [(0.1, 503), (0.4, 200)]
    assert got[0].latency == pytest.approx(0.05) and got[1].latency == pytest.approx(0.2)


def test_another_file_is_refused_with_its_name(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    sqlite3.connect(path).close()
    with pytest.raises(ValueError, match=r"other\.sqlite: not oha's per-request output"):
        read_oha_requests(path)
