"""What a POST run cost PostgreSQL, beside the app: exact counters replace sampled CPU at the driver's edges
(`measure(extra_cpu=...)`), and `PostRuns.db_metrics` puts the app's and PostgreSQL's CPU per acknowledged
insert side by side, with PostgreSQL's memory and where its CPU came from."""

from __future__ import annotations

import os
import time
from types import SimpleNamespace

import pytest

from polyperf.load.result import LoadResult
from polyperf.measure.database import ConnectionProbe
from polyperf.measure.sampler import Measurement, Usage, measure
from polyperf.orchestrate.db_runs import Database, PostRuns


def _result(start: float, seconds: float) -> LoadResult:
    return LoadResult.native(
        "oha",
        "http://127.0.0.1:1/",
        started_at=start,
        seconds=seconds,
        requests=100,
        successes=100,
        client_cpus=[],
        latency={0.5: 0.001},
    )


def _run(seconds: float = 0.2) -> LoadResult:
    start = time.time()
    time.sleep(seconds)
    return _result(start, seconds)


def test_an_exact_counter_replaces_the_sampled_cpu_of_its_tree() -> None:
    ticks = iter([10.0, 10.75])  # read once before the driver starts, once after it exits
    m = measure(
        os.getpid(),
        lambda _on_spawn: _run(),
        client_cpus=[],
        extra={"db": os.getpid(), "other": os.getpid()},
        extra_cpu={"db": lambda: next(ticks)},
    )
    assert m.extra["db"].cpu_seconds == pytest.approx(0.75)
    assert m.extra["other"].cpu_seconds < 0.75  # sampled from /proc: this process slept


def _usage(cpu: float) -> Usage:
    return Usage(cpu_seconds=cpu, wait_seconds=0.0, rss_mean=0.0, rss_peak=0, threads_max=1, samples=3)


def _runs(extra_cpu: dict) -> PostRuns:
    runs = PostRuns.__new__(PostRuns)  # no tables: db_metrics needs only the environment and the database
    runs.env = SimpleNamespace(extra_cpu=extra_cpu)
    runs.db = Database("postgresql://x@127.0.0.1:1/postgres", 4242, [0], True)
    return runs


def test_app_and_postgres_cpu_per_insert_side_by_side() -> None:
    m = Measurement(_result(0.0, 1.0), _usage(0.03), _usage(0.0), 1, {"db": _usage(0.01)})
    probe = ConnectionProbe("postgresql://x@127.0.0.1:1/postgres")
    probe.samples = [(0.0, 10, 4)]
    probe.rss = [(0.0, 5_000_000), (0.5, 7_000_000)]
    probe.pss = 3_000_000
    rows = {
        name: (value, unit, extra) for name, value, unit, extra in _runs({"db": float}).db_metrics(m, probe, inserts=80)
    }
    assert rows["app_cpu_s_per_insert"][0] == pytest.approx(0.03 / 80)
    assert rows["db_cpu_s_per_insert"][0] == pytest.approx(0.01 / 80)
    assert rows["db_cpu_fraction_of_total"][0] == pytest.approx(0.25)
    assert rows["db_cpu_s_per_request"][0] == pytest.approx(0.01 / 100)
    assert rows["db_rss_peak_bytes"][:2] == (7_000_000.0, "bytes")
    assert rows["db_pss_bytes"][:2] == (3_000_000.0, "bytes")
    assert rows["db_cpu_s_per_insert"][2] == {"db_cpu_source": "cgroup"}
    sampled = {name: extra for name, _v, _u, extra in _runs({}).db_metrics(m, probe, inserts=80)}
    assert sampled["db_cpu_s_per_insert"] == {"db_cpu_source": "proc"}


def test_no_memory_rows_when_nothing_could_be_read() -> None:
    m = Measurement(_result(0.0, 1.0), _usage(0.03), _usage(0.0), 1, {})
    probe = ConnectionProbe("postgresql://x@127.0.0.1:1/postgres")
    names = [name for name, *_ in _runs({}).db_metrics(m, probe)]
    assert names == []  # never a 0 that looks like a measurement
