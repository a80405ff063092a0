"""Microbenchmark readers against golden files captured from real runs (criterion JSON, `go test -bench`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from polyperf.measure.microbench import CriterionEstimate, GoBenchLine, parse_go_bench, read_criterion

DATA = Path(__file__).parent / "testdata" / "microbench"
CRITERION = DATA / "criterion"
SHAPES = {"SpawnMany", "YieldMany", "PingPong", "ChainedSpawn"}


def _estimates_ns(full_id: str) -> dict:
    return json.loads((CRITERION / full_id / "new" / "estimates.json").read_text())


def test_reads_every_golden_bench_with_ids_from_benchmark_json():
    found = read_criterion(CRITERION)
    ids = [e.full_id for e in found]
    assert ids == sorted(ids)
    assert {(e.group, e.function) for e in found} >= {("old_threadpool", "ping_pong"), ("multi_thread", "spawn_many")}
    assert all(e.value is None for e in found)


@pytest.mark.parametrize("full_id", ["old_threadpool/ping_pong", "multi_thread/spawn_many"])
def test_estimates_are_converted_from_ns_to_seconds(full_id):
    raw = _estimates_ns(full_id)
    (est,) = [e for e in read_criterion(CRITERION) if e.full_id == full_id]
    mean = raw["mean"]
    assert est.mean_s == pytest.approx(mean["point_estimate"] * 1e-9)
    assert est.mean_lower_s == pytest.approx(mean["confidence_interval"]["lower_bound"] * 1e-9)
    assert est.mean_upper_s == pytest.approx(mean["confidence_interval"]["upper_bound"] * 1e-9)
    assert est.median_s == pytest.approx(raw["median"]["point_estimate"] * 1e-9)
    assert est.confidence_level == 0.95
    assert est.mean_lower_s <= est.mean_s <= est.mean_upper_s
    assert est.median_lower_s <= est.median_s <= est.median_upper_s
    # Linear sampling: criterion's headline is the slope, and typical_s follows it.
    assert est.slope_s == pytest.approx(raw["slope"]["point_estimate"] * 1e-9)
    assert est.typical_s == est.slope_s


def test_sample_counts_come_from_sample_json():
    (est,) = [e for e in read_criterion(CRITERION) if e.full_id == "old_threadpool/ping_pong"]
    sample = json.loads((CRITERION / "old_threadpool/ping_pong/new/sample.json").read_text())
    assert est.samples == len(sample["iters"]) == 10
    assert est.iterations == sum(sample["iters"])


def test_missing_metadata_falls_back_to_directory_names(tmp_path):
    bench = tmp_path / "current_thread" / "yield_many" / "new"
    bench.mkdir(parents=True)
    shutil.copy(CRITERION / "old_threadpool/ping_pong/new/estimates.json", bench)
    (est,) = read_criterion(tmp_path)
    assert (est.group, est.function, est.full_id) == ("current_thread", "yield_many", "current_thread/yield_many")
    assert est.samples is None and est.iterations is None


def test_flat_sampling_without_slope_reports_the_mean(tmp_path):
    bench = tmp_path / "g" / "f" / "new"
    bench.mkdir(parents=True)
    raw = _estimates_ns("old_threadpool/ping_pong")
    raw["slope"] = None
    (bench / "estimates.json").write_text(json.dumps(raw))
    (est,) = read_criterion(tmp_path)
    assert est.slope_s is None
    assert est.typical_s == est.mean_s


def test_corrupt_estimates_name_the_file(tmp_path):
    bench = tmp_path / "g" / "f" / "new"
    bench.mkdir(parents=True)
    (bench / "estimates.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"estimates\.json"):
        read_criterion(tmp_path)


def test_empty_directory_has_no_estimates(tmp_path):
    assert read_criterion(tmp_path) == []
    assert all(isinstance(e, CriterionEstimate) for e in read_criterion(CRITERION))


def test_go_bench_golden_output():
    lines = parse_go_bench((DATA / "go_schedbench.txt").read_text())
    # 4 benchmarks x -cpu 1,2 x -count 3
    assert len(lines) == 24
    assert {line.name for line in lines} == SHAPES
    assert {line.procs for line in lines} == {1, 2}
    assert all(line.pkg == "polyperf/go_apps/internal/schedbench" for line in lines)
    first = lines[0]
    assert (first.name, first.procs, first.iterations) == ("SpawnMany", 1, 100)
    assert first.seconds_per_op == pytest.approx(24716100e-9)
    assert (first.bytes_per_op, first.allocs_per_op) == (224761, 10127)
    # A deterministic fact of the shapes: one allocation per goroutine (+ the countdown and its channel).
    assert all(line.allocs_per_op >= 10_000 for line in lines if line.name == "SpawnMany")
    assert all(line.allocs_per_op == 1002 for line in lines if line.name == "ChainedSpawn")


def test_go_bench_line_variants():
    text = "\n".join(
        [
            "goos: linux",
            "pkg: example/p",
            "BenchmarkParse/small-8   \t 2000\t  512.5 ns/op\t  99.90 MB/s\t  64 B/op\t  2 allocs/op",
            "BenchmarkPlain 10 1.5e+06 ns/op",
            "BenchmarkLogged-2 some log output without a unit",
            "--- BENCH: BenchmarkLogged-2",
            "PASS",
        ]
    )
    assert parse_go_bench(text) == [
        GoBenchLine("Parse/small", 8, 2000, pytest.approx(512.5e-9), 64, 2, "example/p", {"MB/s": 99.9}),
        GoBenchLine("Plain", 1, 10, pytest.approx(1.5e-3), None, None, "example/p", {}),
    ]
