"""The servers of one experiment: each target built, started pinned (one worker per server CPU) and
verified before any load; a target that fails a step is kept out with its reason."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from polyperf.build import build, get_app
from polyperf.common import steps
from polyperf.common.paths import log_part
from polyperf.errors import PolyperfError
from polyperf.serve.cpu_account import CpuAccount, account_support, remove_stale
from polyperf.serve.cpu_budget import CpuBudget, threads_for_budget
from polyperf.serve.server import Server
from polyperf.serve.verify import require_verified, verify

__all__ = ["DEFAULT_QUOTA_PERIOD_S", "Fleet", "FleetStopFailed", "Target"]

# 10 ms: measured to keep the quota fully used and capacity proportional to it; 100 ms stalls pile up requests
DEFAULT_QUOTA_PERIOD_S = 0.010


class FleetStopFailed(PolyperfError):
    """One or more servers or cgroups of a fleet could not be stopped or removed (each named); the others were."""


@dataclass(frozen=True)
class Target:
    """One server configuration under load: an app (plus args) and the path the drivers GET."""

    app: str  # registry name (`name[:variant]`); the rows' `implementation` is the name
    path: str
    variant: str = ""  # e.g. the runtime ("multi") or build variant: the rows' `variant`
    args: tuple[str, ...] = ()
    params: Mapping[str, Any] = field(default_factory=dict)
    instance: str = ""  # tells apart servers whose rows differ only in params (e.g. document counts)
    # driver options of the request itself (e.g. {"method": "POST", "body": ...}): what calibrations and warm-ups
    # send, where a bare GET of `path` is not the work under test
    request: Mapping[str, Any] = field(default_factory=dict)
    # a binary built elsewhere (one git revision's, for `polyperf ab`), started instead of the registry's build
    binary: Path | None = None
    env: Mapping[str, str] = field(default_factory=dict)  # this server's own extra environment (test knobs)

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
        self.accounts: dict[str, CpuAccount] = {}  # exact CPU per server (a cgroup of its own), where writable
        self.cpu_source = "proc"  # "cgroup" once start() found cgroups writable
        self.affinity: dict[str, list[int]] = {}  # each server's CPU affinity as it was after start
        self.starts: dict[str, int] = {}  # the number of each target's current process (0: the first; `restart`)
        self.failed: dict[str, str] = {}

    def start(self) -> Fleet:
        self._prepare_cgroups()
        verified: set[tuple[str, Path | None]] = set()
        for target in self.targets:
            try:
                app, _variant = get_app(target.app)
                if target.binary is None:
                    build(target.app, log_dir=log_part(self.log_dir, "builds"))
                server = self._start_server(target)
                self._cgroups(target.key, server)
                if (target.app, target.binary) not in verified:  # one binary, verified once (checks take ~1.5 s)
                    require_verified(
                        f"{target.key} on {server.url}",
                        verify(server.url, app.checks, with_db=bool(self.database_url) and app.uses_database),
                    )
                    verified.add((target.app, target.binary))
            except (PolyperfError, OSError) as exc:  # OSError: a server gone before its affinity was read
                self.drop(target.key, f"{type(exc).__name__}: {exc}")
        return self

    def _start_server(self, target: Target) -> Server:
        server = Server(
            target.app,
            log_dir=log_part(self.log_dir, "servers"),
            cpus=self.server_cpus,
            workers=self.workers,
            database_url=self.database_url,
            args=target.args,
            env={**self.env, **target.env},
            binary=target.binary,
        )
        self.servers[target.key] = server  # known before it starts: stop() reaches it whatever happens
        self.starts[target.key] = self.starts.get(target.key, -1) + 1
        server.start()
        self.affinity[target.key] = sorted(os.sched_getaffinity(server.pid))
        return server

    def restart(self, key: str) -> None:
        """A fresh process of a running target: the same binary, arguments, CPUs and cgroups (its budget and CPU
        account go on counting). A server process keeps one speed for its whole life, so a claim resting on one
        process measures that process; `starts[key]` numbers the processes. A restart that fails drops the
        target with its reason."""
        target = next(t for t in self.targets if t.key == key)
        server = self.servers.get(key)
        if server is None:
            return
        try:
            server.stop()
            server = self._start_server(target)
            budget, account = self.budgets.get(key), self.accounts.get(key)
            if budget is not None:
                budget.add(server.pid)
            if account is not None and account.owned:
                account.add(server.pid)
        except (PolyperfError, OSError) as exc:
            self.drop(key, f"restarting: {type(exc).__name__}: {exc}")

    def _prepare_cgroups(self) -> None:
        """Clears what a killed earlier run left, and decides where server CPU comes from (said once)."""
        stale = remove_stale()
        if stale:
            steps.announce(
                f"polyperf: removed {len(stale)} cgroup(s) left by an earlier run that was killed: "
                + ", ".join(map(str, stale))
            )
        why = account_support()
        self.cpu_source = "cgroup" if why is None else "proc"
        if why is not None:
            steps.announce(f"polyperf: server CPU is sampled from /proc (10 ms ticks), not counted by a cgroup: {why}")

    def _cgroups(self, key: str, server: Server) -> None:
        """The server's own cgroups: a budget (one per server, so throttling is counted per server; a high
        weight lets it win its quota on a machine that runs other work too) and its CPU account. Each is
        registered before it is made, so an interrupt in between leaks nothing."""
        budget = None
        if self.cpu_quota:
            budget = self.budgets[key] = CpuBudget(self.cpu_quota, self.quota_period_s, key, weight=10_000)
            budget.create()
            budget.add(server.pid)
        if self.cpu_source == "cgroup":
            account = self.accounts[key] = CpuAccount(key)
            account.create(budget)
            if account.owned:
                account.add(server.pid)

    def server_cpu(self, key: str) -> Callable[[], float] | None:
        """The exact CPU-seconds counter of a server's cgroup, or None where CPU is sampled from /proc."""
        account = self.accounts.get(key)
        return account.usage_s if account is not None else None

    def set_cpu_quota(self, fraction: float) -> None:
        """Changes every server's CPU budget in place (calibration)."""
        self.cpu_quota = fraction
        for budget in self.budgets.values():
            budget.set_fraction(fraction)

    @property
    def running(self) -> list[tuple[Target, Server]]:
        return [(t, self.servers[t.key]) for t in self.targets if t.key in self.servers]

    def drop(self, key: str, reason: str) -> None:
        """Keeps a failed target out with its reason; its server and cgroups go, whatever stopping them does."""
        self.failed[key] = reason
        try:
            self._stop_one(key)
        except Exception as exc:
            self.failed[key] = f"{reason}; stopping it: {type(exc).__name__}: {exc}"

    def _stop_one(self, key: str) -> None:
        """Stops one server and removes its cgroups, all of it even if a step fails; raises the first error."""
        server, account, budget = self.servers.pop(key, None), self.accounts.pop(key, None), self.budgets.pop(key, None)
        parts = [
            server.stop if server else None,
            account.remove if account else None,
            budget.remove if budget else None,
        ]
        errors: list[BaseException] = []
        for step in parts:
            try:
                if step is not None:
                    step()
            except BaseException as exc:  # the other steps run first; raised below
                errors.append(exc)
        if errors:  # an interrupt outranks an error
            raise next((e for e in errors if not isinstance(e, Exception)), errors[0])

    def stop(self) -> None:
        """Stops every server and removes every cgroup whatever one of them does; then raises one error that
        names each failure."""
        failures, interrupt = [], None
        for key in dict.fromkeys([*self.servers, *self.accounts, *self.budgets]):
            try:
                self._stop_one(key)
            except Exception as exc:
                failures.append(f"{key}: {type(exc).__name__}: {exc}")
            except BaseException as exc:  # an interrupt: stop the rest first
                interrupt = interrupt or exc
        if interrupt is not None:
            raise interrupt
        if failures:
            raise FleetStopFailed(f"stopping the fleet: {'; '.join(failures)}")

    def __enter__(self) -> Fleet:
        try:
            return self.start()
        except BaseException:
            with contextlib.suppress(FleetStopFailed):  # the error that stopped the start is the one to see
                self.stop()
            raise

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
