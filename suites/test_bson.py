"""BSON deserialization (Patrick Freed, "Making slow Rust code fast", 2021). The article's four Rust paths
(clone, document, raw, raw_borrowed) timed and allocation-counted on each dataset, and polyperf's decoder into
Python objects against pymongo's C decoder, scored as the MongoDB driver benchmark spec does (bytes / median
time, MB = 10^6 bytes).

Every timed call runs in fresh worker processes, as pyperf does (`polyperf.orchestrate.workers`): each repeat is
a new process that holds every path and decoder of every dataset, warms each up alike and times them in a seeded
random order each round, so the sides of a claim pair by process and an interval carries the spread from one
process to the next. Each round is given to pytest-benchmark (case `deserialize` / `decode_all`: wall seconds,
its JSON and statistics) and, from the same rounds, recorded as `cpu_seconds` (this thread's CPU time) in the
`*_interleaved` cases: the work is single-threaded and CPU-bound, and on a shared 2-core machine wall time also
counts other processes' time slices (the find decoders' wall-time ratio CI spanned 0.8-3.4x where CPU time gave
±5%). The claims use `cpu_seconds`.

Python decoders allocate thousands of objects, so the cyclic GC runs during them. Each worker freezes its start-up
heap (`gc.freeze`) and collects before every round: each decoder then pays exactly the collections its own
allocations trigger, as in a small program."""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable

import bson
import pytest
from bson.codec_options import CodecOptions
from bson.raw_bson import RawBSONDocument

from polyperf import _native
from polyperf.orchestrate.workers import Plan, Sample, Side, run_workers
from polyperf.record.pytest_plugin import benchmark_from_workers

PATHS = _native.DESERIALIZE_PATHS
DATASETS = _native.BSON_DATASETS
PATHS_IMPL = "bson-rust"
DECODER_IMPL = "python"
ARTICLE_DOCUMENTS = 10_000

# variant -> decode_all; "pymongo_raw" is pymongo's lazy RawBSONDocument (context, not a rival). Module-level
# callables and partials of them: a worker process imports them by reference.
DECODERS: dict[str, Callable[[bytes], list]] = {
    "pymongo": bson.decode_all,
    "polyperf": _native.bson_decode_all,
    "pymongo_raw": functools.partial(bson.decode_all, codec_options=CodecOptions(document_class=RawBSONDocument)),
}


@pytest.fixture(scope="module")
def documents(profile) -> dict[str, int]:
    """Documents per dataset: the article's 10,000 for `find`; the richer sets sized to ~2 MB (quick)."""
    scale = profile.pick(smoke=0.1, quick=1, full=4)
    sized = {"flat": 1_000, "nested": 300, "types": 5_000}
    return {"find": ARTICLE_DOCUMENTS, **{d: max(int(n * scale), 1) for d, n in sized.items()}}


@pytest.fixture(scope="module")
def replies(documents) -> dict[str, bytes]:
    return {d: _native.bson_reply(documents[d], d) for d in DATASETS}


@pytest.fixture(scope="module")
def streams(documents) -> dict[str, bytes]:
    return {d: _native.bson_documents(documents[d], d) for d in DATASETS}


@pytest.fixture(scope="module")
def worker_plan(profile, load_options):
    # Six worker processes even in smoke: each is an independent repeat, and six is the least at which a median or
    # a paired ratio has a 95% interval and a CI gate can see a regression; twelve in quick, where the run's family
    # control needs a sign-test p-value (0.0005 at twelve) well below what six to ten pairs can give. Rounds inside
    # one are its samples.
    return Plan(
        processes=profile.pick(smoke=6, quick=12, full=20),
        rounds=profile.pick(smoke=1, quick=2, full=3),
        warmup=1,
        min_round_s=0.005,
        seed=load_options.seed,
    )


@pytest.fixture(scope="module")
def timings(replies, streams, worker_plan, run_dir) -> dict[str, list[Sample]]:
    """Every path and decoder of every dataset, timed in the same worker processes: side name -> samples."""
    sides = [Side(f"{d}/{path}", _native.deserialize_reply, (replies[d], path)) for d in DATASETS for path in PATHS]
    sides += [Side(f"{d}/{variant}", decode, (streams[d],)) for d in DATASETS for variant, decode in DECODERS.items()]
    by_side: dict[str, list[Sample]] = {side.name: [] for side in sides}
    for sample in run_workers(sides, worker_plan, log_path=run_dir / "logs" / "workers-bson.log"):
        by_side[sample.side].append(sample)
    return by_side


def _params(dataset: str, documents: dict[str, int], data: bytes) -> dict:
    return {"dataset": dataset, "documents": documents[dataset], "bytes": len(data)}


@pytest.mark.parametrize("dataset", DATASETS)
@pytest.mark.parametrize("path", PATHS)
def test_path_time(benchmark, path, dataset, replies, documents, timings):
    reply = replies[dataset]
    assert _native.deserialize_reply(reply, path).documents == documents[dataset]
    benchmark_from_workers(
        benchmark,
        timings[f"{dataset}/{path}"],
        case="deserialize",
        implementation=PATHS_IMPL,
        variant=path,
        params=_params(dataset, documents, reply),
        bytes_per_round=len(reply),
    )


@pytest.mark.parametrize("dataset", DATASETS)
def test_path_allocations(dataset, replies, documents, record):
    """Exact allocation counts (deterministic, so one call each) and the facts they must show."""
    reply = replies[dataset]
    results = {path: _native.deserialize_reply(reply, path) for path in PATHS}
    assert len({r.checksum for r in results.values()}) == 1
    assert results["clone"].allocations > results["document"].allocations
    assert results["raw_borrowed"].allocations < results["raw"].allocations
    for path, result in results.items():
        common = {
            "case": "deserialize",
            "implementation": PATHS_IMPL,
            "variant": path,
            "params": _params(dataset, documents, reply),
        }
        record("allocations", result.allocations, "count", **common)
        record("allocated_bytes", result.allocated_bytes, "bytes", **common)


def _record_cpu(record, samples: list[Sample], params: dict, **common) -> None:
    """Thread CPU seconds per call of worker rounds: the repeat is the process, the round a sample of it."""
    for sample in samples:
        extra = {"iterations": sample.iterations, "round": sample.round}
        record("cpu_seconds", sample.cpu_seconds, "s", repeat=sample.process, params={**params, **extra}, **common)


@pytest.mark.parametrize("dataset", DATASETS)
def test_path_interleaved(dataset, replies, documents, timings, record):
    """The paths' CPU time per call, from the worker rounds; on the article's reply raw < document < clone."""
    reply = replies[dataset]
    for path in PATHS:
        samples = timings[f"{dataset}/{path}"]
        common = {"case": "deserialize_interleaved", "implementation": PATHS_IMPL, "variant": path}
        _record_cpu(record, samples, _params(dataset, documents, reply), **common)
    if dataset == "find":
        median = {path: statistics.median(s.cpu_seconds for s in timings[f"find/{path}"]) for path in PATHS}
        assert median["raw"] < median["document"] < median["clone"], median


# Each benchmark test spells out its own benchmark_from_workers call: the case, implementation and bytes differ.
@pytest.mark.parametrize("dataset", DATASETS)
@pytest.mark.parametrize("variant", list(DECODERS))
def test_decode_all_time(benchmark, variant, dataset, streams, documents, timings):
    data = streams[dataset]
    assert len(DECODERS[variant](data)) == documents[dataset]
    benchmark_from_workers(
        benchmark,
        timings[f"{dataset}/{variant}"],
        case="decode_all",
        implementation=DECODER_IMPL,
        variant=variant,
        params=_params(dataset, documents, data),
        bytes_per_round=len(data),
    )


@pytest.mark.parametrize("dataset", DATASETS)
def test_decode_all_interleaved(dataset, streams, documents, timings, record):
    """pymongo vs polyperf (and RawBSONDocument): equal results first, then their CPU time from the worker rounds."""
    data = streams[dataset]
    assert _native.bson_decode_all(data) == bson.decode_all(data)
    for variant in DECODERS:
        common = {"case": "decode_all_interleaved", "implementation": DECODER_IMPL, "variant": variant}
        _record_cpu(record, timings[f"{dataset}/{variant}"], _params(dataset, documents, data), **common)
