"""Counts per request of a running server — syscalls and allocations — over a fixed number of requests
after a warm-up, by a small client that sends them over one keep-alive connection, `depth` at a time
(depth > 1 pipelines: a batch in one write, as the articles' wrk scripts do; oha and bombardier never
pipeline). Counts barely move between runs where times move by ±20%, so a CI can gate on them.

- read/write-family syscalls: /proc/PID/io `syscr`/`syscw` of the server's process tree (every thread's
  calls are in its process's counts), read right before and after the requests; always available.
- every syscall by name: `perf stat -e 'syscalls:sys_enter_*'` (else `strace -f -c`) attached to the server
  over one more batch; the tracer slows the server, so that batch's time is only kept as the overhead.
- allocations: the server's own counter on a loopback port (`POLYPERF_ALLOC_COUNTER_PORT`): the Rust apps'
  `counting` build variant, the Go runtime's Mallocs. The pure part is in `count_parse`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import IO

import psutil

from polyperf.common import procs
from polyperf.errors import PolyperfError, ToolchainMissing
from polyperf.measure.count_parse import (
    IoCounts,
    frame_responses,
    parse_perf_stat,
    parse_strace_summary,
)

__all__ = [
    "ALLOC_COUNTER_ENV",
    "TRACED_SYSCALLS",
    "CountFailed",
    "SyscallTrace",
    "drive",
    "io_counts",
    "read_alloc_counter",
    "syscall_tracer",
]

ALLOC_COUNTER_ENV = "POLYPERF_ALLOC_COUNTER_PORT"


class CountFailed(PolyperfError):
    """A count could not be taken (the server refused, answered non-2xx, or its counter is off)."""


def io_counts(pid: int) -> IoCounts:
    """syscr/syscw summed over `pid` and its descendants (a child that exited meanwhile is not counted)."""
    reads = writes = 0
    try:
        root = psutil.Process(pid)
        procs_ = [root, *root.children(recursive=True)]
    except psutil.Error as exc:
        raise CountFailed(f"/proc/{pid}/io: {exc}") from exc
    for proc in procs_:
        try:
            io = proc.io_counters()
        except psutil.NoSuchProcess:
            continue
        except psutil.Error as exc:
            raise CountFailed(f"/proc/{proc.pid}/io: {exc}") from exc
        reads += io.read_count
        writes += io.write_count
    return IoCounts(reads, writes)


def read_alloc_counter(port: int, *, timeout: float = 5.0) -> int:
    """The allocation count a server reports on 127.0.0.1:`port` (one decimal line per connection)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            data = b""
            while not data.endswith(b"\n"):
                chunk = sock.recv(64)
                if not chunk:
                    break
                data += chunk
        return int(data.strip())
    except (OSError, ValueError) as exc:
        raise CountFailed(f"allocation counter on 127.0.0.1:{port}: {exc}") from exc


def drive(host: str, port: int, request: bytes, requests: int, *, depth: int = 1, timeout: float = 30.0) -> float:
    """Sends `request` `requests` times over one keep-alive connection, `depth` per write, reading every
    response before the next batch; returns the seconds it took. Any non-2xx answer raises: counts of
    failing requests would describe the error path."""
    started = time.perf_counter()
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            left, buf = requests, b""
            while left > 0:
                batch = min(depth, left)
                sock.sendall(request * batch)
                got = 0
                while got < batch:
                    chunk = sock.recv(1 << 16)
                    if not chunk:
                        raise CountFailed(
                            f"http://{host}:{port} closed the connection after {requests - left} requests"
                        )
                    buf += chunk
                    statuses, used = frame_responses(buf)
                    buf = buf[used:]
                    bad = [s for s in statuses if not 200 <= s < 300]
                    if bad:
                        raise CountFailed(f"http://{host}:{port} answered {bad[0]} during a count")
                    got += len(statuses)
                left -= batch
    except (OSError, ValueError) as exc:
        raise CountFailed(f"http://{host}:{port}: {exc}") from exc
    return time.perf_counter() - started


def syscall_tracer() -> str | None:
    """`perf` or `strace`, whichever is installed (perf counts in the kernel and perturbs less)."""
    return next((tool for tool in ("perf", "strace") if shutil.which(tool)), None)


# What servers call, counted one by one; `raw_syscalls:sys_enter` counts all, so the rest is one "other".
# (Every one of ~360 tracepoints works too, but closing that many takes perf ~13 s per server here.)
TRACED_SYSCALLS = (
    "read", "readv", "pread64", "recvfrom", "recvmsg", "recvmmsg",
    "write", "writev", "pwrite64", "sendto", "sendmsg", "sendmmsg", "sendfile64", "splice",
    "epoll_wait", "epoll_pwait", "epoll_pwait2", "epoll_ctl", "poll", "ppoll", "io_uring_enter",
    "accept", "accept4", "close", "shutdown", "getsockopt", "setsockopt", "ioctl", "fcntl",
    "futex", "nanosleep", "clock_nanosleep", "sched_yield", "eventfd2", "timerfd_settime",
    "mmap", "munmap", "mremap", "madvise", "brk", "mprotect",
    "rt_sigreturn", "rt_sigprocmask", "tgkill", "getpid", "gettid", "getrandom", "clock_gettime",
)  # fmt: skip
_TRACEFS = Path("/sys/kernel/tracing/events/syscalls")


def _perf_events() -> str:
    names = [n for n in TRACED_SYSCALLS if not _TRACEFS.exists() or (_TRACEFS / f"sys_enter_{n}").exists()]
    return ",".join(["raw_syscalls:sys_enter", *(f"syscalls:sys_enter_{n}" for n in names)])


class SyscallTrace:
    """Counts every syscall of `pid` (all its threads) by name for as long as the `with` block runs; the
    counts are in `counts` afterwards (perf: `TRACED_SYSCALLS` one by one and the rest as "other"; strace:
    all by name). `tool`: "perf" or "strace" (default: whichever is installed). perf attaches with its
    counters off and turns them on and off through its control FIFO, so the window is exactly the block's."""

    def __init__(self, pid: int, out: Path, *, tool: str | None = None, attach_timeout: float = 10.0) -> None:
        tool = tool or syscall_tracer()
        if tool is None:
            raise ToolchainMissing("neither perf nor strace found: apt-get install linux-perf strace")
        self.pid = pid
        self.tool = tool
        self.out = Path(out)
        self.attach_timeout = attach_timeout
        self.counts: dict[str, int] = {}
        self.proc = None
        self._ctl: IO[str] | None = None
        self._ack: IO[str] | None = None

    def _command(self) -> list[str]:
        if self.tool == "perf":
            ctl, ack = self.out.with_suffix(".ctl"), self.out.with_suffix(".ack")
            for fifo in (ctl, ack):
                fifo.unlink(missing_ok=True)
                os.mkfifo(fifo)
            control = f"fifo:{ctl},{ack}"
            events = _perf_events()
            pid, out = str(self.pid), str(self.out)
            return ["perf", "stat", "-x,", "-D", "-1", "--control", control, "-e", events, "-p", pid, "-o", out]
        return ["strace", "-f", "-c", "-p", str(self.pid), "-o", str(self.out)]

    def _perf_command(self, command: str) -> None:
        """`enable` / `disable`, answered once perf has done it (its counters are open by then)."""
        assert self._ctl is not None and self._ack is not None
        self._ctl.write(command + "\n")
        self._ctl.flush()
        for _ in range(3):  # perf pads some answers with NUL bytes or blank lines
            line = self._ack.readline()
            if "ack" in line or not line:
                break
        if "ack" not in line:
            raise CountFailed(f"perf stat did not acknowledge {command!r} (log {self.out.with_suffix('.log')})")

    def _wait_attached(self) -> None:
        if self.tool == "perf":
            # opening the FIFOs blocks until perf opens them too: bounded by a timer that unblocks us
            timer = threading.Timer(self.attach_timeout, self._unblock)
            timer.start()
            try:
                self._ctl = self.out.with_suffix(".ctl").open("w")
                self._ack = self.out.with_suffix(".ack").open("r")
            finally:
                timer.cancel()
            self._perf_command("enable")
            return
        log, deadline = self.out.with_suffix(".log"), time.monotonic() + self.attach_timeout
        while not (log.exists() and "attached" in log.read_text(errors="replace")):  # "Process N attached"
            if time.monotonic() > deadline or (self.proc is not None and self.proc.poll() is not None):
                raise CountFailed(f"strace could not attach to pid {self.pid} (log {log})")
            time.sleep(0.05)
        time.sleep(0.3)  # strace attaches thread after thread

    def _unblock(self) -> None:
        if self.proc is not None:
            procs.stop(self.proc, grace=5.0)
        for fifo in (self.out.with_suffix(".ctl"), self.out.with_suffix(".ack")):
            with contextlib.suppress(OSError):  # a FIFO opened without a peer returns once one appears
                os.close(os.open(fifo, os.O_RDWR | os.O_NONBLOCK))

    def __enter__(self) -> SyscallTrace:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.unlink(missing_ok=True)
        self.proc = procs.spawn(self._command(), log_path=self.out.with_suffix(".log"))
        try:
            self._wait_attached()
        except (OSError, CountFailed) as exc:
            self._close()
            raise CountFailed(f"{self.tool} could not count the syscalls of pid {self.pid}: {exc}") from exc
        return self

    def _close(self) -> None:
        for fh in (self._ctl, self._ack):
            with contextlib.suppress(OSError):
                if fh is not None:
                    fh.close()
        if self.proc is not None:
            procs.stop(self.proc, grace=30.0, sig=signal.SIGINT)  # both write their summary on SIGINT
        for fifo in (self.out.with_suffix(".ctl"), self.out.with_suffix(".ack")):
            fifo.unlink(missing_ok=True)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if self.tool == "perf" and exc_type is None:
                self._perf_command("disable")
        finally:
            self._close()
        text = self.out.read_text(errors="replace") if self.out.exists() else ""
        self.counts = parse_perf_stat(text) if self.tool == "perf" else parse_strace_summary(text)
        if exc_type is None and not self.counts:
            raise CountFailed(f"{self.tool} counted no syscalls of pid {self.pid} ({self.out})")
