"""oha on several client hosts at once: a locust master (`locust_child.py`, role `oha-master`) asks each
`polyperf worker` over locust's own messaging to run one bounded oha against the target and send oha's
JSON summary back; `combine_oha` makes one `LoadResult` of them.

How the parts are combined, and why:
- requests, successes, status codes and errors are summed;
- each worker's window is placed on the master's clock (`received_at` minus the worker's own measured
  delay between oha's exit and its reply, minus oha's `total`), so hosts' clocks need not agree; the
  combined window is the union of the windows, so `rps` = all requests / union (never more than the
  sum of the per-worker rates, which are kept in `extra["per_worker"]`);
- latency percentiles are those of every request of every worker: each worker sends an HDR histogram of
  all the latencies its oha wrote (`latency_hdr`: 3 significant digits, so a merged percentile is at most
  0.1 % above the exact one), the histograms are added and the percentiles read from the sum. A
  histogram must hold exactly the worker's completed requests (oha's status counts), or the run fails.
  Each worker's own oha percentiles stay in `extra["per_worker"]`.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from polyperf.common import procs
from polyperf.common.logs import log_tail
from polyperf.common.net import free_port
from polyperf.load import latency_hdr
from polyperf.load.locust_driver import CHILD, STARTUP_ALLOWANCE, connect_host, parse_hostport
from polyperf.load.native_driver import oha_counts, oha_latency
from polyperf.load.result import PERCENTILES, Bounds, LoadFailed, LoadResult, OnSpawn, check_target
from polyperf.load.worker_job import OhaJob, oha_bound

__all__ = ["combine_oha", "oha_bound", "run_oha_workers", "split_evenly"]


def split_evenly(total: float, parts: int) -> int:
    """Each of `parts` workers' share of a total (rounded up, at least 1) (pure)."""
    return max(1, math.ceil(total / parts))


def run_oha_workers(
    url: str,
    *,
    bounds: Bounds,
    client_cpus: Sequence[int],
    log_dir: Path,
    workers: int,
    master_bind: str | None = None,
    connections: int = 64,
    rate: float | None = None,
    worker_wait: float = 60.0,
    allow_remote: bool = False,
    on_spawn: OnSpawn | None = None,
    alive: Callable[[], None] | None = None,
) -> LoadResult:
    """One bounded oha run on each of `workers` external `polyperf worker`s, combined (module doc).

    `connections`, `rate` and `bounds.max_requests` are totals, split evenly over the workers. Each worker
    gets an `OhaJob` (target, connections, duration, request bound, rate), checks it and builds oha's command
    line itself; the master binds `master_bind`, loopback unless told otherwise.
    """
    target = check_target(url, allow_remote=allow_remote)
    url = target.url
    if workers < 1:
        raise ValueError("run_oha_workers needs at least one external worker")
    job = OhaJob(
        target=url,
        connections=split_evenly(connections, workers),
        duration_s=bounds.duration,
        max_requests=split_evenly(bounds.max_requests, workers),
        rate=rate / workers if rate else None,
    )
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    bind_host, bind_port = parse_hostport(master_bind or "127.0.0.1", 0)
    tag = f"oha-master-{time.time_ns()}"
    out = log_dir / f"{tag}.json"
    cfg: dict[str, Any] = {
        "host": target.origin,
        "path": target.path,
        "duration": bounds.duration,
        "grace": bounds.grace,
        "max_requests": bounds.max_requests,
        "process_budget": 0,  # no locust users in this mode
        "workers": workers,
        "master_bind": bind_host,
        "master_port": bind_port or free_port(connect_host(bind_host)),
        "worker_wait": worker_wait,
        "out": str(out),
        "oha_job": job.to_message(),
    }
    cfg_path = log_dir / f"{tag}.config.json"
    cfg_path.write_text(json.dumps(cfg))
    log_path = log_dir / f"{tag}.log"
    master = procs.spawn([sys.executable, str(CHILD), str(cfg_path), "oha-master"], log_path=log_path, cpus=client_cpus)
    try:
        if on_spawn is not None:
            on_spawn(master.pid)
        deadline = time.monotonic() + STARTUP_ALLOWANCE + worker_wait + bounds.duration + bounds.grace + 15.0
        while master.poll() is None:
            if time.monotonic() > deadline:
                raise LoadFailed(f"oha master did not finish in time; log {log_path}: {log_tail(log_path)}")
            if alive is not None:
                alive()
            time.sleep(0.05)
    finally:
        procs.stop(master, grace=5.0)
    if master.returncode != 0 or not out.exists():
        raise LoadFailed(f"oha master exited with {master.returncode}; log {log_path}: {log_tail(log_path)}")
    summary = json.loads(out.read_text())
    return combine_oha(
        summary["workers"],
        url=url,
        expected=workers,
        connections=connections,
        rate=rate,
        client_cpus=client_cpus,
        max_requests_each=job.max_requests + (job.connections if rate else 0),
    )


def _window(report: Mapping[str, Any]) -> tuple[float, float]:
    """(start, end) of one worker's oha run on the master's clock."""
    end = float(report["received_at"]) - float(report.get("lag", 0.0))
    return end - float(report["data"]["summary"]["total"]), end


def _histogram(report: Mapping[str, Any], completed: int, url: str) -> Any:
    """A worker's HDR histogram, which must hold one latency per request oha counted as completed."""
    who = f"distributed oha against {url}: worker {report.get('host', '?')} ({report.get('id', '?')})"
    if not report.get("latency_hdr"):
        raise LoadFailed(f"{who} sent no latency histogram (a polyperf worker older than its master?)")
    try:
        histogram = latency_hdr.decode(report["latency_hdr"])
    except ValueError as exc:
        raise LoadFailed(f"{who}: {exc}") from None
    if histogram.get_total_count() != completed:
        raise LoadFailed(
            f"{who}: its histogram holds {histogram.get_total_count()} latencies for {completed} completed "
            f"requests; per-request file {report.get('requests_db', '?')}"
        )
    return histogram


def combine_oha(
    reports: Sequence[Mapping[str, Any]],
    *,
    url: str,
    expected: int,
    connections: int,
    rate: float | None,
    client_cpus: Sequence[int] = (),
    max_requests_each: int | None = None,
) -> LoadResult:
    """One `LoadResult` from the workers' oha summaries, as the module doc says (pure). A worker is not trusted:
    a summary that is malformed, or counts more requests than its bound (`max_requests_each`), fails the run."""
    failed = [f"{r.get('id', '?')}: {r['error']}" for r in reports if r.get("error")]
    if failed or len(reports) < expected:
        missing = expected - len(reports)
        raise LoadFailed(
            f"distributed oha against {url}: "
            + "; ".join(failed + ([f"{missing} of {expected} workers sent no result"] if missing > 0 else []))
        )
    per_worker, status, errors = [], {}, {}
    requests = successes = 0
    histograms = []
    for report in reports:
        try:
            n, ok, codes, errs = oha_counts(report["data"])
            start, end = _window(report)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise LoadFailed(
                f"distributed oha against {url}: worker {report.get('id', '?')} sent a malformed "
                f"summary ({type(exc).__name__}: {exc})"
            ) from None
        if max_requests_each is not None and n > max_requests_each:
            raise LoadFailed(
                f"distributed oha against {url}: worker {report.get('id', '?')} counts {n} requests, over its "
                f"bound of {max_requests_each}"
            )
        requests, successes = requests + n, successes + ok
        for code, count in codes.items():
            status[code] = status.get(code, 0) + count
        for kind, count in errs.items():
            errors[kind] = errors.get(kind, 0) + count
        histograms.append(_histogram(report, sum(codes.values()), url))
        latency = oha_latency(report["data"]) if n else {}
        per_worker.append(
            {
                "id": report.get("id"),
                "host": report.get("host"),
                "cpus": report.get("cpus"),
                "requests": n,
                "rps": n / (end - start) if end > start else 0.0,
                "window": [start, end],
                "latency": {str(p): v for p, v in latency.items()},
            }
        )
    windows = [w["window"] for w in per_worker]
    started, ended = min(w[0] for w in windows), max(w[1] for w in windows)
    merged = latency_hdr.merge(histograms)
    return LoadResult.native(
        "oha",
        url,
        started_at=started,
        seconds=ended - started,  # the difference of two close clock readings is exact: the window ends at `ended`
        requests=requests,
        successes=successes,
        client_cpus=client_cpus,
        mode="fixed-rate" if rate else "closed",
        latency=latency_hdr.percentiles(merged, PERCENTILES),
        connections=connections,
        offered_rate=rate,
        errors=errors,
        status_counts=status,
        client_processes=len(reports),
        extra={
            "distributed": True,
            "workers": len(reports),
            "per_worker": per_worker,
            "latency_combination": "HDR histogram of every request of every worker, 3 significant digits "
            f"(at most {latency_hdr.RELATIVE_ERROR:.2%} above the exact percentile)",
            "latency_count": merged.get_total_count(),
        },
    )
