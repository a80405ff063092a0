"""The pure half of counting per request (`counts.py` does the I/O): HTTP/1.1 response framing for the
pipelining client, `perf stat` and `strace -c` output to counts by syscall name, and counts per request.
No I/O, no clocks; unit-tested in tests/test_counts.py."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "IoCounts",
    "frame_responses",
    "parse_perf_stat",
    "parse_strace_summary",
    "per_request",
    "request_bytes",
]


@dataclass(frozen=True)
class IoCounts:
    """/proc/PID/io of a process tree: read-family (`syscr`) and write-family (`syscw`) syscalls. The kernel
    counts read/readv/pread and write/writev/pwrite (and sendfile) here, not recv/send/recvmsg/sendmsg."""

    reads: int
    writes: int

    def __sub__(self, other: IoCounts) -> IoCounts:
        return IoCounts(self.reads - other.reads, self.writes - other.writes)

    @property
    def total(self) -> int:
        return self.reads + self.writes


def per_request(count: float, requests: int) -> float:
    """`count` spread over `requests` (NaN for none: a rate of nothing is not zero)."""
    return count / requests if requests > 0 else float("nan")


def request_bytes(
    method: str, path: str, host: str, body: bytes = b"", content_type: str = "application/json"
) -> bytes:
    """One keep-alive HTTP/1.1 request."""
    head = [f"{method} {path} HTTP/1.1", f"Host: {host}", "User-Agent: polyperf-counts"]
    if body or method not in ("GET", "HEAD"):
        head += [f"Content-Type: {content_type}", f"Content-Length: {len(body)}"]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


_CHUNK = re.compile(rb"([0-9a-fA-F]+)[^\r\n]*\r\n")


def _chunked_end(buf: bytes, pos: int) -> int | None:
    """End offset of a chunked body starting at `pos`, or None while incomplete (trailers not supported)."""
    while True:
        m = _CHUNK.match(buf, pos)
        if m is None:
            return None
        size = int(m.group(1), 16)
        pos = m.end() + size + 2
        if pos > len(buf):
            return None
        if size == 0:
            return pos


def frame_responses(buf: bytes) -> tuple[list[int], int]:
    """The status codes of the complete responses at the start of `buf`, and the bytes they take."""
    statuses: list[int] = []
    pos = 0
    while True:
        head_end = buf.find(b"\r\n\r\n", pos)
        if head_end < 0:
            return statuses, pos
        lines = buf[pos:head_end].split(b"\r\n")
        try:
            status = int(lines[0].split()[1])
        except (IndexError, ValueError):
            raise ValueError(f"not an HTTP/1.1 response: {lines[0][:80]!r}") from None
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip().lower()
        body = head_end + 4
        if headers.get(b"transfer-encoding") == b"chunked":
            end = _chunked_end(buf, body)
            if end is None:
                return statuses, pos
        else:
            end = body + int(headers.get(b"content-length", b"0"))
            if end > len(buf):
                return statuses, pos
        statuses.append(status)
        pos = end


_PERF_LINE = re.compile(r"^\s*([^,]*),[^,]*,(raw_syscalls:sys_enter|syscalls:sys_enter_(\w+)),")


def parse_perf_stat(text: str) -> dict[str, int]:
    """`perf stat -x,` output of `syscalls:sys_enter_<name>` events → {name: calls}, the ones never made left
    out; with `raw_syscalls:sys_enter` (every call) too, the calls of no listed name become "other"."""
    counts: dict[str, int] = {}
    total = None
    for line in text.splitlines():
        m = _PERF_LINE.match(line)
        if m is None or not m.group(1).strip().isdigit():  # "<not counted>": never called
            continue
        if m.group(3) is None:
            total = int(m.group(1))
        elif int(m.group(1)) > 0:
            counts[m.group(3)] = int(m.group(1))
    if total is not None and total > sum(counts.values()):
        counts["other"] = total - sum(counts.values())
    return counts


# "% time  seconds  usecs/call  calls  errors  syscall" — errors may be blank
_STRACE_ROW = re.compile(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$")


def parse_strace_summary(text: str) -> dict[str, int]:
    """`strace -c` output → {syscall: calls} (the `total` line left out)."""
    counts = {}
    for line in text.splitlines():
        m = _STRACE_ROW.match(line)
        if m and m.group(2) != "total":
            counts[m.group(2)] = counts.get(m.group(2), 0) + int(m.group(1))
    return counts


def read_write_family(by_name: Mapping[str, int]) -> int:
    """The calls /proc/PID/io counts (syscr + syscw), from counts by name: a cross-check of the two sources."""
    family = ("read", "readv", "pread64", "preadv", "preadv2", "write", "writev", "pwrite64", "pwritev", "pwritev2")
    return sum(by_name.get(name, 0) for name in family)
