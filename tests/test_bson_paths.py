"""polyperf._native.deserialize_reply: the article's four paths agree, count allocations exactly, accept
any reply of the right shape (pymongo-encoded included) and refuse everything else with ValueError."""

from __future__ import annotations

import random
import threading

import bson
import pytest
from bson.int64 import Int64

from polyperf import _native

PATHS = _native.DESERIALIZE_PATHS
DATASETS = _native.BSON_DATASETS
ARTICLE_DOC = {"hello": "world", "anotherKey": "anotherValue", "number": 1234}


def fnv1a(chunks: list[bytes]) -> int:
    h = 0xCBF29CE484222325
    for chunk in chunks:
        for b in chunk:
            h = ((h ^ b) * 0x100000001B3) % 2**64
    return h


def expected_checksum(reply: bytes) -> int:
    """The crate's documented checksum, recomputed from pymongo's decoding of the same bytes."""
    cursor = bson.decode(reply)["cursor"]
    sep = b"\xff"
    chunks = [cursor["ns"].encode() + sep, int(cursor["id"]).to_bytes(8, "little", signed=True)]
    for doc in cursor["firstBatch"]:
        chunks += [
            doc["hello"].encode() + sep,
            doc["anotherKey"].encode() + sep,
            int(doc["number"]).to_bytes(8, "little", signed=True),
        ]
    return fnv1a(chunks)


def pymongo_reply(docs: list[dict], **cursor_extra) -> bytes:
    return bson.encode({"cursor": {"id": 0, "ns": "db.coll", "firstBatch": docs, **cursor_extra}, "ok": 1})


@pytest.mark.parametrize("dataset", DATASETS)
@pytest.mark.parametrize("n", [0, 1, 10, 1000])
def test_paths_agree_on_every_dataset(dataset, n):
    reply = _native.bson_reply(n, dataset)
    results = [_native.deserialize_reply(reply, path) for path in PATHS]
    assert {r.checksum for r in results} == {expected_checksum(reply)}
    assert {r.documents for r in results} == {n}
    assert [r.path for r in results] == list(PATHS)
    assert all(r.bytes == len(reply) and r.elapsed_ns > 0 for r in results)


def test_article_reply_is_what_pymongo_encodes():
    """The generated reply is byte-for-byte pymongo's encoding of the same values."""
    expected = bson.encode({"cursor": {"id": Int64(0), "ns": "db.coll", "firstBatch": [ARTICLE_DOC] * 100}, "ok": 1.0})
    assert _native.bson_reply(100) == expected
    assert _native.bson_documents(3) == bson.encode(ARTICLE_DOC) * 3


@pytest.mark.parametrize("path", PATHS)
def test_pymongo_encoded_replies_of_the_same_shape(path):
    """Other field orders, int32 ids, int64 numbers, an int ok and unknown fields are all accepted."""
    docs = [{"number": Int64(i), "extra": [1, {"x": None}], "anotherKey": "v", "hello": f"w{i}"} for i in range(50)]
    reply = bson.encode(
        {
            "ok": 1,
            "extraTop": "x",
            "cursor": {"firstBatch": docs, "ns": "test.items", "id": 7, "postBatchResumeToken": {}},
        }
    )
    result = _native.deserialize_reply(reply, path)
    assert (result.documents, result.checksum) == (50, expected_checksum(reply))
    same = pymongo_reply([ARTICLE_DOC] * 10)
    ours = _native.bson_reply(10)
    assert _native.deserialize_reply(same, path).checksum == _native.deserialize_reply(ours, path).checksum


def test_allocation_facts():
    reply = _native.bson_reply(10_000)
    counts = {path: _native.deserialize_reply(reply, path) for path in PATHS}
    allocations = {path: r.allocations for path, r in counts.items()}
    # Exact and deterministic: the same call allocates the same again.
    for path in PATHS:
        again = _native.deserialize_reply(reply, path)
        assert (again.allocations, again.allocated_bytes) == (allocations[path], counts[path].allocated_bytes)
    assert allocations["clone"] > allocations["document"] > allocations["raw"] > allocations["raw_borrowed"]
    assert counts["clone"].allocated_bytes > counts["document"].allocated_bytes
    assert counts["raw_borrowed"].allocated_bytes < counts["raw"].allocated_bytes
    # Owned strings: two per document on top of the borrowed path's batch vector.
    assert allocations["raw"] - allocations["raw_borrowed"] >= 2 * 10_000


def test_allocation_counts_ignore_other_threads():
    """Counting is per thread: concurrent calls (the GIL is released) each see only their own work."""
    reply = _native.bson_reply(2_000)
    serial = _native.deserialize_reply(reply, "document").allocations
    seen, stop = [], threading.Event()

    def worker():
        for _ in range(20):
            seen.append(_native.deserialize_reply(reply, "document").allocations)

    def noise():
        while not stop.is_set():
            _native.deserialize_reply(reply, "clone")

    threads = [threading.Thread(target=worker) for _ in range(2)]
    background = threading.Thread(target=noise)
    background.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    background.join()
    assert set(seen) == {serial}


WRONG_SHAPES = {
    "empty": b"",
    "concatenated_documents": _native.bson_documents(2),
    "bare_document": bson.encode(ARTICLE_DOC),
    "not_ok": bson.encode({"cursor": {"id": 0, "ns": "a.b", "firstBatch": []}, "ok": 0}),
    "no_cursor": bson.encode({"ok": 1}),
    "batch_not_array": bson.encode({"cursor": {"id": 0, "ns": "a.b", "firstBatch": {"0": ARTICLE_DOC}}, "ok": 1}),
    "missing_field": pymongo_reply([{"hello": "world", "number": 1}]),
    "number_is_string": pymongo_reply([{**ARTICLE_DOC, "number": "1234"}]),
    "number_is_double": pymongo_reply([{**ARTICLE_DOC, "number": 1234.0}]),
    "hello_is_int": pymongo_reply([{**ARTICLE_DOC, "hello": 1}]),
    "trailing_garbage": _native.bson_reply(2) + b"\x00",
    "truncated": _native.bson_reply(2)[:-3],
    "length_prefix_wrong": b"\xff\x00\x00\x00" + _native.bson_reply(2)[4:],
}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", list(WRONG_SHAPES))
def test_wrong_shapes_and_malformed_bytes_raise_value_error(path, name):
    with pytest.raises(ValueError, match="reply"):
        _native.deserialize_reply(WRONG_SHAPES[name], path)


def test_bytes_like_replies():
    reply = _native.bson_reply(5)
    expected = _native.deserialize_reply(reply, "raw").checksum
    for convert in (bytearray, memoryview):
        assert _native.deserialize_reply(convert(reply), "raw_borrowed").checksum == expected
    with pytest.raises(TypeError):
        _native.deserialize_reply("text", "raw")


def test_unknown_path_and_dataset_raise_value_error():
    with pytest.raises(ValueError, match="unknown deserialize path"):
        _native.deserialize_reply(_native.bson_reply(1), "Raw")
    with pytest.raises(ValueError, match="unknown dataset"):
        _native.bson_reply(1, "huge")


@pytest.mark.parametrize("path", PATHS)
def test_mutated_replies_never_crash(path):
    """Random byte damage: a result (the paths agree then) or ValueError, never a crash."""
    rng = random.Random(path)
    base = _native.bson_reply(3, "types")
    for _ in range(2000):
        raw = bytearray(base)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(raw))
            raw[at] = rng.randrange(256) if rng.random() < 0.7 else raw[at] ^ 0x80
        try:
            result = _native.deserialize_reply(bytes(raw), path)
        except ValueError:
            continue
        assert result.documents == 3
