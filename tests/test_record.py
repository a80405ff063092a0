"""Facts of record/: the row schema and its upgrade, the recorder, the rows of a build and of a load run, the run
directory and env.json. Exact values throughout: every number is computed by hand from the inputs (what
`nox -s mutants` asks of the tests of record/)."""

from __future__ import annotations

import json
import math
import re
import warnings
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from polyperf.build.builder import BuildResult
from polyperf.load.result import LoadResult
from polyperf.measure.sampler import Measurement, Usage
from polyperf.record import env as env_mod
from polyperf.record import run_dir as run_dir_mod
from polyperf.record.recorder import Recorder
from polyperf.record.rows import build_rows, measurement_rows
from polyperf.record.run_dir import (
    RowWriter,
    UnreadableLines,
    finalize_run,
    load_env,
    load_run,
    log_line,
    new_run_dir,
    resolve_run,
    unreadable_lines,
    unreadable_text,
)
from polyperf.record.schema import BASE_UNITS, COLUMNS, SCHEMA_VERSION, Row, as_frame, params_key, upgrade


class ListWriter:
    """A RowWriter that keeps the rows it is given."""

    def __init__(self) -> None:
        self.rows: list[Row] = []

    def write(self, rows: list[Row]) -> None:
        self.rows.extend(rows)


# --- schema ---------------------------------------------------------------------------------------------


def test_row_refuses_a_non_base_unit_naming_the_base_units():
    with pytest.raises(ValueError) as info:
        Row("s", "c", "i", "", "latency", 1.0, "ms")
    assert str(info.value) == (
        f"s/latency: unit 'ms' is not a base unit ({', '.join(sorted(BASE_UNITS))}); convert before recording"
    )
    with pytest.raises(TypeError, match=r"^s/m: value must be a number, got True$"):
        Row("s", "c", "i", "", "m", True, "count")
    with pytest.raises(TypeError, match="got '1'"):
        Row("s", "c", "i", "", "m", "1", "count")
    row = Row("s", "c", "i", "", "m", 3, "count")
    assert (row.repeat, dict(row.params), row.driver, row.client_bound) == (0, {}, "", False)


def test_params_key_is_sorted_and_stringifies_what_json_cannot():
    assert params_key({"b": 1, "a": Path("/x")}) == '{"a": "/x", "b": 1}'
    assert params_key(None) == "{}"
    assert params_key({"b": 1, "a": 2}) == params_key({"a": 2, "b": 1})


def _v1(**rec):
    base = {"suite": "s", "case": "c", "implementation": "i", "repeat": 0, "run_id": "r"}
    return {**base, **rec}


def test_v1_upgrade_converts_units_metrics_driver_and_flag():
    records = [
        _v1(variant="oha/multi", metric="latency_p99_ms", value=2.0, unit="ms", params='{"driver": "oha", "n": 1}'),
        _v1(variant="oha", metric="cpu_us_per_request", value=5.0, unit="us", params={"driver": "oha"}),
        _v1(variant="wrkish", metric="rps", value=7.0, unit="req/s", params={"driver": "wrk", "client_bound": True}),
        _v1(variant="plain", metric="elapsed_ms", value=3.0, unit="s", params={}),
        _v1(variant="", metric="size", value=None, unit="flag", params=None),
        _v1(variant="oha", metric="client_bound", value=1.0, unit="flag", params={}),
    ]
    out = upgrade(records)
    assert len(out) == 5  # the v1 client_bound metric row is dropped: v2 keeps the flag as a column
    a, b, c, d, e = out
    assert (a["variant"], a["driver"], a["metric"], a["unit"]) == ("multi", "oha", "latency_p99_s", "s")
    assert a["value"] == pytest.approx(0.002) and a["params"] == {"n": 1} and a["client_bound"] is False
    assert (b["variant"], b["metric"], b["unit"]) == ("", "cpu_s_per_request", "s")
    assert b["value"] == pytest.approx(5e-6)
    assert (c["variant"], c["driver"], c["unit"], c["value"], c["client_bound"]) == ("wrkish", "wrk", "1/s", 7.0, True)
    assert c["params"] == {}
    assert (d["metric"], d["unit"], d["value"]) == ("elapsed_ms", "s", 3.0)  # only a `_ms` metric in ms is renamed
    assert (e["variant"], e["driver"], e["value"], e["unit"], e["params"]) == ("", "", None, "count", {})
    assert all(r["schema_version"] == 2 for r in out)


def test_v1_percent_and_rates_and_unknown_units():
    out = upgrade(
        [
            _v1(variant="x", metric="server_cpu_percent", value=50.0, unit="%", params={}),
            _v1(variant="x", metric="mb_per_s", value=2.0, unit="MB/s", params={}),
            _v1(variant="x", metric="share", value=25.0, unit="%", params={}),
            _v1(variant="x", metric="odd", value=4.0, unit="bytes", params={}),
        ]
    )
    assert [(r["metric"], r["unit"]) for r in out] == [
        ("server_cpu_share", "ratio"),
        ("bytes_per_s", "bytes/s"),
        ("share", "ratio"),
        ("odd", "bytes"),
    ]
    assert [r["value"] for r in out] == [pytest.approx(0.5), 2e6, pytest.approx(0.25), 4.0]


def test_upgrade_leaves_current_records_alone_and_refuses_newer_ones():
    current = {"metric": "rps", "value": 1.0, "variant": "v", "schema_version": SCHEMA_VERSION}
    assert upgrade([current]) == [current]
    assert upgrade([current])[0] is current
    unversioned = _v1(variant="v", metric="rps", value=1.0, unit="1/s", params={})
    assert upgrade([unversioned])[0]["schema_version"] == 2  # no version: v1
    with pytest.raises(ValueError, match=r"^result written by a newer polyperf \(schema 3 > 2\)$"):
        upgrade([{**current, "schema_version": SCHEMA_VERSION + 1}])


def test_as_frame_types_and_fills_every_column():
    frame = as_frame(
        [
            {"metric": "m", "value": "2.5", "repeat": None, "client_bound": None, "driver": None, "variant": None},
            {"metric": "n", "value": "x", "repeat": "3", "client_bound": True, "driver": "oha", "params": {"a": 1}},
        ]
    )
    assert list(frame.columns) == [*COLUMNS, "schema_version"]
    assert frame["value"].iloc[0] == 2.5 and math.isnan(frame["value"].iloc[1])
    assert frame["repeat"].tolist() == [0, 3] and frame["repeat"].dtype == "int64"
    assert frame["client_bound"].tolist() == [False, True] and frame["client_bound"].dtype == bool
    assert frame["driver"].tolist() == ["", "oha"] and frame["variant"].tolist() == ["", ""]
    assert frame["params"].tolist() == [{}, {"a": 1}]
    assert frame["schema_version"].tolist() == [SCHEMA_VERSION] * 2


# --- recorder -------------------------------------------------------------------------------------------


def test_recorder_writes_one_row_per_call_with_every_field():
    writer = ListWriter()
    record = Recorder(writer, "suite_a")  # type: ignore[arg-type]
    assert record.suite == "suite_a" and record.writer is writer
    record("rps", 10.0, "1/s", case="c", implementation="i")
    record("p", 2.0, "s", case="c2", implementation="j", variant="v", params={"k": 1}, repeat=3, driver="oha",
           client_bound=True)  # fmt: skip
    assert writer.rows == [
        Row("suite_a", "c", "i", "", "rps", 10.0, "1/s", 0, {}, "", False),
        Row("suite_a", "c2", "j", "v", "p", 2.0, "s", 3, {"k": 1}, "oha", True),
    ]


def test_recorder_many_merges_extra_params_over_the_common_ones():
    writer = ListWriter()
    record = Recorder(writer, "s")  # type: ignore[arg-type]
    common = {"case": "c", "implementation": "i", "params": {"a": 1, "b": 1}, "repeat": 2}
    record.many([("x", 1.0, "count", {"b": 2}), ("y", 2.0, "s", {})], **common)
    assert [(r.metric, dict(r.params), r.repeat) for r in writer.rows] == [
        ("x", {"a": 1, "b": 2}, 2),
        ("y", {"a": 1, "b": 1}, 2),
    ]
    assert common["params"] == {"a": 1, "b": 1}  # the caller's dict is left alone
    record.many([("z", 1.0, "count", {"c": 3})], case="c", implementation="i")
    assert dict(writer.rows[-1].params) == {"c": 3}


# --- rows -----------------------------------------------------------------------------------------------


def test_build_rows():
    result = BuildResult("hyper_hello", "release", Path("/bin/x"), 12.5, 2048, True)
    assert build_rows(result) == [
        ("build_seconds", 12.5, "s", {"cached": True, "language": "rust"}),
        ("binary_bytes", 2048.0, "bytes", {"cached": True, "language": "rust"}),
    ]
    assert isinstance(build_rows(result)[1][1], float)


def _measurement(rate: float | None, latency: dict[float, float]) -> Measurement:
    load = LoadResult(
        driver="oha",
        mode="closed",
        url="http://127.0.0.1/",
        started_at=100.0,
        ended_at=104.0,
        requests=400,
        successes=380,
        failures=20,
        latency=latency,
        latency_resolution=1e-6,
        offered_rate=rate,
        errors={"timeout": 5, "connect": 15},
        status_counts={200: 370, 503: 10},
    )
    server = Usage(cpu_seconds=2.0, wait_seconds=1.0, rss_mean=1000.5, rss_peak=2000, threads_max=7, samples=9)
    client = Usage(cpu_seconds=1.0, wait_seconds=3.0, rss_mean=10.0, rss_peak=20, threads_max=2, samples=9)
    return Measurement(load=load, server=server, client=client, client_cores=2)


def test_measurement_rows_in_base_units():
    rows = measurement_rows(_measurement(None, {0.5: 0.001, 0.99: 0.004}))
    # Expected rows spelled out (as in tests/test_plugin_units.py): a table of rows reads best as itself.
    assert rows == [
        ("rps", 100.0, "1/s", {}),
        ("requests", 400.0, "count", {}),
        ("errors", 20.0, "count", {}),
        ("non_2xx", 10.0, "count", {}),
        ("duration_s", 4.0, "s", {}),
        ("cpu_s_per_request", 2.0 / 400, "s", {}),
        ("requests_per_cpu_second", 200.0, "1/s", {}),
        ("server_cpu_share", 0.5, "ratio", {}),
        ("rss_peak_bytes", 2000.0, "bytes", {}),
        ("rss_mean_bytes", 1000.5, "bytes", {}),
        ("server_threads", 7.0, "count", {}),
        ("client_cpu_share", 0.125, "ratio", {}),
        ("client_demand_share", 0.5, "ratio", {}),
        ("server_cpu_wait_share", 0.25, "ratio", {}),
        ("latency_p50_s", 0.001, "s", {}),
        ("latency_p99_s", 0.004, "s", {}),
        ("errors_by_kind", 15.0, "count", {"kind": "connect"}),
        ("errors_by_kind", 5.0, "count", {"kind": "timeout"}),
    ]
    assert all(type(value) is float for _, value, _, _ in rows)


def test_measurement_rows_of_a_fixed_rate_run_with_every_percentile():
    rows = measurement_rows(_measurement(200.0, {0.5: 1.0, 0.9: 2.0, 0.99: 3.0, 0.999: 4.0}))
    names = [metric for metric, *_ in rows]
    assert names[14:19] == ["latency_p50_s", "latency_p90_s", "latency_p99_s", "latency_p999_s", "achieved_rate_ratio"]
    assert rows[18] == ("achieved_rate_ratio", 0.5, "ratio", {})


# --- env.json -------------------------------------------------------------------------------------------


def test_collectors_read_this_machine():
    cpu = env_mod.collect_cpu()
    assert cpu["cpu_count"] >= 1 and cpu["cpu_affinity"] == sorted(cpu["cpu_affinity"]) and cpu["cpu_affinity"]
    model = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name"))
    assert cpu["cpu_model"] == model.split(":", 1)[1].strip()
    total_kib = int(
        next(line for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal:")).split()[1]
    )
    assert env_mod.collect_memory() == {"memory_bytes": total_kib * 1024}
    assert set(env_mod.collect_os()) == {"kernel", "os", "machine"} and all(env_mod.collect_os().values())
    tools = env_mod.collect_toolchains()
    assert tools["python"].count(".") == 2 and tools["cargo"].startswith("cargo ")
    assert tools["rustc"].startswith("rustc ")
    assert env_mod.collect_polyperf()["schema_version"] == SCHEMA_VERSION


def test_command_output_is_none_for_a_missing_tool_or_a_failure():
    assert env_mod._command_output("no-such-tool-polyperf") is None
    assert env_mod._command_output("false") is None
    assert env_mod._command_output("echo", " hi ") == "hi"
    assert env_mod._command_output("pwd", cwd=Path("/")) == "/"


def test_collect_git_reports_the_commit_and_dirtiness(monkeypatch):
    calls = []

    def fake(*cmd, cwd=None):
        calls.append((cmd, cwd))
        return {"rev-parse": "abc", "status": ""}[cmd[1]]

    monkeypatch.setattr(env_mod, "_command_output", fake)
    assert env_mod.collect_git() == {"git_commit": "abc", "git_dirty": False}
    assert calls == [
        (("git", "rev-parse", "HEAD"), env_mod.REPO_ROOT),
        (("git", "status", "--porcelain"), env_mod.REPO_ROOT),
    ]
    monkeypatch.setattr(env_mod, "_command_output", lambda *cmd, cwd=None: " M x" if cmd[1] == "status" else "abc")
    assert env_mod.collect_git()["git_dirty"] is True
    monkeypatch.setattr(env_mod, "_command_output", lambda *cmd, cwd=None: None)
    assert env_mod.collect_git() == {"git_commit": None, "git_dirty": None}


def test_collect_env_survives_a_failing_collector(monkeypatch):
    def broken() -> dict:
        raise OSError("no /proc")

    monkeypatch.setattr(env_mod, "COLLECTORS", [broken, lambda: {"a": 1}])
    assert env_mod.collect_env(b=2) == {"broken_error": "no /proc", "a": 1, "b": 2}


def test_write_env_extends_and_add_note_keeps_each_note_once(tmp_path, monkeypatch):
    monkeypatch.setattr(env_mod, "collect_env", lambda: {"machine": "m"})
    assert env_mod.write_env(tmp_path, profile="quick", when=Path("/x")) == {
        "machine": "m",
        "profile": "quick",
        "when": Path("/x"),
    }
    text = (tmp_path / "env.json").read_text()
    assert text == json.dumps({"machine": "m", "profile": "quick", "when": "/x"}, indent=2, sort_keys=True) + "\n"
    env_mod.write_env(tmp_path, profile="full")
    assert json.loads((tmp_path / "env.json").read_text())["profile"] == "full"
    env_mod.add_note(tmp_path, "no wrk")
    env_mod.add_note(tmp_path, "no perf")
    env_mod.add_note(tmp_path, "no wrk")
    env = json.loads((tmp_path / "env.json").read_text())
    assert env["notes"] == ["no wrk", "no perf"] and env["machine"] == "m"
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    env_mod.add_note(fresh, "first")
    assert json.loads((fresh / "env.json").read_text()) == {"machine": "m", "notes": ["first"]}
    assert pd.api.types.is_list_like(env["notes"])


# --- run directory --------------------------------------------------------------------------------------


def test_new_run_dir_layout_and_no_reuse(tmp_path):
    run_dir = new_run_dir(tmp_path, "r1")
    assert run_dir == tmp_path / "runs" / "r1"
    assert (run_dir / "logs").is_dir() and (run_dir / "results.jsonl").read_bytes() == b""
    with pytest.raises(FileExistsError):
        new_run_dir(tmp_path, "r1")
    fresh = new_run_dir(tmp_path)
    assert fresh.parent == tmp_path / "runs" and len(fresh.name.split("-")) == 3


def test_row_writer_writes_sorted_utf8_json_lines(tmp_path):
    run_dir = new_run_dir(tmp_path, "r")
    RowWriter(run_dir).write([Row("s", "cäse", "i", "v", "m", 2, "count", 1, {"p": Path("/a"), "b": 1}, "oha", True)])
    raw = (run_dir / "results.jsonl").read_bytes()
    expected = {
        "run_id": "r",
        "suite": "s",
        "case": "cäse",
        "implementation": "i",
        "variant": "v",
        "driver": "oha",
        "metric": "m",
        "value": 2.0,
        "unit": "count",
        "repeat": 1,
        "client_bound": True,
        "params": {"b": 1, "p": "/a"},
        "schema_version": SCHEMA_VERSION,
    }
    assert raw.decode("utf-8") == json.dumps(expected, sort_keys=True) + "\n"


def test_unreadable_lines_are_numbered_from_one_and_blank_lines_are_not_counted(tmp_path):
    run_dir = new_run_dir(tmp_path, "r")
    good = json.dumps({"suite": "s", "metric": "m", "value": 1.0, "unit": "count", "schema_version": 2})
    lines = [good.encode(), b"", b"[1]", b"{cut", good.encode(), b"\xff{}", good.encode()]
    (run_dir / "results.jsonl").write_bytes(b"\n".join(lines))
    assert unreadable_lines(run_dir) == [3, 4, 6]
    with pytest.warns(UnreadableLines, match=r"3 unreadable lines skipped \(line 3, 4, 6\)"):
        frame = load_run(run_dir)
    assert len(frame) == 3 and frame.attrs["unreadable_lines"] == [3, 4, 6]


def test_unreadable_text_and_line_lists():
    assert unreadable_text(1) == "1 unreadable line skipped"
    assert unreadable_text(2) == "2 unreadable lines skipped"
    assert unreadable_text(0) == "0 unreadable lines skipped"
    assert run_dir_mod._lines_text([1, 2, 3], shown=2) == "1, 2 and 1 more"
    assert run_dir_mod._lines_text([1, 2], shown=2) == "1, 2"
    assert run_dir_mod._lines_text(list(range(1, 30))) == ", ".join(map(str, range(1, 21))) + " and 9 more"


def test_finalize_logs_every_unreadable_line_once(tmp_path):
    run_dir = new_run_dir(tmp_path, "r")
    good = json.dumps({"suite": "s", "metric": "m", "value": 1.0, "unit": "count", "schema_version": 2})
    (run_dir / "results.jsonl").write_text("\n".join([good, "x"] * 22) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # finalize says nothing itself: whoever loads the run does
        frame = finalize_run(run_dir)
        finalize_run(run_dir)
    assert len(frame) == 22
    lines = (run_dir / "logs" / "polyperf.log").read_text().splitlines()
    numbers = ", ".join(str(n) for n in range(2, 45, 2))
    assert lines == [
        f"results.jsonl: 22 unreadable lines skipped: line {numbers}",
        "results.jsonl: not JSON: line 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34, 36, 38, 40 "
        "and 2 more (first: Expecting value: line 1 column 1 (char 0))",
    ]


def test_log_line_appends_each_text_once_and_never_raises(tmp_path):
    log_line(tmp_path, "a")
    log_line(tmp_path, "b")
    log_line(tmp_path, "a")
    assert (tmp_path / "logs" / "polyperf.log").read_text() == "a\nb\n"
    (tmp_path / "file").write_text("")
    log_line(tmp_path / "file", "c")  # its logs/ cannot be made: silently nothing


def test_parquet_keeps_params_of_any_type_and_the_row_order(tmp_path):
    run_dir = new_run_dir(tmp_path, "r")
    rows = [
        Row("s", "c", "i", "", "m", float(n), "count", n, {"path": Path(f"/p{n}"), "list": [n, "x"]}) for n in range(3)
    ]
    RowWriter(run_dir).write(rows)
    finalize_run(run_dir)
    (run_dir / "results.jsonl").unlink()
    frame = load_run(run_dir)
    assert frame["value"].tolist() == [0.0, 1.0, 2.0] and frame.index.tolist() == [0, 1, 2]
    assert frame["params"].tolist() == [{"path": f"/p{n}", "list": [n, "x"]} for n in range(3)]
    table = pq.read_table(run_dir / "results.parquet")
    assert "__index_level_0__" not in table.column_names
    assert resolve_run(run_dir / "results.parquet") == run_dir.resolve()


def test_load_env_defaults_and_resolve_errors(tmp_path):
    run_dir = new_run_dir(tmp_path, "r")
    assert load_env(run_dir) == {}
    (run_dir / "env.json").write_text(json.dumps({"cpu": "x"}), encoding="utf-8")
    assert load_env(run_dir) == {"cpu": "x", "schema_version": 1, "interrupted": None}
    (run_dir / "env.json").write_text(json.dumps({"schema_version": 2, "interrupted": "SIGINT"}))
    assert load_env(run_dir) == {"schema_version": 2, "interrupted": "SIGINT"}
    with pytest.raises(
        FileNotFoundError, match=r"not a polyperf run directory \(no results.jsonl or results.parquet\)"
    ):
        resolve_run(tmp_path / "runs")


def test_toolchains_and_version_collected_by_name():
    from importlib.metadata import version

    assert env_mod.collect_polyperf() == {"polyperf_version": version("polyperf"), "schema_version": SCHEMA_VERSION}
    tools = env_mod.collect_toolchains()
    assert set(tools) == {"python", "rustc", "cargo", "go"}
    if tools["go"] is not None:
        assert tools["go"].startswith("go version go")


def test_collectors_tolerate_missing_proc_files(monkeypatch):
    real = Path.read_text

    def no_proc(self, *args, **kwargs):
        if str(self).startswith("/proc/"):
            raise FileNotFoundError(self)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", no_proc)
    assert env_mod.collect_memory() == {"memory_bytes": None}
    assert env_mod.collect_cpu()["cpu_model"] is None


def test_cpu_model_keeps_colons_after_the_first(monkeypatch):
    real = Path.read_text
    text = "processor\t: 0\nmodel name\t: Fast: CPU  \nmodel name\t: other\n"
    monkeypatch.setattr(
        Path, "read_text", lambda self, *a, **k: text if str(self) == "/proc/cpuinfo" else real(self, *a, **k)
    )
    assert env_mod.collect_cpu()["cpu_model"] == "Fast: CPU"
    monkeypatch.setattr(
        Path,
        "read_text",
        lambda self, *a, **k: "processor\t: 0\n" if str(self) == "/proc/cpuinfo" else real(self, *a, **k),
    )
    assert env_mod.collect_cpu()["cpu_model"] is None


def test_env_json_is_written_with_sorted_keys(tmp_path, monkeypatch):
    monkeypatch.setattr(env_mod, "collect_env", lambda: {"z": 1, "a": 2})
    env_mod.write_env(tmp_path, m=3)
    assert list(json.loads((tmp_path / "env.json").read_text())) == ["a", "m", "z"]


def test_run_ids_sort_by_time():
    assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{4}", run_dir_mod.new_run_id())


def test_a_parquet_only_run_has_no_unreadable_lines(tmp_path):
    run_dir = new_run_dir(tmp_path, "r")
    RowWriter(run_dir).write([Row("s", "c", "i", "", "m", 1.0, "count")])
    finalize_run(run_dir)
    (run_dir / "results.jsonl").unlink()
    assert unreadable_lines(run_dir) == []
    assert load_run(run_dir).attrs["unreadable_lines"] == []
    header = (run_dir / "results.csv").read_text().splitlines()[0]
    assert header.split(",")[:2] == ["run_id", "suite"]  # no index column


def test_the_unreadable_warning_points_at_the_caller_and_lists_five_lines(tmp_path):
    run_dir = new_run_dir(tmp_path, "r")
    (run_dir / "results.jsonl").write_text("x\n" * 6)
    with pytest.warns(UnreadableLines) as caught:
        load_run(run_dir)
    assert not caught[0].filename.endswith("run_dir.py")  # the caller's line, not load_run's own
    assert str(caught[0].message).endswith("6 unreadable lines skipped (line 1, 2, 3, 4, 5 and 1 more)")


def test_log_line_makes_missing_folders_and_reads_a_garbled_log(tmp_path):
    deep = tmp_path / "a" / "b"
    log_line(deep, "first")
    assert (deep / "logs" / "polyperf.log").read_text() == "first\n"
    (deep / "logs" / "polyperf.log").write_bytes(b"\xff\n")
    log_line(deep, "second")
    assert (deep / "logs" / "polyperf.log").read_bytes() == b"\xff\nsecond\n"
