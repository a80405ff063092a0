"""The history store, on DuckDB and on a real PostgreSQL the tests start: a run is stored whole and once, two
writers at the same moment both land, and bad input (an interrupted or half-written run, a store made by a newer
polyperf, an unreachable server) gets one line and leaves the store as it was."""

from __future__ import annotations

import json
import multiprocessing
import threading
from pathlib import Path

import pytest

from polyperf.cli import main
from polyperf.record import Row
from polyperf.record.env_record import is_commit
from polyperf.record.run_dir import RowWriter, finalize_run, new_run_dir
from polyperf.report.answers import judge_run
from polyperf.store import StoreError, add_runs, open_store, read_run
from polyperf.store.schema import SCHEMA_VERSION

ENV = {"cpu_model": "Synthetic CPU", "cpu_count": 2, "kernel": "6.1.0", "profile": "smoke", "schema_version": 2}


def commit_id(name: str) -> str:
    """A commit id (40 hex characters) named after `name` (a commit id stays itself): env.json holds nothing else."""
    return name if is_commit(name) else name.encode().hex().ljust(40, "0")


def make_run(
    out: Path, run_id: str, commit: str, seconds: float = 1.0, syscalls: int = 100, verdicts: bool = True, **env: object
) -> Path:
    """A finished run folder: a timed series (7 repeats) and an exact count, at `commit`, with the verdicts.json
    `polyperf run` writes (none with `verdicts=False`: a run from before runs kept their verdicts)."""
    run_dir = new_run_dir(out, run_id=run_id)
    rows = [
        Row("io_buffering", "parse", "serde_json", "buffered", "seconds", seconds * (1 + r / 1000), "s", repeat=r)
        for r in range(7)
    ]
    rows += [
        Row("io_buffering", "parse", "serde_json", "buffered", "read_syscalls", syscalls, "count", repeat=r)
        for r in range(7)
    ]
    RowWriter(run_dir).write(rows)
    (run_dir / "env.json").write_text(json.dumps({**ENV, "git_commit": commit_id(commit), **env}))
    table = finalize_run(run_dir)
    if verdicts:
        judge_run(run_dir, table)
    return run_dir


def _counts(store) -> tuple[int, int, int]:
    points = store.points()
    return len(store.runs()), len(points), int(points["n"].sum()) if len(points) else 0


def test_a_run_is_stored_with_its_key_points_and_interval(tmp_path: Path) -> None:
    run = make_run(tmp_path, "20260101-000000-aaaa", "c1")
    store = open_store(tmp_path / "history.duckdb")
    assert store.add_run(read_run(run)) is True
    runs = store.runs()
    assert (
        runs.loc[0, "git_commit"] == commit_id("c1") and runs.loc[0, "profile"] == "smoke" and runs.loc[0, "cores"] == 2
    )
    assert len(runs.loc[0, "machine"]) == 12
    points = store.points().set_index("metric")
    assert points.loc["seconds", "n"] == 7 and points.loc["seconds", "value"] == pytest.approx(1.003)
    # n = 7: the order-statistic 95% interval of a median is [x(1), x(7)]
    assert points.loc["seconds", "low"] == pytest.approx(1.0) and points.loc["seconds", "high"] == pytest.approx(1.006)
    assert bool(points.loc["read_syscalls", "exact"]) and not bool(points.loc["seconds", "exact"])
    samples = store.samples(series_id=int(points.loc["seconds", "series_id"]))
    assert sorted(samples["repeat"]) == list(range(7))


def test_the_same_run_twice_is_stored_once(tmp_path: Path) -> None:
    run = make_run(tmp_path, "20260101-000000-aaaa", "c1")
    store = open_store(tmp_path / "history.duckdb")
    assert [o for _, o in add_runs(store, [run, run])] == ["added", "already stored"]
    assert _counts(store) == (1, 2, 14)


def _add_in_process(store_path: str, run: str, start: multiprocessing.Event) -> None:  # type: ignore[valid-type]
    start.wait(10)
    open_store(store_path).add_run(read_run(run))


def test_two_processes_adding_at_once_both_land(tmp_path: Path) -> None:
    runs = [make_run(tmp_path, f"2026010{i}-000000-aaaa", f"c{i}") for i in (1, 2)]
    store_path = str(tmp_path / "history.duckdb")
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_add_in_process, args=(store_path, str(run), start)) for run in runs]
    for proc in procs:
        proc.start()
    start.set()
    for proc in procs:
        proc.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    assert _counts(open_store(store_path)) == (2, 4, 28)


def test_an_interrupted_or_half_written_run_is_refused_in_one_line(tmp_path: Path, capsys) -> None:
    store_path = tmp_path / "history.duckdb"
    good = make_run(tmp_path, "20260101-000000-aaaa", "c1")
    assert main(["store", "add", "--store", str(store_path), str(good)]) == 0
    cut = make_run(tmp_path, "20260102-000000-aaaa", "c2", interrupted="SIGTERM")
    half = make_run(tmp_path, "20260103-000000-aaaa", "c3")
    (half / "results.parquet").unlink()  # still running, or killed before the end
    capsys.readouterr()
    assert main(["store", "add", "--store", str(store_path), str(cut), str(half)]) == 2
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2
    assert "interrupted (SIGTERM); not stored" in lines[0] and "half-written" in lines[1]
    assert _counts(open_store(store_path)) == (1, 2, 14)


def _mark_newer(store_path: Path) -> None:
    import duckdb

    con = duckdb.connect(str(store_path))
    con.execute("INSERT INTO schema_version VALUES (?)", [SCHEMA_VERSION + 1])
    con.close()


def test_a_store_from_a_newer_polyperf_is_refused_and_left_alone(tmp_path: Path, capsys) -> None:
    store_path = tmp_path / "history.duckdb"
    open_store(store_path).add_run(read_run(make_run(tmp_path, "20260101-000000-aaaa", "c1")))
    _mark_newer(store_path)
    before = store_path.read_bytes()
    run = make_run(tmp_path, "20260102-000000-aaaa", "c2")
    assert main(["store", "add", "--store", str(store_path), str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"schema {SCHEMA_VERSION + 1}, made by a newer polyperf" in err[0]
    assert main(["history", "--store", str(store_path)]) == 2
    assert store_path.read_bytes() == before


def test_no_store_yet_and_an_unreachable_postgresql_say_so_in_one_line(tmp_path: Path, capsys) -> None:
    assert main(["history", "--store", str(tmp_path / "none.duckdb")]) == 2
    assert "no history store here yet" in capsys.readouterr().err
    from polyperf.common.net import free_port

    url = f"postgresql://me:secret@127.0.0.1:{free_port()}/postgres?connect_timeout=2"
    run = make_run(tmp_path, "20260101-000000-aaaa", "c1")
    assert main(["store", "add", "--store", url, str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot reach the PostgreSQL history store" in err[0]
    assert "secret" not in err[0]


# --- PostgreSQL: the same store on a real server ---------------------------------------------------------------


@pytest.fixture(scope="module")
def pg_url(tmp_path_factory: pytest.TempPathFactory):
    from polyperf.errors import PostgresFailed
    from polyperf.serve.postgres import ThrowawayPostgres

    try:
        with ThrowawayPostgres(tmp_path_factory.mktemp("pg")) as pg:
            yield pg.dsn
    except PostgresFailed as exc:
        pytest.skip(f"no PostgreSQL cluster could be started here: {exc}")


def _fresh_pg(pg_url: str) -> str:
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as con:
        for table in ("schema_version", "runs", "series", "samples", "points", "verdicts", "store_state"):
            con.execute(f"DROP TABLE IF EXISTS {table}")
    return pg_url


@pytest.mark.slow
def test_postgresql_stores_once_and_concurrent_writers_both_land(pg_url: str, tmp_path: Path) -> None:
    url = _fresh_pg(pg_url)
    runs = [make_run(tmp_path, f"2026010{i}-000000-aaaa", f"c{i}") for i in range(1, 5)]
    store = open_store(url)
    assert store.add_run(read_run(runs[0])) and not store.add_run(read_run(runs[0]))
    records = [read_run(r) for r in [runs[1], runs[2], runs[3], runs[3]]]  # run 4 twice, at the same moment
    results: list[bool] = []
    barrier = threading.Barrier(len(records))

    def add(record) -> None:
        barrier.wait(10)
        results.append(open_store(url).add_run(record))

    threads = [threading.Thread(target=add, args=(r,)) for r in records]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(results) == [False, True, True, True]
    assert _counts(store) == (4, 8, 56)
    assert store.stored_commits() == {commit_id(f"c{i}") for i in range(1, 5)}
    assert store.series()["series_id"].nunique() == 2  # the series' keys are shared, never duplicated
    from polyperf.report.history import build_history

    history = build_history(store, since="2020-01-01")  # the same reads as on DuckDB
    assert history.commits == [commit_id(f"c{i}") for i in range(1, 5)] and history.points["run_id"].nunique() == 4
    assert store.machines()["runs"].tolist() == [4]


@pytest.mark.slow
def test_postgresql_refuses_a_newer_schema_and_keeps_its_runs(pg_url: str, tmp_path: Path) -> None:
    import psycopg

    url = _fresh_pg(pg_url)
    open_store(url).add_run(read_run(make_run(tmp_path, "20260101-000000-aaaa", "c1")))
    with psycopg.connect(url, autocommit=True) as con:
        con.execute("INSERT INTO schema_version VALUES (%s)", [SCHEMA_VERSION + 1])
    with pytest.raises(StoreError, match="made by a newer polyperf"):
        open_store(url).add_run(read_run(make_run(tmp_path, "20260102-000000-aaaa", "c2")))
    with psycopg.connect(url, autocommit=True) as con:
        assert con.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1


def test_duckdb_rewrites_points_in_series_order_and_keeps_every_point(tmp_path: Path, monkeypatch) -> None:
    import duckdb

    from polyperf.store import duck

    monkeypatch.setattr(duck, "COMPACT_AFTER", 3)
    store_path = tmp_path / "history.duckdb"
    runs = [make_run(tmp_path, f"2026010{i}-000000-aaaa", f"c{i}", seconds=i) for i in range(1, 4)]
    add_runs(open_store(store_path), runs)
    con = duckdb.connect(str(store_path), read_only=True)
    try:
        order = [r[0] for r in con.execute("SELECT series_id FROM points").fetchall()]
        assert con.execute("SELECT value FROM store_state WHERE name = 'sorted_points'").fetchone()[0] == 4
        nullable = con.execute(
            "SELECT is_nullable FROM information_schema.columns WHERE table_name = 'points' AND column_name = 'n'"
        ).fetchone()[0]
    finally:
        con.close()
    assert nullable == "NO"  # the rewritten table keeps the schema's constraints
    assert len(order) == 6 and order[:4] == sorted(order[:4])  # sorted after the second run; the third appended
    assert sorted(open_store(store_path).points()["value"].round(3)) == [1.003, 2.006, 3.009, 100, 100, 100]


def test_a_finished_run_joins_the_history_and_a_failing_store_costs_it_nothing(tmp_path, monkeypatch, capsys) -> None:
    from polyperf.runner import _add_to_history

    run = make_run(tmp_path, "20260101-000000-aaaa", "c1")
    monkeypatch.delenv("POLYPERF_STORE", raising=False)
    _add_to_history(run, quiet=False)
    assert open_store(tmp_path / "history.duckdb").has_run(run.name)  # beside the runs
    other = make_run(tmp_path, "20260102-000000-aaaa", "c2")
    monkeypatch.setenv("POLYPERF_STORE", "mysql://nowhere/db")
    _add_to_history(other, quiet=False)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("polyperf: history: not stored: mysql://")
    assert "history: not stored" in (other / "logs" / "polyperf.log").read_text()
    assert (other / "results.parquet").exists() and read_run(other).run_id == other.name


def test_each_point_is_the_median_and_interval_that_summarize_gives() -> None:
    import numpy as np
    import pandas as pd

    from polyperf.analyse.stats import summarize
    from polyperf.store.records import points_of

    rng = np.random.default_rng(4)
    sizes = [1, 2, 5, 6, 7, 10, 23]
    samples = pd.DataFrame(
        [
            {"series_id": i, "repeat": r, "value": float(v), "client_bound": False}
            for i, n in enumerate(sizes)
            for r, v in enumerate(rng.lognormal(0, 0.2, n))
        ]
    )
    points = points_of(samples).set_index("series_id")
    for i in range(len(sizes)):
        expected = summarize(samples.loc[samples["series_id"] == i, "value"])
        got = points.loc[i]
        assert got["n"] == expected.n and got["value"] == pytest.approx(expected.median)
        if expected.has_interval:
            assert (got["low"], got["high"]) == pytest.approx((expected.low, expected.high))
        else:
            assert np.isnan(got["low"]) and np.isnan(got["high"])


def test_a_file_that_is_no_store_is_refused_in_one_line(tmp_path: Path, capsys) -> None:
    bogus = tmp_path / "history.duckdb"
    bogus.write_text("not a database\n")
    run = make_run(tmp_path, "20260101-000000-aaaa", "c1")
    assert main(["store", "add", "--store", str(bogus), str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot open the history store" in err[0]
    assert bogus.read_text() == "not a database\n"


def test_a_writer_waits_a_bounded_time_for_the_store(tmp_path: Path, monkeypatch, capsys) -> None:
    import fcntl

    store_path = tmp_path / "history.duckdb"
    open_store(store_path).add_run(read_run(make_run(tmp_path, "20260101-000000-aaaa", "c1")))
    run = make_run(tmp_path, "20260102-000000-aaaa", "c2")
    monkeypatch.setenv("POLYPERF_STORE_WAIT", "0.3")
    with (tmp_path / "history.duckdb.lock").open("a") as held:
        fcntl.flock(held, fcntl.LOCK_SH)  # a reader of the store, in another process as far as flock is concerned
        assert main(["store", "add", "--store", str(store_path), str(run)]) == 2
        fcntl.flock(held, fcntl.LOCK_UN)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "another polyperf held the history store for 0.3 s" in err[0]
    assert _counts(open_store(store_path))[0] == 1
    assert main(["store", "add", "--store", str(store_path), str(run)]) == 0  # its turn comes once the lock is free
