"""The rows-vs-acknowledged check: pure rules (lost, phantom, altered, ambiguous), the outage timeline, the
database-bound flag, PostgreSQL's memory, and the check against a real app and a real throwaway PostgreSQL —
which must fail when a row is deleted behind the app's back."""

from __future__ import annotations

import contextlib
import json
import random
import re
import time

import pytest

from polyperf.build import build
from polyperf.load.locust_post import device_body
from polyperf.load.post_probe import PostProbe
from polyperf.measure.database import ConnectionProbe, is_db_bound, postmaster_pid, tree_pss, tree_rss
from polyperf.measure.device_table import DeviceTable, check_rows, parse_request_lines, table_name
from polyperf.serve.postgres import ThrowawayPostgres
from polyperf.serve.server import Server

ROWS = [(1, "AA-00-00-00-00-01", "1.0.0"), (2, "AA-00-00-00-00-02", "1.0.1"), (3, "AA-00-00-00-00-03", "1.0.2")]


def test_by_id_exact_and_each_kind_of_wrong():
    assert check_rows(ROWS, acked_count=3, acked=ROWS).ok
    lost = check_rows(ROWS[:2], acked_count=3, acked=ROWS)
    assert (lost.lost, lost.phantom, lost.ok) == (1, 0, False)
    extra = (4, "AA-00-00-00-00-04", "1.0.3")
    assert check_rows([*ROWS, extra], acked_count=3, acked=ROWS).phantom == 1
    assert check_rows([*ROWS, extra], acked_count=3, ambiguous=1, acked=ROWS).ok  # a 5xx whose INSERT committed
    altered = [ROWS[0], (2, "AA-00-00-00-00-02", "9.9.9"), ROWS[2]]
    assert check_rows(altered, acked_count=3, acked=ROWS).mismatched == 1


def test_by_count_with_one_body_and_mixed():
    body = {"mac": "3C-5A-B4-0E-71-9F", "firmware": "2.4.17"}
    same = [(i, body["mac"], body["firmware"]) for i in range(10, 15)]
    assert check_rows(same, acked_count=5, body=body).ok
    assert check_rows(same, acked_count=6, body=body).lost == 1
    assert check_rows(same, acked_count=4, body=body).phantom == 1
    assert check_rows([*same, (20, "00-00-00-00-00-00", "x")], acked_count=6, body=body).mismatched == 1
    mixed = check_rows([*same, ROWS[0]], acked_count=6, acked=[ROWS[0]], body=body)
    assert mixed.ok and not mixed.by_id
    assert check_rows(same, acked_count=6, acked=[ROWS[0]], body=body).lost == 1


def test_request_lines_and_outage():
    lines = [
        json.dumps([10.00, 0.001, 201, 1, "m", "f"]),
        json.dumps([10.30, 0.050, 503, None, "m", "f"]),
        json.dumps([10.50, 0.200, 0, None, "m", "f"]),
        json.dumps([10.60, 0.001, 400, None, "m", "f"]),  # rejected: no row, not ambiguous
        json.dumps([10.90, 0.002, 201, 2, "m", "f"]),
        "[10.95, 0.0",  # cut off by a hard stop
    ]
    seen = parse_request_lines(lines)
    assert seen.acked == [(1, "m", "f"), (2, "m", "f")]
    assert seen.ambiguous == 3
    outage = seen.outage(down_at=10.2, up_at=10.8)
    assert outage.errors == 3 and outage.error_latency_max_s == pytest.approx(0.2)
    assert outage.recovery_s == pytest.approx(0.1)
    assert outage.error_window_s == pytest.approx(10.6 - 10.25)
    assert seen.history(10.0)[0][:2] == (0, 5)


def test_db_bound_rule():
    assert is_db_bound(0.95, 0.0, 1.0, cores=1, shared=False)
    assert not is_db_bound(0.5, 0.45, 1.0, cores=1, shared=False)
    assert is_db_bound(0.5, 0.45, 1.0, cores=1, shared=True)  # a saturated shared core, mostly PostgreSQL
    assert not is_db_bound(0.3, 0.65, 1.0, cores=1, shared=True)  # saturated, but by the app


def test_random_devices_fit_the_table():
    rng = random.Random(7)
    for _ in range(1000):
        device = device_body(rng)
        assert re.fullmatch(r"([0-9A-F]{2}-){5}[0-9A-F]{2}", device["mac"])
        assert 0 < len(device["firmware"]) <= 10
    assert table_name("20261122-060336-fa74", "nethttp_devices", 500) == "pp_20261122_060336_fa74_nethttp_devices_p500"


@pytest.fixture(scope="module")
def postgres(tmp_path_factory):
    with ThrowawayPostgres(tmp_path_factory.mktemp("pg"), max_connections=20) as pg:
        yield pg


def test_check_fails_when_a_row_is_deleted_behind_the_apps_back(postgres, tmp_path):
    build("nethttp_devices")
    table = DeviceTable(postgres.dsn, "pp_test_rows_check")
    with Server(
        "nethttp_devices", log_dir=tmp_path, database_url=postgres.dsn, args=("--table", table.table)
    ) as server:
        mark = table.high_water()
        with (
            ConnectionProbe(postgres.dsn, interval=0.01) as connections,
            PostProbe(server.url + "/api/devices", interval=0.005, max_requests=30, max_seconds=20) as probe,
        ):
            while len(probe.lines) < 30:
                time.sleep(0.01)
    seen = parse_request_lines(probe.lines)
    assert len(seen.acked) == 30 and seen.ambiguous == 0
    assert connections.samples and postmaster_pid(postgres.dsn) == postgres.proc.pid
    before = check_rows(table.rows_after(mark), acked_count=30, acked=seen.acked)
    assert before.ok and before.found == 30, before.describe()
    table.delete(seen.acked[7][0])
    after = check_rows(table.rows_after(mark), acked_count=30, acked=seen.acked)
    assert not after.ok and after.lost == 1 and after.found == 29, after.describe()
    count_only = check_rows(table.rows_after(mark), acked_count=30)
    assert not count_only.ok and count_only.lost == 1


def test_postgres_memory_is_measured_and_shared_buffers_count_once(postgres):
    """Ten backends that each read the same table: their RSS each include the shared buffers they touched, so
    the sum of RSS exceeds the sum of PSS (which splits every shared page among its sharers)."""
    import psycopg

    postgres.query(
        "CREATE TABLE IF NOT EXISTS pp_memory AS SELECT g AS id, md5(g::text) AS t FROM generate_series(1, 20000) g"
    )
    with contextlib.ExitStack() as stack:
        conns = [stack.enter_context(psycopg.connect(postgres.dsn, autocommit=True)) for _ in range(10)]
        with ConnectionProbe(postgres.dsn, interval=0.01, pid=postgres.proc.pid, memory_every=1, pss=True) as probe:
            for conn in conns:
                conn.execute("SELECT count(*), max(t) FROM pp_memory").fetchone()
            time.sleep(0.1)
        rss, seen = tree_rss(postgres.proc.pid)
        pss, seen_pss = tree_pss(postgres.proc.pid)
    assert seen >= 11 and seen_pss >= 11  # the postmaster, its ten backends (and its helpers)
    assert probe.rss and probe.rss_peak > 0 and probe.pss is not None and probe.pss > 0
    assert 0 < pss < rss
    assert probe.pss < probe.rss_peak
