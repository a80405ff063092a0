"""The run directory and the tidy table: schema v2 frozen by golden files, base units enforced, partial
results survive, and a run written by polyperf 0.1 (schema v1) loads as v2 through the explicit upgrade."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import polyperf
from polyperf.cli import main
from polyperf.common.atomic import atomic_path, write_text_atomic
from polyperf.record import COLUMNS, SCHEMA_VERSION, Row
from polyperf.record.env import write_env
from polyperf.record.run_dir import (
    RowWriter,
    UnreadableLines,
    finalize_run,
    load_run,
    new_run_dir,
    point_latest,
    resolve_run,
    unreadable_lines,
)

TESTDATA = Path(__file__).parent / "testdata" / "schema"


def test_schema_is_frozen():
    # Changing these breaks every notebook and stored run: bump SCHEMA_VERSION, add an upgrade step and a
    # golden file, and write the change into record/FORMAT.md.
    assert COLUMNS == [
        "run_id",
        "suite",
        "case",
        "implementation",
        "variant",
        "driver",
        "metric",
        "value",
        "unit",
        "repeat",
        "client_bound",
        "params",
    ]
    assert SCHEMA_VERSION == 2


def _golden_rows():
    return [
        Row("io", "parse", "serde_json", "buffered", "seconds", 0.5, "s", 2, {"bytes": 10, "label": "a"}),
        Row("http", "ceiling", "gnet_devices", "", "rps", 40_000.0, "1/s", 0, {"connections": 64}, "oha", True),
    ]


def test_v2_rows_match_the_golden_file(tmp_path):
    run_dir = new_run_dir(tmp_path, "golden")
    RowWriter(run_dir).write(_golden_rows())
    written = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert written == json.loads((TESTDATA / "v2_rows.json").read_text())


def test_rows_round_trip_through_parquet_and_csv(tmp_path):
    run_dir = new_run_dir(tmp_path, "r1")
    RowWriter(run_dir).write(_golden_rows())
    frame = finalize_run(run_dir)
    assert list(frame.columns[: len(COLUMNS)]) == COLUMNS
    schema = pq.read_schema(run_dir / "results.parquet")
    params_type = schema.field("params").type
    assert pa.types.is_map(params_type) and params_type.item_type == pa.string()
    (run_dir / "results.jsonl").unlink()  # the parquet alone, as when a run is shared
    for loaded in (frame, load_run(run_dir)):
        row = loaded.iloc[1]
        assert (row["run_id"], row["driver"], row["client_bound"], row["value"]) == ("r1", "oha", True, 40_000.0)
        assert loaded.iloc[0]["params"] == {"bytes": 10, "label": "a"}
    csv = pd.read_csv(run_dir / "results.csv")
    assert json.loads(csv.loc[0, "params"]) == {"bytes": 10, "label": "a"}


def test_only_base_units_are_accepted():
    with pytest.raises(ValueError, match="not a base unit"):
        Row("s", "c", "i", "v", "latency", 3.0, "ms")


def test_a_cut_line_loses_only_itself(tmp_path):
    run_dir = new_run_dir(tmp_path, "r2")
    RowWriter(run_dir).write([Row("s", "c", "i", "v", "m", 1, "count")])
    with (run_dir / "results.jsonl").open("a") as fh:
        fh.write('{"run_id": "r2", "suite": "s", "va')  # a crash mid-write
    with pytest.warns(UnreadableLines, match=r"1 unreadable line skipped \(line 2\)"):
        assert len(load_run(run_dir)) == 1


def _run_with_bad_lines(tmp_path: Path, bad: list[bytes]) -> Path:
    """Six rows of one series, with `bad` lines after the third (the middle of the file)."""
    run_dir = new_run_dir(tmp_path, "broken")
    writer = RowWriter(run_dir)
    rows = [Row("toy", "sort", "sorted", "", "seconds", 0.1 + i / 100, "s", i) for i in range(6)]
    writer.write(rows[:3])
    with (run_dir / "results.jsonl").open("ab") as fh:
        fh.write(b"".join(line + b"\n" for line in bad))
    writer.write(rows[3:])
    return run_dir


def test_unreadable_lines_in_the_middle_are_skipped_and_counted(tmp_path):
    run_dir = _run_with_bad_lines(tmp_path, [b'{"run_id": "broken", "su', b"\xff\xfe not utf-8", b"[1, 2]"])
    with pytest.warns(UnreadableLines, match=r"3 unreadable lines skipped \(line 4, 5, 6\)"):
        table = load_run(run_dir)
    assert len(table) == 6 and table.attrs["unreadable_lines"] == [4, 5, 6]
    assert sorted(table["repeat"]) == list(range(6))
    assert unreadable_lines(run_dir) == [4, 5, 6]


def test_a_clean_run_warns_nothing(tmp_path):
    run_dir = _run_with_bad_lines(tmp_path, [])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_run(run_dir).attrs["unreadable_lines"] == []


def test_report_says_how_many_lines_it_skipped(tmp_path, capsys):
    run_dir = _run_with_bad_lines(tmp_path, [b"garbage"])
    assert main(["report", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "1 unreadable line skipped" in out
    flagged = (run_dir / "report.html").read_text().split('id="flagged"', 1)[1]
    assert "1 unreadable line skipped" in flagged
    assert "results.jsonl: 1 unreadable line skipped: line 4" in (run_dir / "logs" / "polyperf.log").read_text()
    assert len(pd.read_csv(run_dir / "results.csv")) == 6


def test_atomic_writes_leave_the_old_file_on_failure(tmp_path):
    path = tmp_path / "env.json"
    write_text_atomic(path, '{"a": 1}')
    with pytest.raises(RuntimeError), atomic_path(path) as tmp:
        tmp.write_text('{"a": ')
        raise RuntimeError("killed mid-write")
    assert path.read_text() == '{"a": 1}' and [p.name for p in tmp_path.iterdir()] == ["env.json"]
    write_env(tmp_path, interrupted="SIGTERM")
    assert json.loads(path.read_text()) == {"a": 1, "interrupted": "SIGTERM"}


def test_latest_and_resolution(tmp_path):
    first, second = new_run_dir(tmp_path, "a"), new_run_dir(tmp_path, "b")
    for run_dir in (first, second):
        RowWriter(run_dir).write([Row("s", "c", "i", "v", "m", 1, "count")])
        point_latest(run_dir)
    assert resolve_run(tmp_path) == second.resolve()
    assert resolve_run(tmp_path / "latest") == second.resolve()
    with pytest.raises(FileNotFoundError, match="not a polyperf run"):
        resolve_run(tmp_path / "runs")


def test_values_must_be_numbers():
    with pytest.raises(TypeError, match="must be a number"):
        Row("s", "c", "i", "v", "m", "fast", "s")


def test_a_v1_run_directory_loads_as_v2(tmp_path):
    """`v1_run/` was written by polyperf 0.1 (results.parquet + env.json); `v1_upgraded.json` freezes the upgrade."""
    run_dir = tmp_path / "v1"
    shutil.copytree(TESTDATA / "v1_run", run_dir)
    loaded = polyperf.load_run(run_dir)
    assert set(loaded["schema_version"]) == {2}
    assert set(loaded["unit"]) <= {"s", "bytes", "count", "1/s", "bytes/s", "ratio"}
    got = loaded.drop(columns=["run_id"]).to_dict("records")
    assert got == json.loads((TESTDATA / "v1_upgraded.json").read_text())
    env = polyperf.load_env(run_dir)
    assert env["profile"] == "smoke" and env["schema_version"] == 1


def test_suite_seconds_add_up_each_suites_tests():
    from polyperf.record.env import suite_seconds

    durations = {
        "suites/test_io_buffering.py::test_a[x]": 1.3,
        "suites/test_io_buffering.py::test_b": 2.0,
        "suites/test_bson.py::test_c": 0.5,
    }
    assert suite_seconds(durations) == {"io_buffering": 3.3, "bson": 0.5}
