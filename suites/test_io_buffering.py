"""era.co, "Unbuffered I/O can make your Rust programs much slower": serde_json through an unbuffered File vs a
BufReader vs a whole-file read, and writes through a bare File vs a BufWriter. Syscall counts are exact facts;
times are benchmarks.

The timed parses and writes run in fresh worker processes, as pyperf does (`polyperf.orchestrate.workers`): each
repeat is a new process holding every mode, warmed up alike and timed in a seeded random order, so the modes pair
by process and an interval carries the spread from one process to the next. Sweeps time each configuration inside
Rust and interleave the configurations repeat by repeat (A B C A B C ...), so slow drift of this shared machine
hits all of them alike."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from polyperf import _native
from polyperf.common.repeats import repeat_numbers
from polyperf.data.geojson import ARTICLE_BYTES, features_json_load, features_orjson_read_all, write_geojson
from polyperf.orchestrate.workers import Plan, Sample, Side, run_workers
from polyperf.record.pytest_plugin import benchmark_from_workers

READ_MODES = ("unbuffered", "buffered", "read_all")
DEFAULT_CAPACITY = 8192


@pytest.fixture(scope="module")
def sizes(profile):
    return profile.pick(
        smoke=[20_000, ARTICLE_BYTES],
        quick=[100_000, 500_000, ARTICLE_BYTES],
        full=[100_000, ARTICLE_BYTES, 20_000_000, 60_000_000],
    )


@pytest.fixture(scope="module")
def bench_size(profile):
    """The file the modes are benchmarked on: the article's size except in smoke."""
    return profile.pick(smoke=200_000, quick=ARTICLE_BYTES, full=ARTICLE_BYTES)


# Each suite sizes its own worker Plan (as suites/test_bson.py does): the numbers and the reasons for them differ.
@pytest.fixture(scope="module")
def worker_plan(profile, load_options):
    # Six worker processes even in smoke: each is an independent repeat, and `polyperf compare` of two smoke runs
    # can tell a regression (a U test needs 4 per side). Nine in quick: nine of nine pairs beyond the bound give the
    # e-process 187 (e = 94), which e-BH declares once a fifth of a 55-test family is declared
    # (`analyse.allocate.first_batch_floor`); the unbuffered parse is tens of times slower, so all nine are, and
    # the run's top-ups add repeats where that is not enough (twelve before the e-process, ~9 s more).
    # One warm-up call per mode in each; the unbuffered parse of the article's file takes ~2 s.
    return Plan(
        processes=profile.pick(smoke=6, quick=9, full=12),
        rounds=profile.pick(smoke=1, quick=1, full=3),
        warmup=1,
        min_round_s=0.01,
        seed=load_options.seed,
    )


@pytest.fixture(scope="module")
def geojson_files(tmp_path_factory, sizes, bench_size) -> dict[int, Path]:
    folder = tmp_path_factory.mktemp("geojson")
    return {size: write_geojson(folder / f"fc-{size}.json", size) for size in sorted({*sizes, bench_size})}


@pytest.mark.parametrize("mode", READ_MODES)
def test_parse_syscalls(mode, geojson_files, record):
    """One parse per mode and size: read syscalls recorded, and the exact shape asserted."""
    checksums = set()
    for size, path in geojson_files.items():
        result = _native.parse_json_file(path, mode, DEFAULT_CAPACITY)
        assert result.bytes == size
        checksums.add(result.checksum)
        expected = {"unbuffered": size, "buffered": math.ceil(size / DEFAULT_CAPACITY)}.get(mode)
        if expected is not None:
            assert expected <= result.read_syscalls <= expected + 2, (size, result.read_syscalls)
        record(
            "read_syscalls",
            result.read_syscalls,
            "count",
            case="parse_syscalls",
            implementation="serde_json",
            variant=mode,
            params={"bytes": size, "capacity": DEFAULT_CAPACITY},
        )
    assert len(checksums) == len(geojson_files)  # different files, different checksums


# (implementation, variant) -> the parse a worker times; the Python parsers are context, not rivals
PYTHON_PEERS = {("python-json", "buffered"): features_json_load, ("orjson", "read_all"): features_orjson_read_all}


@pytest.fixture(scope="module")
def timings(geojson_files, bench_size, worker_plan, profile, tmp_path_factory, run_dir) -> dict[str, list[Sample]]:
    """Every timed parse and write, in the same worker processes (see the module doc): side name -> samples."""
    path = geojson_files[bench_size]
    out = tmp_path_factory.mktemp("writes")
    lines = profile.pick(smoke=2_000, quick=50_000, full=200_000)
    sides = [Side(f"serde_json/{mode}", _native.parse_json_file, (path, mode, DEFAULT_CAPACITY)) for mode in READ_MODES]
    sides += [Side(f"{impl}/{variant}", parse, (path,)) for (impl, variant), parse in PYTHON_PEERS.items()]
    sides += [
        Side(f"std::io/{mode}", _native.write_lines, (out / f"{mode}.txt", lines, 100, mode, DEFAULT_CAPACITY))
        for mode in ("unbuffered", "buffered")
    ]
    samples = run_workers(sides, worker_plan, log_path=run_dir / "logs" / "workers-io_buffering.log")
    by_side: dict[str, list[Sample]] = {side.name: [] for side in sides}
    for sample in samples:
        by_side[sample.side].append(sample)
    return {"lines": lines, **by_side}


@pytest.mark.parametrize("mode", READ_MODES)
def test_parse_time(benchmark, mode, timings, bench_size, worker_plan):
    samples = timings[f"serde_json/{mode}"]
    assert len({s.process for s in samples}) == worker_plan.processes
    benchmark_from_workers(
        benchmark,
        samples,
        case="parse",
        implementation="serde_json",
        variant=mode,
        params={"bytes": bench_size, "capacity": DEFAULT_CAPACITY},
        bytes_per_round=bench_size,
    )


@pytest.mark.parametrize(("implementation", "variant"), list(PYTHON_PEERS))
def test_python_peers(benchmark, implementation, variant, geojson_files, bench_size, timings):
    """Context: what the same file costs parsed into Python objects by Python's own parsers."""
    path = geojson_files[bench_size]
    assert PYTHON_PEERS[implementation, variant](path) == _native.parse_json_file(path, "read_all").features
    benchmark_from_workers(
        benchmark,
        timings[f"{implementation}/{variant}"],
        case="parse",
        implementation=implementation,
        variant=variant,
        params={"bytes": bench_size},
        bytes_per_round=bench_size,
    )


def test_capacity_sweep(geojson_files, bench_size, profile, record):
    """Syscalls ∝ bytes / capacity; time follows until the buffer outgrows the syscall cost."""
    capacities = profile.pick(
        smoke=[64, 1024, 8192, 65536],
        quick=[64, 256, 1024, 4096, 8192, 16384, 65536, 262144, 1 << 20],
        full=[2**k for k in range(6, 21)],
    )
    repeats = profile.pick(smoke=2, quick=5, full=9)
    path = geojson_files[bench_size]
    for repeat in repeat_numbers(repeats):  # a top-up measures new repeats only
        for capacity in capacities:
            result = _native.parse_json_file(path, "buffered", capacity)
            assert math.ceil(bench_size / capacity) <= result.read_syscalls <= math.ceil(bench_size / capacity) + 2
            params = {"bytes": bench_size, "capacity": capacity}
            common = {
                "case": "capacity_sweep",
                "implementation": "serde_json",
                "variant": "buffered",
                "params": params,
                "repeat": repeat,
            }
            record("read_syscalls", result.read_syscalls, "count", **common)
            record("seconds", result.elapsed_ns / 1e9, "s", **common)


def test_size_sweep(geojson_files, profile, record):
    """Time per mode across file sizes (unbuffered grows with bytes at syscall cost per byte)."""
    repeats = profile.pick(smoke=2, quick=2, full=5)  # a shape, not a claim: the timed parses are the workers'
    for repeat in repeat_numbers(repeats):  # a top-up measures new repeats only
        for size, path in geojson_files.items():
            for mode in READ_MODES:
                result = _native.parse_json_file(path, mode, DEFAULT_CAPACITY)
                common = {
                    "case": "size_sweep",
                    "implementation": "serde_json",
                    "variant": mode,
                    "params": {"bytes": size, "capacity": DEFAULT_CAPACITY},
                    "repeat": repeat,
                }
                record("seconds", result.elapsed_ns / 1e9, "s", **common)
                record("read_syscalls", result.read_syscalls, "count", **common)
                record("bytes", result.bytes, "bytes", **common)


@pytest.mark.parametrize("mode", ["unbuffered", "buffered"])
def test_write_syscalls(mode, tmp_path, record):
    """The article's three writes: three syscalls on a File, one through a BufWriter."""
    for lines, line_len in [(3, 16), (10_000, 100)]:
        result = _native.write_lines(tmp_path / "out.txt", lines, line_len, mode, DEFAULT_CAPACITY)
        per_flush = DEFAULT_CAPACITY // line_len
        expected = lines if mode == "unbuffered" else math.ceil(lines / per_flush)
        assert result.write_syscalls == expected
        record(
            "write_syscalls",
            result.write_syscalls,
            "count",
            case="write_syscalls",
            implementation="std::io",
            variant=mode,
            params={"lines": lines, "line_len": line_len, "capacity": DEFAULT_CAPACITY},
        )


@pytest.mark.parametrize("mode", ["unbuffered", "buffered"])
def test_write_time(benchmark, mode, timings, tmp_path):
    lines, line_len = timings["lines"], 100
    assert _native.write_lines(tmp_path / "out.txt", lines, line_len, mode, DEFAULT_CAPACITY).bytes == lines * line_len
    benchmark_from_workers(
        benchmark,
        timings[f"std::io/{mode}"],
        case="write",
        implementation="std::io",
        variant=mode,
        params={"lines": lines, "line_len": line_len, "capacity": DEFAULT_CAPACITY},
        bytes_per_round=lines * line_len,
    )
