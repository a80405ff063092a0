"""`polyperf audit`: the strace parser on real captures (tests/testdata/strace/, see capture.sh there), the
summary's flag, and live audits of the extension's unbuffered and buffered parsers."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from polyperf.errors import PolyperfError, ToolchainMissing
from polyperf.measure import syscall_audit
from polyperf.measure.syscall_audit import audit, bucket, parse_strace, summarize

GOLDEN = Path(__file__).parent / "testdata" / "strace"
CAPTURED = "/tmp/polyperf-strace-golden"
needs_strace = pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed")


@pytest.fixture(scope="module")
def threads():
    return parse_strace((GOLDEN / "threads.txt").read_text())


@pytest.fixture(scope="module")
def stacks():
    return parse_strace((GOLDEN / "stack.txt").read_text())


@pytest.mark.parametrize("name", ["threads.txt", "stack.txt"])
def test_every_traced_call_is_parsed_once(name):
    """Each call starts on exactly one line (complete or `<unfinished ...>`); its `resumed>` half adds none."""
    text = (GOLDEN / name).read_text()
    starts = re.findall(r"^\d+\s+(?:read|write|pread64|pwrite64|readv|writev)\(", text, re.MULTILINE)
    assert "resumed>" in text and "<unfinished ...>" in text
    assert len(parse_strace(text)) == len(starts)


def test_unfinished_and_resumed_are_joined(threads):
    parse = [c for c in threads if c.path == f"{CAPTURED}/fc.json"]
    writes = [c for c in threads if c.path == f"{CAPTURED}/out.txt"]
    # serde_json::from_reader on a bare File: one 1-byte read per byte of the 200-byte file, one at EOF
    assert [c.returned for c in parse] == [1] * 200 + [0]
    assert {(c.call, c.requested) for c in parse} == {("read", 1)}
    assert [(c.call, c.requested, c.returned) for c in writes] == [("write", 3, 3)] * 40
    assert len({c.pid for c in parse} | {c.pid for c in writes}) == 2  # two threads, interleaved


def test_vectored_positional_and_failed_calls(threads):
    on_vec = [(c.call, c.requested, c.returned) for c in threads if c.path == f"{CAPTURED}/vec.txt"]
    # -s 0 abbreviates iovec arrays to [...]: the request is unknown, the transfer is not
    assert on_vec == [("writev", None, 8), ("pread64", 4, 4), ("readv", None, 8)]
    (failed,) = [c for c in threads if c.errno]
    assert (failed.call, failed.requested, failed.returned, failed.errno) == ("read", 1, -1, "EAGAIN")
    assert failed.path is not None and failed.path.startswith("pipe:[")


def test_summary_of_threads(threads):
    report = summarize(threads, tiny=16, min_run=32)
    assert set(report.flagged) == {f"{CAPTURED}/fc.json", f"{CAPTURED}/out.txt"}
    parse = report.file(f"{CAPTURED}/fc.json")
    assert (parse.reads, parse.writes, parse.read_bytes, parse.read_sizes) == (201, 0, 200, {"1": 200, "0": 1})
    assert parse.longest_tiny_run == 201 and parse.longest_tiny_run_op == "read"
    out = report.file(f"{CAPTURED}/out.txt")
    assert (out.writes, out.write_bytes, out.write_sizes, out.longest_tiny_run) == (40, 120, {"2-16": 40}, 40)
    assert parse.stack == ()  # captured without -k
    assert summarize(threads, tiny=16, min_run=64).flagged == [f"{CAPTURED}/fc.json"]  # 40 writes < 64


def test_stack_traces_attach_to_their_call(stacks):
    assert all(call.stack for call in stacks)  # every call of a -k capture has frames, resumed ones too
    reads = [c for c in stacks if c.path == f"{CAPTURED}/fc.json" and c.requested == 1]
    assert len(reads) == 48
    assert all("libc.so.6(read+" in c.stack[0] and "/usr/bin/dd" in c.stack[1] for c in reads)
    writes = [c for c in stacks if c.path == f"{CAPTURED}/copy1"]
    assert len(writes) == 48 and all("libc.so.6(__write+" in c.stack[0] for c in writes)


def test_runs_are_per_process_and_descriptor(stacks):
    """Two dd processes read fc.json at once (bs=1 and bs=64): the 64-byte reads must not break the 1-byte run."""
    report = summarize(stacks, tiny=16, min_run=32)
    assert set(report.flagged) == {f"{CAPTURED}/fc.json", f"{CAPTURED}/copy1"}
    source = report.file(f"{CAPTURED}/fc.json")
    assert (source.reads, source.read_bytes, source.longest_tiny_run) == (48 + 5, 48 + 200, 48)
    assert source.read_sizes == {"1": 48, "17-512": 3, "2-16": 1, "0": 1}
    assert any("/usr/bin/dd" in frame for frame in source.stack)
    assert not report.file(f"{CAPTURED}/copy2").likely_unbuffered


def test_pid_formats_eventfd_and_eagain():
    text = "\n".join(
        [
            *('[pid  7] read(3</data.bin>, "x", 1) = 1' for _ in range(3)),
            "[pid  7] read(3</data.bin>, 0x7ffd, 1) = -1 EAGAIN (Resource temporarily unavailable)",
            *('[pid  7] read(3</data.bin>, "x", 1) = 1' for _ in range(2)),
            *('write(5<anon_inode:[eventfd]>, "\\1\\0\\0\\0\\0\\0\\0\\0", 8) = 8' for _ in range(10)),
            'read(4</big>, ""..., 65536) = 65536',
            "+++ exited with 0 +++",
        ]
    )
    calls = parse_strace(text)
    assert [c.pid for c in calls[:6]] == [7] * 6 and calls[-1].pid is None
    report = summarize(calls, tiny=16, min_run=5)
    assert report.flagged == ["/data.bin"]  # EAGAIN neither counts nor breaks; eventfd is fixed-size by API
    assert report.file("/data.bin").errors == 1
    assert report.file("/big").read_sizes == {">8K": 1}


def test_buckets():
    assert [bucket(n) for n in (0, 1, 2, 16, 17, 512, 513, 8192, 8193)] == [
        "0",
        "1",
        "2-16",
        "2-16",
        "17-512",
        "17-512",
        "513-8K",
        "513-8K",
        ">8K",
    ]


def test_json_and_text(stacks):
    report = summarize(stacks, tiny=16, min_run=32)
    data = json.loads(report.to_json())
    assert set(data["flagged"]) == {f"{CAPTURED}/fc.json", f"{CAPTURED}/copy1"}
    assert data["total_calls"] == len(stacks)
    text = report.to_text()
    assert f"likely unbuffered: {CAPTURED}/fc.json: 48 consecutive reads" in text
    assert "/usr/bin/dd" in text
    with pytest.raises(ValueError, match="min_run"):
        summarize(stacks, tiny=16, min_run=0)


def test_strace_missing(monkeypatch):
    monkeypatch.setattr(syscall_audit.shutil, "which", lambda name: None)
    with pytest.raises(ToolchainMissing, match="apt-get install strace"):
        audit(["true"])


@needs_strace
def test_unknown_command_and_timeout():
    with pytest.raises(PolyperfError, match="command not found: no-such-command-xyz"):
        audit(["no-such-command-xyz"])
    start = time.monotonic()
    with pytest.raises(PolyperfError, match="timed out after 1 s"):
        audit(["sleep", "30"], timeout=1, quiet=True)
    assert time.monotonic() - start < 10


def _parse_command(path: Path, mode: str) -> list[str]:
    """Python loading polyperf._native by file (skipping polyperf/__init__'s imports) to parse `path`."""
    from polyperf import _native

    code = (
        "import importlib.util as u; "
        f"s = u.spec_from_file_location('polyperf._native', {_native.__file__!r}); "
        "m = u.module_from_spec(s); s.loader.exec_module(m); "
        f"m.parse_json_file({str(path)!r}, {mode!r})"
    )
    return [sys.executable, "-S", "-c", code]


@needs_strace
def test_live_unbuffered_parse_is_flagged(tmp_path):
    from polyperf.data.geojson import write_geojson

    path = write_geojson(tmp_path / "fc.json", 20_000)
    report = audit(_parse_command(path, "unbuffered"), quiet=True)
    assert report.exit_code == 0
    assert report.flagged == [str(path)]
    stats = report.file(str(path))
    assert (stats.reads, stats.read_sizes) == (20_001, {"1": 20_000, "0": 1})  # cf. test_native_io
    if report.stack_traces:  # strace built with libunwind: the sample points into the extension
        assert any("_native" in frame for frame in stats.stack), stats.stack


@needs_strace
def test_live_buffered_parse_is_not_flagged(tmp_path):
    from polyperf.data.geojson import write_geojson

    path = write_geojson(tmp_path / "fc.json", 20_000)
    report = audit(_parse_command(path, "buffered"), quiet=True)
    assert report.exit_code == 0 and report.flagged == []
    stats = report.file(str(path))
    assert (stats.reads, stats.read_bytes) == (3 + 1, 20_000)  # ceil(20000 / 8192) + the read at EOF


@needs_strace
def test_json_is_alone_on_stdout():
    """The audited command's own output (here half a JSON object on stdout) goes to stderr."""
    noisy = "echo 'noise on stdout {\"flagged\": ['; echo 'noise on stderr' >&2"
    done = subprocess.run(
        [sys.executable, "-m", "polyperf", "audit", "--json", "--no-stack-traces", "--", "sh", "-c", noisy],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["command"] == ["sh", "-c", noisy] and data["exit_code"] == 0
    assert "noise on stdout" in done.stderr and "noise on stderr" in done.stderr
