"""Load drivers and measurement against a real app (hyper_hello, the quickest to build and start), for a
second or two each: the numbers are present and consistent, the bounds hold, every process a driver
starts is gone afterwards, the client-bound flag trips when the client is starved, a server killed
mid-run is reported with its log tail while the rows already recorded stay, and only loopback is loaded.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest
from process_checks import gone

from polyperf.build import build
from polyperf.common.cpus import cpu_label, split_cpus
from polyperf.errors import ServerFailed, ToolchainMissing
from polyperf.load import (
    Bounds,
    LoadFailed,
    TargetNotLoopback,
    ensure_oha,
    ensure_wrk,
    require_loopback,
    run_locust,
    run_oha,
    run_wrk,
)
from polyperf.load.native_driver import oha_counts, wrk_counts
from polyperf.load.result import LoadResult
from polyperf.measure.sampler import Sample, is_client_bound, measure, window_usage
from polyperf.orchestrate.load_suite import LoadEnv
from polyperf.record import Recorder
from polyperf.record.rows import measurement_rows
from polyperf.record.run_dir import RowWriter, load_run
from polyperf.serve.cpu_account import account_support
from polyperf.serve.fleet import Fleet, Target
from polyperf.serve.server import Server

SERVER_CPUS, CLIENT_CPUS = split_cpus()
NO_LIMIT = 10**9

pytestmark = pytest.mark.slow  # builds and starts real servers


@pytest.fixture(scope="session")
def tools():
    return ensure_oha()


def _driver(name):
    """The driver function; wrk comes from Debian, so without it its cases skip with the install line."""
    if name == "wrk":
        try:
            ensure_wrk()
        except ToolchainMissing as exc:
            pytest.skip(str(exc))
    return {"oha": run_oha, "wrk": run_wrk}[name]


@pytest.fixture(scope="module")
def hello(tmp_path_factory, tools):
    build("hyper_hello")
    with Server(
        "hyper_hello", log_dir=tmp_path_factory.mktemp("hello"), cpus=SERVER_CPUS, workers=len(SERVER_CPUS)
    ) as server:
        yield server


def _load(run, server: Server, log_dir, bounds: Bounds, *, client_cpus=CLIENT_CPUS, **options) -> LoadResult:
    """One bounded load by the driver function `run` on `server`'s root, from the client CPUs."""
    return run(server.url + "/", bounds=bounds, client_cpus=client_cpus, log_dir=log_dir, **options)


def _assert_sane(result: LoadResult, bound: float):
    assert result.requests > 0 and result.rps > 0, result
    assert result.requests == result.successes + result.failures
    assert result.failures == 0, result.errors
    assert result.latency[0.5] <= result.latency[0.9] <= result.latency[0.99] <= result.latency[0.999]
    # locust rounds to whole milliseconds, so a sub-millisecond median is 0 there
    assert (0 if result.driver == "locust" else 1e-7) <= result.latency[0.5] < 1.0
    assert 0 < result.duration <= bound + 0.5, result.duration


@pytest.mark.parametrize("driver", ["oha", "wrk"])
def test_native_driver_closed_model(hello, tmp_path, driver):
    run = _driver(driver)
    pids = []
    started = time.monotonic()
    result = _load(run, hello, tmp_path, Bounds(1.5, NO_LIMIT), connections=16, on_spawn=pids.append)
    assert time.monotonic() - started < 1.5 + 5
    _assert_sane(result, 1.5)
    assert result.driver == driver and result.mode == "closed" and result.connections == 16
    assert result.duration > 1.0
    assert len(pids) == 1 and gone(pids)


def test_oha_stops_at_request_bound(hello, tmp_path):
    result = _load(run_oha, hello, tmp_path, Bounds(2.0, 3000), connections=8)
    assert result.requests == 3000 and result.duration < 2.0
    assert result.rps == pytest.approx(3000 / result.duration)


def test_wrk_refuses_a_request_bound_it_cannot_keep(hello, tmp_path):
    """wrk in fixed-request mode stops on time only: with a request bound it would sleep out -d and report a
    rate over the wrong duration, so it refuses before starting (oha and bombardier keep such bounds)."""
    _driver("wrk")
    with pytest.raises(LoadFailed, match="cannot stop at 3000 requests"):
        _load(run_wrk, hello, tmp_path, Bounds(2.0, 3000), connections=8)
    assert not list(tmp_path.iterdir()), "nothing was started"


def test_oha_fixed_rate_reports_offered_and_achieved(hello, tmp_path):
    result = _load(run_oha, hello, tmp_path, Bounds(1.5, NO_LIMIT), connections=8, rate=500)
    _assert_sane(result, 1.5)
    assert result.mode == "fixed-rate" and result.offered_rate == 500
    assert 0.8 < result.achieved_rate_ratio <= 1.05


@pytest.mark.parametrize("processes", [1, 2])
def test_locust_closed_model(hello, tmp_path, processes):
    pids = []
    started = time.monotonic()
    locust = {"users": 8, "spawn_rate": 100, "processes": processes}
    result = _load(run_locust, hello, tmp_path, Bounds(1.5, NO_LIMIT), **locust, on_spawn=pids.append)
    assert time.monotonic() - started < 1.5 + 30  # locust's own start-up (gevent, workers) is bounded too
    _assert_sane(result, 1.5)
    assert result.latency_resolution == 0.001 and result.status_counts == {200: result.requests}
    assert len(pids) == (1 if processes == 1 else processes + 1)  # local, or master + workers
    assert result.extra["workers"] == (0 if processes == 1 else processes)
    assert gone(pids), "a locust process outlived its run"


def test_locust_request_bound_and_step_ramp(hello, tmp_path):
    capped = _load(run_locust, hello, tmp_path, Bounds(10.0, 400), users=4, processes=2)
    assert 0 < capped.requests <= 400 and capped.duration < 10.0
    ramp = _load(run_locust, hello, tmp_path, Bounds(10.0, NO_LIMIT), steps=[(2, 1.0), (6, 1.0)], processes=1)
    assert ramp.mode == "ramp" and ramp.connections == 6
    assert 1.5 < ramp.duration < 4.0, "the ramp stops after its last stage, long before the 10 s bound"
    assert ramp.extra["peak_users"] == 6


def test_measure_gives_server_and_client_cost(hello, tmp_path):
    m = measure(
        hello.pid,
        lambda on_spawn: _load(run_oha, hello, tmp_path, Bounds(1.5, NO_LIMIT), on_spawn=on_spawn),
        client_cpus=CLIENT_CPUS,
        alive=hello.check_alive,
    )
    assert 0.5e-6 < m.cpu_s_per_request < 0.01
    assert m.requests_per_cpu_second == pytest.approx(1 / m.cpu_s_per_request)
    assert m.server.rss_peak >= m.server.rss_mean > 1_000_000 and m.server.threads_max >= 1
    assert m.client.cpu_seconds > 0 and 0 < m.client_cpu_fraction <= 1.2
    names = {metric for metric, *_ in measurement_rows(m)}
    assert {
        "rps",
        "latency_p50_s",
        "latency_p90_s",
        "latency_p99_s",
        "latency_p999_s",
        "cpu_s_per_request",
        "requests_per_cpu_second",
        "rss_peak_bytes",
        "rss_mean_bytes",
        "client_cpu_share",
        "errors",
    } <= names


def test_client_bound_when_the_client_is_starved(hello, tmp_path):
    """One locust process with many users against a fast server: locust, not the server, is the limit."""
    m = measure(
        hello.pid,
        lambda on_spawn: _load(
            run_locust,
            hello,
            tmp_path,
            Bounds(2.0, NO_LIMIT),
            client_cpus=CLIENT_CPUS[:1],
            users=200,
            spawn_rate=1000,
            processes=1,
            on_spawn=on_spawn,
        ),
        client_cpus=CLIENT_CPUS[:1],
    )
    assert m.client_bound, f"client used {m.client_cpu_fraction:.0%} of its core, server {m.server_cpu_fraction:.0%}"
    impossible = measure(
        hello.pid,
        lambda on_spawn: _load(
            run_oha, hello, tmp_path, Bounds(1.0, NO_LIMIT), connections=4, rate=2_000_000, on_spawn=on_spawn
        ),
        client_cpus=CLIENT_CPUS,
    )
    assert impossible.load.achieved_rate_ratio < 0.95 and impossible.client_bound


def test_load_env_counts_server_cpu_in_its_cgroup_and_records_the_split(tools, tmp_path):
    run_dir = tmp_path / "run"
    (run_dir / "logs").mkdir(parents=True)
    targets = [Target("hyper_hello", "/", "multi", ("--runtime", "multi")), Target("hyper_hello", "/", "current")]
    with Fleet(targets, log_dir=run_dir / "logs", server_cpus=SERVER_CPUS) as fleet:
        env = LoadEnv(fleet, Recorder(RowWriter(run_dir), "load_test"), client_cpus=CLIENT_CPUS, log_dir=tmp_path)
        for repeat, target in env.interleave(2):
            assert env.oha(target, case="ceiling", repeat=repeat, duration=0.5) is not None
        assert env.oha(targets[0], case="own_client", duration=0.3, drain=False) is not None
        source = fleet.cpu_source
    rows = load_run(run_dir)
    skipped = {
        p.get("drain_skipped", False) for c, p in zip(rows["case"], rows["params"], strict=True) if c == "own_client"
    }
    assert skipped == {True}, "a run that skips the drain says so"
    rows = rows[rows["case"] == "ceiling"]
    params = list(rows["params"])
    assert {p["cpu_source"] for p in params} == {source}
    if account_support() is None:
        assert source == "cgroup"
    assert {p["server_affinity"] for p in params} == {cpu_label(SERVER_CPUS)}
    assert {p["client_affinity"] for p in params} == {cpu_label(CLIENT_CPUS)}
    assert sorted({(r, p["slot"]) for r, p in zip(rows["repeat"], params, strict=True)}) == [
        (0, 0),
        (0, 1),
        (1, 0),
        (1, 1),
    ]
    per_request = rows[rows["metric"] == "cpu_s_per_request"]["value"]
    assert len(per_request) == 4 and (per_request > 0).all()
    assert (rows["metric"] == "client_cpu_s_per_request").sum() == 4


def test_dead_server_is_reported_and_rows_are_kept(tools, tmp_path):
    run_dir = tmp_path / "run"
    (run_dir / "logs").mkdir(parents=True)
    record = Recorder(RowWriter(run_dir), "load_test")
    target = Target("hyper_hello", "/")
    with Fleet([target], log_dir=run_dir / "logs", server_cpus=SERVER_CPUS) as fleet:
        assert not fleet.failed, fleet.failed
        env = LoadEnv(fleet, record, client_cpus=CLIENT_CPUS, log_dir=tmp_path)
        assert env.oha(target, case="before", duration=0.5) is not None
        server_pid = fleet.servers[target.key].pid
        threading.Timer(0.5, os.kill, (server_pid, signal.SIGKILL)).start()
        started = time.monotonic()
        assert env.oha(target, case="killed", duration=5.0) is None
        assert time.monotonic() - started < 4.0, "a dead server ends the run early"
    assert len(env.problems) == 1
    assert "server died" in env.problems[0] and "exited with code -9" in env.problems[0]
    assert "listening" in env.problems[0], "the server's log tail is in the report"
    assert target.key in fleet.failed and target.key not in fleet.servers
    kept = load_run(run_dir)
    assert set(kept["case"]) == {"before"} and "rps" in set(kept["metric"])


def test_alive_check_ends_a_driver_with_server_failed(tmp_path, tools):
    server = Server("hyper_hello", log_dir=tmp_path, cpus=SERVER_CPUS).start()
    try:
        threading.Timer(0.3, os.kill, (server.pid, signal.SIGKILL)).start()
        with pytest.raises(ServerFailed, match=r"exited with code -9; log .*listening"):
            _load(run_locust, server, tmp_path, Bounds(5.0, NO_LIMIT), users=2, processes=1, alive=server.check_alive)
    finally:
        server.stop()


@pytest.mark.parametrize(
    "url", ["http://10.0.0.1:8080/", "http://192.168.1.10/", "http://8.8.8.8/", "ftp://127.0.0.1/", "http:///nohost"]
)
def test_refuses_non_loopback_targets(url, tmp_path):
    for run in (run_oha, run_wrk, run_locust):
        with pytest.raises(TargetNotLoopback):
            run(url, bounds=Bounds(1.0, 10), client_cpus=CLIENT_CPUS, log_dir=tmp_path)
    assert not list(tmp_path.iterdir()), "nothing was started"


def test_loopback_names_and_addresses_are_accepted_and_canonical():
    cases = {
        "http://127.0.0.1:1/": "http://127.0.0.1:1/",
        "http://localhost:8080/x": "http://127.0.0.1:8080/x",
        "http://[::1]:80/": "http://[::1]:80/",
        "http://127.3.4.5/": "http://127.3.4.5:80/",
    }
    for url, canonical in cases.items():
        assert require_loopback(url) == canonical


def test_bounds_are_validated():
    with pytest.raises(ValueError):
        Bounds(0, 10)
    with pytest.raises(ValueError):
        Bounds(1.0, 0)


def test_window_usage_interpolates_cpu_at_the_window_edges():
    samples = [Sample(0.0, 0.0, 100, 1), Sample(1.0, 0.5, 300, 2), Sample(2.0, 1.5, 200, 3)]
    usage = window_usage(samples, 0.5, 1.5)
    assert usage.cpu_seconds == pytest.approx(1.0 - 0.25)
    assert usage.rss_peak == 300 and usage.rss_mean == 300 and usage.threads_max == 2


def test_client_bound_rule():
    assert is_client_bound(0.90, None) and not is_client_bound(0.89, None)
    assert is_client_bound(0.1, 0.94) and not is_client_bound(0.1, 0.95)


def test_counts_from_driver_outputs():
    oha = {
        "statusCodeDistribution": {"200": 90, "503": 5},
        "errorDistribution": {"connection refused": 3, "aborted due to deadline": 7},
    }
    assert oha_counts(oha) == (98, 90, {200: 90, 503: 5}, {"connection refused": 3})
    wrk = {"requests": 100, "errors": {"connect": 2, "read": 0, "write": 0, "status": 4, "timeout": 1}}
    assert wrk_counts(wrk) == (103, 96, {"connect": 2, "status": 4, "timeout": 1})


def test_inconsistent_result_is_rejected():
    bad = LoadResult(
        "oha",
        "closed",
        "http://127.0.0.1/",
        0.0,
        1.0,
        requests=10,
        successes=8,
        failures=1,
        latency={0.5: 0.001, 0.99: 0.002},
        latency_resolution=1e-6,
    )
    with pytest.raises(LoadFailed, match="requests 10 != successes 8"):
        bad.check()


_HARNESS = """
import sys, time
from pathlib import Path
from polyperf.load import Bounds, run_locust, run_oha
url, driver, log = sys.argv[1], sys.argv[2], Path(sys.argv[3])
report = lambda pid: print(pid, flush=True)
if driver == "locust":
    run_locust(url, bounds=Bounds(60, 10**9), client_cpus=[0], log_dir=log, users=4, processes=2, on_spawn=report)
else:
    run_oha(url, bounds=Bounds(60, 10**9), client_cpus=[0], log_dir=log, connections=4, on_spawn=report)
"""


@pytest.mark.parametrize(
    ("driver", "sig"),
    [("locust", signal.SIGKILL), ("locust", signal.SIGINT), ("oha", signal.SIGKILL), ("oha", signal.SIGTERM)],
)
def test_no_load_generator_outlives_the_harness(hello, tmp_path, driver, sig):
    harness = subprocess.Popen(
        [sys.executable, "-c", _HARNESS, hello.url + "/", driver, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        pids = [int(harness.stdout.readline()) for _ in range(3 if driver == "locust" else 1)]
        time.sleep(1.0)
        assert all(psutil.pid_exists(p) for p in pids)
        harness.send_signal(sig)
        harness.wait(timeout=30)
        assert gone(pids), f"{driver} processes survived the harness dying by {sig!r}"
    finally:
        harness.kill()
