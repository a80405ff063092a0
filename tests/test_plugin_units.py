"""The pure parts of the suites' pytest plugin (record/pytest_plugin.py), of the database runs' rows
(record/db_runs.py) and of the counting runs (record/count_runs.py), pinned to exact values: how a test's
path names its suite, the CPU-budget option, how a pytest-benchmark result becomes rows, the rows-check
rows, which build counts an app, and syscalls per request."""

from __future__ import annotations

import dataclasses
import os
import subprocess
from types import SimpleNamespace

import pytest

from polyperf.measure.count_parse import IoCounts
from polyperf.measure.rows_check import RowsCheck
from polyperf.record import count_runs, db_runs
from polyperf.record import pytest_plugin as plugin
from polyperf.record.schema import Row


def test_suite_of_a_node_id_or_a_path():
    assert plugin.suite_of("suites/test_io_buffering.py::test_x[a::b]") == "io_buffering"
    assert plugin.suite_of("suites/test_bson.py") == "bson"
    assert plugin.suite_of("other/bench_test_x.py") == "bench_test_x"


def test_quota_option():
    assert plugin._quota(None) == (None, False)
    assert plugin._quota("") == (None, False)
    assert plugin._quota("none") == (None, False)
    assert plugin._quota("auto") == (1.0, True)
    assert plugin._quota("0.5") == (0.5, False)
    with pytest.raises(pytest.UsageError) as info:
        plugin._quota("half")
    assert str(info.value) == "--server-cpu-quota takes a number of CPUs (e.g. 0.5) or auto, not 'half'"
    for bad in ("0", "-1", "nan"):
        with pytest.raises(pytest.UsageError) as info:
            plugin._quota(bad)
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
    assert plugin._plain(None) is None and plugin._plain(True) is True and plugin._plain(2.5) == 2.5
    assert plugin._plain([1]) == "[1]"


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
