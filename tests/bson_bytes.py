"""Hand-made BSON bytes for the decoder tests: valid legacy types and malformed documents."""

from __future__ import annotations

import struct

import bson

# --- hand-made bytes ------------------------------------------------------------------------------


def doc_bytes(body: bytes) -> bytes:
    """A document around `body` (the elements), with a correct length prefix and terminator."""
    return struct.pack("<i", len(body) + 5) + body + b"\x00"


def element(tag: int, key: bytes, payload: bytes) -> bytes:
    return bytes([tag]) + key + b"\x00" + payload


def bson_string(s: bytes) -> bytes:
    return struct.pack("<i", len(s) + 1) + s + b"\x00"


LEGACY = {
    "undefined": doc_bytes(element(0x06, b"u", b"")),
    "symbol": doc_bytes(element(0x0E, b"s", bson_string(b"sym"))),
    "dbpointer": doc_bytes(element(0x0C, b"p", bson_string(b"db.coll") + bytes(range(12)))),
    "code": doc_bytes(element(0x0D, b"c", bson_string(b"function(){}"))),
    "code_w_scope": doc_bytes(
        element(
            0x0F,
            b"c",
            struct.pack("<i", 4 + 4 + 2 + 12) + bson_string(b"x") + doc_bytes(element(0x10, b"a", b"\x01\x00\x00\x00")),
        )
    ),
    "binary_old": doc_bytes(element(0x05, b"b", struct.pack("<i", 7) + b"\x02" + struct.pack("<i", 3) + b"abc")),
    "empty_string_key": doc_bytes(element(0x10, b"", b"\x07\x00\x00\x00")),
    "embedded_nul_in_string": doc_bytes(element(0x02, b"s", bson_string(b"a\x00b"))),
    "array_with_odd_keys": doc_bytes(
        element(0x04, b"a", doc_bytes(element(0x10, b"x\xff", b"\x01\0\0\0") + element(0x10, b"9", b"\x02\0\0\0")))
    ),
    "regex_unknown_flags": doc_bytes(element(0x0B, b"r", b"a.c\x00zimq\x00")),
    "dbref_with_db": bson.encode({"r": {"$ref": "c", "$id": 1, "$db": "d", "extra": True}}),
    "dbref_non_string_ref": bson.encode({"r": {"$ref": 5, "$id": 1}}),
    "dbref_null_db": bson.encode({"r": {"$ref": "c", "$id": 1, "$db": None}}),
    "dbref_in_array": bson.encode({"r": [{"$id": 2, "$ref": "c"}]}),
    "top_level_dbref_stays_dict": bson.encode({"$ref": "c", "$id": 1}),
    "duplicate_keys": doc_bytes(
        element(0x10, b"k", b"\x01\0\0\0") + element(0x10, b"j", b"\x02\0\0\0") + element(0x10, b"k", b"\x03\0\0\0")
    ),
    "datetime_min": doc_bytes(element(0x09, b"d", struct.pack("<q", -62_135_596_800_000))),
    "datetime_max": doc_bytes(element(0x09, b"d", struct.pack("<q", 253_402_300_799_999))),
    "datetime_negative_millis": doc_bytes(element(0x09, b"d", struct.pack("<q", -1))),
    "minkey_maxkey": doc_bytes(element(0xFF, b"lo", b"") + element(0x7F, b"hi", b"")),
}


GOOD = doc_bytes(element(0x02, b"k", bson_string(b"value")))


def nested(depth: int, tag: int = 0x03) -> bytes:
    inner = doc_bytes(b"")
    for _ in range(depth - 1):
        inner = doc_bytes(element(tag, b"0" if tag == 0x04 else b"k", inner))
    return inner


MALFORMED = {
    "empty": b"",
    "too_short": b"\x05\x00\x00",
    "truncated": GOOD[:-1],
    "length_too_large": struct.pack("<i", len(GOOD) + 1) + GOOD[4:],
    "length_too_small": struct.pack("<i", 4) + GOOD[4:],
    "length_negative": struct.pack("<i", -1) + GOOD[4:],
    "missing_terminator": GOOD[:-1] + b"\x01",
    "trailing_garbage": GOOD + b"\x00",
    "string_length_too_long": doc_bytes(element(0x02, b"k", struct.pack("<i", 100) + b"abc\x00")),
    "string_length_zero": doc_bytes(element(0x02, b"k", struct.pack("<i", 0) + b"\x00")),
    "string_length_negative": doc_bytes(element(0x02, b"k", struct.pack("<i", -5) + b"abc\x00")),
    "string_missing_nul": doc_bytes(element(0x02, b"k", struct.pack("<i", 4) + b"abcd")),
    "bad_utf8_value": doc_bytes(element(0x02, b"k", bson_string(b"\xff\xfe"))),
    "bad_utf8_surrogate": doc_bytes(element(0x02, b"k", bson_string(b"\xed\xa0\x80"))),
    "bad_utf8_key": doc_bytes(element(0x10, b"k\xc3", b"\x01\0\0\0")),
    "bad_utf8_regex": doc_bytes(element(0x0B, b"r", b"\xff\x00i\x00")),
    "bad_utf8_regex_flags": doc_bytes(element(0x0B, b"r", b"a\x00\xff\x00")),
    "key_without_terminator": struct.pack("<i", 8) + b"\x10ab\x00",
    "unknown_type": doc_bytes(element(0x14, b"k", b"\x01\0\0\0")),
    "unknown_type_zero": doc_bytes(element(0x00, b"k", b"")),
    "unknown_type_high": doc_bytes(element(0x80, b"k", b"")),
    "int32_truncated": doc_bytes(element(0x10, b"k", b"\x01\x00")),
    "double_truncated": doc_bytes(element(0x01, b"k", b"\x00" * 7)),
    "bool_two": doc_bytes(element(0x08, b"k", b"\x02")),
    "datetime_out_of_range": doc_bytes(element(0x09, b"d", struct.pack("<q", 253_402_300_800_000))),
    "datetime_before_year_1": doc_bytes(element(0x09, b"d", struct.pack("<q", -62_135_596_800_001))),
    "subdocument_too_long": doc_bytes(element(0x03, b"d", struct.pack("<i", 50) + b"\x00")),
    "subdocument_too_short": doc_bytes(element(0x03, b"d", struct.pack("<i", 4) + b"\x00\x00\x00\x00\x00")),
    "subdocument_missing_terminator": doc_bytes(element(0x03, b"d", struct.pack("<i", 5) + b"\x01")),
    "array_element_overruns": doc_bytes(
        element(0x04, b"a", struct.pack("<i", 10) + element(0x10, b"0", b"\x01\0\0\0") + b"\x00")
    ),
    "binary_too_long": doc_bytes(element(0x05, b"b", struct.pack("<i", 99) + b"\x00abc")),
    "binary_negative_length": doc_bytes(element(0x05, b"b", struct.pack("<i", -1) + b"\x00abc")),
    "binary_old_inner_mismatch": doc_bytes(
        element(0x05, b"b", struct.pack("<i", 7) + b"\x02" + struct.pack("<i", 4) + b"abc")
    ),
    "objectid_truncated": doc_bytes(element(0x07, b"o", b"\x01" * 11)),
    "regex_unterminated": doc_bytes(element(0x0B, b"r", b"abc")),
    "code_w_scope_length_mismatch": doc_bytes(
        element(0x0F, b"c", struct.pack("<i", 99) + bson_string(b"x") + doc_bytes(b""))
    ),
    "code_w_scope_scope_too_short": doc_bytes(
        element(0x0F, b"c", struct.pack("<i", 4 + 6 + 4) + bson_string(b"x") + struct.pack("<i", 4))
    ),
    "dbpointer_truncated": doc_bytes(element(0x0C, b"p", bson_string(b"c") + b"\x01" * 5)),
    "nested_too_deep": nested(100_000),
    "arrays_nested_too_deep": nested(100_000, tag=0x04),
}
