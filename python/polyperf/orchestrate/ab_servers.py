"""The servers' side of `polyperf ab`: each server of a load suite started from both revisions' binaries, and one
side of one repeat measured on demand. HEAD's harness (fleet, drivers, pinning, CPU accounting), each revision's
server.

A side's measurement restarts each of its servers (a fresh process per side and repeat, in a seeded random order),
warms it up unrecorded, and runs oha against it for a short window at 64 connections, the suite's `ceiling` case.
The gated value is the server's CPU per request over the window: its cgroup's exact CPU counter where cgroups are
writable (else /proc's 10 ms ticks), under the same CPU budget for every server where budgets work, so that the
server, not the one client core, is the limit and requests are batched alike in every window. Requests per second
and latencies are recorded beside it, not gated: on a shared machine they also move with everything else running.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

from polyperf.build.revisions import Revision, RevisionError
from polyperf.common.cpus import split_cpus
from polyperf.load import ensure_oha
from polyperf.orchestrate.load_suite import LoadEnv
from polyperf.record.recorder import Recorder
from polyperf.record.schema import Row
from polyperf.serve.cpu_budget import cpu_budget_support
from polyperf.serve.fleet import Fleet, Target
from polyperf.serve.suite_targets import HTTP_FRAMEWORKS

__all__ = ["SERVER_SUITES", "ServerSides", "apps_of"]

SERVER_SUITES: dict[str, Sequence[Target]] = {"http_frameworks": HTTP_FRAMEWORKS}
CASE = "ceiling"  # the suite's closed-model case at 64 connections: the same work, measured the same way


def apps_of(suites: Iterable[str]) -> list[str]:
    """The apps whose binaries the server suites among `suites` need, each once."""
    return list(dict.fromkeys(t.name for s in suites for t in SERVER_SUITES.get(s, ())))


class _PairRows:
    """Where the load environment's rows wait until their side is whole (stands in for the run's `RowWriter`)."""

    def __init__(self) -> None:
        self.rows: list[Row] = []

    def write(self, rows: Iterable[Row]) -> None:
        self.rows.extend(rows)

    def take(self) -> list[Row]:
        rows, self.rows = self.rows, []
        return rows


class ServerSides:
    """The servers of `suites` for sides A and B (`revisions`), started, verified and pinned; `measure(side, repeat,
    slot)` returns one side's rows of one repeat. Use as a context manager: every server and cgroup is stopped on the
    way out, also on failure and Ctrl-C."""

    def __init__(
        self,
        suites: Sequence[str],
        revisions: Mapping[str, Revision],
        *,
        log_dir: Path,
        seed: int,
        env_b: Mapping[str, str] | None = None,
        window_s: float = 0.5,
        warm_up_s: float = 0.2,
        connections: int = 64,
    ) -> None:
        self.window_s, self.warm_up_s, self.connections = window_s, warm_up_s, connections
        self.suite_of: dict[str, str] = {}
        self.sides: dict[str, list[Target]] = {"A": [], "B": []}
        for suite in suites:
            for target in SERVER_SUITES[suite]:
                for side, rev in revisions.items():
                    instance = f"{target.instance}-{side}" if target.instance else side
                    built = dataclasses.replace(
                        target,
                        instance=instance,
                        binary=rev.binaries[target.name],
                        env=dict(env_b or {}) if side == "B" else {},
                        params={**target.params, "side": side, "commit": rev.commit},
                    )
                    self.sides[side].append(built)
                    self.suite_of[built.key] = suite
        self.server_cpus, self.client_cpus = split_cpus()
        self.budget_why = cpu_budget_support() if len(self.client_cpus) <= len(self.server_cpus) else "not needed"
        self.fleet = Fleet(
            [*self.sides["A"], *self.sides["B"]],
            log_dir=log_dir,
            server_cpus=self.server_cpus,
            cpu_quota=1.0 if self.budget_why is None else None,
        )
        self._rows = _PairRows()
        self.env = LoadEnv(
            self.fleet,
            Recorder(self._rows, "ab"),  # type: ignore[arg-type]  # rows are renamed per suite in `measure`
            client_cpus=self.client_cpus,
            log_dir=log_dir,
            seed=seed,
        )
        self.cpu_quota: float | None = None

    def __enter__(self) -> ServerSides:
        ensure_oha()
        self.fleet.__enter__()
        try:
            if self.fleet.failed:
                failed = "; ".join(f"{key}: {why}" for key, why in self.fleet.failed.items())
                raise RevisionError(f"servers that did not start or pass verification: {failed}")
            if self.fleet.budgets:  # the largest budget, the same for every server, that one client core fills
                self.cpu_quota = self.env.calibrate_cpu_quota()
                self.env.add_params(cpu_quota_auto=self.cpu_quota)
        except BaseException:
            self.fleet.stop()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.fleet.stop()

    @property
    def conditions(self) -> dict[str, object]:
        """How the servers were measured, for env.json and the table's footnote."""
        return {
            "server_cpus": self.server_cpus,
            "client_cpus": self.client_cpus,
            "cpu_quota": self.cpu_quota,
            "cpu_quota_missing": self.budget_why,
            "cpu_source": self.fleet.cpu_source,
            "window_s": self.window_s,
            "connections": self.connections,
        }

    def measure(self, side: str, repeat: int) -> list[Row]:
        """Side `side` of repeat `repeat`: every server restarted, warmed up and measured once, in a seeded order."""
        for target in self.env.order(self.sides[side]):
            self.fleet.restart(target.key)
            if target.key not in self.fleet.servers:
                raise RevisionError(f"{target.key} could not be restarted: {self.fleet.failed.get(target.key)}")
            self.env.oha(target, case="warmup", duration=self.warm_up_s, connections=16, keep=False)
            self.env.oha(target, case=CASE, repeat=repeat, duration=self.window_s, connections=self.connections)
            problems = self.env.take_problems()
            if problems:  # a server that died or a load that failed leaves no pair to judge
                raise RevisionError(f"{target.key} (side {side}): {problems[0]}")
        return [self._as_side(row, side) for row in self._rows.take()]

    def _as_side(self, row: Row, side: str) -> Row:
        """A row as ab's table keys it: the suite, the server (with its runtime) as implementation, the side as
        variant."""
        key = next(t.key for t in self.sides[side] if t.name == row.implementation and t.variant == row.variant)
        server = f"{row.implementation}/{row.variant}" if row.variant else row.implementation
        return dataclasses.replace(row, suite=self.suite_of[key], implementation=server, variant=side)
