"""Native load generators for the ceilings and for fixed-rate latency: oha (Rust, JSON output, `-q` fixed
rate with `--latency-correction` against coordinated omission) and wrk (C, used once to check that
oha's ceiling is wrk's). One core of either drives ~100k+ req/s; locust's FastHttpUser ~9k.

oha is installed by the project into `<repo>/.tools` (`ensure_oha`, called by nox, CI and the suites),
wrk comes from Debian (`apt-get install wrk`). Both run pinned to the client CPUs via `procs.spawn`.
Bounds: oha gets `-n max_requests`, wrk a Lua script that stops each thread at its share of the
request budget (and writes wrk's summary as JSON); both are interrupted with SIGINT when the duration
is up, on which both stop and still report.
"""

from __future__ import annotations

import json
import math
import shutil
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from polyperf.common import procs
from polyperf.common.logs import log_tail
from polyperf.common.paths import TOOLS_DIR
from polyperf.common.tools import cargo_install
from polyperf.errors import ToolchainMissing
from polyperf.load.common import PERCENTILES, Bounds, LoadFailed, LoadResult, OnSpawn, require_target

__all__ = [
    "OHA_VERSION",
    "ensure_oha",
    "ensure_wrk",
    "oha_counts",
    "oha_latency",
    "run_child",
    "run_oha",
    "run_wrk",
    "wrk_counts",
]

OHA_VERSION = "1.16.0"  # builds with --locked on Rust 1.95 (needs cmake and a C compiler: bundled sqlite)
_OHA_KEYS = {0.5: "p50", 0.9: "p90", 0.99: "p99", 0.999: "p99.9"}
_DEADLINE_ABORT = "aborted due to deadline"  # in flight when oha stopped: not a completed request


def ensure_oha(*, root: Path = TOOLS_DIR, install: bool = True) -> Path:
    """`<root>/bin/oha` at OHA_VERSION, installed with `cargo install oha@VERSION --locked` if missing."""
    return cargo_install("oha", OHA_VERSION, ["oha"], root=root, install=install)[0]


def ensure_wrk() -> Path:
    found = shutil.which("wrk")
    if found is None:
        raise ToolchainMissing("`wrk` not found on PATH: apt-get install wrk")
    return Path(found)


def run_child(
    cmd: list[str],
    *,
    bounds: Bounds,
    cpus: Sequence[int],
    log_path: Path,
    interrupt: bool,
    on_spawn: OnSpawn | None,
    alive: Callable[[], None] | None,
) -> tuple[float, float]:
    """Runs a load generator to completion within its bounds; returns (spawn time, end time), epoch.

    `interrupt`: send SIGINT once `bounds.duration` has passed (oha then reports and exits); either way
    a child still running `bounds.grace` seconds later is killed and the run fails.
    """
    spawned = time.time()
    proc = procs.spawn(cmd, log_path=log_path, cpus=cpus)
    ended = None
    try:
        if on_spawn is not None:
            on_spawn(proc.pid)
        interrupted = False
        while proc.poll() is None:
            elapsed = time.time() - spawned
            if interrupt and not interrupted and elapsed >= bounds.duration:
                ended = time.time()
                proc.send_signal(signal.SIGINT)
                interrupted = True
            if elapsed > bounds.duration + bounds.grace:
                raise LoadFailed(
                    f"{cmd[0]} still running {elapsed:.0f}s after start (bound {bounds.duration}s); "
                    f"killed. Log {log_path}: {log_tail(log_path)}"
                )
            if alive is not None:
                alive()
            time.sleep(0.01)
    finally:
        procs.stop(proc, grace=5.0)
    if proc.returncode != 0:
        raise LoadFailed(f"{' '.join(cmd)} exited with {proc.returncode}; log {log_path}: {log_tail(log_path)}")
    return spawned, ended or time.time()


def oha_counts(data: Mapping) -> tuple[int, int, dict[int, int], dict[str, int]]:
    """(requests, successes, status counts, errors) from oha's JSON; requests cut off by the stop are
    not completed requests and are left out (pure)."""
    status = {int(k): int(v) for k, v in data.get("statusCodeDistribution", {}).items()}
    errors = {k: int(v) for k, v in data.get("errorDistribution", {}).items() if k != _DEADLINE_ABORT}
    successes = sum(n for code, n in status.items() if 200 <= code < 300)
    return sum(status.values()) + sum(errors.values()), successes, status, errors


def oha_latency(data: Mapping) -> dict[float, float]:
    """Percentile -> seconds from oha's JSON (those it reports; none when no request completed) (pure)."""
    found = data.get("latencyPercentiles") or {}
    return {p: float(found[key]) for p, key in _OHA_KEYS.items() if found.get(key) is not None}


def run_oha(
    url: str,
    *,
    bounds: Bounds,
    client_cpus: Sequence[int],
    log_dir: Path,
    connections: int = 64,
    rate: float | None = None,
    on_spawn: OnSpawn | None = None,
    alive: Callable[[], None] | None = None,
    allow_remote: bool = False,
    method: str = "GET",
    body: str | None = None,
    content_type: str = "application/json",
) -> LoadResult:
    """oha against `url` (loopback unless `allow_remote`): closed model with `connections`, or open model at
    `rate` requests/s with latency measured from each request's scheduled time (`--latency-correction`).
    `method` and `body` make every request the same POST (e.g. the matrix app's `{"n": 120}`)."""
    require_target(url, allow_remote=allow_remote)
    oha = ensure_oha(install=False)
    log_dir = Path(log_dir)
    tag = f"oha-{time.time_ns()}"
    out = log_dir / f"{tag}.json"
    threads = max(1, len(client_cpus))
    cmd = [
        str(oha),
        "-n",
        str(bounds.max_requests),
        "-c",
        str(connections),
        "--no-tui",
        "--output-format",
        "json",
        "-o",
        str(out),
        "--worker-threads",
        str(threads),
        "-t",
        "10s",
    ]
    if rate is not None:
        cmd += ["-q", f"{rate:g}", "--latency-correction"]
    if method != "GET" or body is not None:
        cmd += ["-m", method, *(["-d", body, "-H", f"content-type: {content_type}"] if body is not None else [])]
    spawned, ended = run_child(
        [*cmd, url],
        bounds=bounds,
        cpus=client_cpus,
        log_path=log_dir / f"{tag}.log",
        interrupt=True,
        on_spawn=on_spawn,
        alive=alive,
    )
    try:
        data = json.loads(out.read_text())
    except (OSError, ValueError) as exc:
        raise LoadFailed(f"oha wrote no readable JSON to {out}: {exc}") from None
    requests, successes, status, errors = oha_counts(data)
    total = float(data["summary"]["total"])
    started = max(spawned, ended - total)
    latency = oha_latency(data)
    return LoadResult.native(
        "oha",
        url,
        started_at=started,
        seconds=total,
        requests=requests,
        successes=successes,
        client_cpus=client_cpus,
        mode="fixed-rate" if rate else "closed",
        latency=latency,
        connections=connections,
        offered_rate=rate,
        errors=errors,
        status_counts=status,
        extra={"raw": str(out), "threads": threads},
    )


_WRK_SCRIPT = """-- polyperf: stop each thread at its share of the request budget; the summary as JSON
local budget = {budget}
local sent = 0
request = function()
  sent = sent + 1
  if sent > budget then wrk.thread:stop() end
  return wrk.request()
end
done = function(summary, latency, requests)
  local f = assert(io.open({out}, "w"))
  local e = summary.errors
  f:write(string.format('{{"duration_us": %d, "requests": %d, "bytes": %d, ', summary.duration,
    summary.requests, summary.bytes))
  f:write(string.format('"errors": {{"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}}, ',
    e.connect, e.read, e.write, e.status, e.timeout))
  f:write('"latency_us": {{')
  for i, p in ipairs({{{percentiles}}}) do
    if i > 1 then f:write(", ") end
    f:write(string.format('"%s": %f', p, latency:percentile(p)))
  end
  f:write("}}}}")
  f:close()
end
"""


def wrk_counts(data: Mapping) -> tuple[int, int, dict[str, int]]:
    """(requests, successes, errors) from the script's JSON: `requests` there are responses (non-2xx/3xx
    among them, as `status` errors); socket errors are requests that got no response (pure)."""
    errors = {k: int(v) for k, v in data["errors"].items() if int(v)}
    responses = int(data["requests"])
    socket_errors = sum(v for k, v in errors.items() if k != "status")
    return responses + socket_errors, responses - errors.get("status", 0), errors


def run_wrk(
    url: str,
    *,
    bounds: Bounds,
    client_cpus: Sequence[int],
    log_dir: Path,
    connections: int = 64,
    on_spawn: OnSpawn | None = None,
    alive: Callable[[], None] | None = None,
    allow_remote: bool = False,
) -> LoadResult:
    """wrk against `url` (loopback unless `allow_remote`), closed model: the reference for oha's ceiling."""
    require_target(url, allow_remote=allow_remote)
    wrk = ensure_wrk()
    log_dir = Path(log_dir)
    tag = f"wrk-{time.time_ns()}"
    out = log_dir / f"{tag}.json"
    threads = max(1, len(client_cpus))
    script = log_dir / f"{tag}.lua"
    script.write_text(
        _WRK_SCRIPT.format(
            budget=math.ceil(bounds.max_requests / threads),
            out=json.dumps(str(out)),
            percentiles=", ".join(f"{p * 100:g}" for p in PERCENTILES),
        )
    )
    # wrk takes whole seconds only: round up, and interrupt it (SIGINT: it reports) at the real bound
    cmd = [
        str(wrk),
        "-t",
        str(threads),
        "-c",
        str(max(connections, threads)),
        "-d",
        f"{math.ceil(bounds.duration)}s",
        "--timeout",
        "10s",
        "-s",
        str(script),
        url,
    ]
    _spawned, ended = run_child(
        cmd,
        bounds=bounds,
        cpus=client_cpus,
        log_path=log_dir / f"{tag}.log",
        interrupt=True,
        on_spawn=on_spawn,
        alive=alive,
    )
    try:
        data = json.loads(out.read_text())
    except (OSError, ValueError) as exc:
        raise LoadFailed(
            f"wrk wrote no readable JSON to {out}: {exc}; log {log_tail(log_dir / f'{tag}.log')}"
        ) from None
    requests, successes, errors = wrk_counts(data)
    total = data["duration_us"] / 1e6
    latency = {p: data["latency_us"][f"{p * 100:g}"] / 1e6 for p in PERCENTILES}
    return LoadResult.native(
        "wrk",
        url,
        started_at=ended - total,
        seconds=total,
        requests=requests,
        successes=successes,
        client_cpus=client_cpus,
        latency=latency,
        connections=connections,
        errors=errors,
        extra={"raw": str(out), "threads": threads},
    )
