"""The run directory and the tidy table: schema v2 frozen by golden files, base units enforced, partial
results survive, and a run written by polyperf 0.1 (schema v1) loads as v2 through the explicit upgrade."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import polyperf
from polyperf.record import COLUMNS, SCHEMA_VERSION, Row
from polyperf.record.run_dir import RowWriter, finalize_run, load_run, new_run_dir, point_latest, resolve_run

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
    assert len(load_run(run_dir)) == 1


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
