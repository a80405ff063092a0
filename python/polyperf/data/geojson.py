"""A deterministic GeoJSON FeatureCollection generator that hits an exact byte size.

The default size is the article's file (2,009,108 bytes). Features mix Points, LineStrings and
Polygons with a few properties, one per line; the last feature carries a padding string so the
document ends exactly at the requested size.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

__all__ = ["ARTICLE_BYTES", "features_json_load", "features_orjson_read_all", "geojson_bytes", "write_geojson"]

ARTICLE_BYTES = 2_009_108
_HEAD = b'{"type":"FeatureCollection","features":[\n'
_TAIL = b"\n]}\n"
_SEP = b",\n"


def _dumps(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=True).encode()


def _position(rng: random.Random) -> list[float]:
    return [round(rng.uniform(-180, 180), 6), round(rng.uniform(-90, 90), 6)]


def _geometry(rng: random.Random, index: int) -> dict:
    kind = index % 3
    if kind == 0:
        return {"type": "Point", "coordinates": _position(rng)}
    if kind == 1:
        return {"type": "LineString", "coordinates": [_position(rng) for _ in range(rng.randint(2, 12))]}
    ring = [_position(rng) for _ in range(rng.randint(3, 10))]
    return {"type": "Polygon", "coordinates": [[*ring, ring[0]]]}


def _feature(rng: random.Random, index: int) -> bytes:
    properties = {"name": f"feature-{index}", "rank": rng.randint(0, 1000), "active": index % 2 == 0}
    return _dumps({"type": "Feature", "id": index, "geometry": _geometry(rng, index), "properties": properties})


def _padding_feature(pad: int) -> bytes:
    return _dumps({"type": "Feature", "geometry": None, "properties": {"padding": "x" * pad}})


_MIN_BYTES = len(_HEAD) + len(_padding_feature(0)) + len(_TAIL)


def geojson_bytes(size: int = ARTICLE_BYTES, seed: int = 1) -> bytes:
    """A FeatureCollection of exactly `size` bytes; the same bytes for the same (size, seed)."""
    if size < _MIN_BYTES:
        raise ValueError(f"a FeatureCollection needs at least {_MIN_BYTES} bytes, asked for {size}")
    rng = random.Random(seed)
    parts = [_HEAD]
    used = len(_HEAD) + len(_TAIL)
    reserve = len(_SEP) + len(_padding_feature(0))
    index = 0
    while True:
        feature = _feature(rng, index)
        if used + len(feature) + reserve + (len(_SEP) if index else 0) > size:
            break
        if index:
            parts.append(_SEP)
            used += len(_SEP)
        parts.append(feature)
        used += len(feature)
        index += 1
    if index:
        parts.append(_SEP)
        used += len(_SEP)
    parts.append(_padding_feature(size - used - len(_padding_feature(0))))
    parts.append(_TAIL)
    data = b"".join(parts)
    if len(data) != size:  # an invariant of the construction above, not a user error
        raise AssertionError(f"generator produced {len(data)} bytes instead of {size}")
    return data


def write_geojson(path: Path, size: int = ARTICLE_BYTES, seed: int = 1) -> Path:
    path = Path(path)
    path.write_bytes(geojson_bytes(size, seed))
    return path


# Python's own parsers of the same file (the io_buffering suite's context), here so that a benchmark worker process
# can import them without importing the suite.
def features_json_load(path: Path) -> int:
    """Features parsed by `json.load` through Python's buffered reader (io.BufferedReader, 8 KiB)."""
    with Path(path).open("rb") as fh:
        return len(json.load(fh)["features"])


def features_orjson_read_all(path: Path) -> int:
    """Features parsed by orjson from the whole file read at once."""
    import orjson

    return len(orjson.loads(Path(path).read_bytes())["features"])
