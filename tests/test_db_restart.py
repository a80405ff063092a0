"""PostgreSQL restarted under load never races the rows check: with a restart slower than the load (PostgreSQL kept
down for seconds after the load has ended), the run's rows are read once the database is back, its acknowledged
POSTs are all found, the whole run's check finds no phantom, and the app's recovery is seen. A database that does not
come back is a one-line problem whose requests still count in the whole run's check."""

from __future__ import annotations

import time

import pytest

from polyperf.build import build
from polyperf.common.cpus import split_cpus
from polyperf.measure.device_table import DatabaseUnavailable, DeviceTable
from polyperf.orchestrate.db_restart import RestartPlan, restart_under_load
from polyperf.orchestrate.db_runs import Database, PostRuns
from polyperf.orchestrate.load_suite import LoadEnv
from polyperf.record import Recorder
from polyperf.record.run_dir import RowWriter, load_run
from polyperf.serve.fleet import Fleet, Target
from polyperf.serve.postgres import ThrowawayPostgres

SERVER_CPUS, CLIENT_CPUS = split_cpus()
BODY = {"mac": "3C-5A-B4-0E-71-9F", "firmware": "2.4.17"}


def test_rows_are_read_only_when_the_database_is_back(tmp_path):
    """The load (0.6 s) ends while PostgreSQL is still down (restart at 0.3 s, kept down 3 s more)."""
    build("nethttp_devices", log_dir=tmp_path)
    run_dir = tmp_path / "run"
    (run_dir / "logs").mkdir(parents=True)
    table = "pp_restart_race_nethttp"
    target = Target("nethttp_devices", "/api/devices", args=("--pool-size", "4", "--table", table, "--db-timeout", "2"))
    with (
        ThrowawayPostgres(run_dir / "logs", max_connections=30) as pg,
        Fleet([target], log_dir=run_dir / "logs", server_cpus=SERVER_CPUS, database_url=pg.dsn) as fleet,
    ):
        assert not fleet.failed, fleet.failed
        env = LoadEnv(
            fleet, Recorder(RowWriter(run_dir), "devices_postgres"), client_cpus=CLIENT_CPUS, log_dir=run_dir / "logs"
        )
        database = Database(pg.dsn, pg.proc.pid, list(SERVER_CPUS), True, pg)
        runs = PostRuns(env, database, {target.key: table}, body=BODY)
        plan = RestartPlan(rate=200, seconds=0.6, at=0.3, db_timeout_s=2.0, down_s=3.0)
        started = time.monotonic()
        restart_under_load(runs, database, target, "fast", plan, BODY)
        assert time.monotonic() - started > 3.0  # the restart really outlasted the load
        assert env.problems == [], env.problems
        (check, _before), *_ = runs.whole_run().values()
        assert check.ok and check.acked > 0, check.describe()
    rows = load_run(run_dir)
    recovery = rows.query("case == 'restart_fast' and metric == 'recovery_s'")
    assert len(recovery) == 1  # the app was seen answering again after PostgreSQL came back
    acked = rows.query("case == 'restart_fast' and metric == 'rows_acked'")["value"]
    assert len(acked) == 1 and acked.iloc[0] > 0  # the run's own rows check was recorded


def test_a_database_that_stays_away_is_one_line_without_secrets():
    table = DeviceTable("postgresql://pp:hunter2@127.0.0.1:1/x", "pp_nowhere", wait_s=0.3)
    started = time.monotonic()
    with pytest.raises(DatabaseUnavailable) as caught:
        table.rows_after(0)
    assert 0.3 <= time.monotonic() - started < 15
    message = str(caught.value)
    assert "\n" not in message and "hunter2" not in message and "0.3 s" in message and "pp_nowhere" in message
