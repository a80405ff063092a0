"""The pure parts of the suites' pytest plugin (record/pytest_plugin.py), of the database runs' rows
(orchestrate/db_runs.py) and of the counting runs (orchestrate/count_runs.py), pinned to exact values: how a test's
path names its suite, the CPU-budget option, how a pytest-benchmark result becomes rows, the rows-check
rows, which build counts an app, and syscalls per request."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
from types import SimpleNamespace
from typing import ClassVar

import pytest

from polyperf.errors import PolyperfError
from polyperf.load.result import LoadResult
from polyperf.measure.count_parse import IoCounts
from polyperf.measure.device_table import RowsCheck
from polyperf.measure.sampler import Measurement, Usage
from polyperf.orchestrate import count_runs, db_runs
from polyperf.record import pytest_plugin as plugin
from polyperf.record.run_dir import new_run_dir
from polyperf.record.schema import Row


def test_suite_of_a_node_id_or_a_path():
    assert plugin.suite_of("suites/test_io_buffering.py::test_x[a::b]") == "io_buffering"
    assert plugin.suite_of("suites/test_bson.py") == "bson"
    assert plugin.suite_of("other/bench_test_x.py") == "bench_test_x"


def test_quota_option():
    from polyperf.record.load_options import parse_quota

    assert parse_quota(None) == (None, False)
    assert parse_quota("") == (None, False)
    assert parse_quota("none") == (None, False)
    assert parse_quota("auto") == (1.0, True)
    assert parse_quota("0.5") == (0.5, False)
    with pytest.raises(ValueError) as info:
        parse_quota("half")
    assert str(info.value) == "--server-cpu-quota takes a number of CPUs (e.g. 0.5) or auto, not 'half'"
    for bad in ("0", "-1", "nan"):
        with pytest.raises(ValueError) as info:
            parse_quota(bad)
        assert str(info.value) == f"--server-cpu-quota must be above 0, not {bad!r}"


def _options(server: int, client: int, **kw) -> plugin.LoadOptions:
    return plugin.LoadOptions(list(range(server)), list(range(server, server + client)), False, **kw)


def test_budget_by_default_only_where_the_client_cannot_outpace_the_server(monkeypatch):
    import polyperf.serve.cpu_budget as cpu_budget

    monkeypatch.setattr(cpu_budget, "cpu_budget_support", lambda: None)  # budgets work here
    one_each = _options(1, 1)
    assert one_each.budget_by_default() == dataclasses.replace(one_each, cpu_quota=1.0, auto_quota=True)
    assert _options(1, 2).budget_by_default() == _options(1, 2)  # more client cores: unchanged
    assert _options(2, 2).budget_by_default().auto_quota is True
    asked = _options(1, 1, cpu_quota=0.5)
    assert asked.budget_by_default() is asked
    refused = _options(1, 1, quota_refused=True)
    assert refused.budget_by_default() is refused
    monkeypatch.setattr(cpu_budget, "cpu_budget_support", lambda: "no cgroup v2")
    assert one_each.budget_by_default() is one_each


def test_load_options_defaults_and_fleet_arguments():
    options = plugin.LoadOptions([0], [1], True)
    assert (options.cpu_quota, options.auto_quota, options.quota_period_s, options.quota_refused) == (
        None,
        False,
        0.010,
        False,
    )
    assert options.seed is None
    budgeted = plugin.LoadOptions([0, 1], [2], False, cpu_quota=0.5, quota_period_s=0.1)
    assert budgeted.fleet == {"server_cpus": [0, 1], "cpu_quota": 0.5, "quota_period_s": 0.1}


def test_describe_benchmark_labels_the_result():
    bench = SimpleNamespace(extra_info={})
    plugin.describe_benchmark(bench, case="read", implementation="bufreader", params={"size": 4})
    assert bench.extra_info == {
        "polyperf": {
            "case": "read",
            "implementation": "bufreader",
            "variant": "",
            "params": {"size": 4},
            "bytes_per_round": None,
        }
    }
    plugin.describe_benchmark(bench, case="c", implementation="i", variant="v", bytes_per_round=10)
    assert bench.extra_info["polyperf"]["params"] == {} and bench.extra_info["polyperf"]["bytes_per_round"] == 10
    assert bench.extra_info["polyperf"]["variant"] == "v"


def _bench(data, *, extra=None, iterations=1, name="test_read[big]", param="big", params=None):
    return SimpleNamespace(
        stats=SimpleNamespace(data=data),
        extra_info=extra or {},
        iterations=iterations,
        name=name,
        param=param,
        params=params,
        fullname=f"suites/test_io_buffering.py::{name}",
    )


def test_benchmark_rows_from_the_test_when_not_described():
    rows = plugin.benchmark_rows(_bench([0.5, 0.25], iterations=3, params={"size": 4, "path": plugin.Path("/x")}))
    params = {"size": 4, "path": "/x", "iterations": 3}
    assert rows == [
        Row("io_buffering", "read", "big", "", "seconds", 0.5, "s", 0, params),
        Row("io_buffering", "read", "big", "", "seconds", 0.25, "s", 1, params),
    ]
    plain = plugin.benchmark_rows(_bench([1.0], iterations=0, name="test_write", param=None))
    assert plain == [Row("io_buffering", "write", "write", "", "seconds", 1.0, "s", 0, {"iterations": 1})]
    from polyperf.record.benchmark_rows import _plain

    assert _plain(None) is None and _plain(True) is True and _plain(2.5) == 2.5
    assert _plain([1]) == "[1]"


def test_benchmark_rows_of_a_described_benchmark_with_throughput():
    label = {"case": "c", "implementation": "i", "variant": "v", "params": {"n": 1}, "bytes_per_round": 100}
    rows = plugin.benchmark_rows(_bench([0.5, 0.0], extra={"polyperf": label}, iterations=None))
    params = {"n": 1, "iterations": 1}
    assert rows == [
        Row("io_buffering", "c", "i", "v", "seconds", 0.5, "s", 0, params),
        Row("io_buffering", "c", "i", "v", "bytes_per_s", 200.0, "bytes/s", 0, params),
        Row("io_buffering", "c", "i", "v", "seconds", 0.0, "s", 1, params),  # no rate from a zero time
    ]
    assert plugin.benchmark_rows(_bench([])) == []
    assert plugin.benchmark_rows(SimpleNamespace(stats=None)) == []


def test_a_benchmark_is_written_once(tmp_path):
    written = []
    writer = SimpleNamespace(write=lambda rows: written.append(list(rows)))
    config = SimpleNamespace(stash={plugin._WRITER: writer})
    bench = _bench([0.5])
    plugin._write_benchmark(config, bench)
    plugin._write_benchmark(config, bench)
    plugin.pytest_benchmark_update_json(config, [bench, _bench([0.25])], {})
    assert [[r.value for r in rows] for rows in written] == [[0.5], [0.25]]
    plugin._write_benchmark(config, None)
    plugin._write_benchmark(SimpleNamespace(stash={}), _bench([1.0]))
    assert len(written) == 2


def test_rows_check_metrics_and_merge():
    check = RowsCheck(acked=10, found=9, ambiguous=1, lost=1, phantom=2, mismatched=3, by_id=True)
    assert db_runs.check_metrics(check) == [
        ("rows_acked", 10.0, "count", {}),
        ("rows_found", 9.0, "count", {}),
        ("rows_ambiguous", 1.0, "count", {}),
        ("rows_mismatch", 6.0, "count", {}),
    ]
    other = RowsCheck(acked=1, found=2, ambiguous=3, lost=4, phantom=5, mismatched=6, by_id=False)
    assert db_runs._merge(check, other) == RowsCheck(11, 11, 4, 5, 7, 9, False)
    assert db_runs._merge(check, check).by_id is True


def test_counting_spec_per_language_and_variant():
    assert count_runs.counting_spec("nethttp_devices") == ("nethttp_devices", "go runtime Mallocs")
    allocator = "counting allocator (alloc + alloc_zeroed + realloc)"
    assert count_runs.counting_spec("hyper_hello") == ("hyper_hello:counting", allocator)
    assert count_runs.counting_spec("actix_matrix:native-mimalloc") == (
        "actix_matrix:counting-native-mimalloc",
        allocator,
    )
    assert count_runs.counting_spec("actix_matrix:release-lto") == ("actix_matrix:counting", allocator)


def test_io_rows_per_request_and_the_timed_window():
    delta = IoCounts(reads=30, writes=10)
    source = {"source": "proc_io"}
    assert count_runs.io_rows(delta, 10) == [
        ("syscalls_per_request", 4.0, "count", {**source, "family": "read+write"}),
        ("read_syscalls_per_request", 3.0, "count", source),
        ("write_syscalls_per_request", 1.0, "count", source),
    ]
    start, end = IoCounts(5, 5), IoCounts(35, 15)
    assert count_runs.window_io_rows([start, end], 10) == count_runs.io_rows(delta, 10)
    for io, requests in (([start], 10), ([None, end], 10), ([start, None], 10), ([start, end], 0)):
        assert count_runs.window_io_rows(io, requests) == []
    plan = count_runs.CountPlan()
    assert (plan.requests, plan.warmup, plan.method, plan.body, plan.pipelined) == (2000, 500, "GET", b"", ())
    assert (plan.trace, plan.trace_requests) == (True, 1000)


def test_io_counts_of_a_process_that_is_gone():
    proc = subprocess.Popen(["true"])
    proc.wait()
    assert count_runs.maybe_io_counts(proc.pid) is None
    mine = count_runs.maybe_io_counts(os.getpid())
    assert mine is None or mine.reads > 0


# --- the plugin's hooks, driven with a stand-in config ------------------------------------------------------


class FakePlugins:
    def __init__(self, plugins: dict) -> None:
        self.plugins = plugins

    def getplugin(self, name: str):
        return self.plugins.get(name)


def _config(run_dir, **stash):
    keys = {"run_dir": plugin._RUN_DIR, "order": plugin._ORDER, "owns": plugin._OWNS_RUN, "signal": plugin._SIGNAL}
    return SimpleNamespace(
        stash={keys[k]: v for k, v in {"run_dir": run_dir, **stash}.items() if v is not None},
        getoption=lambda name: {"--polyperf-profile": "smoke"}[name],
        pluginmanager=FakePlugins({}),
    )


@pytest.fixture
def hooks(monkeypatch):
    """The plugin's module-level config slot, restored afterwards."""
    monkeypatch.setattr(plugin, "_CONFIG", {})
    return plugin._CONFIG


def test_progress_names_the_test_under_way_and_those_to_come(tmp_path, hooks):
    plugin.pytest_runtest_logstart("b", ("f", 1, "b"))  # no session yet: nothing written
    assert not (tmp_path / "progress.json").exists()
    config = _config(tmp_path, order=None)
    items = [SimpleNamespace(nodeid=n, path=tmp_path / f"test_{n}.py") for n in ("a", "b", "c")]
    plugin.pytest_collection_modifyitems(None, config, items)
    hooks["config"] = config
    plugin.pytest_runtest_logstart("b", ("f", 1, "b"))
    progress = json.loads((tmp_path / "progress.json").read_text())
    assert progress == {"nodeid": "b", "index": 1, "total": 3, "pending": ["b", "c"]}
    plugin.pytest_runtest_logstart("z", ("f", 1, "z"))  # not collected (a rerun): counted from the start
    assert json.loads((tmp_path / "progress.json").read_text())["index"] == 0
    hooks["config"] = _config(tmp_path)
    plugin.pytest_runtest_logstart("only", ("f", 1, "only"))
    assert json.loads((tmp_path / "progress.json").read_text()) == {
        "nodeid": "only",
        "index": 0,
        "total": 1,
        "pending": ["only"],
    }
    hooks["config"] = SimpleNamespace(stash={})
    (tmp_path / "progress.json").unlink()
    plugin.pytest_runtest_logstart("b", ("f", 1, "b"))
    assert not (tmp_path / "progress.json").exists()


def test_durations_add_up_per_test_and_land_when_the_session_ends(tmp_path, hooks):
    config = _config(tmp_path)
    plugin.pytest_runtest_logreport(SimpleNamespace(nodeid="a", duration=1.0))  # no session: ignored
    hooks["config"] = config
    for phase in (0.5, 2.0, 0.25):
        plugin.pytest_runtest_logreport(SimpleNamespace(nodeid="a", duration=phase))
    plugin.pytest_runtest_logreport(SimpleNamespace(nodeid="b", duration=1.0))
    plugin.pytest_sessionfinish(SimpleNamespace(config=config), pytest.ExitCode.OK)
    assert json.loads((tmp_path / "durations.json").read_text()) == {"a": 2.75, "b": 1.0}
    assert not (tmp_path / "env.json").exists()  # not interrupted


def test_an_interrupted_session_is_marked_and_keeps_the_old_estimates(tmp_path, hooks):
    config = _config(tmp_path)
    plugin.pytest_sessionfinish(SimpleNamespace(config=config), pytest.ExitCode.INTERRUPTED)
    assert not (tmp_path / "durations.json").exists()
    assert json.loads((tmp_path / "env.json").read_text())["interrupted"] == "SIGINT"
    signalled = _config(tmp_path / "b", signal="SIGTERM")
    (tmp_path / "b").mkdir()
    plugin.pytest_sessionfinish(SimpleNamespace(config=signalled), pytest.ExitCode.OK)
    assert json.loads((tmp_path / "b" / "env.json").read_text())["interrupted"] == "SIGTERM"
    assert not (tmp_path / "b" / "durations.json").exists()
    plugin.pytest_sessionfinish(SimpleNamespace(config=SimpleNamespace(stash={})), pytest.ExitCode.INTERRUPTED)


def test_a_failing_env_update_goes_to_the_log(tmp_path):
    (tmp_path / "env.json").write_text("{not json")
    plugin._mark_interrupted(tmp_path, "SIGHUP")
    log = (tmp_path / "logs" / "polyperf.log").read_text()
    assert log.startswith("env.json: could not record the SIGHUP that stopped the run: ")


def test_sigterm_and_sighup_stop_the_session_like_ctrl_c(tmp_path):
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP)}
    config = _config(tmp_path)
    try:
        plugin._stop_on_signals(config)
        for sig in (signal.SIGHUP, signal.SIGTERM):
            with pytest.raises(KeyboardInterrupt):
                signal.getsignal(sig)(sig, None)
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    assert config.stash[plugin._SIGNAL] == "SIGHUP"  # the first one is what stopped the run
    assert json.loads((tmp_path / "env.json").read_text())["interrupted"] == "SIGHUP"


def test_report_header_and_the_end_of_a_session(tmp_path, capsys):
    assert plugin.pytest_report_header(SimpleNamespace(stash={})) is None
    run_dir = new_run_dir(tmp_path, "r")
    config = _config(run_dir, owns=True)
    assert plugin.pytest_report_header(config) == f"polyperf: profile=smoke run_dir={run_dir}"
    plugin.pytest_unconfigure(SimpleNamespace(stash={}))  # a session without a run: nothing to finish
    plugin.pytest_unconfigure(config)
    assert (run_dir / "results.parquet").exists() and (tmp_path / "latest").resolve() == run_dir.resolve()
    assert capsys.readouterr().out == f"\npolyperf: results in {run_dir} (render with `polyperf report {run_dir}`)\n"
    given = new_run_dir(tmp_path, "given")
    plugin.pytest_unconfigure(_config(given, owns=False))
    assert (given / "results.csv").exists() and (tmp_path / "latest").resolve() == run_dir.resolve()


def test_live_lines_go_past_the_capture_to_the_terminal(capsys):
    lines = []
    reporter = SimpleNamespace(write_line=lines.append, flush=lambda: lines.append("<flush>"))
    config = SimpleNamespace(pluginmanager=FakePlugins({"terminalreporter": reporter}))
    plugin.live_line_sink(config)("building x")
    assert lines == ["building x", "<flush>"]
    plugin.live_line_sink(SimpleNamespace(pluginmanager=FakePlugins({})))("no terminal")
    assert capsys.readouterr().err == "no terminal\n"


def test_live_lines_suspend_the_capture_while_they_write():
    events = []

    @contextlib.contextmanager
    def disabled():
        events.append("capture off")
        yield
        events.append("capture on")

    capman = SimpleNamespace(global_and_fixture_disabled=disabled)
    reporter = SimpleNamespace(write_line=events.append, flush=lambda: None)
    plugin.live_line_sink(
        SimpleNamespace(pluginmanager=FakePlugins({"capturemanager": capman, "terminalreporter": reporter}))
    )("x")
    assert events == ["capture off", "x", "capture on"]


# --- the database's cost beside the app's ------------------------------------------------------------------


def _post_runs(cpus, shared, extra_cpu=None):
    runs = object.__new__(db_runs.PostRuns)  # no database: only the arithmetic of db_metrics is used
    runs.db = db_runs.Database("dsn", 1, cpus, shared)
    runs.env = SimpleNamespace(extra_cpu=extra_cpu or {})
    return runs


def _db_measurement(db_cpu: float | None, requests: int = 100):
    load = LoadResult("oha", "closed", "http://127.0.0.1/", 0.0, 2.0, requests, requests, 0, {}, 1e-6)
    server = Usage(cpu_seconds=1.0, wait_seconds=0.0, rss_mean=1.0, rss_peak=1, threads_max=1, samples=1)
    extra = {} if db_cpu is None else {"db": dataclasses.replace(server, cpu_seconds=db_cpu)}
    return Measurement(load=load, server=server, client=server, client_cores=1, extra=extra)


def test_db_metrics_per_request_and_per_insert():
    probe = SimpleNamespace(samples=[1], peak=7, mean=3.5, open_peak=9, rss=[1], rss_peak=1000, pss=600)
    rows = _post_runs([0, 1], shared=False).db_metrics(_db_measurement(3.0), probe, inserts=50)
    proc = {"db_cpu_source": "proc"}
    assert rows == [
        ("db_connections_peak", 7.0, "count", {}),
        ("db_connections_mean", 3.5, "count", {}),
        ("db_connections_open_peak", 9.0, "count", {}),
        ("db_rss_peak_bytes", 1000.0, "bytes", {}),
        ("db_pss_bytes", 600.0, "bytes", {}),
        ("db_cpu_s_per_request", 0.03, "s", proc),
        ("db_cpu_share", 0.75, "ratio", proc),
        ("db_bound", 0.0, "ratio", proc),  # 75% of its own two cores: under the 90% line
        ("total_cpu_s_per_request", 0.04, "s", proc),
        ("app_cpu_s_per_insert", 0.02, "s", proc),
        ("db_cpu_s_per_insert", 0.06, "s", proc),
        ("db_cpu_fraction_of_total", 0.75, "ratio", proc),
    ]
    assert all(type(value) is float for _, value, _, _ in rows)


def test_db_metrics_bound_source_and_what_is_left_out():
    shared = _post_runs([0], shared=True, extra_cpu={"db": object()}).db_metrics(_db_measurement(1.0), None)
    source = {"db_cpu_source": "cgroup"}
    assert shared == [
        ("db_cpu_s_per_request", 0.01, "s", source),
        ("db_cpu_share", 0.5, "ratio", source),
        ("db_bound", 1.0, "ratio", source),  # with the app: 100% of one shared core, half of it PostgreSQL's
        ("total_cpu_s_per_request", 0.02, "s", source),
    ]
    empty_probe = SimpleNamespace(samples=[], rss=[], pss=None)
    assert _post_runs([], shared=False).db_metrics(_db_measurement(None), empty_probe) == []
    assert _post_runs([0], shared=False).db_metrics(_db_measurement(1.0, requests=0), None) == []
    no_cpu = _post_runs([], shared=False).db_metrics(_db_measurement(0.0), None, inserts=5)
    proc = {"db_cpu_source": "proc"}
    assert no_cpu[-3:] == [
        ("app_cpu_s_per_insert", 0.2, "s", proc),
        ("db_cpu_s_per_insert", 0.0, "s", proc),
        ("db_cpu_fraction_of_total", 0.0, "ratio", proc),
    ]


# --- the command-line options and their environment defaults -----------------------------------------------


class FakeParser:
    def __init__(self) -> None:
        self.groups: dict[str, dict[str, dict]] = {}

    def getgroup(self, name: str):
        options = self.groups.setdefault(name, {})
        return SimpleNamespace(addoption=lambda flag, **kw: options.__setitem__(flag, kw))


def _options_table(monkeypatch, env: dict[str, str]) -> dict[str, dict]:
    for name in [k for k in os.environ if k.startswith("POLYPERF_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    parser = FakeParser()
    plugin.pytest_addoption(parser)
    assert list(parser.groups) == ["polyperf"]
    return {flag: {k: v for k, v in kw.items() if k != "help"} for flag, kw in parser.groups["polyperf"].items()}


def test_options_and_their_defaults_without_environment(monkeypatch):
    assert _options_table(monkeypatch, {}) == {
        "--polyperf-profile": {"choices": plugin.PROFILES, "default": "quick"},
        "--polyperf-out": {"default": "reports"},
        "--polyperf-run-dir": {"default": None},
        "--server-cpus": {"default": None},
        "--client-cpus": {"default": None},
        "--server-cpu-quota": {"default": None, "metavar": "FRACTION|auto|none"},
        "--cpu-quota-period-ms": {"type": float, "default": 10.0},
        "--database-url": {"default": None, "metavar": "URL"},
        "--flamegraph": {"action": "store_true", "default": False},
        "--seed": {"type": int, "default": None},
    }


def test_every_option_takes_its_default_from_the_environment(monkeypatch):
    env = {
        "POLYPERF_PROFILE": "smoke",
        "POLYPERF_OUT": "elsewhere",
        "POLYPERF_SERVER_CPUS": "0",
        "POLYPERF_CLIENT_CPUS": "1",
        "POLYPERF_SERVER_CPU_QUOTA": "auto",
        "POLYPERF_CPU_QUOTA_PERIOD_MS": "100",
        "POLYPERF_DATABASE_URL": "postgresql://x",
        "POLYPERF_FLAMEGRAPH": "1",
        "POLYPERF_SEED": "42",
    }
    defaults = {flag: kw["default"] for flag, kw in _options_table(monkeypatch, env).items()}
    assert defaults == {
        "--polyperf-profile": "smoke",
        "--polyperf-out": "elsewhere",
        "--polyperf-run-dir": None,
        "--server-cpus": "0",
        "--client-cpus": "1",
        "--server-cpu-quota": "auto",
        "--cpu-quota-period-ms": 100.0,
        "--database-url": "postgresql://x",
        "--flamegraph": True,
        "--seed": 42,
    }
    assert _options_table(monkeypatch, {"POLYPERF_FLAMEGRAPH": "yes"})["--flamegraph"]["default"] is False


# --- database runs: the rows check recorded beside the run, and the whole run's check -------------------------


class FakeTable:
    """A device table: rows (id, mac, firmware), the highest id as the mark."""

    tables: ClassVar[dict[str, list]] = {}

    def __init__(self, dsn: str, name: str) -> None:
        self.rows = FakeTable.tables.setdefault(name, [])

    def high_water(self) -> int:
        return max((row[0] for row in self.rows), default=0)

    def rows_after(self, mark: int) -> list:
        return [row for row in self.rows if row[0] > mark]

    def count(self) -> int:
        return len(self.rows)


class EnvNamespace(SimpleNamespace):
    """A stand-in LoadEnv's bookkeeping: the methods through which others change a LoadEnv."""

    def note_problem(self, text):
        self.problems.append(text)

    def measure_also(self, name, pid, cpu=None):
        self.extra_pids[name] = pid
        if cpu is not None:
            self.extra_cpu[name] = cpu


def _db_env(writer):
    return EnvNamespace(
        problems=[],
        params={"server_cpus": "0"},
        client_cpus=[1],
        extra_pids={},
        extra_cpu={},
        record=plugin.Recorder(writer, "devices"),
    )


@pytest.fixture
def tables(monkeypatch):
    FakeTable.tables = {"t_a": [(1, "m", "f")], "t_a2": [], "t_b": [(1, "m", "f"), (2, "m", "f")]}
    monkeypatch.setattr(db_runs, "DeviceTable", FakeTable)
    return FakeTable.tables


def test_post_runs_mark_each_table_and_measure_a_local_database(tables):
    writer = SimpleNamespace(rows=[], write=lambda rows: writer.rows.extend(rows))
    env = _db_env(writer)
    account = SimpleNamespace(usage_s=lambda: 1.0)
    db = db_runs.Database("dsn", 42, [0], False, account=account)
    runs = db_runs.PostRuns(env, db, {"a": "t_a", "b": "t_b"}, body={"mac": "m", "firmware": "f"})
    assert runs.start == {"a": 1, "b": 2} and runs.totals == {} and runs.body == {"mac": "m", "firmware": "f"}
    assert env.extra_pids == {"db": 42} and env.extra_cpu == {"db": account.usage_s}
    remote = _db_env(writer)
    db_runs.PostRuns(remote, db_runs.Database("dsn", None, [], False, account=account), {}, body={})
    assert remote.extra_pids == {} and remote.extra_cpu == {}


def test_a_failed_check_is_a_problem_and_kept_runs_record_it_with_their_params(tables):
    writer = SimpleNamespace(rows=[], write=lambda rows: writer.rows.extend(rows))
    env = _db_env(writer)
    runs = db_runs.PostRuns(env, db_runs.Database("dsn", None, [], False), {"a#1": "t_a"}, body={})
    target = SimpleNamespace(key="a#1", name="a", variant="release", path="/api", params={"pool": 8})
    m = _db_measurement(None)
    bad = RowsCheck(acked=10, found=9, ambiguous=1, lost=1, phantom=0, mismatched=0, by_id=False)
    options = {"connections": 4, "steps": ((2, 1.0), (4, 1.0))}
    runs.record_check(target, m, bad, None, case="post", repeat=2, duration=3.0, options=options, params={"k": 1})
    assert env.problems == [f"post a#1 (repeat 2): rows check failed: {bad.describe()}"]
    assert runs.totals == {"a#1": [10, 1]}
    assert [(r.metric, r.value) for r in writer.rows] == [
        ("rows_acked", 10.0),
        ("rows_found", 9.0),
        ("rows_ambiguous", 1.0),
        ("rows_mismatch", 1.0),
    ]
    row = writer.rows[0]
    assert (row.suite, row.case, row.implementation, row.variant, row.driver, row.repeat) == (
        "devices",
        "post",
        "a",
        "release",
        "oha",
        2,
    )
    assert dict(row.params) == {
        "server_cpus": "0",
        "pool": 8,
        "path": "/api",
        "duration_s": 3.0,
        "connections": 4,
        "steps": [[2, 1.0], [4, 1.0]],
        "k": 1,
    }
    good = RowsCheck(acked=5, found=5, ambiguous=0, lost=0, phantom=0, mismatched=0, by_id=True)
    runs.record_check(target, m, good, None, case="warm", repeat=0, duration=1.0, options={}, params=None, keep=False)
    assert runs.totals == {"a#1": [15, 1]} and len(writer.rows) == 4 and len(env.problems) == 1


def test_the_whole_run_checks_every_table_of_an_app_from_its_mark(tables):
    runs = db_runs.PostRuns(_db_env(None), db_runs.Database("dsn", None, [], False), {}, body={})
    runs.tables = {"a#1": "t_a", "a/2": "t_a2", "b": "t_b"}
    runs.start = {"a#1": 1, "a/2": 0, "b": 2}
    tables["t_a"] += [(2, "m", "f"), (3, "m", "f")]
    tables["t_a2"] += [(1, "m", "f")]
    tables["t_b"] += [(3, "m", "f")]
    runs.totals = {"a#1": [2, 0], "a/2": [1, 1], "b": [2, 0]}
    out = runs.whole_run()
    assert out == {
        "a": (RowsCheck(3, 3, 1, 0, 0, 0, False), 1),  # the verification's row of t_a was there before
        "b": (RowsCheck(2, 1, 0, 1, 0, 0, False), 2),  # one acknowledged row is missing
    }


class FakeProbe:
    made: ClassVar[list[dict]] = []

    def __init__(self, dsn: str, **kwargs) -> None:
        FakeProbe.made.append({"dsn": dsn, **kwargs})
        self.samples, self.rss, self.pss = [], [], None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None


class FakeLoadEnv(EnvNamespace):
    """What PostRuns asks of a LoadEnv: its runs (answered with a fixed result) and its bookkeeping."""

    def __init__(self, writer, inserted: list, driver: str = "oha", extra: dict | None = None) -> None:
        self.problems, self.params, self.client_cpus = [], {}, [1]
        self.extra_pids, self.extra_cpu = {}, {}
        self.record = plugin.Recorder(writer, "devices")
        self.calls, self.inserted, self.driver, self.extra = [], inserted, driver, extra or {}

    def _run(self, target, **kwargs):
        self.calls.append(kwargs)
        FakeTable.tables["t_a"].extend(self.inserted)
        load = LoadResult(
            self.driver, "closed", "u", 0.0, 1.0, 3, 3, 0, {}, 1e-6, status_counts={201: 3}, extra=self.extra
        )
        usage = Usage(0.1, 0.0, 1.0, 1, 1, 1)
        return Measurement(load=load, server=usage, client=usage, client_cores=1)

    oha = locust = _run


def test_an_oha_post_run_is_bounded_by_its_requests_and_checked(tables, monkeypatch):
    monkeypatch.setattr(db_runs, "ConnectionProbe", FakeProbe)
    FakeProbe.made = []
    writer = SimpleNamespace(rows=[], write=lambda rows: writer.rows.extend(rows))
    env = FakeLoadEnv(writer, [(2, "m", "f"), (3, "m", "f"), (4, "m", "f")])
    runs = db_runs.PostRuns(
        env, db_runs.Database("dsn", 9, [0], False), {"a": "t_a"}, body={"mac": "m", "firmware": "f"}
    )
    target = SimpleNamespace(key="a", name="a", variant="release", path="/api", params={})
    _, check = runs.oha(target, case="post", requests=3, bound_s=5.0, connections=2, rate=10.0, repeat=1, pss=True)
    assert check == RowsCheck(3, 3, 0, 0, 0, 0, False) and env.problems == []
    assert env.calls == [
        {"case": "post", "duration": 5.0, "repeat": 1, "params": None, "keep": True, "max_requests": 3, "drain": True}
        | {"connections": 2, "method": "POST", "body": '{"mac": "m", "firmware": "f"}', "rate": 10.0}
    ]
    assert FakeProbe.made == [{"dsn": "dsn", "cpus": [1], "pid": 9, "pss": True}]
    assert {r.metric for r in writer.rows} >= {"rows_acked", "rows_found"} and writer.rows[0].params["rate"] == 10.0
    env.inserted = []
    _, check = runs.oha(target, case="warm", requests=3, bound_s=5.0, connections=2, keep=False, per_request=True)
    assert check.lost == 3 and len(FakeProbe.made) == 1  # no probe for an unkept run
    assert env.calls[-1]["per_request"] is True and "rate" not in env.calls[-1] and env.calls[-1]["keep"] is False
    assert env.problems == [f"warm a (repeat 0): rows check failed: {check.describe()}"]


def test_a_locust_post_run_checks_each_id_it_was_given(tables, monkeypatch, tmp_path):
    monkeypatch.setattr(db_runs, "ConnectionProbe", FakeProbe)
    log = tmp_path / "requests.jsonl"
    log.write_text('[1.0, 0.01, 201, 2, "m", "f"]\n[1.1, 0.01, 201, 3, "m", "f"]\n[1.2, 0.01, 503, null, "m", "f"]\n')
    writer = SimpleNamespace(rows=[], write=lambda rows: writer.rows.extend(rows))
    env = FakeLoadEnv(writer, [(2, "m", "f"), (3, "m", "f")], driver="locust", extra={"requests_logs": [str(log)]})
    runs = db_runs.PostRuns(env, db_runs.Database("dsn", None, [], False), {"a": "t_a"}, body={})
    target = SimpleNamespace(key="a", name="a", variant="", path="/api", params={})
    _, check, seen = runs.locust(target, case="ramp", steps=[(2, 1.0), (4, 2.0)], think=0.1, timeout=2.0)
    assert check == RowsCheck(2, 2, 1, 0, 0, 0, True) and seen.acked == [(2, "m", "f"), (3, "m", "f")]
    assert env.calls == [
        {"case": "ramp", "duration": 3.0, "repeat": 0, "params": {"users": 4}}
        | {"steps": [(2, 1.0), (4, 2.0)], "method": "POST", "body": "devices", "think": 0.1, "timeout": 2.0}
    ]
    assert writer.rows[0].params["steps"] == [[2, 1.0], [4, 2.0]] and writer.rows[0].params["users"] == 4


# --- a counting run, with stand-ins for the server, the client and the counters ------------------------------


class FakeCountServer:
    started: ClassVar[list] = []

    def __init__(self, spec, **kwargs) -> None:
        FakeCountServer.started.append((spec, kwargs))
        self.host, self.port, self.pid = "127.0.0.1", 8123, 77
        self.app = SimpleNamespace(name=spec.split(":")[0])
        self.alive_checks = 0

    def check_alive(self) -> None:
        self.alive_checks += 1

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None


class FakeTrace:
    def __init__(self, pid, out, *, tool) -> None:
        self.args, self.counts = (pid, out, tool), {"write": 2000, "read": 1000}

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None


@pytest.fixture
def counting(monkeypatch, tmp_path):
    """Counters that advance by known amounts: 3 allocations, 2 reads and 1 write per request; each batch
    takes 0.5 s untraced, 1.5 s traced."""
    seen = SimpleNamespace(drives=[], tracer="strace")
    state = {"allocs": 0, "reads": 0, "writes": 0}

    def drive(host, port, request, n, depth=1):
        seen.drives.append((host, port, request, n, depth))
        state["allocs"] += 3 * n
        state["reads"] += 2 * n
        state["writes"] += n
        return 1.5 if n == 100 else 0.5

    monkeypatch.setattr(count_runs, "drive", drive)
    monkeypatch.setattr(count_runs, "io_counts", lambda pid: IoCounts(state["reads"], state["writes"]))
    monkeypatch.setattr(count_runs, "read_alloc_counter", lambda port: state["allocs"])
    monkeypatch.setattr(count_runs, "syscall_tracer", lambda: seen.tracer)
    monkeypatch.setattr(count_runs, "SyscallTrace", FakeTrace)
    monkeypatch.setattr(count_runs, "build", lambda spec, log_dir: seen.__dict__.setdefault("built", spec))
    monkeypatch.setattr(count_runs, "Server", FakeCountServer)
    monkeypatch.setattr(count_runs, "free_port", lambda: 9555)
    FakeCountServer.started = []
    writer = SimpleNamespace(rows=[], write=lambda rows: writer.rows.extend(rows))
    fleet = SimpleNamespace(server_cpus=[0], workers=1, database_url=None, env={"A": "1"})
    seen.env = EnvNamespace(
        fleet=fleet, log_dir=tmp_path, problems=[], params={"server_cpus": "0"}, record=plugin.Recorder(writer, "s")
    )
    seen.writer = writer
    return seen


def _count_target(app="hyper_hello"):
    return SimpleNamespace(app=app, key=app, name=app, variant="release", path="/", params={"p": 1}, args=())


def test_a_count_records_per_request_rows_for_each_case(counting):
    plan = count_runs.CountPlan(requests=200, warmup=50, pipelined=(4,), trace_requests=100)
    assert count_runs.count_target(counting.env, _count_target(), plan, case="counts", repeat=2, params={"q": 2})
    spec, kwargs = FakeCountServer.started[0]
    assert counting.built == spec == "hyper_hello:counting"
    assert kwargs["env"] == {"A": "1", count_runs.ALLOC_COUNTER_ENV: "9555"} and kwargs["cpus"] == [0]
    request = count_runs.request_bytes("GET", "/", "127.0.0.1:8123", b"")
    assert [d[3:] for d in counting.drives] == [(50, 1), (200, 1), (100, 1), (50, 4), (200, 4)]
    assert {d[2] for d in counting.drives} == {request}
    rows = {
        (r.case, r.metric, r.params.get("syscall"), r.params["pipeline_depth"]): r.value for r in counting.writer.rows
    }
    assert rows == {
        ("counts", "allocations_per_request", None, 1): 3.0,
        ("counts", "syscalls_per_request", None, 1): 3.0,
        ("counts", "read_syscalls_per_request", None, 1): 2.0,
        ("counts", "write_syscalls_per_request", None, 1): 1.0,
        ("counts", "syscalls_per_request_by_name", "read", 1): 10.0,
        ("counts", "syscalls_per_request_by_name", "write", 1): 20.0,
        ("counts", "syscall_trace_overhead", None, 1): 6.0,  # 1.5 s traced / (0.5 s x 100 / 200) untraced
        ("counts_pipelined", "allocations_per_request", None, 4): 3.0,
        ("counts_pipelined", "syscalls_per_request", None, 4): 3.0,
        ("counts_pipelined", "read_syscalls_per_request", None, 4): 2.0,
        ("counts_pipelined", "write_syscalls_per_request", None, 4): 1.0,
    }
    first = counting.writer.rows[0]
    assert (first.driver, first.repeat, first.implementation, first.variant) == (
        "polyperf-counts",
        2,
        "hyper_hello",
        "release",
    )
    assert {k: v for k, v in first.params.items() if k != "pipeline_depth"} == {
        "server_cpus": "0",
        "p": 1,
        "path": "/",
        "method": "GET",
        "requests": 200,
        "warmup": 50,
        "connections": 1,
        "alloc_counter": "counting allocator (alloc + alloc_zeroed + realloc)",
        "build": "hyper_hello:counting",
        "q": 2,
    }


def test_a_count_without_a_tracer_says_so_and_a_failed_one_is_a_problem(counting):
    counting.tracer = None
    plan = count_runs.CountPlan(requests=100, warmup=10)
    assert count_runs.count_target(counting.env, _count_target("nethttp_devices"), plan, case="c")
    assert {r.params["trace_note"] for r in counting.writer.rows} == {"not traced (neither perf nor strace installed)"}
    assert {r.case for r in counting.writer.rows} == {"c"}
    untraced = count_runs.CountPlan(requests=100, warmup=10, trace=False)
    counting.writer.rows.clear()
    assert count_runs.count_target(counting.env, _count_target("nethttp_devices"), untraced, case="c")
    assert all("trace_note" not in r.params for r in counting.writer.rows)
    assert counting.env.problems == []

    def broken(spec, log_dir):
        raise PolyperfError(f"cargo build of {spec} failed")

    count_runs.build = broken  # restored by the fixture's monkeypatch
    assert not count_runs.count_target(counting.env, _count_target(), plan, case="c")
    assert counting.env.problems == ["c hyper_hello: cargo build of hyper_hello:counting failed"]


# --- pytest_configure: the run directory a session writes into ---------------------------------------------


def _session_config(tmp_path, options: dict, *, benchmark: bool = True):
    values = {
        "--server-cpus": None,
        "--client-cpus": None,
        "--polyperf-run-dir": None,
        "--polyperf-profile": "smoke",
        "--polyperf-out": "out",
        "benchmark_json": None,
        **options,
    }
    return SimpleNamespace(
        option=SimpleNamespace(collectonly=False, benchmark_json=None),
        getoption=lambda name, default=None: values.get(name, default),
        rootpath=tmp_path,
        stash={},
        invocation_params=SimpleNamespace(args=("--polyperf-profile=smoke",)),
        getini=lambda name: [],
        pluginmanager=SimpleNamespace(
            hasplugin=lambda name: benchmark and name == "benchmark", import_plugin=lambda name: None
        ),
    )


@pytest.fixture
def configured(monkeypatch):
    """pytest_configure's global effects (signal handlers, the steps' sink, the config slot) undone after."""
    monkeypatch.setattr(plugin, "_CONFIG", {})
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)
    plugin.steps.set_sink(None)


def test_configure_makes_a_run_directory_it_owns(tmp_path, configured):
    config = _session_config(tmp_path, {})
    plugin.pytest_configure(config)
    run_dir = config.stash[plugin._RUN_DIR]
    assert run_dir.parent == tmp_path / "out" / "runs" and (run_dir / "results.jsonl").exists()
    assert json.loads((run_dir / "env.json").read_text())["profile"] == "smoke"
    assert config.stash[plugin._OWNS_RUN] is True and config.stash[plugin._WRITER].run_dir == run_dir
    assert plugin._CONFIG["config"] is config
    assert config.option.benchmark_json == str(run_dir / "benchmark.json")
    assert signal.getsignal(signal.SIGTERM) is signal.getsignal(signal.SIGHUP) is not signal.SIG_DFL


def test_configure_writes_into_a_given_run_directory_and_keeps_a_chosen_benchmark_file(tmp_path, configured):
    given = tmp_path / "given"
    config = _session_config(tmp_path, {"--polyperf-run-dir": str(given), "benchmark_json": "mine.json"})
    plugin.pytest_configure(config)
    assert config.stash[plugin._RUN_DIR] == given and (given / "logs").is_dir()
    assert config.stash[plugin._OWNS_RUN] is False and not (given / "env.json").exists()
    assert config.option.benchmark_json is None and not (tmp_path / "out").exists()
    plain = _session_config(tmp_path / "p", {}, benchmark=False)
    (tmp_path / "p").mkdir()
    plugin.pytest_configure(plain)
    assert plain.option.benchmark_json is None


def test_configure_does_nothing_when_collecting_or_in_a_worker_and_refuses_overlapping_cpus(tmp_path, configured):
    collecting = _session_config(tmp_path, {})
    collecting.option.collectonly = True
    plugin.pytest_configure(collecting)
    worker = _session_config(tmp_path, {})
    worker.workerinput = {}
    plugin.pytest_configure(worker)
    assert collecting.stash == worker.stash == {} and not (tmp_path / "out").exists()
    with pytest.raises(pytest.UsageError, match="overlap"):
        plugin.pytest_configure(_session_config(tmp_path, {"--server-cpus": "0", "--client-cpus": "0"}))
    assert not (tmp_path / "out").exists()
