"""Parses strace output: the read/write-family calls of `strace -f -y [-k]`, unfinished calls joined with
their resumption and `-k` stack frames attached (pure; `syscall_audit` runs strace and summarizes)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

__all__ = ["READS", "WRITES", "Syscall", "iter_syscalls", "parse_strace"]

READS = frozenset({"read", "pread64", "readv", "preadv", "preadv2"})
WRITES = frozenset({"write", "pwrite64", "writev", "pwritev", "pwritev2"})
_UNFINISHED = " <unfinished ...>"

_PREFIX = re.compile(r"(?:\[pid\s+(\d+)\]\s+|(\d+)\s+)?")
_START = re.compile(r"(\w+)\(")
_RESUMED = re.compile(r"<\.\.\. (\w+) resumed>")
_RESULT = re.compile(r"\s*=\s*(-?\d+|\?)(?:\s+(E[A-Z0-9]+))?")
_FD = re.compile(r"(-?\d+)(?:<(.*)>)?$", re.DOTALL)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_IOV_LEN = re.compile(r"iov_len=(\d+)")


@dataclass(frozen=True)
class Syscall:
    """One completed read/write-family call. `requested` is the buffer size asked for (None when strace
    elided it, e.g. an abbreviated iovec array); `returned` is None when the call never returned (`= ?`)."""

    pid: int | None
    call: str
    fd: int
    path: str | None
    requested: int | None
    returned: int | None
    errno: str | None = None
    stack: tuple[str, ...] = ()

    @property
    def is_write(self) -> bool:
        return self.call in WRITES

    @property
    def ok(self) -> bool:
        return self.returned is not None and self.returned >= 0

    @property
    def size(self) -> int | None:
        """What the call asked for; what it moved when strace elided the request."""
        return self.requested if self.requested is not None else self.returned

    @property
    def target(self) -> str:
        return self.path if self.path is not None else f"fd {self.fd}"


def _split_args(text: str) -> tuple[list[str], str] | None:
    """Splits `a, [b, c], "d,)"...) = 1` at top-level commas up to the closing parenthesis."""
    args: list[str] = []
    depth, start, i, n = 0, 0, 0, len(text)
    while i < n:
        char = text[i]
        if char == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif char in "[{(":
            depth += 1
        elif char in "]}" or (char == ")" and depth > 0):
            depth -= 1
        elif char == ")":
            args.append(text[start:i].strip())
            return [arg for arg in args if arg], text[i + 1 :]
        elif char == "," and depth == 0:
            args.append(text[start:i].strip())
            start = i + 1
        i += 1
    return None


def _requested(call: str, args: list[str]) -> int | None:
    if call in {"readv", "writev", "preadv", "pwritev", "preadv2", "pwritev2"}:
        iov = _STRING.sub('""', args[1]) if len(args) > 1 else "[...]"
        lengths = _IOV_LEN.findall(iov)
        return sum(map(int, lengths)) if lengths and "..." not in iov.replace('""...', "") else None
    return int(args[2]) if len(args) > 2 and args[2].isdigit() else None


def _to_syscall(pid: int | None, call: str, argtext: str) -> Syscall | None:
    split = _split_args(argtext)
    if split is None:
        return None
    args, rest = split
    result, fd = _RESULT.match(rest), _FD.match(args[0]) if args else None
    if result is None or fd is None:
        return None
    returned = None if result[1] == "?" else int(result[1])
    return Syscall(pid, call, int(fd[1]), fd[2], _requested(call, args), returned, result[2])


def iter_syscalls(lines: Iterable[str]) -> Iterator[Syscall]:
    """Streams the read/write-family calls of `strace -f -y [-k]` output, joining `<unfinished ...>` with
    its `<... resumed>` line and attaching the ` > frame` lines that follow a call as its stack."""
    pending: dict[int | None, str] = {}  # a thread has at most one call in flight
    last: Syscall | None = None
    stack: list[str] = []
    for raw in lines:
        line = raw.rstrip("\n")
        if line.startswith(" > "):
            if last is not None:
                stack.append(line[3:].strip())
            continue
        if last is not None:
            yield replace(last, stack=tuple(stack)) if stack else last
            last, stack = None, []
        prefix = _PREFIX.match(line)
        assert prefix is not None  # every group is optional
        pid_text = prefix[1] or prefix[2]
        pid = int(pid_text) if pid_text else None
        body = line[prefix.end() :]
        resumed = _RESUMED.match(body)
        if resumed:
            head = pending.pop(pid, None)
            if head is None:
                continue
            body = head + body[resumed.end() :]
        if body.endswith(_UNFINISHED):
            pending[pid] = body[: -len(_UNFINISHED)]
            continue
        start = _START.match(body)
        if start and (start[1] in READS or start[1] in WRITES):
            last = _to_syscall(pid, start[1], body[start.end() :])
    if last is not None:
        yield replace(last, stack=tuple(stack)) if stack else last


def parse_strace(text: str) -> list[Syscall]:
    """All read/write-family calls in a strace capture (see `iter_syscalls`)."""
    return list(iter_syscalls(text.splitlines()))
