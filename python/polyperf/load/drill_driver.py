"""Drill, the load tool of the actix-web build-settings article: writes its YAML plan, runs it pinned
to the client CPUs within a time bound, and parses the `--stats` summary it prints.

Drill has no machine-readable statistics (its `--report` file is a one-iteration baseline for `--compare`),
so the summary text is parsed; `--nanosec` prints latencies in ns instead of whole ms. Drill runs all
requests on one current-thread tokio runtime (one client core), keeps one reqwest client per host, counts
a request failed unless its status is 2xx (connection errors count as status 520), and records latencies
to the last body byte in µs in an HDR histogram with 2 significant digits.

Redirects and TLS: drill follows up to 10 redirects (reqwest's default) and has no switch to stop it. So drill
runs with every proxy variable pointing at a closed loopback port and NO_PROXY naming only the target's host: a
redirect to any other host fails to connect (drill counts it failed, status 520) and no load leaves for it. A
redirect to the target's own host is still followed there. drill verifies certificates (polyperf never passes
`--no-check-certificate`).
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from polyperf.common import procs
from polyperf.common.logs import log_tail
from polyperf.common.paths import TOOLS_DIR
from polyperf.common.tools import cargo_install
from polyperf.load.result import PERCENTILES, LoadFailed, LoadResult, check_target

__all__ = [
    "DRILL_VERSION",
    "DrillRun",
    "DrillStats",
    "drill_plan",
    "ensure_drill",
    "parse_drill_stats",
    "run_drill",
    "to_load_result",
]

DRILL_VERSION = "0.9.1"  # `cargo install drill@0.9.1 --locked` builds on Rust 1.95 (needs libssl-dev, pkg-config)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_TIME = re.compile(r"^(\d+(?:\.\d+)?)(ns|ms)$")
_UNITS = {"ns": 1e-9, "ms": 1e-3}
# The global summary's keys as drill 0.9 prints them, in order; per-request blocks before it prefix the name.
_KEYS = {
    "Time taken for tests": "seconds",
    "Total requests": "requests",
    "Successful requests": "successes",
    "Failed requests": "failures",
    "Requests per second": "rps",
    "Median time per request": "median",
    "Average time per request": "mean",
    "Sample standard deviation": "stdev",
    "99.0'th percentile": "p99",
    "99.5'th percentile": "p99_5",
    "99.9'th percentile": "p99_9",
    "Max time per request": "max",
}
_LINE = re.compile(r"^(" + "|".join(re.escape(k) for k in _KEYS) + r")\s+(\S+)")
_HEADER = re.compile(r"^(Concurrency|Iterations)\s+(\d+)\s*$")


@dataclass(frozen=True)
class DrillStats:
    """Drill's global `--stats` summary in base units (seconds, counts, requests per second)."""

    seconds: float  # "Time taken for tests", printed to 0.1 s
    requests: int
    successes: int
    failures: int
    rps: float  # requests / drill's own measured duration, printed to 0.01
    median: float
    mean: float
    stdev: float
    p99: float
    p99_5: float
    p99_9: float
    max: float
    concurrency: int | None = None
    iterations: int | None = None

    @property
    def duration(self) -> float:
        """Drill's measured duration, recovered from req/s (finer than the printed 0.1 s) when possible."""
        return self.requests / self.rps if self.rps > 0 else self.seconds

    @property
    def latency(self) -> dict[float, float]:
        """Quantile -> seconds for the quantiles drill prints (1.0 is the maximum; no p90)."""
        return {0.5: self.median, 0.99: self.p99, 0.995: self.p99_5, 0.999: self.p99_9, 1.0: self.max}


@dataclass(frozen=True)
class DrillRun:
    """One drill run: what was asked, the wall-clock window (epoch s) and the parsed summary."""

    url: str  # base URL + path
    concurrency: int
    requested: int
    started_at: float
    ended_at: float
    stats: DrillStats
    client_cpus: tuple[int, ...]
    plan: Path
    log: Path
    extra: Mapping[str, Any] = field(default_factory=dict)


def _scalar(value: str) -> str:
    # A JSON string is a valid YAML double-quoted scalar: no YAML quoting rules to get wrong.
    return json.dumps(value)


def drill_plan(
    base_url: str,
    path: str,
    body: Mapping[str, Any] | str | None,
    *,
    concurrency: int,
    requests: int,
    method: str = "POST",
    name: str | None = None,
) -> str:
    """The benchmark YAML for `requests` iterations of one request, `concurrency` at a time (pure).

    A mapping body is sent as compact JSON with `Content-Type: application/json`.
    """
    if concurrency < 1 or requests < concurrency:
        # drill itself panics when concurrency > iterations
        raise ValueError(
            f"drill needs 1 <= concurrency <= requests, got concurrency={concurrency}, requests={requests}"
        )
    if not path.startswith("/"):
        raise ValueError(f"request path must start with '/': {path!r}")
    text = body if isinstance(body, str) or body is None else json.dumps(body, separators=(",", ":"))
    if text is not None and "{{" in text:
        raise ValueError(f"drill would interpolate '{{{{ ... }}}}' in the body: {text!r}")
    lines = [
        "# polyperf drill plan (generated): one request, repeated `iterations` times",
        "---",
        f"concurrency: {concurrency}",
        f"base: {_scalar(base_url.rstrip('/'))}",
        f"iterations: {requests}",
        "rampup: 0",
        "",
        "plan:",
        f"  - name: {_scalar(name or f'{method.upper()} {path}')}",
        "    request:",
        f"      url: {_scalar(path)}",
        f"      method: {method.upper()}",
    ]
    if text is not None:
        lines.append(f"      body: {_scalar(text)}")
        if not isinstance(body, str):
            lines += ["      headers:", f"        Content-Type: {_scalar('application/json')}"]
    return "\n".join(lines) + "\n"


_CLOSED = "http://127.0.0.1:9"  # the discard port, closed here: a proxy nothing answers at


def _no_other_hosts(host: str) -> dict[str, str]:
    """Proxy variables that leave drill (reqwest reads them) no way to any host but `host`: see the module doc."""
    proxies = {name: _CLOSED for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "ALL_PROXY")}
    return {**proxies, "all_proxy": _CLOSED, "NO_PROXY": host.strip("[]"), "no_proxy": host.strip("[]")}


def _number(key: str, raw: str) -> float:
    if key in ("seconds", "rps", "requests", "successes", "failures"):
        return float(raw)
    match = _TIME.match(raw)
    if match is None:
        raise ValueError(f"drill summary: cannot read {key!r} value {raw!r} (expected e.g. 1234ns or 12ms)")
    return float(match.group(1)) * _UNITS[match.group(2)]


def parse_drill_stats(output: str) -> DrillStats:
    """The global summary of `drill --stats` output (pure). Raises ValueError if it is missing or
    inconsistent. Colour codes are ignored; latencies may be in ns (`--nanosec`) or whole ms."""
    lines = [_ANSI.sub("", line).strip() for line in output.splitlines()]
    header = {m.group(1).lower(): int(m.group(2)) for m in map(_HEADER.match, lines) if m}
    starts = [i for i, line in enumerate(lines) if line.startswith("Time taken for tests")]
    if not starts:
        raise ValueError("no drill summary ('Time taken for tests') in the output: was --stats given?")
    values: dict[str, float] = {}
    for line in lines[starts[-1] :]:
        match = _LINE.match(line)
        if match:
            key = _KEYS[match.group(1)]
            values.setdefault(key, _number(key, match.group(2)))
    missing = [k for k in _KEYS.values() if k not in values]
    if missing:
        raise ValueError(f"drill summary lacks {', '.join(missing)}")
    counts = {k: int(values.pop(k)) for k in ("requests", "successes", "failures")}
    stats = DrillStats(**counts, **values, concurrency=header.get("concurrency"), iterations=header.get("iterations"))
    if stats.requests != stats.successes + stats.failures:
        raise ValueError(
            f"drill summary: {stats.requests} requests != {stats.successes} successful + {stats.failures} failed"
        )
    return stats


def ensure_drill(*, root: Path = TOOLS_DIR, install: bool = True) -> Path:
    """`<root>/bin/drill` at DRILL_VERSION, installed with `cargo install drill@VERSION --locked` if missing."""
    return cargo_install("drill", DRILL_VERSION, ["drill"], root=root, install=install)[0]


def run_drill(
    base_url: str,
    path: str,
    body: Mapping[str, Any] | str | None,
    *,
    concurrency: int,
    requests: int,
    client_cpus: Sequence[int],
    log_dir: Path,
    timeout: float,
    drill: Path | None = None,
    method: str = "POST",
    request_timeout: float = 10.0,
) -> DrillRun:
    """Runs drill against `base_url` + `path` (loopback only), pinned to `client_cpus`; killed and
    `LoadFailed` if it has not finished within `timeout` seconds (drill itself has no time bound)."""
    target = check_target(base_url.rstrip("/") + path)  # loopback only; drill gets the canonical parts
    url, base_url, path = target.url, target.origin, target.path
    drill = drill or ensure_drill(install=False)
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    tag = f"drill-{time.time_ns()}"
    plan, log = log_dir / f"{tag}.yml", log_dir / f"{tag}.log"
    plan.write_text(drill_plan(base_url, path, body, concurrency=concurrency, requests=requests, method=method))
    cmd = [
        str(drill),
        "--benchmark",
        str(plan),
        "--stats",
        "--quiet",
        "--nanosec",
        "--timeout",
        str(max(1, math.ceil(request_timeout))),
    ]
    env = {**os.environ, "NO_COLOR": "1", **_no_other_hosts(target.host)}
    started = time.time()
    proc = procs.spawn(cmd, log_path=log, cpus=client_cpus, env=env)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise LoadFailed(
            f"{' '.join(cmd)} still running after {timeout:g}s; killed. Log {log}: {log_tail(log)}"
        ) from None
    finally:
        procs.stop(proc, grace=5.0)
    ended = time.time()
    if proc.returncode != 0:
        raise LoadFailed(f"{' '.join(cmd)} exited with {proc.returncode}; log {log}: {log_tail(log)}")
    try:
        stats = parse_drill_stats(log.read_text(errors="replace"))
    except ValueError as exc:
        raise LoadFailed(f"drill against {url}: {exc}; log {log}: {log_tail(log)}") from None
    return DrillRun(
        url=url,
        concurrency=concurrency,
        requested=requests,
        started_at=started,
        ended_at=ended,
        stats=stats,
        client_cpus=tuple(client_cpus),
        plan=plan,
        log=log,
        extra={"drill_version": DRILL_VERSION, "command": cmd},
    )


def to_load_result(run: DrillRun) -> LoadResult:
    """The run as the harness's `LoadResult` (closed model). The window is drill's own measured duration,
    ending when the process ended; p90 is absent because drill does not print it."""
    stats = run.stats
    latency = {p: v for p, v in stats.latency.items() if p in PERCENTILES}
    result = LoadResult(
        driver="drill",
        mode="closed",
        url=run.url,
        started_at=run.ended_at - stats.duration,
        ended_at=run.ended_at,
        requests=stats.requests,
        successes=stats.successes,
        failures=stats.failures,
        latency=latency,
        latency_resolution=1e-6,
        connections=run.concurrency,
        client_cpus=run.client_cpus,
        extra={
            **run.extra,
            "log": str(run.log),
            "plan": str(run.plan),
            "mean": stats.mean,
            "stdev": stats.stdev,
            "p99.5": stats.p99_5,
            "max": stats.max,
            "printed_seconds": stats.seconds,
            "latency_significant_digits": 2,
        },
    )
    result.check()
    return result
