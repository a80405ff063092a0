"""Starts a built app on 127.0.0.1 and a free port (optionally pinned to CPUs), waits until `/healthz`
answers, captures its log, and stops it with SIGTERM then SIGKILL. A server that will not start or
dies mid-run raises `ServerFailed` with its exit code and the tail of its log."""

from __future__ import annotations

import http.client
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from polyperf.build.registry import get_app
from polyperf.common import procs
from polyperf.common.logs import log_tail
from polyperf.common.net import free_port
from polyperf.errors import ServerFailed

__all__ = ["Server"]


class Server:
    """One running app. Use as a context manager; `url` is valid once started."""

    def __init__(
        self,
        app_spec: str,
        *,
        log_dir: Path,
        port: int | None = None,
        host: str = "127.0.0.1",
        cpus: Sequence[int] | None = None,
        workers: int | None = None,
        database_url: str | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        ready_timeout: float = 30.0,
        binary: Path | None = None,
    ) -> None:
        self.app, self.variant = get_app(app_spec)
        self.binary = binary or self.app.binary(self.variant)  # another build of the app (`polyperf ab`'s revisions)
        self.host = host
        self.port = port or free_port(host)
        self.cpus = list(cpus) if cpus else None
        self.workers = workers
        self.database_url = database_url
        self.extra_args = list(args)
        self.env = dict(env or {})
        self.ready_timeout = ready_timeout
        self.log_path = Path(log_dir) / f"{self.app.name}-{self.variant}-{self.port}.log"
        self.proc = None

    @property
    def name(self) -> str:
        return f"{self.app.name}:{self.variant}"

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise ServerFailed(f"{self.name} is not running")
        return self.proc.pid

    def command(self) -> list[str]:
        if not self.binary.exists():
            raise ServerFailed(f"{self.name}: binary {self.binary} not built (run `polyperf build {self.name}`)")
        cmd = [str(self.binary), "--host", self.host, "--port", str(self.port), *self.app.default_args]
        if self.workers:
            cmd += ["--workers", str(self.workers)]
        return cmd + self.extra_args

    def start(self) -> Server:
        env = {**os.environ, **self.env} if self.env else None
        if self.database_url and self.app.uses_database:
            # the apps read DATABASE_URL when --database-url is absent; the environment keeps a password out of
            # argv, which every local user can read in /proc
            env = {**(env or os.environ), "DATABASE_URL": self.database_url}
        self.proc = procs.spawn(self.command(), log_path=self.log_path, cpus=self.cpus, env=env)
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                conn = http.client.HTTPConnection(self.host, self.port, timeout=2)
                conn.request("GET", "/healthz")
                if conn.getresponse().status == 200:
                    conn.close()
                    return
                conn.close()
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise ServerFailed(
            f"{self.name} did not answer GET /healthz on {self.url} within "
            f"{self.ready_timeout:.0f}s; log: {log_tail(self.log_path)}"
        )

    def check_alive(self) -> None:
        """Raises `ServerFailed` (exit code + log tail) if the process has exited."""
        if self.proc is not None and self.proc.poll() is not None:
            code = self.proc.returncode
            procs.stop(self.proc)
            raise ServerFailed(
                f"{self.name} on port {self.port} exited with code {code}; "
                f"log {self.log_path}: {log_tail(self.log_path)}"
            )

    def stop(self, grace: float = 10.0) -> int | None:
        if self.proc is None:
            return None
        return procs.stop(self.proc, grace=grace)

    # The usual context-manager pair, as in cpu_account, cpu_budget and postgres: each names its own start and stop.
    def __enter__(self) -> Server:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
