"""locust as a load driver, through its library API (`Environment`, runners, `FastHttpUser`), headless.

Closed model: `users` users, each sending its next request as soon as the last is answered, spawned
at `spawn_rate`; or a step ramp (`steps`, a `LoadTestShape`). One process runs a `LocalRunner`;
`processes > 1` runs a `MasterRunner` plus that many `WorkerRunner` processes, the way locust scales
out, so the client can use every core it is given. Every process is started by `procs.spawn`, pinned
to the client CPUs, and stopped on the way out whatever happens.

Across hosts: `external_workers=N` makes the master bind `master_bind` ("ADDR:PORT", e.g. the lab
network's address) and wait (bounded by `worker_wait`) for N more workers started elsewhere with
`polyperf worker --master ADDR:PORT`; the request budget is split evenly over every worker.

locust itself runs in those child processes (`locust_child.py`), never in the harness: importing it
monkey-patches the interpreter for gevent. Its stats come from locust's own objects (`RequestStats`:
counts, failures, response-time percentiles, requests per second), which round response times to
whole milliseconds below 100 ms: `latency_resolution` says so, and reports must too.

POST mode (`method="POST"`, `body`: a JSON string, or "devices" for a random device per request):
`think` seconds between a user's requests, `timeout` per request, stopped users finish their request,
and every request is logged (`extra["requests_logs"]`, read with `polyperf.measure.device_table`).
"""

from __future__ import annotations

import json
import math
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from polyperf.common import procs
from polyperf.common.logs import log_tail
from polyperf.common.net import free_port
from polyperf.load.result import Bounds, LoadFailed, LoadResult, OnSpawn, check_target

__all__ = ["DEFAULT_MASTER_PORT", "LOCUST_RESOLUTION", "connect_host", "parse_hostport", "run_locust"]

CHILD = Path(__file__).with_name("locust_child.py")
LOCUST_RESOLUTION = 0.001  # locust stores response times in whole ms below 100 ms (coarser above)
STARTUP_ALLOWANCE = 45.0  # importing locust/gevent and connecting workers, on a busy 2-core box
DEFAULT_MASTER_PORT = 5557  # locust's own default
_HOSTPORT = re.compile(r"(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[A-Za-z0-9.*-]+))(?::(?P<port>[0-9]{1,5}))?", re.ASCII)


def parse_hostport(text: str, default_port: int = DEFAULT_MASTER_PORT) -> tuple[str, int]:
    """ "ADDR:PORT", "ADDR", "[::1]:PORT" -> (host, port) (pure); anything else (user-info, a path, a port
    outside 0-65535) is refused with ValueError."""
    match = _HOSTPORT.fullmatch(text)
    port = int(match["port"]) if match and match["port"] else default_port
    if match is None or not 0 <= port <= 65535:
        raise ValueError(f"{text!r} is not ADDR[:PORT] (an IPv6 address in brackets)")
    return match["v6"] or match["host"], port


def connect_host(bind: str) -> str:
    """Where a local worker reaches a master bound to `bind` (a wildcard bind is reached on loopback)."""
    return "127.0.0.1" if bind in ("", "*", "0.0.0.0") else bind


def _spawn(
    role: str, cfg_path: Path, log_dir: Path, tag: str, cpus: Sequence[int], started: list, on_spawn: OnSpawn | None
) -> object:
    proc = procs.spawn(
        [sys.executable, str(CHILD), str(cfg_path), role], log_path=log_dir / f"{tag}-{role}.log", cpus=cpus
    )
    started.append((role, proc, log_dir / f"{tag}-{role}.log"))
    if on_spawn:
        on_spawn(proc.pid)
    return proc


def _wait(started: list, deadline: float, alive: Callable[[], None] | None) -> None:
    """Waits for the lead process (local or master); fails fast if a worker or the server dies."""
    role, lead, lead_log = started[0]
    while lead.poll() is None:
        if time.monotonic() > deadline:
            raise LoadFailed(f"locust {role} did not finish in time; log {lead_log}: {log_tail(lead_log)}")
        if alive is not None:
            alive()
        for worker_role, proc, log in started[1:]:
            if proc.poll() not in (None, 0):
                raise LoadFailed(
                    f"locust {worker_role} (pid {proc.pid}) exited with {proc.returncode}; log {log}: {log_tail(log)}"
                )
        time.sleep(0.05)
    if lead.returncode != 0:
        raise LoadFailed(f"locust {role} exited with {lead.returncode}; log {lead_log}: {log_tail(lead_log)}")


def run_locust(
    url: str,
    *,
    bounds: Bounds,
    client_cpus: Sequence[int],
    log_dir: Path,
    users: int = 10,
    spawn_rate: float = 100.0,
    steps: Sequence[tuple[int, float]] = (),
    processes: int | None = None,
    on_spawn: OnSpawn | None = None,
    alive: Callable[[], None] | None = None,
    allow_remote: bool = False,
    external_workers: int = 0,
    master_bind: str | None = None,
    worker_wait: float = 60.0,
    method: str = "GET",
    body: str | None = None,
    think: float = 0.0,
    timeout: float | None = None,
) -> LoadResult:
    """GETs `url` (loopback unless `allow_remote`) with locust until `bounds` stop it; see the module doc.

    `steps` = [(users, seconds), ...] runs the step ramp instead of a fixed `users`.
    `processes` defaults to one per client CPU (1 → LocalRunner, N > 1 → master + N workers), and to no
    local worker when `external_workers` > 0 (then the master waits for those, on `master_bind`).
    `alive` is called while waiting (e.g. `Server.check_alive`); whatever it raises ends the run.
    """
    target = check_target(url, allow_remote=allow_remote)
    url = target.url  # what every process loads, and what the result reports
    if processes is None:
        processes = 0 if external_workers else max(1, len(client_cpus))
    workers = processes + external_workers if (external_workers or processes > 1) else 0
    bind_host, bind_port = parse_hostport(master_bind or "127.0.0.1:0", 0)
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    tag = f"locust-{target.port}-{time.time_ns()}"
    out = log_dir / f"{tag}.json"
    cfg = {
        "host": target.origin,
        "path": target.path,
        "users": users,
        "spawn_rate": spawn_rate,
        "steps": [list(s) for s in steps],
        "duration": bounds.duration,
        "max_requests": bounds.max_requests,
        "process_budget": math.ceil(bounds.max_requests / max(1, workers)),
        "workers": workers,
        "master_bind": bind_host,
        "master_host": connect_host(bind_host),
        "master_port": (bind_port or free_port(connect_host(bind_host))) if workers else 0,
        "worker_wait": worker_wait,
        "allow_remote": allow_remote,
        "out": str(out),
    }
    if method != "GET":
        cfg |= {
            "method": method,
            "body": body,
            "think": think,
            "timeout": timeout,
            "requests_log": str(log_dir / f"{tag}-requests"),
            "stop_timeout": (timeout or 10.0) + 1.0,  # a stopped user finishes its request: none is cut off
        }
    cfg_path = log_dir / f"{tag}.config.json"
    cfg_path.write_text(json.dumps(cfg))
    started: list = []
    try:
        if not workers:
            _spawn("local", cfg_path, log_dir, tag, client_cpus, started, on_spawn)
        else:
            _spawn("master", cfg_path, log_dir, tag, client_cpus, started, on_spawn)
            for _ in range(processes):
                _spawn("worker", cfg_path, log_dir, tag, client_cpus, started, on_spawn)
        allowance = STARTUP_ALLOWANCE + (worker_wait if external_workers else 0.0)
        _wait(started, time.monotonic() + allowance + bounds.duration + bounds.grace, alive)
    finally:
        for _role, proc, _log in reversed(started):
            procs.stop(proc, grace=5.0)
    if not out.exists():
        raise LoadFailed(f"locust wrote no result to {out}; log: {log_tail(started[0][2])}")
    return _to_result(json.loads(out.read_text()), url, steps, users, workers, client_cpus, out)


def _to_result(
    data: dict,
    url: str,
    steps: Sequence[tuple[int, float]],
    users: int,
    processes: int,
    client_cpus: Sequence[int],
    raw: Path,
) -> LoadResult:
    result = LoadResult(
        driver="locust",
        mode="ramp" if steps else "closed",
        url=url,
        started_at=data["started_at"],
        ended_at=data["ended_at"],
        requests=data["requests"],
        successes=data["requests"] - data["failures"],
        failures=data["failures"],
        latency={float(p): ms / 1000 for p, ms in data["percentiles_ms"].items()},
        latency_resolution=LOCUST_RESOLUTION,
        connections=max((s[0] for s in steps), default=users),
        errors=data["errors"],
        status_counts={int(k): v for k, v in data["status_counts"].items()},
        history=[tuple(h) for h in data["history"]],
        client_processes=processes + 1 if processes else 1,
        client_cpus=tuple(client_cpus),
        extra={
            "peak_users": data["peak_users"],
            "workers": data["workers"],
            "raw": str(raw),
            "requests_logs": sorted(str(p) for p in raw.parent.glob(f"{raw.stem}-requests-*.jsonl")),
        },
    )
    result.check()
    return result
