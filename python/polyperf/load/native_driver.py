"""Native load generators for the ceilings and for fixed-rate latency: oha (Rust, JSON output, `-q` fixed
rate with `--latency-correction` against coordinated omission) and wrk (C, used once to check that
oha's ceiling is wrk's). One core of either drives ~100k+ req/s; locust's FastHttpUser ~9k.

oha is installed by the project into `<repo>/.tools` (`ensure_oha`, called by nox, CI and the suites),
wrk comes from Debian (`apt-get install wrk`). Both run pinned to the client CPUs via `procs.spawn`.
Bounds: oha gets `-n max_requests`; both are interrupted with SIGINT when the duration is up, on which both
stop and still report. wrk sends one fixed request, as oha and bombardier do: its Lua script has only a
`done()` hook (which writes wrk's summary as JSON) — a `request()` function would put wrk into per-request
script mode and measure Lua as well. So wrk cannot stop at a request count: it refuses a request bound that
could be reached within its duration, and fails a run that overshot one.

Redirects and TLS, per generator (a server's answer is not trusted to choose where load goes): oha is told
`--redirect 0` (a 3xx counts as a failure with its status) and verifies certificates (`--insecure` is never
passed); wrk never follows a redirect (it sends one fixed request per connection and counts a 3xx as a non-2xx
answer), but it verifies no certificate, so https is refused for wrk.

Every generator's window follows one rule (`driver_window`): its own run time, placed to end where it
stopped sending, never starting before the harness spawned it (one clock for all).
"""

from __future__ import annotations

import json
import math
import shutil
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from polyperf.common import procs
from polyperf.common.logs import log_tail
from polyperf.common.paths import TOOLS_DIR
from polyperf.common.tools import cargo_install
from polyperf.errors import ToolchainMissing
from polyperf.load.result import PERCENTILES, Bounds, LoadFailed, LoadResult, OnSpawn, require_target
from polyperf.load.worker_job import OHA_SAFETY

__all__ = [
    "OHA_VERSION",
    "WRK_UNREACHABLE_RPS",
    "driver_window",
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


def read_json_output(out: Path, tool: str, log_path: Path) -> Any:
    """The JSON summary a generator wrote to `out`; LoadFailed naming the file, why, and the end of its log."""
    try:
        return json.loads(out.read_text())
    except (OSError, ValueError) as exc:
        raise LoadFailed(f"{tool} wrote no readable JSON to {out}: {exc}; log {log_tail(log_path)}") from None


def run_child(
    cmd: list[str],
    *,
    bounds: Bounds,
    cpus: Sequence[int],
    log_path: Path,
    interrupt: bool,
    on_spawn: OnSpawn | None,
    alive: Callable[[], None] | None,
    end_at_exit: bool = False,
) -> tuple[float, float]:
    """Runs a load generator to completion within its bounds; returns (spawn time, end time), epoch.

    `interrupt`: send SIGINT once `bounds.duration` has passed (oha then reports and exits); either way
    a child still running `bounds.grace` seconds later is killed and the run fails. The end time is the
    SIGINT's, unless `end_at_exit` (a generator that keeps sending until it exits) or it exited by itself.
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
            # the SIGINT waits (bounded) for the generator to catch it: one that arrives before its handler is
            # installed kills it with no report (seen on a loaded 2-core machine with 0.5 s windows)
            ready = _catches_sigint(proc.pid) or elapsed >= bounds.duration + SIGINT_WAIT_S
            if interrupt and not interrupted and elapsed >= bounds.duration and ready:
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
    exited = time.time()
    return spawned, exited if end_at_exit or ended is None else ended


SIGINT_WAIT_S = 5.0  # the longest a generator's start may delay its interrupt past the duration


def _catches_sigint(pid: int) -> bool:
    """Whether the process has installed a SIGINT handler (the SigCgt mask of /proc/PID/status)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) & (1 << (signal.SIGINT - 1)))
    except (OSError, ValueError, IndexError):
        return True  # nothing to wait for where it cannot be read
    return True


def driver_window(spawned: float, ended: float, total: float) -> tuple[float, float]:
    """(start, seconds) of a generator's measured window, the same rule for oha, wrk and bombardier (pure): its
    own run time `total`, placed to end at `ended`, clamped so that it never starts before `spawned`."""
    seconds = max(0.0, min(total, ended - spawned))
    return ended - seconds, seconds


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


# run_oha, run_wrk and bombardier's run take the same keyword arguments on purpose: one call shape for every driver.
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
    per_request: bool = False,
) -> LoadResult:
    """oha against `url` (loopback unless `allow_remote`): closed model with `connections`, or open model at
    `rate` requests/s with latency measured from each request's scheduled time (`--latency-correction`).
    `method` and `body` make every request the same POST (e.g. the matrix app's `{"n": 120}`).
    `per_request`: oha also writes every request (due time, end, status) to a sqlite file (`--db-url`), named
    in `extra["requests_db"]` (see `polyperf.measure.per_second`); oha writes it after the run, at exit.
    oha gets the canonical URL (`require_target`), which `LoadResult.url` reports."""
    url = require_target(url, allow_remote=allow_remote)
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
        *OHA_SAFETY,  # --redirect 0: a 3xx counts as a failure with its status; certificates verified
    ]
    if rate is not None:
        cmd += ["-q", f"{rate:g}", "--latency-correction"]
    if method != "GET" or body is not None:
        cmd += ["-m", method, *(["-d", body, "-H", f"content-type: {content_type}"] if body is not None else [])]
    requests_db = log_dir / f"{tag}.sqlite"
    if per_request:
        cmd += ["--db-url", str(requests_db)]
    spawned, ended = run_child(
        [*cmd, url],
        bounds=bounds,
        cpus=client_cpus,
        log_path=log_dir / f"{tag}.log",
        interrupt=True,
        on_spawn=on_spawn,
        alive=alive,
    )
    data = read_json_output(out, "oha", log_dir / f"{tag}.log")
    requests, successes, status, errors = oha_counts(data)
    started, seconds = driver_window(spawned, ended, float(data["summary"]["total"]))
    latency = oha_latency(data)
    return LoadResult.native(
        "oha",
        url,
        started_at=started,
        seconds=seconds,
        requests=requests,
        successes=successes,
        client_cpus=client_cpus,
        mode="fixed-rate" if rate else "closed",
        latency=latency,
        connections=connections,
        offered_rate=rate,
        errors=errors,
        status_counts=status,
        extra={"raw": str(out), "threads": threads, **({"requests_db": str(requests_db)} if per_request else {})},
    )


# done() only: with no request() (nor response()) function wrk stays in its fixed-request mode
_WRK_SCRIPT = """-- polyperf: wrk's summary as JSON; no request() hook, so every request is the same fixed one
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
# a request bound wrk can never reach in its duration is a safety bound only (no loopback server comes close)
WRK_UNREACHABLE_RPS = 2_000_000


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
    url = require_target(url, allow_remote=allow_remote)
    if url.startswith("https:"):
        raise LoadFailed(f"wrk against {url}: wrk verifies no TLS certificate; use oha, which does")
    if bounds.max_requests < bounds.duration * WRK_UNREACHABLE_RPS:
        raise LoadFailed(
            f"wrk cannot stop at {bounds.max_requests} requests (fixed-request mode stops on time only; a Lua "
            "request() hook would change what it measures): use oha or bombardier for a request bound"
        )
    wrk = ensure_wrk()
    log_dir = Path(log_dir)
    tag = f"wrk-{time.time_ns()}"
    out = log_dir / f"{tag}.json"
    threads = max(1, len(client_cpus))
    script = log_dir / f"{tag}.lua"
    script.write_text(
        _WRK_SCRIPT.format(
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
    # wrk's threads notice the SIGINT on their next 100 ms tick and send until then: its window ends at exit
    spawned, ended = run_child(
        cmd,
        bounds=bounds,
        cpus=client_cpus,
        log_path=log_dir / f"{tag}.log",
        interrupt=True,
        on_spawn=on_spawn,
        alive=alive,
        end_at_exit=True,
    )
    data = read_json_output(out, "wrk", log_dir / f"{tag}.log")
    requests, successes, errors = wrk_counts(data)
    if requests > bounds.max_requests:
        raise LoadFailed(f"wrk sent {requests} requests, over the bound of {bounds.max_requests}")
    started, seconds = driver_window(spawned, ended, data["duration_us"] / 1e6)
    latency = {p: data["latency_us"][f"{p * 100:g}"] / 1e6 for p in PERCENTILES}
    return LoadResult.native(
        "wrk",
        url,
        started_at=started,
        seconds=seconds,
        requests=requests,
        successes=successes,
        client_cpus=client_cpus,
        latency=latency,
        connections=connections,
        errors=errors,
        extra={"raw": str(out), "threads": threads},
    )
