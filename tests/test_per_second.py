"""per_second: whole seconds binned by when requests were due, nearest-rank percentiles, the last short second
left out, the spike ratio; and oha's own per-request sqlite read back (the schema of its `--db-url`)."""

from __future__ import annotations

import sqlite3
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from load_target_probe import OkHandler

from polyperf.errors import ToolchainMissing
from polyperf.load import Bounds, ensure_oha, run_oha
from polyperf.measure.per_second import (
    MIN_SECONDS,
    Request,
    Second,
    per_second,
    percentile,
    read_oha_requests,
    spike_ratio,
)


def _steady(seconds: int, per_second_: int, latency: float) -> list[Request]:
    return [Request(s + i / per_second_, latency, 200) for s in range(seconds) for i in range(per_second_)]


def test_bins_by_due_time_and_keeps_sub_millisecond_latencies() -> None:
    requests = _steady(4, 200, 0.000_37)
    requests[250] = Request(requests[250].start, 0.25, 200)  # one slow request in second 1
    seconds = per_second(requests)
    assert [s.second for s in seconds] == [0, 1, 2, 3]
    assert all(s.requests == 200 for s in seconds)
    assert seconds[0].p50 == seconds[0].p99 == 0.000_37  # not rounded to 0 or 1 ms
    assert seconds[1].p99 == 0.000_37  # 1 of 200 is above the 99th percentile (index 198 of 0..199)...
    requests[251] = Request(requests[251].start, 0.30, 200)
    requests[252] = Request(requests[252].start, 0.40, 200)
    assert per_second(requests)[1].p99 == 0.30  # ...3 of 200 are not


def test_percentile_follows_ohas_rule() -> None:
    ordered = [float(i) for i in range(2000)]
    assert [percentile(ordered, p) for p in (0.5, 0.9, 0.99)] == [1000.0, 1800.0, 1980.0]
    assert percentile([1.0], 0.99) == 1.0 and percentile([1.0, 2.0], 1.0) == 2.0


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
    path = _oha_db(tmp_path / "r.sqlite", [(0.5, 0.4, 0.6, 0.2, 200), (0.1, None, 0.15, 0.05, 503)])  # duration: oha's
    got = read_oha_requests(path)
    assert [(r.start, r.status) for r in got] == [(0.1, 503), (0.4, 200)]
    assert got[0].latency == pytest.approx(0.05) and got[1].latency == pytest.approx(0.2)


def test_another_file_is_refused_with_its_name(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    sqlite3.connect(path).close()
    with pytest.raises(ValueError, match=r"other\.sqlite: not oha's per-request output"):
        read_oha_requests(path)


@pytest.fixture
def local_http():
    """A loopback HTTP server answering 200 to every GET, in a thread."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), OkHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/"
    server.shutdown()
    server.server_close()


@pytest.mark.slow
def test_ohas_own_records_give_ohas_own_percentiles(local_http: str, tmp_path: Path) -> None:
    """oha at a fixed rate with every request kept: one record per answered request, and the whole run's
    percentiles by `percentile` are exactly those of oha's summary (the same latencies, the same rule)."""
    try:
        ensure_oha(install=False)
    except ToolchainMissing as exc:
        pytest.skip(str(exc))
    result = run_oha(
        local_http,
        bounds=Bounds(5.0, 600),
        client_cpus=[],
        log_dir=tmp_path,
        connections=4,
        rate=300,
        per_request=True,
    )
    requests = read_oha_requests(Path(result.extra["requests_db"]))
    assert len(requests) == result.successes == 600
    assert all(r.status == 200 and r.latency > 0 for r in requests)
    ordered = sorted(r.latency for r in requests)
    for p in (0.5, 0.9, 0.99):
        assert percentile(ordered, p) == pytest.approx(result.latency[p], abs=1e-9)
    assert [s.second for s in per_second(requests)] == [0, 1]  # 600 requests due over 2 s at 300/s
