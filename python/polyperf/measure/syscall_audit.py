"""`polyperf audit`: runs a command under strace and flags files read or written in runs of tiny syscalls.

The first article's detective work (era.co's article: `strace --trace=read` filtered for 1-byte reads, with
`--stack-traces`), made a report. `summarize` is pure; `audit` runs strace; `strace_output` parses its output.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from polyperf.errors import PolyperfError, ToolchainMissing
from polyperf.measure.strace_output import Syscall, iter_syscalls, parse_strace

__all__ = ["BUCKETS", "AuditReport", "FileStats", "Syscall", "audit", "iter_syscalls", "parse_strace", "summarize"]

TRACED = "read,write,pread64,pwrite64,readv,writev"
# (label, largest byte count in the bucket) for the bytes a successful call moved.
BUCKETS: tuple[tuple[str, float], ...] = (
    ("0", 0),
    ("1", 1),
    ("2-16", 16),
    ("17-512", 512),
    ("513-8K", 8192),
    (">8K", math.inf),
)
# Fixed-size by their API (eventfd, timerfd, signalfd take 8-byte or struct-sized calls), never "unbuffered".
_FIXED_SIZE_PREFIXES = ("anon_inode:",)


def bucket(nbytes: int) -> str:
    return next(label for label, top in BUCKETS if nbytes <= top)


@dataclass
class FileStats:
    """What one file (or socket, pipe, terminal) saw. Size buckets count the bytes each successful call
    moved; a "tiny run" counts consecutive calls on one descriptor that asked for at most `tiny` bytes."""

    path: str
    reads: int = 0
    writes: int = 0
    read_bytes: int = 0
    write_bytes: int = 0
    errors: int = 0
    read_sizes: dict[str, int] = field(default_factory=dict)
    write_sizes: dict[str, int] = field(default_factory=dict)
    longest_tiny_run: int = 0
    longest_tiny_run_op: str = ""
    likely_unbuffered: bool = False
    stack: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.__dict__.items()}


def _count(stats: FileStats, call: Syscall) -> None:
    stats.writes += call.is_write
    stats.reads += not call.is_write
    if not call.ok:
        stats.errors += 1
        return
    assert call.returned is not None
    sizes = stats.write_sizes if call.is_write else stats.read_sizes
    sizes[bucket(call.returned)] = sizes.get(bucket(call.returned), 0) + 1
    if call.is_write:
        stats.write_bytes += call.returned
    else:
        stats.read_bytes += call.returned


def summarize(calls: Iterable[Syscall], tiny: int = 16, min_run: int = 64) -> AuditReport:
    """Per-file counts, size histograms and the "likely unbuffered" flag (a run of >= `min_run` consecutive
    calls asking for <= `tiny` bytes on one descriptor of one process, reads and writes apart)."""
    if tiny < 1 or min_run < 1:
        raise ValueError(f"tiny and min_run must be >= 1, got tiny={tiny}, min_run={min_run}")
    files: dict[str, FileStats] = {}
    runs: dict[tuple[int | None, int, str, bool], tuple[int, tuple[str, ...]]] = {}  # -> (length, first stack)
    for call in calls:
        stats = files.setdefault(call.target, FileStats(call.target))
        _count(stats, call)
        if not call.ok:
            continue  # EAGAIN and friends neither extend nor break a run
        key = (call.pid, call.fd, call.target, call.is_write)
        if call.size is None or call.size > tiny:
            runs[key] = (0, ())
            continue
        length, stack = runs.get(key, (0, ()))
        length, stack = length + 1, stack or call.stack
        runs[key] = (length, stack)
        if length > stats.longest_tiny_run:
            stats.longest_tiny_run, stats.longest_tiny_run_op = length, "write" if call.is_write else "read"
        if length >= min_run and not call.target.startswith(_FIXED_SIZE_PREFIXES):
            stats.likely_unbuffered = True
            stats.stack = stats.stack or stack
    ordered = sorted(files.values(), key=lambda s: (not s.likely_unbuffered, -(s.reads + s.writes), s.path))
    return AuditReport(files=tuple(ordered), tiny=tiny, min_run=min_run)


@dataclass(frozen=True)
class AuditReport:
    files: tuple[FileStats, ...]
    tiny: int
    min_run: int
    command: tuple[str, ...] = ()
    exit_code: int | None = None
    stack_traces: bool = False

    @property
    def flagged(self) -> list[str]:
        return [stats.path for stats in self.files if stats.likely_unbuffered]

    @property
    def total_calls(self) -> int:
        return sum(stats.reads + stats.writes for stats in self.files)

    def file(self, path: str) -> FileStats:
        return next(stats for stats in self.files if stats.path == path)

    def to_dict(self) -> dict[str, Any]:
        return {
            "command": list(self.command),
            "exit_code": self.exit_code,
            "tiny": self.tiny,
            "min_run": self.min_run,
            "stack_traces": self.stack_traces,
            "total_calls": self.total_calls,
            "flagged": self.flagged,
            "files": [stats.to_dict() for stats in self.files],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def to_text(self, limit: int = 15, frames: int = 12) -> str:
        return _render_text(self, limit, frames)


def _sizes(sizes: dict[str, int]) -> str:
    return " ".join(f"{label}:{sizes[label]}" for label, _ in BUCKETS if sizes.get(label))


def _short(path: str, width: int = 60) -> str:
    return path if len(path) <= width else "..." + path[-(width - 3) :]


def _render_text(report: AuditReport, limit: int, frames: int) -> str:
    from tabulate import tabulate

    head = f"audit of `{shlex.join(report.command)}`" if report.command else "audit"
    if report.exit_code is not None:
        head += f" (exit {report.exit_code})"
    lines = [f"{head}: {report.total_calls} read/write syscalls on {len(report.files)} files"]
    rows = [
        [
            _short(s.path),
            s.reads,
            s.writes,
            s.read_bytes,
            s.write_bytes,
            _sizes(s.read_sizes),
            _sizes(s.write_sizes),
            s.longest_tiny_run,
            "UNBUFFERED?" if s.likely_unbuffered else "",
        ]
        for s in report.files[:limit]
    ]
    lines.append(
        tabulate(
            rows,
            headers=[
                "file",
                "reads",
                "writes",
                "bytes read",
                "bytes written",
                "read sizes",
                "write sizes",
                f"tiny run (<={report.tiny} B)",
                "",
            ],
        )
    )
    if len(report.files) > limit:
        lines.append(f"... and {len(report.files) - limit} more files")
    for stats in report.files:
        if not stats.likely_unbuffered:
            continue
        fix = "BufWriter" if stats.longest_tiny_run_op == "write" else "BufReader, or read it whole"
        lines += [
            "",
            f"likely unbuffered: {stats.path}: {stats.longest_tiny_run} consecutive "
            f"{stats.longest_tiny_run_op}s of <= {report.tiny} bytes; buffer it ({fix})",
        ]
        lines += [f"    {frame}" for frame in stats.stack[:frames]]
        if not stats.stack:
            lines.append("    (no stack sample: strace -k unavailable or not asked for)")
    if not report.flagged:
        lines += ["", f"no file had a run of >= {report.min_run} tiny (<= {report.tiny} bytes) reads or writes"]
    return "\n".join(lines)


@functools.cache
def _supported(strace: str, flag: str) -> bool:
    done = subprocess.run(
        [strace, flag, "-f", "-e", "trace=read", "-o", os.devnull, "true"], capture_output=True, timeout=30, check=False
    )
    return done.returncode == 0


def _with(argv: list[str], *flags: str) -> list[str]:
    """`argv` with strace `flags` inserted before the `--` that starts the command."""
    split = argv.index("--")
    return [*argv[:split], *flags, *argv[split:]]


def _stop(proc: subprocess.Popen[bytes]) -> None:
    # The tracer runs in its own session: one killpg ends strace and every tracee it forked.
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _run_bounded(argv: list[str], cmd: Sequence[str], timeout: float, quiet: bool, stdout_to_stderr: bool) -> int:
    out = subprocess.DEVNULL if quiet else None
    # fd 2: the command's own output joins ours on stderr, so stdout can hold a report alone
    stdout = 2 if stdout_to_stderr and not quiet else out
    with subprocess.Popen(argv, stdout=stdout, stderr=out, start_new_session=True) as proc:
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _stop(proc)
            raise PolyperfError(f"audit of `{shlex.join(cmd)}` timed out after {timeout:g} s; killed it") from None


def _stack_samples(argv: list[str], trace: Path, report: AuditReport, timeout: float) -> dict[str, tuple[str, ...]]:
    """Runs the command again under `-k -P <flagged file>...` and stops it once every flagged file has one
    stack of a tiny call: `-k` costs milliseconds per syscall, far too much for a whole unbuffered run."""
    wanted = {
        s.path: s.longest_tiny_run_op == "write" for s in report.files if s.likely_unbuffered and s.path.startswith("/")
    }  # pipes and sockets have no path to filter on
    samples: dict[str, tuple[str, ...]] = {}
    if not wanted:
        return samples
    argv = _with(argv, "-k", *(arg for path in wanted for arg in ("-P", path)), "-o", str(trace))
    deadline = time.monotonic() + timeout
    with subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True) as proc:
        try:
            while True:
                running = proc.poll() is None
                calls = parse_strace(trace.read_text(errors="replace")) if trace.exists() else []
                for call in calls[:-1] if running else calls:  # the last call's stack may still be arriving
                    if (
                        call.target in wanted
                        and wanted[call.target] == call.is_write
                        and call.stack
                        and call.size is not None
                        and call.size <= report.tiny
                    ):
                        samples.setdefault(call.target, call.stack)
                if not running or samples.keys() == wanted.keys() or time.monotonic() > deadline:
                    break
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=0.2)
        finally:
            _stop(proc)
    return samples


def audit(
    cmd: Sequence[str],
    *,
    stack_traces: bool = True,
    tiny: int = 16,
    min_run: int = 64,
    timeout: float = 600.0,
    quiet: bool = False,
    stdout_to_stderr: bool = False,
) -> AuditReport:
    """Runs `cmd` under `strace -f -y` tracing the read/write family and summarizes the trace. With
    `stack_traces` and a strace that supports `-k`, flagged files get a stack sample from a second, quiet run
    of the command that is stopped as soon as each has one. The command's exit code is reported, not raised.
    The command writes to this process's stdout and stderr; `stdout_to_stderr` sends both to stderr, `quiet`
    to /dev/null."""
    if not cmd:
        raise ValueError("audit needs a command to run")
    strace = shutil.which("strace")
    if strace is None:
        raise ToolchainMissing("strace not found on PATH: install it with `apt-get install strace`")
    if shutil.which(cmd[0]) is None:
        raise PolyperfError(f"audit: command not found: {cmd[0]}")
    # --seccomp-bpf stops the tracee only at traced syscalls, several times less overhead.
    fast = ["--seccomp-bpf"] if _supported(strace, "--seccomp-bpf") else []
    argv = [strace, "-f", "-y", "-s", "0", "-e", f"trace={TRACED}", *fast, "--", *cmd]
    with tempfile.TemporaryDirectory(prefix="polyperf-audit-") as tmp:
        trace = Path(tmp) / "strace.txt"
        code = _run_bounded(_with(argv, "-o", str(trace)), cmd, timeout, quiet, stdout_to_stderr)
        if not trace.exists():
            raise PolyperfError(f"strace wrote no trace for `{shlex.join(cmd)}` (exit {code})")
        with trace.open(encoding="utf-8", errors="replace") as lines:
            report = summarize(iter_syscalls(lines), tiny=tiny, min_run=min_run)
        sampled = stack_traces and bool(report.flagged) and _supported(strace, "-k")
        if sampled:
            samples = _stack_samples(argv, Path(tmp) / "stacks.txt", report, timeout)
            for stats in report.files:
                stats.stack = samples.get(stats.path, stats.stack)
    return replace(report, command=tuple(cmd), exit_code=code, stack_traces=sampled)
