"""`LoadEnv.count`: syscalls and allocations per request of one target over a fixed number of requests after
a warm-up, recorded as `count` rows beside the timed ones. The target runs a second time for it, never the
timed server: the Rust apps as their `counting` build variant (a counting global allocator), the Go apps as
the same binary with the runtime's counter turned on (`POLYPERF_ALLOC_COUNTER_PORT`, loopback only). Where
perf or strace is installed, one more batch runs under it for every syscall by name; its time is kept only
as the tracer's overhead. `measure.counts` does the counting; the timed window's syscalls are `load_suite`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from polyperf.build import build, get_app
from polyperf.common.net import free_port
from polyperf.common.paths import log_part
from polyperf.errors import PolyperfError
from polyperf.measure.count_parse import IoCounts, per_request, request_bytes
from polyperf.measure.counts import (
    ALLOC_COUNTER_ENV,
    SyscallTrace,
    drive,
    io_counts,
    read_alloc_counter,
    syscall_tracer,
)
from polyperf.record.recorder import Metric, Recorder
from polyperf.serve.fleet import Fleet, Target
from polyperf.serve.server import Server

__all__ = ["CountEnv", "CountPlan", "count_target", "counting_spec", "io_rows", "maybe_io_counts", "window_io_rows"]


class CountEnv(Protocol):
    """What a count needs of its load environment (a `LoadEnv`), named here so that this module does not import
    the one that calls it."""

    fleet: Fleet
    log_dir: Path
    params: dict[str, Any]
    record: Recorder

    def note_problem(self, text: str) -> None: ...


@dataclass(frozen=True)
class CountPlan:
    """What one count measures: `requests` after `warmup` (one at a time on one keep-alive connection), the
    request itself, then the same again per `pipelined` depth (that many requests per write, recorded under
    `<case>_pipelined`), and where perf or strace is installed (`trace`) every syscall by name over one more
    batch of `trace_requests`."""

    requests: int = 2_000
    warmup: int = 500
    method: str = "GET"
    body: bytes = b""
    pipelined: tuple[int, ...] = ()
    trace: bool = True
    trace_requests: int = 1_000


def counting_spec(app_spec: str) -> tuple[str, str]:
    """(app spec to start, allocation counter) for counting `app_spec`: a Rust app's `counting` variant (or
    `counting-<variant>` where one matches the variant, e.g. mimalloc's), a Go app as it is."""
    app, variant = get_app(app_spec)
    if app.language == "go":
        return app_spec, "go runtime Mallocs"
    for name in (f"counting-{variant}", "counting"):
        if name in app.variants:
            return f"{app.name}:{name}", "counting allocator (alloc + alloc_zeroed + realloc)"
    raise PolyperfError(f"{app.name} has no counting build variant (variants: {', '.join(app.variants)})")


def io_rows(delta: IoCounts, requests: int) -> list[Metric]:
    """Read- and write-family syscalls per request (/proc/PID/io), and their sum."""
    source = {"source": "proc_io"}
    return [
        ("syscalls_per_request", per_request(delta.total, requests), "count", {**source, "family": "read+write"}),
        ("read_syscalls_per_request", per_request(delta.reads, requests), "count", source),
        ("write_syscalls_per_request", per_request(delta.writes, requests), "count", source),
    ]


def maybe_io_counts(pid: int) -> IoCounts | None:
    """/proc/PID/io of the tree, or None where it cannot be read (the timed run goes on without it)."""
    try:
        return io_counts(pid)
    except PolyperfError:
        return None


def window_io_rows(io: list[IoCounts | None], requests: int) -> list[Metric]:
    """The timed window's syscalls per request, from the counts at the driver's start and end."""
    if len(io) != 2 or io[0] is None or io[1] is None or requests <= 0:
        return []
    return io_rows(io[1] - io[0], requests)


def _batch(server: Server, request: bytes, plan: CountPlan, counter_port: int, depth: int) -> tuple[list, float]:
    """Allocations and /proc/PID/io per request over `plan.requests` after `plan.warmup`, `depth` per write."""
    drive(server.host, server.port, request, plan.warmup, depth=depth)
    io_before, allocs_before = io_counts(server.pid), read_alloc_counter(counter_port)
    seconds = drive(server.host, server.port, request, plan.requests, depth=depth)
    allocs_after, io_after = read_alloc_counter(counter_port), io_counts(server.pid)
    server.check_alive()
    allocations = per_request(allocs_after - allocs_before, plan.requests)
    depth_param = {"pipeline_depth": depth}
    rows = [("allocations_per_request", allocations, "count", depth_param)]
    rows += [(m, v, u, {**extra, **depth_param}) for m, v, u, extra in io_rows(io_after - io_before, plan.requests)]
    return rows, seconds


def _by_name(server: Server, request: bytes, plan: CountPlan, seconds: float, out: Path) -> tuple[list, str]:
    """Every syscall by name over `plan.trace_requests` more, and the tracer's overhead; a note without one."""
    tool = syscall_tracer() if plan.trace else None
    if tool is None:
        return [], "not traced (neither perf nor strace installed)" if plan.trace else ""
    with SyscallTrace(server.pid, out, tool=tool) as trace:
        traced = drive(server.host, server.port, request, plan.trace_requests)
    n = plan.trace_requests
    rows = [
        ("syscalls_per_request_by_name", per_request(calls, n), "count", {"syscall": name, "tracer": tool})
        for name, calls in sorted(trace.counts.items())
    ]
    # the tracer's cost on the same batch, untraced vs traced (a Python client: the server's own slowdown is larger)
    untraced = seconds * n / plan.requests
    rows.append(
        ("syscall_trace_overhead", traced / untraced if untraced > 0 else float("nan"), "ratio", {"tracer": tool})
    )
    return rows, ""


def _measure(
    server: Server, path: str, plan: CountPlan, counter_port: int, trace_dir: Path
) -> tuple[dict[str, list[Metric]], str]:
    """The counts of one started server, by case suffix ("" one at a time, "_pipelined")."""
    request = request_bytes(plan.method, path, f"{server.host}:{server.port}", plan.body)
    rows, seconds = _batch(server, request, plan, counter_port, 1)
    traced, note = _by_name(server, request, plan, seconds, trace_dir / f"syscalls-{server.app.name}-{server.port}.txt")
    out = {"": rows + [(m, v, u, {**x, "pipeline_depth": 1}) for m, v, u, x in traced]}
    for depth in plan.pipelined:
        out["_pipelined"] = out.get("_pipelined", []) + _batch(server, request, plan, counter_port, depth)[0]
    return out, note


def count_target(
    env: CountEnv,
    target: Target,
    plan: CountPlan,
    *,
    case: str,
    repeat: int = 0,
    params: Mapping[str, Any] | None = None,
) -> bool:
    """Counts `target` by `plan` and records the rows under `case`; False (with the reason in
    the environment's problems) when the count could not be taken."""
    fleet = env.fleet
    counter_port = free_port()
    try:
        spec, counter = counting_spec(target.app)
        build(spec, log_dir=log_part(env.log_dir, "builds"))
        server = Server(
            spec,
            log_dir=log_part(env.log_dir, "servers"),
            cpus=fleet.server_cpus,
            workers=fleet.workers,
            database_url=fleet.database_url,
            args=target.args,
            env={**fleet.env, ALLOC_COUNTER_ENV: str(counter_port)},
        )
        with server:
            by_case, note = _measure(server, target.path, plan, counter_port, log_part(env.log_dir, "counts"))
    except PolyperfError as exc:
        env.note_problem(f"{case} {target.key}: {exc}")
        return False
    run_params = {
        **env.params,
        **target.params,
        "path": target.path,
        "method": plan.method,
        "requests": plan.requests,
        "warmup": plan.warmup,
        "connections": 1,
        "alloc_counter": counter,
        "build": spec,
        **({"trace_note": note} if note else {}),
        **(params or {}),
    }
    for suffix, rows in by_case.items():
        env.record.many(
            rows,
            case=case + suffix,
            implementation=target.name,
            variant=target.variant,
            driver="polyperf-counts",
            repeat=repeat,
            params=run_params,
        )
    return True
