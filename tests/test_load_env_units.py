"""`LoadEnv` (orchestrate/load_suite.py) without servers: a stand-in fleet, driver and sampler, so that what a run
records — its rows, its params, its problems — and the seeded orders, the drain, the CPU budget's rows and
its calibration are checked to the value."""

from __future__ import annotations

import json
import os
import tempfile
from types import SimpleNamespace

import pytest

from polyperf.errors import ServerFailed
from polyperf.load.result import LoadFailed, LoadResult
from polyperf.measure.count_parse import IoCounts
from polyperf.measure.sampler import Measurement, Usage
from polyperf.orchestrate import load_suite
from polyperf.orchestrate.load_suite import LoadEnv
from polyperf.record.recorder import Recorder
from polyperf.serve.cpu_budget import ThrottleStats
from polyperf.serve.drain import Quiet


class ListWriter:
    def __init__(self) -> None:
        self.rows: list = []

    def write(self, rows) -> None:
        self.rows.extend(rows)

    def narrows(self) -> None:
        pass


def _target(key: str) -> SimpleNamespace:
    return SimpleNamespace(
        key=key, name=key.split(":")[0], variant="release", path="/p", params={"lang": "rust"}, request={}
    )


class FakeBudget:
    def __init__(self, fraction: float, throttled: list[ThrottleStats]) -> None:
        self.fraction, self.period_s, self._stats = fraction, 0.01, list(throttled)

    def stats(self) -> ThrottleStats:
        return self._stats.pop(0)


class FakeFleet:
    def __init__(self, keys, budgets=None, cpu_source="proc") -> None:
        self.server_cpus, self.workers, self.quota_period_s, self.cpu_source = [0], 1, 0.01, cpu_source
        self.targets = [_target(k) for k in keys]
        self.servers = {
            k: SimpleNamespace(
                url=f"http://127.0.0.1:{9000 + i}", pid=os.getpid(), port=9000 + i, check_alive=lambda: None
            )
            for i, k in enumerate(keys)
        }
        self.budgets, self.affinity = dict(budgets or {}), {k: [0] for k in keys}
        self.dropped, self.quotas = [], []

    @property
    def running(self):
        return [(t, self.servers[t.key]) for t in self.targets if t.key in self.servers]

    def server_cpu(self, key):
        return None

    def drop(self, key, why):
        self.servers.pop(key)
        self.dropped.append((key, why))

    def set_cpu_quota(self, fraction):
        self.quotas.append(fraction)


@pytest.fixture
def lab(monkeypatch, tmp_path):
    """Stand-ins for the driver, the sampler, the drain and /proc/PID/io; `lab.seen` holds their calls."""
    seen = SimpleNamespace(quiet=[], driver=[], measure=[], server_cpu=1.0, fail=None)
    io = iter([IoCounts(10, 10), IoCounts(30, 20)] * 100)

    def driver(url, *, bounds, client_cpus, log_dir, on_spawn, alive, **options):
        seen.driver.append({"url": url, "bounds": bounds, "client_cpus": client_cpus, **options})
        return LoadResult("oha", "closed", url, 0.0, 2.0, 200, 200, 0, {0.5: 0.001}, 1e-6)

    def measure(pid, run, **kwargs):
        seen.measure.append(kwargs)
        if seen.fail is not None:
            raise seen.fail
        load = run(lambda child: None)
        server = Usage(seen.server_cpu, 0.0, 1.0, 1, 1, 1)
        client = Usage(0.1, 0.0, 1.0, 1, 1, 1)
        return Measurement(load, server, client, 1, cpu_source="proc", client_affinity=(1,))

    def wait_quiet(ports, counters, *, timeout, idle):
        seen.quiet.append((ports, sorted(counters), timeout, idle))
        return seen.quiet_result if hasattr(seen, "quiet_result") else Quiet(0.0, False)

    monkeypatch.setitem(load_suite.DRIVERS, "oha", driver)
    monkeypatch.setattr(load_suite, "measure", measure)
    monkeypatch.setattr(load_suite, "wait_quiet", wait_quiet)
    monkeypatch.setattr(load_suite, "maybe_io_counts", lambda pid: next(io))
    seen.tmp = tmp_path
    return seen


def _env(fleet, writer=None, seed=7, suite="s"):
    return LoadEnv(
        fleet,
        Recorder(writer or ListWriter(), suite),
        client_cpus=[1],
        log_dir=tempfile.mkdtemp(prefix="polyperf-test-logs-"),  # never the checkout's logs/
        params={"x": 1},
        seed=seed,
    )


def test_a_run_records_every_row_with_its_params(lab):
    writer = ListWriter()
    fleet = FakeFleet(["a:release"])
    env = _env(fleet, writer)
    assert env.params == {"server_cpus": "0", "client_cpus": "1", "server_workers": 1, "x": 1}
    assert (env.seed, env.client_cpus, env.problems, env.extra_pids, env.extra_cpu) == (7, [1], [], {}, {})
    m = env.oha(
        fleet.targets[0], case="hello", duration=2.0, repeat=3, params={"p": 2}, connections=16, steps=((1, 2),)
    )
    assert m is not None and m.load.requests == 200
    assert lab.driver == [
        {
            "url": "http://127.0.0.1:9000/p",
            "bounds": load_suite.Bounds(2.0, load_suite.MAX_REQUESTS),
            "client_cpus": [1],
        }
        | {"connections": 16, "steps": ((1, 2),)}
    ]
    assert (
        lab.measure[0]["client_cpus"] == [1] and lab.measure[0]["extra"] == {} and lab.measure[0]["server_cpu"] is None
    )
    assert lab.quiet == [([9000], ["a:release"], 3.0, 0.011)]  # /proc ticks are 10 ms: a tick is not busy
    rows = writer.rows
    assert {(r.suite, r.case, r.implementation, r.variant, r.driver, r.repeat, r.client_bound) for r in rows} == {
        ("s", "hello", "a", "release", "oha", 3, False)
    }
    assert dict(rows[0].params) == {
        "server_cpus": "0",
        "client_cpus": "1",
        "server_workers": 1,
        "x": 1,
        "lang": "rust",
        "path": "/p",
        "cpu_source": "proc",
        "server_affinity": "0",
        "client_affinity": "1",
        "server_process": 0,
        "duration_s": 2.0,
        "connections": 16,
        "steps": [[1, 2]],
        "p": 2,
    }
    value = {r.metric: r.value for r in rows if r.metric != "errors_by_kind"}
    assert value["client_cpu_s_per_request"] == pytest.approx(0.1 / 200)
    assert value["syscalls_per_request"] == pytest.approx(30 / 200)  # (30 + 20) - (10 + 10)
    assert "cpu_quota" not in value


def test_unkept_runs_undrained_runs_and_a_missing_server(lab):
    writer = ListWriter()
    fleet = FakeFleet(["a"])
    env = _env(fleet, writer)
    assert env.oha(fleet.targets[0], case="warm", duration=1.0, keep=False) is not None and writer.rows == []
    env.oha(fleet.targets[0], case="witness", duration=1.0, drain=False)
    assert len(lab.quiet) == 1 and writer.rows[0].params["drain_skipped"] is True
    lab.quiet_result = Quiet(3.0, True, 2, ("a", "b"))
    env.oha(fleet.targets[0], case="busy", duration=1.0)
    busy = next(r for r in writer.rows if r.case == "busy").params
    assert (busy["drain_timed_out"], busy["drain_open_connections"], busy["drain_busy"]) == (True, 2, "a,b")
    lab.quiet_result = Quiet(3.0, True, 1, ())
    env.oha(fleet.targets[0], case="open", duration=1.0)
    assert "drain_busy" not in next(r for r in writer.rows if r.case == "open").params
    assert env.oha(_target("gone"), case="c", duration=1.0) is None


def test_a_failing_server_is_dropped_and_a_failing_driver_noted(lab):
    fleet = FakeFleet(["a", "b"])
    env = _env(fleet)
    lab.fail = ServerFailed("exit 3")
    assert env.oha(fleet.targets[0], case="c", duration=1.0, repeat=2) is None
    assert fleet.dropped == [("a", "exit 3")]
    lab.fail = LoadFailed("no JSON")
    assert env.wrk(fleet.targets[1], case="c", duration=1.0) is None
    assert env.locust(fleet.targets[1], case="d", duration=1.0, repeat=1) is None
    gave_up = "(3 times in a row; the repeat was not retried again)"  # a driver failing each time: tried 3 times
    assert env.take_problems() == [
        "c a (oha, repeat 2): server died: exit 3",
        f"c b (wrk, repeat 0): no JSON {gave_up}",
        f"d b (locust, repeat 1): no JSON {gave_up}",
    ]
    assert env.take_problems() == [] and fleet.dropped == [("a", "exit 3")]
    assert len(lab.measure) == 1 + 3 + 3 and env.retries.count == 4  # the server's death is not retried


def test_a_run_whose_driver_fails_once_is_tried_again_and_the_retry_noted(lab, monkeypatch):
    writer = ListWriter()
    fleet = FakeFleet(["a"])
    env = _env(fleet, writer)
    failures = iter([LoadFailed("oha still running 15s after start"), None])
    real = load_suite.measure

    def flaky(pid, run, **kwargs):
        lab.fail = next(failures, None)
        return real(pid, run, **kwargs)

    monkeypatch.setattr(load_suite, "measure", flaky)
    m = env.oha(fleet.targets[0], case="c", duration=1.0, repeat=4)
    assert m is not None and len(lab.measure) == 2 and env.retries.count == 1
    assert {r.repeat for r in writer.rows} == {4} and len({r.metric for r in writer.rows}) == len(writer.rows)
    assert env.take_problems() == [
        "c a (oha, repeat 4): 1 failed attempt retried (last: oha still running 15s after start)"
    ]


def test_a_budgeted_run_records_its_throttling_and_whether_the_budget_bound(lab):
    writer = ListWriter()
    start, end = ThrottleStats(10, 1, 0.5), ThrottleStats(210, 51, 1.5)
    fleet = FakeFleet(["a"], budgets={"a": FakeBudget(0.5, [start, end, start, end])})
    env = _env(fleet, writer)
    env.oha(fleet.targets[0], case="full", duration=2.0)  # 1.0 CPU-s in 2 s on half a CPU: the quota used fully
    value = {r.metric: r.value for r in writer.rows}
    assert (value["cpu_quota"], value["cpu_quota_period_s"], value["nr_periods"], value["nr_throttled"]) == (
        0.5,
        0.01,
        200.0,
        50.0,
    )
    assert value["throttled_s"] == 1.0 and value["quota_use"] == 1.0
    assert {r.client_bound for r in writer.rows} == {False}
    assert (writer.rows[0].params["cpu_quota"], writer.rows[0].params["cpu_quota_period_s"]) == (0.5, 0.01)
    lab.server_cpu = 0.8  # 80% of the quota: the client was the limit
    env.oha(fleet.targets[0], case="short", duration=2.0)
    assert {r.client_bound for r in writer.rows if r.case == "short"} == {True}


def test_interleave_visits_every_live_target_once_per_repeat_in_seeded_orders(lab):
    fleet = FakeFleet(["a", "b", "c"])
    env, again = _env(fleet, seed=11), _env(FakeFleet(["a", "b", "c"]), seed=11)
    visits = [(repeat, target.key, env._slot) for repeat, target in env.interleave(3)]
    assert [(r, k) for r, k, _ in visits] == [(r, k) for r, k, _ in [(r, t.key, None) for r, t in again.interleave(3)]]
    for repeat in range(3):
        keys = [k for r, k, _ in visits if r == repeat]
        assert sorted(keys) == ["a", "b", "c"]
        assert [slot for r, k, slot in visits if r == repeat] == [(repeat, k, i) for i, k in enumerate(keys)]
    assert env._slot is None
    other_seed = [t.key for _, t in _env(FakeFleet(["a", "b", "c"]), seed=12).interleave(3)]
    assert other_seed != [k for _, k, _ in visits]  # another seed, other orders (fixed seeds: a fact)
    fleet.servers.pop("b")
    assert sorted(t.key for _, t in env.interleave(1)) == ["a", "c"]
    assert [t.key for _, t in env.interleave(1, [fleet.targets[0]])] == ["a"]
    writer = ListWriter()
    env = _env(FakeFleet(["a"]), writer)
    for repeat, target in env.interleave(2):
        env.oha(target, case="c", duration=1.0, repeat=repeat)
    assert [r.params["slot"] for r in writer.rows if r.metric == "rps"] == [0, 0]
    env.oha(env.fleet.targets[0], case="c", duration=1.0, repeat=5)
    assert "slot" not in writer.rows[-1].params


def test_order_is_seeded_per_suite():
    fleet = FakeFleet(["a"])
    items = list(range(10))
    assert _env(fleet, seed=3).order(items) == _env(fleet, seed=3).order(items)
    assert _env(fleet, seed=3).order(items) != _env(fleet, seed=3, suite="other").order(items)
    assert sorted(_env(fleet, seed=3).order(items)) == items and items == list(range(10))
    assert _env(fleet, seed=None).seed in range(2**32)


def test_calibrate_reports_each_ceiling_and_the_drain_idle_of_a_cgroup(lab):
    fleet = FakeFleet(["a", "b"], cpu_source="cgroup")
    assert _env(fleet).calibrate(duration=1.0) == {"a": 100.0, "b": 100.0}
    assert [call["connections"] for call in lab.driver] == [64, 64]
    assert {q[3] for q in lab.quiet} == {0.001}


def test_auto_quota_confirms_the_estimate_or_falls_back(lab):
    stats = [ThrottleStats(0, 0, 0.0), ThrottleStats(100, 0, 0.0)] * 10
    fleet = FakeFleet(["a"], budgets={"a": FakeBudget(1.0, stats)})
    lab.server_cpu = 2.0  # fills a whole CPU over the 2 s runs
    env = _env(fleet)
    assert env.calibrate_cpu_quota(duration=0.5) == 1.0
    assert fleet.quotas == [1.0, 1.0] and env.problems == []
    lab.server_cpu = 0.1  # never fills any budget
    fleet = FakeFleet(["a"], budgets={"a": FakeBudget(1.0, stats)})
    env = _env(fleet)
    assert env.calibrate_cpu_quota(duration=0.5, steps=2) == 0.25
    assert fleet.quotas == [1.0, 0.7, 0.525, 0.25]  # 0.7 x (100 req/s / 5% of a core) / 2,000 req per CPU-s
    assert env.problems == ["--server-cpu-quota auto: no budget was confirmed in 2 steps; measured at 0.25 CPU instead"]


def test_repeats_spread_over_server_processes_restart_and_warm_every_target(lab):
    """processes=3 over 6 repeats: every target restarted before repeats 2 and 4 (a fresh process each block),
    warmed up unrecorded, and the rows carry the process's number."""
    fleet = FakeFleet(["a", "b"])
    restarts: list[tuple[int, str]] = []
    fleet.starts = {"a": 0, "b": 0}

    def restart(key):
        restarts.append((current[0], key))
        fleet.starts[key] += 1

    fleet.restart = restart
    writer = ListWriter()
    env, current, warmed = _env(fleet, writer), [0], []
    for repeat, target in env.interleave(6, processes=3, warm_up=lambda t: warmed.append((current[0], t.key))):
        current[0] = repeat
        env.oha(target, case="c", duration=1.0, repeat=repeat)
    assert sorted(restarts) == [(1, "a"), (1, "b"), (3, "a"), (3, "b")]  # before repeats 2 and 4
    assert sorted(warmed) == sorted(restarts)
    processes = {(r.repeat, r.params["server_process"]) for r in writer.rows if r.metric == "rps"}
    assert processes == {(0, 0), (1, 0), (2, 1), (3, 1), (4, 2), (5, 2)}
    restarts.clear()
    assert len(list(env.interleave(4))) == 8 and restarts == []  # one process unless asked


def test_a_restart_that_fails_is_a_problem_and_the_target_is_skipped(lab):
    fleet = FakeFleet(["a", "b"])
    fleet.starts = {}

    def restart(key):
        if key == "a":
            fleet.drop(key, "restarting: ServerFailed: gone")

    fleet.restart, fleet.failed = restart, {}
    fleet.drop = lambda key, why: (fleet.servers.pop(key), fleet.failed.__setitem__(key, why))
    env = _env(fleet)
    visited = [(r, t.key) for r, t in env.interleave(2, processes=2, warm_up=lambda t: None)]
    assert sorted(visited) == [(0, "a"), (0, "b"), (1, "b")]
    assert env.problems == ["a: restarting: ServerFailed: gone"]


def test_calibration_and_warm_ups_send_the_targets_own_request(lab):
    fleet = FakeFleet(["a"])
    fleet.targets[0].request = {"method": "POST", "body": '{"n": 4}'}
    _env(fleet).calibrate(duration=1.0)
    assert lab.driver[-1]["method"] == "POST" and lab.driver[-1]["body"] == '{"n": 4}'


def test_a_top_up_measures_again_only_the_targets_its_open_entries_select(lab, monkeypatch):
    from polyperf.common.repeats import ENV, TARGETS_ENV

    node = "suites/test_x.py::test_ceiling"
    monkeypatch.setenv("PYTEST_CURRENT_TEST", f"{node} (call)")
    fleet = FakeFleet(["a", "b", "c"])
    env = _env(fleet)
    assert sorted({t.key for _, t in env.interleave(2)}) == ["a", "b", "c"]  # a first batch: every target
    monkeypatch.setenv(ENV, "12:2")
    monkeypatch.setenv(TARGETS_ENV, json.dumps({node: [["b", "release"]]}))
    assert [(r, t.key) for r, t in env.interleave(8)] == [(12, "b"), (13, "b")]
    assert [t.key for _, t in env.interleave(1, series=False)] != []  # a warm-up or calibration runs as asked
    monkeypatch.setenv(TARGETS_ENV, json.dumps({node: [["gone", "release"]]}))
    assert list(env.interleave(8)) == []  # a loop over other targets: nothing to measure again
    monkeypatch.setenv(TARGETS_ENV, json.dumps({"suites/test_x.py::test_other": [["b", "release"]]}))
    assert sorted({t.key for _, t in env.interleave(8)}) == ["a", "b", "c"]  # another test's selection
