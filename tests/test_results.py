"""The run directory and the tidy table: schema frozen, partial results survive, loaders upgrade."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from polyperf.results import (
    COLUMNS,
    SCHEMA_VERSION,
    Row,
    RowWriter,
    finalize_run,
    load_run,
    new_run_dir,
    point_latest,
    resolve_run,
)


def test_schema_is_frozen():
    # Changing these breaks every notebook and stored run: bump SCHEMA_VERSION and upgrade in _upgrade.
    assert COLUMNS == ["run_id", "suite", "case", "implementation", "variant", "metric", "value", "unit",
                       "repeat", "params"]
    assert SCHEMA_VERSION == 1


def test_rows_round_trip_through_parquet_and_csv(tmp_path):
    run_dir = new_run_dir(tmp_path, "r1")
    RowWriter(run_dir).write([Row("io", "parse", "serde_json", "buffered", "seconds", 0.5, "s", 2, {"bytes": 10})])
    frame = finalize_run(run_dir)
    assert list(frame.columns[: len(COLUMNS)]) == COLUMNS
    for loaded in (load_run(run_dir), pd.read_parquet(run_dir / "results.parquet"),
                   pd.read_csv(run_dir / "results.csv")):
        row = loaded.iloc[0]
        assert (row["run_id"], row["variant"], row["value"], row["repeat"]) == ("r1", "buffered", 0.5, 2)
        assert json.loads(row["params"]) == {"bytes": 10}


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


def test_values_must_be_numbers(tmp_path):
    with pytest.raises(TypeError, match="must be a number"):
        RowWriter(new_run_dir(tmp_path, "x")).write([Row("s", "c", "i", "v", "m", "fast", "s")])


def test_older_tables_are_upgraded(tmp_path):
    run_dir = tmp_path / "old"
    run_dir.mkdir()
    legacy = pd.DataFrame([{"run_id": "old", "suite": "s", "case": "c", "implementation": "i", "variant": "v",
                            "metric": "m", "value": 3, "unit": "count", "repeat": None, "params": None}])
    legacy.to_parquet(run_dir / "results.parquet")
    loaded = load_run(run_dir)
    assert loaded.loc[0, "schema_version"] == SCHEMA_VERSION
    assert loaded.loc[0, "params"] == "{}"
    assert loaded.loc[0, "repeat"] == 0
