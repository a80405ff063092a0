"""What a load run cost, measured from outside the processes: the server's CPU seconds over exactly the
measured window (→ CPU µs per request), its RSS (mean, peak) and threads, and the load generator's own
CPU (→ `client_bound`: a result limited by the client, never to be read as the server's capacity).
`extra={"db": pid}` samples more process trees over the same window (e.g. PostgreSQL's postmaster and
every backend it forks), reported in `Measurement.extra`.

The server's CPU is exact where its cgroup counts it (`server_cpu`, a counter read right before the driver
starts and right after it exits: `cpu_source = "cgroup"`). Elsewhere, and for the client and `extra` trees,
a background thread samples the process trees from /proc (psutil) every `interval` seconds and the
window's CPU is interpolated at the driver's own start and end timestamps (`cpu_source = "proc"`). The pure
part (`window_usage`, `is_client_bound`) does no I/O and is unit-tested; `measure` ties a driver to it.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Self

import psutil

from polyperf.common.background import BackgroundLoop
from polyperf.load.result import LoadResult, OnSpawn

__all__ = [
    "CLIENT_CPU_LIMIT",
    "RATE_LIMIT",
    "Measurement",
    "Sample",
    "Sampler",
    "Usage",
    "is_client_bound",
    "measure",
    "window_usage",
]

# A client using >= 90% of its cores, or a fixed-rate run reaching < 95% of its rate, is the bottleneck.
CLIENT_CPU_LIMIT = 0.90
RATE_LIMIT = 0.95


@dataclass(frozen=True)
class Sample:
    t: float  # epoch seconds (the clock the drivers report their windows in)
    cpu: float  # user + system seconds of every process of the tree seen so far (exited ones keep their last)
    rss: int  # bytes, live processes
    threads: int
    wait: float = 0.0  # seconds its threads were runnable but waiting for a CPU (schedstat), cumulative


@dataclass(frozen=True)
class Usage:
    """A process tree's cost over one window."""

    cpu_seconds: float
    wait_seconds: float  # runnable but not running: the CPU it wanted and did not get
    rss_mean: float
    rss_peak: int
    threads_max: int
    samples: int


def _at(samples: Sequence[Sample], t: float, field: str) -> float:
    """A cumulative field at `t`, linearly interpolated between samples (clamped at the ends)."""
    times = [s.t for s in samples]
    i = bisect.bisect_left(times, t)
    if i == 0:
        return getattr(samples[0], field)
    if i == len(samples):
        return getattr(samples[-1], field)
    a, b = samples[i - 1], samples[i]
    va, vb = getattr(a, field), getattr(b, field)
    return va + (vb - va) * ((t - a.t) / (b.t - a.t) if b.t > a.t else 1.0)


def window_usage(samples: Sequence[Sample], start: float, end: float) -> Usage:
    """CPU used in [start, end] and the memory/threads seen in it (pure; samples sorted by time)."""
    if not samples:
        raise ValueError("no samples: was the sampler running during the window?")
    inside = [s for s in samples if start <= s.t <= end] or [min(samples, key=lambda s: abs(s.t - end))]
    rss = [s.rss for s in inside]
    return Usage(
        cpu_seconds=max(0.0, _at(samples, end, "cpu") - _at(samples, start, "cpu")),
        wait_seconds=max(0.0, _at(samples, end, "wait") - _at(samples, start, "wait")),
        rss_mean=sum(rss) / len(rss),
        rss_peak=max(rss),
        threads_max=max(s.threads for s in inside),
        samples=len(inside),
    )


def is_client_bound(client_cpu_fraction: float, achieved_rate_ratio: float | None) -> bool:
    """True if the client, not the server, limited the result.

    `client_cpu_fraction` is the CPU the client used *or wanted* over the window as a fraction of its
    cores (0..1): CPU time plus time runnable in the run queue. On a machine shared with other work a
    saturated client cannot get 90% of its cores, but it is still the bottleneck.
    """
    return client_cpu_fraction >= CLIENT_CPU_LIMIT or (
        achieved_rate_ratio is not None and achieved_rate_ratio < RATE_LIMIT
    )


def _run_queue_wait(pid: int) -> float:
    """Seconds the process's live threads spent runnable, waiting for a CPU (/proc/<pid>/task/*/schedstat)."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                total += int(fh.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return total / 1e9


class _Tree:
    """Root processes and every descendant; CPU per pid is kept after a process exits. `light`: CPU only (one
    /proc read per process), for trees of hundreds of processes such as a database's backends."""

    def __init__(self, roots: Sequence[int], *, light: bool = False) -> None:
        self.light = light
        self.roots: list[psutil.Process] = []
        self.members: dict[int, psutil.Process] = {}
        self.cpu: dict[int, float] = {}
        self.wait: dict[int, float] = {}
        for pid in roots:
            self.add_root(pid)

    def add_root(self, pid: int) -> None:
        try:
            proc = psutil.Process(pid)
        except psutil.NoSuchProcess:
            return
        self.roots.append(proc)
        self.members[pid] = proc

    def rescan(self) -> None:
        for root in self.roots:
            try:
                for child in root.children(recursive=True):
                    self.members.setdefault(child.pid, child)
            except psutil.Error:
                continue

    def sample(self, now: float) -> Sample:
        rss = threads = 0
        for pid, proc in list(self.members.items()):
            try:
                if self.light:
                    times = proc.cpu_times()
                    self.cpu[pid] = times.user + times.system
                    threads += 1
                    continue
                with proc.oneshot():
                    times = proc.cpu_times()
                    self.cpu[pid] = times.user + times.system
                    rss += proc.memory_info().rss
                    threads += proc.num_threads()
                self.wait[pid] = _run_queue_wait(pid)
            except psutil.Error:  # gone (or a zombie): its last CPU reading stays counted
                del self.members[pid]
        return Sample(now, sum(self.cpu.values()), rss, threads, sum(self.wait.values()))


class Sampler(BackgroundLoop):
    """Samples the server's and the client's process trees in a background thread.

    The thread pins itself to `cpus` (the client's) so that it never takes the server's CPU.
    `add_client(pid)` is the drivers' `on_spawn` hook.
    """

    def __init__(
        self,
        server_pid: int,
        *,
        cpus: Sequence[int] = (),
        interval: float = 0.05,
        rescan_every: int = 10,
        extra: Mapping[str, int] | None = None,
        extra_every: int = 4,
    ) -> None:
        super().__init__("polyperf-sampler", cpus)
        self.server = _Tree([server_pid])
        self.client = _Tree([])
        self.server_samples: list[Sample] = []
        self.client_samples: list[Sample] = []
        # more trees watched over the same window, e.g. {"db": postmaster pid}: CPU only, every `extra_every`
        # ticks, so that sampling hundreds of backends does not take the client's CPU from the load generator
        self.extra = {name: _Tree([pid], light=True) for name, pid in (extra or {}).items()}
        self.extra_every = extra_every
        self.extra_samples: dict[str, list[Sample]] = {name: [] for name in self.extra}
        self.client_affinity: list[int] = []
        self.interval = interval
        self.rescan_every = rescan_every
        self._lock = threading.Lock()

    def add_client(self, pid: int) -> None:
        with self._lock:
            self.client.add_root(pid)
            if not self.client_affinity:  # as it was right after start (the first process of the client)
                with contextlib.suppress(OSError):
                    self.client_affinity = sorted(os.sched_getaffinity(pid))

    def sample(self, *, extra: bool = True) -> None:
        """Takes one sample of the trees now (also called at the window's edges); `extra`: the extra ones too."""
        with self._lock:
            now = time.time()
            self.server_samples.append(self.server.sample(now))
            self.client_samples.append(self.client.sample(now))
            for name, tree in self.extra.items() if extra else ():
                self.extra_samples[name].append(tree.sample(now))

    def _loop(self) -> None:
        tick = 0
        while not self._stop.is_set():
            if tick % self.rescan_every == 0:
                with self._lock:
                    for tree in (self.server, self.client, *self.extra.values()):
                        tree.rescan()
            self.sample(extra=tick % self.extra_every == 0)
            tick += 1
            self._stop.wait(self.interval)

    def __enter__(self) -> Self:
        # every member known before the first sample: one found later would bring its earlier CPU into the window
        with self._lock:
            for tree in (self.server, self.client, *self.extra.values()):
                tree.rescan()
        self.sample()
        return super().__enter__()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        super().__exit__(exc_type, exc, tb)
        self.sample()


@dataclass(frozen=True)
class Measurement:
    """A load result with what it cost the server and the client over the same window."""

    load: LoadResult
    server: Usage
    client: Usage
    client_cores: int
    extra: Mapping[str, Usage] = field(default_factory=dict)  # the `extra` trees of `measure`, by name
    cpu_source: str = "proc"  # where `server.cpu_seconds` came from: "cgroup" (exact counter) or "proc" (sampled)
    client_affinity: Sequence[int] = ()  # the load generator's CPUs as they were right after it started

    @property
    def cpu_s_per_request(self) -> float:
        return self.server.cpu_seconds / self.load.requests if self.load.requests else float("nan")

    @property
    def requests_per_cpu_second(self) -> float:
        """Capacity per server CPU-second: what one fully used server core would answer at this load."""
        return self.load.requests / self.server.cpu_seconds if self.server.cpu_seconds > 0 else float("nan")

    @property
    def client_cpu_fraction(self) -> float:
        """The client's CPU over the window as a fraction of its cores (1.0 = every core busy)."""
        return self.client.cpu_seconds / self.load.duration / max(self.client_cores, 1)

    @property
    def client_demand_fraction(self) -> float:
        """CPU used plus CPU waited for (run queue), as a fraction of the client's cores."""
        return (self.client.cpu_seconds + self.client.wait_seconds) / self.load.duration / max(self.client_cores, 1)

    @property
    def server_cpu_fraction(self) -> float:
        return self.server.cpu_seconds / self.load.duration

    @property
    def client_bound(self) -> bool:
        return is_client_bound(
            max(self.client_cpu_fraction, self.client_demand_fraction), self.load.achieved_rate_ratio
        )


def measure(
    server_pid: int,
    run: Callable[[OnSpawn], LoadResult],
    *,
    client_cpus: Sequence[int],
    alive: Callable[[], None] | None = None,
    interval: float = 0.05,
    extra: Mapping[str, int] | None = None,
    server_cpu: Callable[[], float] | None = None,
    extra_cpu: Mapping[str, Callable[[], float]] | None = None,
) -> Measurement:
    """Runs `run(on_spawn)` (a driver call) while sampling; the server must still be alive afterwards.

    `alive` (e.g. `Server.check_alive`) raises if the server died, with its exit code and log tail.
    `extra` = {name: pid}: more process trees measured over the same window (`Measurement.extra`).
    `server_cpu`: the server's exact CPU-seconds counter (its cgroup's), read right before the driver starts
    and right after it exits; the server was drained before, so the difference is this run's CPU.
    `extra_cpu` = {name: counter}: the same for `extra` trees that have an exact counter (e.g. a database in
    a cgroup of its own); their `cpu_seconds` then come from it.
    """
    counters = dict(extra_cpu or {})
    with Sampler(server_pid, cpus=client_cpus, interval=interval, extra=extra) as sampler:
        extra_before = {name: read() for name, read in counters.items()}
        before = server_cpu() if server_cpu is not None else None
        result = run(sampler.add_client)
        after = server_cpu() if server_cpu is not None else None
        extra_after = {name: read() for name, read in counters.items()}
    if alive is not None:
        alive()
    server = window_usage(sampler.server_samples, result.started_at, result.ended_at)
    if before is not None and after is not None:
        server = dataclasses.replace(server, cpu_seconds=max(0.0, after - before))
    client = window_usage(sampler.client_samples, result.started_at, result.ended_at)
    others = {
        name: window_usage(samples, result.started_at, result.ended_at)
        for name, samples in sampler.extra_samples.items()
    }
    for name in set(others) & set(counters):
        others[name] = dataclasses.replace(others[name], cpu_seconds=max(0.0, extra_after[name] - extra_before[name]))
    return Measurement(
        result,
        server,
        client,
        len(client_cpus) or os.cpu_count() or 1,
        others,
        cpu_source="proc" if before is None else "cgroup",
        client_affinity=sampler.client_affinity,
    )
