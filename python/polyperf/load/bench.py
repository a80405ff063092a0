"""What the load suites share: the CPU split between server and client, a fleet of apps started pinned
and verified before any load, one measured run (driver + `metrics.measure`), and a measurement as
tidy rows (metric names of issue 5: `rps`, `latency_p50_ms`, ..., `cpu_us_per_request`, `client_bound`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from polyperf.apps import get_app
from polyperf.build import build
from polyperf.errors import PolyperfError, ServerFailed
from polyperf.load.common import LoadFailed, LoadResult, OnSpawn
from polyperf.metrics import Measurement, measure
from polyperf.server import Server, parse_cpus
from polyperf.verify import require_verified, verify

__all__ = ["Campaign", "Fleet", "Target", "cpu_label", "measurement_rows", "run_measured", "split_cpus",
           "suite_options"]

# A driver call with everything bound but the `on_spawn` hook and the server's `alive` check.
Driver = Callable[[OnSpawn, Callable[[], None]], LoadResult]
Recorder = Callable[..., None]  # the suites' `record` fixture


def split_cpus(server: str | None = None, client: str | None = None) -> tuple[list[int], list[int]]:
    """Server and client CPU sets: as given (`"0"`, `"1-3"`), else the first half of the CPUs this
    process may use for the server and the rest for the client (on 2 cores: server 0, client 1)."""
    available = sorted(os.sched_getaffinity(0))
    server_cpus = parse_cpus(server or os.environ.get("POLYPERF_SERVER_CPUS"))
    client_cpus = parse_cpus(client or os.environ.get("POLYPERF_CLIENT_CPUS"))
    half = max(1, len(available) // 2)
    server_cpus = server_cpus or available[:half]
    client_cpus = client_cpus or [c for c in available if c not in server_cpus] or available
    return server_cpus, client_cpus


def suite_options(config: Any) -> tuple[list[int], list[int], bool]:
    """(server CPUs, client CPUs, flamegraph?) from the pytest options of `load.pytest_options`, or from
    POLYPERF_SERVER_CPUS / POLYPERF_CLIENT_CPUS / POLYPERF_FLAMEGRAPH=1 when that plugin is not loaded."""
    server_cpus, client_cpus = split_cpus(config.getoption("--server-cpus", None),
                                          config.getoption("--client-cpus", None))
    flamegraph = bool(config.getoption("--flamegraph", False)) or os.environ.get("POLYPERF_FLAMEGRAPH") == "1"
    return server_cpus, client_cpus, flamegraph


def cpu_label(cpus: Sequence[int]) -> str:
    return ",".join(map(str, cpus))


@dataclass(frozen=True)
class Target:
    """One server configuration under load: an app (plus args) and the path the drivers GET."""

    app: str  # registry name, the rows' `implementation`
    path: str
    qualifier: str = ""  # e.g. the runtime: rows' variant becomes "<driver>/<qualifier>"
    args: tuple[str, ...] = ()
    params: Mapping[str, Any] = field(default_factory=dict)
    instance: str = ""  # tells apart servers whose rows differ only in params (e.g. document counts)

    @property
    def key(self) -> str:
        key = f"{self.app}/{self.qualifier}" if self.qualifier else self.app
        return f"{key}#{self.instance}" if self.instance else key

    def variant(self, driver: str) -> str:
        return f"{driver}/{self.qualifier}" if self.qualifier else driver


class Fleet:
    """Builds, starts (pinned to `server_cpus`, one worker per CPU) and verifies every target; a target
    that fails any step is kept out of the load with its reason in `failed`."""

    def __init__(self, targets: Sequence[Target], *, log_dir: Path, server_cpus: Sequence[int]) -> None:
        self.targets = list(targets)
        self.log_dir = Path(log_dir)
        self.server_cpus = list(server_cpus)
        self.servers: dict[str, Server] = {}
        self.failed: dict[str, str] = {}

    def start(self) -> Fleet:
        verified: dict[str, bool] = {}
        for target in self.targets:
            try:
                app, _variant = get_app(target.app)
                build(target.app, log_dir=self.log_dir)
                server = Server(target.app, log_dir=self.log_dir, cpus=self.server_cpus,
                                workers=len(self.server_cpus), args=target.args).start()
                self.servers[target.key] = server
                if not verified.get(target.app):  # one app binary, verified once (checks take ~1.5 s)
                    require_verified(f"{target.key} on {server.url}", verify(server.url, app.checks))
                    verified[target.app] = True
            except PolyperfError as exc:
                self.drop(target.key, f"{type(exc).__name__}: {exc}")
        return self

    @property
    def running(self) -> list[tuple[Target, Server]]:
        return [(t, self.servers[t.key]) for t in self.targets if t.key in self.servers]

    def drop(self, key: str, reason: str) -> None:
        self.failed[key] = reason
        server = self.servers.pop(key, None)
        if server is not None:
            with contextlib.suppress(PolyperfError):
                server.stop()

    def stop(self) -> None:
        for key in list(self.servers):
            self.servers.pop(key).stop()

    def __enter__(self) -> Fleet:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def run_measured(server: Server, driver: Driver, *, client_cpus: Sequence[int]) -> Measurement:
    """One driver run against `server` under `measure`; a server that died raises `ServerFailed`."""
    return measure(server.pid, lambda on_spawn: driver(on_spawn, server.check_alive),
                   client_cpus=client_cpus, alive=server.check_alive)


def measurement_rows(m: Measurement) -> list[tuple[str, float, str, dict[str, Any]]]:
    """(metric, value, unit, extra params) for one measured run; latency in ms as issue 5 names the
    metrics; errors by kind as `errors_by_kind` rows with the kind in params."""
    load = m.load
    rows: list[tuple[str, float, str]] = [
        ("rps", load.rps, "req/s"),
        ("requests", load.requests, "count"),
        ("errors", load.failures, "count"),
        ("non_2xx", load.non_2xx, "count"),
        ("duration_s", load.duration, "s"),
        ("cpu_us_per_request", m.cpu_us_per_request, "us"),
        ("server_cpu_percent", m.server_cpu_fraction * 100, "%"),
        ("rss_peak_bytes", m.server.rss_peak, "bytes"),
        ("rss_mean_bytes", m.server.rss_mean, "bytes"),
        ("server_threads", m.server.threads_max, "count"),
        ("client_cpu_percent", m.client_cpu_fraction * 100, "%"),
        # CPU used + CPU waited for: what the flag uses; waiting shows a machine shared with other work
        ("client_demand_percent", m.client_demand_fraction * 100, "%"),
        ("server_cpu_wait_percent", m.server.wait_seconds / load.duration * 100, "%"),
        ("client_bound", float(m.client_bound), "flag"),
    ]
    for p, name in ((0.5, "p50"), (0.9, "p90"), (0.99, "p99"), (0.999, "p999")):
        if p in load.latency:
            rows.append((f"latency_{name}_ms", load.latency[p] * 1e3, "ms"))
    if load.achieved_rate_ratio is not None:
        rows.append(("achieved_rate_ratio", load.achieved_rate_ratio, "ratio"))
    out = [(metric, float(value), unit, {}) for metric, value, unit in rows]
    out += [("errors_by_kind", float(n), "count", {"kind": kind}) for kind, n in sorted(load.errors.items())]
    return out


class Campaign:
    """Measured runs against a fleet: every measurement becomes rows at once (a later crash keeps them);
    a server that dies is dropped with its exit code and log tail, a driver that fails is noted, and
    the other targets go on. `problems` lists all of it for the suite to report."""

    def __init__(self, fleet: Fleet, record: Recorder, *, client_cpus: Sequence[int],
                 params: Mapping[str, Any], flamegraph_dir: Path | None = None) -> None:
        self.fleet = fleet
        self.flamegraph_dir = flamegraph_dir
        self.record = record
        self.client_cpus = list(client_cpus)
        self.params = dict(params)
        self.problems: list[str] = []

    def run(self, target: Target, driver_name: str, driver: Driver, *, case: str, repeat: int,
            params: Mapping[str, Any], keep: bool = True) -> Measurement | None:
        """One measured run, recorded unless `keep` is false (warm-ups); None if it failed."""
        server = self.fleet.servers.get(target.key)
        if server is None:
            return None
        where = f"{case} {target.key} ({driver_name}, repeat {repeat})"
        try:
            m = run_measured(server, driver, client_cpus=self.client_cpus)
        except ServerFailed as exc:
            self.fleet.drop(target.key, str(exc))
            self.problems.append(f"{where}: server died: {exc}")
            return None
        except LoadFailed as exc:
            self.problems.append(f"{where}: {exc}")
            return None
        if not keep:
            return m
        # client_bound in params too: a flagged repeat is its own series, and claims can leave it out
        full = {**self.params, **target.params, **params, "driver": driver_name, "path": target.path,
                "client_bound": m.client_bound}
        for metric, value, unit, extra in measurement_rows(m):
            self.record(metric, value, unit, case=case, implementation=target.app,
                        variant=target.variant(driver_name), params={**full, **extra}, repeat=repeat)
        return m

    def flamegraph(self, target: Target, driver_name: str, driver: Driver, *, name: str) -> Path | None:
        """An extra, unrecorded run under `perf record` (perf perturbs what it watches, so no numbers come
        from it), rendered to `<flamegraph_dir>/<name>.svg`. Does nothing without `flamegraph_dir`."""
        from polyperf.flamegraph import PerfRecord, render

        server = self.fleet.servers.get(target.key)
        if self.flamegraph_dir is None or server is None:
            return None
        data = self.flamegraph_dir / f"{name}.perf.data"
        try:
            with PerfRecord(server.pid, data, cpus=self.client_cpus):
                run_measured(server, driver, client_cpus=self.client_cpus)
            svg = render(data, self.flamegraph_dir / f"{name}.svg",
                         title=f"{target.key} under {driver_name} ({server.cpus and cpu_label(server.cpus)})")
        except PolyperfError as exc:
            self.problems.append(f"flamegraph {name}: {exc}")
            return None
        finally:
            data.unlink(missing_ok=True)
        return svg
