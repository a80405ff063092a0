"""The servers of one experiment: each target built, started pinned (one worker per server CPU) and
verified before any load; a target that fails a step is kept out with its reason."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from polyperf.build import build, get_app
from polyperf.errors import PolyperfError
from polyperf.serve.cpu_budget import CpuBudget, threads_for_budget
from polyperf.serve.server import Server
from polyperf.serve.verify import require_verified, verify

__all__ = ["DEFAULT_QUOTA_PERIOD_S", "Fleet", "Target"]

# 10 ms: measured to keep the quota fully used and capacity proportional to it; 100 ms stalls pile up requests
DEFAULT_QUOTA_PERIOD_S = 0.010


@dataclass(frozen=True)
class Target:
    """One server configuration under load: an app (plus args) and the path the drivers GET."""

    app: str  # registry name (`name[:variant]`); the rows' `implementation` is the name
    path: str
    variant: str = ""  # e.g. the runtime ("multi") or build variant: the rows' `variant`
    args: tuple[str, ...] = ()
    params: Mapping[str, Any] = field(default_factory=dict)
    instance: str = ""  # tells apart servers whose rows differ only in params (e.g. document counts)

    @property
    def name(self) -> str:
        return self.app.partition(":")[0]

    @property
    def key(self) -> str:
        key = f"{self.name}/{self.variant}" if self.variant else self.name
        return f"{key}#{self.instance}" if self.instance else key


class Fleet:
    """Builds, starts (pinned to `server_cpus`, one worker per CPU unless `workers` says otherwise) and
    verifies every target; failures land in `failed` and the others go on."""

    def __init__(
        self,
        targets: Sequence[Target],
        *,
        log_dir: Path,
        server_cpus: Sequence[int],
        workers: int | None = None,
        database_url: str | None = None,
        env: Mapping[str, str] | None = None,
        cpu_quota: float | None = None,
        quota_period_s: float = DEFAULT_QUOTA_PERIOD_S,
    ) -> None:
        self.targets = list(targets)
        self.log_dir = Path(log_dir)
        self.server_cpus = list(server_cpus)
        self.cpu_quota = cpu_quota
        self.quota_period_s = quota_period_s
        # runtime threads match the budget: a tokio worker or Go P per CPU it may use
        self.workers = workers or (threads_for_budget(cpu_quota) if cpu_quota else len(self.server_cpus))
        self.database_url = database_url
        # gnet's --workers sets its loops, not GOMAXPROCS; Go reads a cgroup limit only at start, before the move
        self.env = {"GOMAXPROCS": str(self.workers), **(env or {})}
        self.servers: dict[str, Server] = {}
        self.budgets: dict[str, CpuBudget] = {}
        self.failed: dict[str, str] = {}

    def start(self) -> Fleet:
        verified: set[str] = set()
        for target in self.targets:
            try:
                app, _variant = get_app(target.app)
                build(target.app, log_dir=self.log_dir)
                server = Server(
                    target.app,
                    log_dir=self.log_dir,
                    cpus=self.server_cpus,
                    workers=self.workers,
                    database_url=self.database_url,
                    args=target.args,
                    env=self.env,
                ).start()
                self.servers[target.key] = server
                if self.cpu_quota:
                    self._budget(target.key, server)
                if target.app not in verified:  # one app binary, verified once (checks take ~1.5 s)
                    require_verified(
                        f"{target.key} on {server.url}",
                        verify(server.url, app.checks, with_db=bool(self.database_url) and app.uses_database),
                    )
                    verified.add(target.app)
            except PolyperfError as exc:
                self.drop(target.key, f"{type(exc).__name__}: {exc}")
        return self

    def _budget(self, key: str, server: Server) -> None:
        # one cgroup per server, so throttling is counted per server; a high weight lets it win its quota on a
        # machine that runs other work too
        budget = CpuBudget(self.cpu_quota or 1.0, self.quota_period_s, key, weight=10_000).create()
        self.budgets[key] = budget
        budget.add(server.pid)

    def set_cpu_quota(self, fraction: float) -> None:
        """Changes every server's CPU budget in place (calibration)."""
        self.cpu_quota = fraction
        for budget in self.budgets.values():
            budget.set_fraction(fraction)

    @property
    def running(self) -> list[tuple[Target, Server]]:
        return [(t, self.servers[t.key]) for t in self.targets if t.key in self.servers]

    def drop(self, key: str, reason: str) -> None:
        self.failed[key] = reason
        server = self.servers.pop(key, None)
        if server is not None:
            with contextlib.suppress(PolyperfError):
                server.stop()
        budget = self.budgets.pop(key, None)
        if budget is not None:
            with contextlib.suppress(PolyperfError):
                budget.remove()

    def stop(self) -> None:
        for key in list(self.servers):
            self.servers.pop(key).stop()
        for key in list(self.budgets):
            with contextlib.suppress(PolyperfError):
                self.budgets.pop(key).remove()

    def __enter__(self) -> Fleet:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
