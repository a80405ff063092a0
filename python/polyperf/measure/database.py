"""PostgreSQL's side of a load run: its process tree (found from a connection, pinned like the servers), the
connections in use and the tree's memory sampled while the run goes, and whether it was the bottleneck.

The CPU of the tree is measured by `sampler.measure(..., extra={"db": pid})` over the run's own window, from
the kernel's counter where a throwaway cluster sits in a cgroup of its own (`account_tree`), else from /proc;
`is_db_bound` (pure) turns it into the flag the article's author checked by eye ("Postgres was not the
bottleneck"). Memory: every backend maps the same shared buffers, so the sum of RSS over the tree counts
those pages once per backend (`ps` adds up the same way); PSS splits each shared page among the processes
that map it, so the sum of PSS is the tree's real footprint. RSS is cheap (statm) and sampled during the
run; PSS costs ~1 ms per process (smaps_rollup) and is read once, after it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from types import TracebackType
from urllib.parse import urlsplit

import psutil

from polyperf.common.background import BackgroundLoop
from polyperf.serve.cpu_account import CpuAccount
from polyperf.serve.cpu_budget import CpuBudgetError

__all__ = [
    "DB_CPU_LIMIT",
    "ConnectionProbe",
    "account_tree",
    "is_db_bound",
    "pin_tree",
    "postmaster_pid",
    "tree_pss",
    "tree_rss",
]

DB_CPU_LIMIT = 0.90  # like the client's: a tree using >= 90% of the cores it has is the limit

# (open, in use): every app's pool keeps its connections open; "in use" are those not idle at that instant
_CONNECTIONS_SQL = (
    "SELECT count(*), count(*) FILTER (WHERE state <> 'idle') FROM pg_stat_activity "
    "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
)


def is_db_bound(db_cpu_s: float, server_cpu_s: float, duration: float, *, cores: int, shared: bool) -> bool:
    """True if PostgreSQL limited the run (pure). On cores of its own: it used >= 90% of them. Sharing the
    server's cores: together they used >= 90% of them and PostgreSQL took at least half of that."""
    if duration <= 0 or cores <= 0:
        return False
    if not shared:
        return db_cpu_s / duration / cores >= DB_CPU_LIMIT
    return (db_cpu_s + server_cpu_s) / duration / cores >= DB_CPU_LIMIT and db_cpu_s >= server_cpu_s


def postmaster_pid(dsn: str) -> int | None:
    """The pid of the server process tree behind `dsn` when it runs on this machine and is visible here
    (the parent of this connection's backend), else None: a remote server's CPU cannot be measured."""
    import psycopg

    host = urlsplit(dsn).hostname or ""
    if host not in ("", "localhost", "127.0.0.1", "::1") and not host.startswith("/"):
        return None
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
            backend = int(conn.execute("SELECT pg_backend_pid()").fetchone()[0])
            parent = psutil.Process(backend).parent()
    except (psycopg.Error, psutil.Error):
        return None
    return parent.pid if parent is not None and "postgres" in parent.name() else None


def pin_tree(pid: int, cpus: Sequence[int]) -> int:
    """Pins a process and its current children to `cpus` (children forked later inherit it from the root);
    returns how many processes were pinned."""
    pinned = 0
    try:
        procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return 0
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.cpu_affinity(list(cpus))
            pinned += 1
    return pinned


def account_tree(account: CpuAccount, pid: int) -> int:
    """Moves a process tree we started (never a user's server) into `account`, root first, so backends forked
    from then on are counted there too; returns how many processes moved."""
    moved = 0
    for proc in _tree(pid):
        with contextlib.suppress(CpuBudgetError, OSError):
            account.add(proc.pid)
            moved += 1
    return moved


def _tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def tree_rss(pid: int) -> tuple[int, int]:
    """(sum of RSS in bytes, processes read) over `pid` and its descendants; a process that cannot be read
    (gone, another user's) is left out of both."""
    total = seen = 0
    for proc in _tree(pid):
        with contextlib.suppress(psutil.Error):
            total += proc.memory_info().rss
            seen += 1
    return total, seen


def tree_pss(pid: int) -> tuple[int, int]:
    """(sum of PSS in bytes, processes read) over `pid` and its descendants, from /proc/<pid>/smaps_rollup."""
    total = seen = 0
    for proc in _tree(pid):
        try:
            with open(f"/proc/{proc.pid}/smaps_rollup") as fh:
                total += next(int(line.split()[1]) * 1024 for line in fh if line.startswith("Pss:"))
            seen += 1
        except (OSError, StopIteration, ValueError, IndexError):
            continue
    return total, seen


class ConnectionProbe(BackgroundLoop):
    """Client connections open and in use (`pg_stat_activity`, its own left out), sampled every `interval`
    seconds in a thread pinned to `cpus`, at most `max_samples` times; errors (a restarting server) are
    counted, not raised. With `pid` (the postmaster, when it runs here) the tree's summed RSS is sampled too,
    every `memory_every` samples, and with `pss` its summed PSS read once when the probe stops (~1 ms per
    backend: hundreds of them take a while)."""

    def __init__(
        self,
        dsn: str,
        *,
        interval: float = 0.05,
        cpus: Sequence[int] = (),
        max_samples: int = 3000,
        pid: int | None = None,
        memory_every: int = 5,
        pss: bool = False,
    ) -> None:
        super().__init__("polyperf-pg-connections", cpus)
        self.join_timeout = 10.0
        self.dsn = dsn
        self.interval = interval
        self.max_samples = max_samples
        self.samples: list[tuple[float, int, int]] = []  # (epoch s, open, in use)
        self.errors = 0
        self.pid = pid
        self.memory_every = memory_every
        self.want_pss = pss
        self.rss: list[tuple[float, int]] = []  # (epoch s, summed RSS bytes) of every readable sample
        self.pss: int | None = None  # summed PSS bytes after the run (None: not readable here)

    @property
    def peak(self) -> int:
        """Most connections in use at once (sampled)."""
        return max((n for _t, _open, n in self.samples), default=0)

    @property
    def mean(self) -> float:
        return sum(n for _t, _open, n in self.samples) / len(self.samples) if self.samples else 0.0

    @property
    def open_peak(self) -> int:
        return max((n for _t, n, _active in self.samples), default=0)

    @property
    def rss_peak(self) -> int:
        """The largest summed RSS sampled (0: none could be read)."""
        return max((n for _t, n in self.rss), default=0)

    def _sample_memory(self) -> None:
        if self.pid is not None:
            total, seen = tree_rss(self.pid)
            if seen:
                self.rss.append((time.time(), total))

    def _loop(self) -> None:
        import psycopg

        conn = None
        tick = 0
        while not self._stop.is_set() and len(self.samples) < self.max_samples:
            if tick % self.memory_every == 0:
                self._sample_memory()
            tick += 1
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=2)
                opened, active = conn.execute(_CONNECTIONS_SQL).fetchone()
                self.samples.append((time.time(), int(opened), int(active)))
            except psycopg.Error:
                self.errors += 1
                with contextlib.suppress(psycopg.Error):
                    if conn is not None:
                        conn.close()
                conn = None
            self._stop.wait(self.interval)
        if conn is not None:
            with contextlib.suppress(psycopg.Error):
                conn.close()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        super().__exit__(exc_type, exc, tb)
        if self.pid is not None:
            self._sample_memory()  # the window's end, as the loop may have slept through it
        if self.pid is not None and self.want_pss:
            total, seen = tree_pss(self.pid)
            self.pss = total if seen else None
