"""polyperf._native.bson_decode / bson_decode_all against pymongo's C decoder: equal values, types and
key order on everything pymongo encodes; an error (BsonDecodeError, a ValueError) wherever pymongo
rejects the bytes; never a crash."""

from __future__ import annotations

import datetime
import math
import struct
import threading

import bson
import pytest
from bson.binary import Binary
from bson.code import Code
from bson.dbref import DBRef
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.max_key import MaxKey
from bson.min_key import MinKey
from bson.objectid import ObjectId
from bson.regex import Regex
from bson.timestamp import Timestamp
from bson_bytes import GOOD, LEGACY, MALFORMED, doc_bytes, element, nested
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polyperf import _native

pytestmark = pytest.mark.skipif(not bson.has_c(), reason="the reference is pymongo's C decoder")

DecodeError = _native.BsonDecodeError


def assert_same(ours, theirs, path="$"):
    """Equal values of identical types, dict keys in the same order, recursively (NaN equals NaN)."""
    assert type(ours) is type(theirs), f"{path}: {type(ours).__name__} vs {type(theirs).__name__}"
    if isinstance(theirs, dict):
        assert list(ours) == list(theirs), f"{path}: key order"
        for key in theirs:
            assert_same(ours[key], theirs[key], f"{path}.{key}")
    elif isinstance(theirs, list):
        assert len(ours) == len(theirs), f"{path}: length"
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            assert_same(a, b, f"{path}[{i}]")
    elif isinstance(theirs, float) and math.isnan(theirs):
        assert math.isnan(ours), path
    elif isinstance(theirs, Code):
        assert str(ours) == str(theirs), path
        assert_same(ours.scope, theirs.scope, f"{path}.scope")
    elif isinstance(theirs, DBRef):
        assert (ours.collection, ours.database) == (theirs.collection, theirs.database), path
        assert_same(ours.id, theirs.id, f"{path}.$id")
        assert_same(ours.as_doc(), theirs.as_doc(), f"{path}.as_doc()")
    else:
        assert ours == theirs, path


def check_like_pymongo(data: bytes) -> None:
    """Both decoders on the same bytes: the same result, or both refuse them."""
    for ours_fn, theirs_fn in ((_native.bson_decode, bson.decode), (_native.bson_decode_all, bson.decode_all)):
        try:
            expected = theirs_fn(data)
        except Exception as err:  # pymongo raises InvalidBSON (and, in corners, other errors)
            with pytest.raises(DecodeError):
                ours_fn(data)
            assert not isinstance(err, MemoryError)
            continue
        assert_same(ours_fn(data), expected)


# --- generated documents --------------------------------------------------------------------------

keys = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=12)
texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
millis = st.integers(-62_135_596_800_000, 253_402_300_799_999)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1).map(Int64),
    st.integers(2**31, 2**63 - 1),  # Python ints beyond int32 are encoded as int64
    st.floats(allow_nan=True, allow_infinity=True),
    texts,
    st.binary(max_size=40),
    st.builds(Binary, st.binary(max_size=40), st.integers(1, 255)),
    st.binary(min_size=12, max_size=12).map(ObjectId),
    millis.map(lambda ms: datetime.datetime(1970, 1, 1) + datetime.timedelta(milliseconds=ms)),
    st.builds(
        Regex,
        st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=10),
        st.sampled_from([0, 2, 8, 16, 32, 64, 2 | 8 | 64]),
    ),
    st.builds(Timestamp, st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)),
    st.binary(min_size=16, max_size=16).map(Decimal128.from_bid),
    st.builds(Code, texts),
    st.just(MinKey()),
    st.just(MaxKey()),
)


def _containers(children):
    documents = st.dictionaries(keys, children, max_size=6)
    return st.one_of(
        st.lists(children, max_size=6),
        documents,
        st.builds(Code, texts, documents),
        st.builds(DBRef, texts, children, st.none() | texts),
    )


values = st.recursive(scalars, _containers, max_leaves=30)
documents = st.dictionaries(keys, values, max_size=8)


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_generated_documents_decode_like_pymongo(doc):
    data = bson.encode(doc)
    assert_same(_native.bson_decode(data), bson.decode(data))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(documents, max_size=5))
def test_generated_streams_decode_like_pymongo(docs):
    data = b"".join(bson.encode(d) for d in docs)
    assert_same(_native.bson_decode_all(data), bson.decode_all(data))


@pytest.mark.slow
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents, st.data())
def test_mutated_bytes_behave_like_pymongo(doc, data):
    """Flip, overwrite, insert, delete and truncate bytes: if pymongo refuses, so do we; else equal."""
    raw = bytearray(bson.encode(doc))
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate"]))
        at = data.draw(st.integers(0, max(len(raw) - 1, 0)))
        if op == "flip" and raw:
            raw[at] ^= 1 << data.draw(st.integers(0, 7))
        elif op == "set" and raw:
            raw[at] = data.draw(st.sampled_from([0, 1, 0x7F, 0x80, 0xFF, data.draw(st.integers(0, 255))]))
        elif op == "insert":
            raw[at:at] = data.draw(st.binary(min_size=1, max_size=4))
        elif op == "delete" and raw:
            del raw[at : at + data.draw(st.integers(1, 4))]
        elif op == "truncate":
            del raw[at:]
    check_like_pymongo(bytes(raw))


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=64))
def test_random_bytes_behave_like_pymongo(data):
    check_like_pymongo(data)


@pytest.mark.parametrize("dataset", _native.BSON_DATASETS)
def test_generated_datasets_decode_like_pymongo(dataset):
    data = _native.bson_documents(50, dataset)
    assert_same(_native.bson_decode_all(data), bson.decode_all(data))
    reply = _native.bson_reply(20, dataset)
    assert_same(_native.bson_decode(reply), bson.decode(reply))


def test_every_type_has_pymongos_class():
    (doc,) = _native.bson_decode_all(_native.bson_documents(1, "types"))
    expected = {
        "double": float,
        "string": str,
        "document": dict,
        "array": list,
        "binary": bytes,
        "uuid": Binary,
        "objectId": ObjectId,
        "bool": bool,
        "datetime": datetime.datetime,
        "null": type(None),
        "regex": Regex,
        "int32": int,
        "timestamp": Timestamp,
        "int64": Int64,
        "decimal128": Decimal128,
    }
    assert {k: type(doc[k]) for k in expected} == expected
    assert doc["datetime"].tzinfo is None  # pymongo's default CodecOptions: tz_aware=False, naive UTC


@pytest.mark.parametrize("name", list(LEGACY))
def test_hand_made_valid_documents_decode_like_pymongo(name):
    data = LEGACY[name]
    assert_same(_native.bson_decode(data), bson.decode(data))
    assert_same(_native.bson_decode_all(data * 2), bson.decode_all(data * 2))


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_bytes_raise_with_offset(name):
    data = MALFORMED[name]
    with pytest.raises(Exception):  # noqa: B017 - pymongo must refuse them too (InvalidBSON)
        bson.decode(data)
    for decode in (_native.bson_decode, _native.bson_decode_all):
        if decode is _native.bson_decode_all and name == "empty":
            continue  # an empty stream is valid: no documents
        with pytest.raises(ValueError, match=r"byte offset \d+") as info:
            decode(data)
        assert isinstance(info.value, DecodeError)
        assert 0 <= info.value.offset <= len(data)


def test_streams_need_whole_documents():
    assert _native.bson_decode_all(b"") == [] == bson.decode_all(b"")
    for data in (GOOD + b"\x00", GOOD + GOOD[:-1], GOOD + b"\x05\x00\x00\x00"):
        with pytest.raises(Exception):  # noqa: B017
            bson.decode_all(data)
        with pytest.raises(DecodeError):
            _native.bson_decode_all(data)


def test_nesting_up_to_the_limit_decodes_on_a_small_stack():
    """The depth cap keeps recursion shallow enough for a 512 KiB thread stack."""
    limit = _native.BSON_MAX_DEPTH
    deep = nested(limit)
    outcome = {}

    def work():
        outcome["ok"] = _native.bson_decode(deep)
        try:
            _native.bson_decode(nested(limit + 1))
        except DecodeError as err:
            outcome["err"] = err

    previous = threading.stack_size(512 * 1024)
    try:
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
    finally:
        threading.stack_size(previous)
    assert "nested deeper" in str(outcome["err"])
    depth, node = 0, outcome["ok"]
    while node:
        node, depth = node["k"], depth + 1
    assert depth == limit - 1


def test_offsets_point_at_the_problem():
    data = doc_bytes(element(0x10, b"a", b"\x01\0\0\0") + element(0x08, b"b", b"\x05"))
    with pytest.raises(DecodeError, match="boolean") as info:
        _native.bson_decode(data)
    assert info.value.offset == 4 + 7 + 3  # header, the int32 element, the bool's tag and key
    second = len(GOOD)
    with pytest.raises(DecodeError) as info:
        _native.bson_decode_all(GOOD + MALFORMED["bool_two"])
    assert info.value.offset > second


@pytest.mark.parametrize("convert", [bytearray, memoryview])
def test_bytes_like_inputs_decode_like_pymongo(convert):
    data = _native.bson_documents(5, "types")
    assert_same(_native.bson_decode_all(convert(data)), bson.decode_all(convert(data)))
    first = data[: struct.unpack_from("<i", data)[0]]
    assert_same(_native.bson_decode(convert(first)), bson.decode(convert(first)))


def test_text_is_not_bytes():
    with pytest.raises(TypeError):
        _native.bson_decode("not bytes")


def test_fast_constructors_build_pymongos_objects():
    """The slot-filling constructors passed their self-check, and what they build pickles, copies and
    prints exactly like pymongo's own objects."""
    import copy
    import pickle

    assert all(dict(_native._bson_fast_paths()).values()), _native._bson_fast_paths()
    data = _native.bson_documents(20, "types")
    ours, theirs = _native.bson_decode_all(data), bson.decode_all(data)
    assert repr(ours) == repr(theirs)
    assert pickle.loads(pickle.dumps(ours)) == theirs
    assert copy.deepcopy(ours) == theirs
    assert bson.encode(ours[0]) == bson.encode(theirs[0]) == data[: len(bson.encode(theirs[0]))]


def test_threads_decoding_at_once_agree():
    """Python-level constructors (Code, DBRef) can switch threads mid-decode; the shared name cache is
    then held by one call and the others use private ones: every result stays right."""
    import sys

    doc = {
        "code": Code("f()", {"k": 1}),
        "ref": DBRef("c", 1, "d", extra=2),
        "n": list(range(50)),
        **{f"name_{i}": i for i in range(300)},
    }
    data = bson.encode(doc) * 20
    expected = bson.decode_all(data)
    failures = []

    def work():
        for _ in range(30):
            if _native.bson_decode_all(data) != expected:
                failures.append(1)

    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(previous)
    assert not failures
