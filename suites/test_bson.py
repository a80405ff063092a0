"""BSON deserialization (Patrick Freed, "Making slow Rust code fast", 2021). The article's four Rust paths
(clone, document, raw, raw_borrowed) timed and allocation-counted on each dataset, and polyperf's decoder into
Python objects against pymongo's C decoder, scored as the MongoDB driver benchmark spec does (bytes / median
time, MB = 10^6 bytes).

pytest-benchmark gives the rounds and figures; the `*_interleaved` cases time the variants in turn, repeat by
repeat (A B C A B C ...), so drift of this shared machine hits them alike, and the claims use those pairs.
They record `cpu_seconds` (this thread's CPU time, `time.thread_time_ns`) next to wall `seconds`: the work is
single-threaded and CPU-bound, and on a shared 2-core machine wall time also counts other processes' time
slices (the find decoders' wall-time ratio CI spanned 0.8-3.4x where CPU time gave ±5%). The claims use
`cpu_seconds`.

Python decoders allocate thousands of objects, so the cyclic GC runs during them. Left alone, its full
collections walk the whole pytest process (pandas, matplotlib, ...) whenever they happen to trigger, which
swamped the decoders' own work (medians 5-20x slower, CIs spanning 0.4-4.9x). So the process heap is frozen
(`gc.freeze`) for this module and every decode starts after `gc.collect()`: each decoder then pays exactly the
collections its own allocations trigger, as in a small program."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable

import bson
import pytest
from bson.codec_options import CodecOptions
from bson.raw_bson import RawBSONDocument

from polyperf import _native
from polyperf.record.pytest_plugin import describe_benchmark

PATHS = _native.DESERIALIZE_PATHS
DATASETS = _native.BSON_DATASETS
PATHS_IMPL = "bson-rust"
DECODER_IMPL = "python"
ARTICLE_DOCUMENTS = 10_000
_RAW_OPTIONS = CodecOptions(document_class=RawBSONDocument)


def _decode_raw(data: bytes) -> list:
    return bson.decode_all(data, _RAW_OPTIONS)


# variant -> decode_all; "pymongo_raw" is pymongo's lazy RawBSONDocument (context, not a rival).
DECODERS: dict[str, Callable[[bytes], list]] = {
    "pymongo": bson.decode_all,
    "polyperf": _native.bson_decode_all,
    "pymongo_raw": _decode_raw,
}


@pytest.fixture(scope="module", autouse=True)
def frozen_heap():
    """Moves everything alive now out of the collector's sight for this module (see the docstring)."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


def _settle() -> None:
    """Untimed, before each decode: start from empty GC generations."""
    gc.collect()


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
def rounds(profile):
    # Six in smoke: the least at which a median has a 95% interval and a CI gate can see a regression.
    return profile.pick(smoke=6, quick=15, full=30)


@pytest.fixture(scope="module")
def repeats(profile):
    return profile.pick(smoke=6, quick=15, full=41)


def _params(dataset: str, documents: dict[str, int], data: bytes) -> dict:
    return {"dataset": dataset, "documents": documents[dataset], "bytes": len(data)}


@pytest.mark.parametrize("dataset", DATASETS)
@pytest.mark.parametrize("path", PATHS)
def test_path_time(benchmark, path, dataset, replies, documents, rounds):
    reply = replies[dataset]
    describe_benchmark(
        benchmark,
        case="deserialize",
        implementation=PATHS_IMPL,
        variant=path,
        params=_params(dataset, documents, reply),
        bytes_per_round=len(reply),
    )
    result = benchmark.pedantic(_native.deserialize_reply, args=(reply, path), rounds=rounds, warmup_rounds=1)
    assert result.documents == documents[dataset]


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


@pytest.mark.parametrize("dataset", DATASETS)
def test_path_interleaved(dataset, replies, documents, repeats, record):
    """Rust-timed calls, paths in turn; on the article's reply raw < document < clone must show."""
    reply = replies[dataset]
    times: dict[str, list[float]] = {path: [] for path in PATHS}
    for path in PATHS:  # warm-up
        _native.deserialize_reply(reply, path)
    for repeat in range(repeats):
        for path in PATHS:
            cpu_start = time.thread_time_ns()
            result = _native.deserialize_reply(reply, path)
            cpu_seconds = (time.thread_time_ns() - cpu_start) / 1e9
            seconds = result.elapsed_ns / 1e9
            times[path].append(cpu_seconds)
            common = {
                "case": "deserialize_interleaved",
                "implementation": PATHS_IMPL,
                "variant": path,
                "params": _params(dataset, documents, reply),
                "repeat": repeat,
            }
            record("seconds", seconds, "s", **common)
            record("cpu_seconds", cpu_seconds, "s", **common)
            record("bytes_per_s", len(reply) / seconds, "bytes/s", **common)
    if dataset == "find":
        median = {path: statistics.median(t) for path, t in times.items()}
        assert median["raw"] < median["document"] < median["clone"], median


@pytest.mark.parametrize("dataset", DATASETS)
@pytest.mark.parametrize("variant", list(DECODERS))
def test_decode_all_time(benchmark, variant, dataset, streams, documents, rounds):
    data = streams[dataset]
    describe_benchmark(
        benchmark,
        case="decode_all",
        implementation=DECODER_IMPL,
        variant=variant,
        params=_params(dataset, documents, data),
        bytes_per_round=len(data),
    )
    docs = benchmark.pedantic(DECODERS[variant], args=(data,), setup=_settle, rounds=rounds, warmup_rounds=1)
    assert len(docs) == documents[dataset]


@pytest.mark.parametrize("dataset", DATASETS)
def test_decode_all_interleaved(dataset, streams, documents, repeats, record):
    """pymongo vs polyperf (and RawBSONDocument) in turn on the same bytes; equal results first."""
    data = streams[dataset]
    assert _native.bson_decode_all(data) == bson.decode_all(data)
    for decode in DECODERS.values():  # warm-up
        decode(data)
    for repeat in range(repeats):
        for variant, decode in DECODERS.items():
            _settle()
            cpu_start, start = time.thread_time_ns(), time.perf_counter_ns()
            docs = decode(data)
            seconds = (time.perf_counter_ns() - start) / 1e9
            cpu_seconds = (time.thread_time_ns() - cpu_start) / 1e9
            del docs  # freeing is outside the timing, as in pytest-benchmark's rounds
            common = {
                "case": "decode_all_interleaved",
                "implementation": DECODER_IMPL,
                "variant": variant,
                "params": _params(dataset, documents, data),
                "repeat": repeat,
            }
            record("seconds", seconds, "s", **common)
            record("cpu_seconds", cpu_seconds, "s", **common)
            record("bytes_per_s", len(data) / seconds, "bytes/s", **common)
