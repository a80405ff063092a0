"""The I/O parsers and writers of polyperf._native: exact syscall facts and every bad input."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys

import pytest

from polyperf import _native
from polyperf.data.geojson import geojson_bytes, write_geojson

MODES = ("unbuffered", "buffered", "read_all")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fc")
    return {size: write_geojson(folder / f"{size}.json", size) for size in (107, 5_000, 65_536, 300_001)}


@pytest.mark.parametrize("size", [107, 5_000, 65_536, 300_001])
def test_unbuffered_reads_one_byte_per_syscall(files, size):
    result = _native.parse_json_file(files[size], "unbuffered")
    # one read per byte, plus the read that finds EOF (serde_json checks for trailing data)
    assert result.read_syscalls == size + 1
    assert result.bytes == size


@pytest.mark.parametrize("size", [5_000, 65_536, 300_001])
@pytest.mark.parametrize("capacity", [1, 64, 1000, 8192, 65_536, 1 << 20])
def test_buffered_reads_ceil_bytes_over_capacity(files, size, capacity):
    result = _native.parse_json_file(files[size], "buffered", capacity)
    assert result.read_syscalls == math.ceil(size / capacity) + 1


def test_read_all_is_constant(files):
    counts = {_native.parse_json_file(path, "read_all").read_syscalls for path in files.values()}
    assert counts == {2}  # read(len) + the read that returns 0 at EOF


def test_checksums_equal_across_modes(files):
    for path in files.values():
        sums = {_native.parse_json_file(path, mode).checksum for mode in MODES}
        assert len(sums) == 1


def test_checksum_reflects_content(tmp_path):
    path = tmp_path / "fc.json"
    path.write_text(
        '{"type":"FeatureCollection","features":['
        '{"type":"Feature","geometry":{"type":"Point","coordinates":[1.5,2]},"properties":{"a":1}},'
        '{"type":"Feature","geometry":{"type":"MultiLineString","coordinates":[[[1,1],[2,2]]]},'
        '"properties":null}]}'
    )
    result = _native.parse_json_file(path, "buffered")
    assert (result.features, result.positions, result.coordinate_sum, result.properties) == (2, 3, 9.5, 1)


@pytest.mark.parametrize(
    ("lines", "line_len", "capacity"),
    [(3, 16, 8192), (1000, 100, 8192), (500, 1, 64), (200, 8192, 8192), (100, 9000, 8192), (1000, 33, 100)],
)
def test_write_syscalls(tmp_path, lines, line_len, capacity):
    out = tmp_path / "out.txt"
    unbuffered = _native.write_lines(out, lines, line_len, "unbuffered", capacity)
    assert unbuffered.write_syscalls == lines
    buffered = _native.write_lines(out, lines, line_len, "buffered", capacity)
    # BufWriter flushes when the next line would not fit; lines >= capacity bypass the buffer
    expected = lines if line_len >= capacity else math.ceil(lines / (capacity // line_len))
    assert buffered.write_syscalls == expected
    assert buffered.bytes == out.stat().st_size == lines * line_len


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed")
@pytest.mark.parametrize("mode", ["unbuffered", "buffered"])
def test_counts_match_strace(tmp_path, mode):
    """Cross-check against strace on a subprocess: reads on the file's descriptor, counted by the kernel tracer."""
    path = write_geojson(tmp_path / "fc.json", 20_000)
    trace = tmp_path / "trace.txt"
    code = f"from polyperf import _native; print(_native.parse_json_file({str(path)!r}, {mode!r}, 1024).read_syscalls)"
    done = subprocess.run(
        ["strace", "-f", "-y", "-e", "trace=read", "-o", str(trace), sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    on_file = [line for line in trace.read_text().splitlines() if f"<{path}>" in line and "read(" in line]
    assert int(done.stdout) == len(on_file)


def test_counts_are_per_thread(files):
    """A concurrent Python thread reading files must not leak into the measured counts."""
    import threading

    stop = threading.Event()

    def noise():
        while not stop.is_set():
            files[5_000].read_bytes()

    thread = threading.Thread(target=noise)
    thread.start()
    try:
        result = _native.parse_json_file(files[65_536], "buffered", 1024)
    finally:
        stop.set()
        thread.join()
    assert result.read_syscalls == 64 + 1


def test_missing_file():
    with pytest.raises(FileNotFoundError, match="no-such-file"):
        _native.parse_json_file("/tmp/no-such-file.json", "buffered")


def test_directory(tmp_path):
    with pytest.raises(IsADirectoryError):
        _native.parse_json_file(tmp_path, "unbuffered")


def test_write_into_missing_directory(tmp_path):
    with pytest.raises(FileNotFoundError):
        _native.write_lines(tmp_path / "nope" / "out.txt", 3, 10, "buffered")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('{"type":"FeatureCollection","features":[', "line 1 column"),
        ('{"type":"FeatureCollection",\n"features":[{"type":"Feature","geometry":nul}]}', "line 2 column"),
        ('{"type":"Feature","features":[]}', "line 1 column"),
        ("[1, 2, 3]", "line 1 column"),
        ('{"type":"FeatureCollection"}', "missing field `features`"),
        (
            '{"type":"FeatureCollection","features":[{"type":"Feature","geometry":'
            '{"type":"Point","coordinates":[[1,2]]}}]}',
            "Point coordinates",
        ),
        ('{"type":"FeatureCollection","features":[]} trailing', "trailing characters"),
        ("", "EOF"),
    ],
)
def test_malformed_json_names_line_and_column(tmp_path, mode, text, fragment):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=r"line [0-9]+ column [0-9]+") as info:
        _native.parse_json_file(path, mode)
    assert fragment in str(info.value)


def test_bad_arguments(files):
    path = files[107]
    with pytest.raises(ValueError, match="unknown read mode"):
        _native.parse_json_file(path, "mmap")
    with pytest.raises(ValueError, match="capacity"):
        _native.parse_json_file(path, "buffered", 0)
    with pytest.raises(ValueError, match="unknown write mode"):
        _native.write_lines(path.with_suffix(".out"), 1, 1, "direct")
    with pytest.raises(ValueError, match="line_len"):
        _native.write_lines(path.with_suffix(".out"), 1, 0, "buffered")
    with pytest.raises(OverflowError):
        _native.parse_json_file(path, "buffered", -1)


def test_generator_exact_sizes_and_valid():
    import json

    for size in (107, 108, 999, 12_345, 2_009_108):
        data = geojson_bytes(size)
        assert len(data) == size
        assert json.loads(data)["type"] == "FeatureCollection"
    assert geojson_bytes(5000) == geojson_bytes(5000)
    with pytest.raises(ValueError, match="at least"):
        geojson_bytes(50)
