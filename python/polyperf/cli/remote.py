"""`polyperf load | worker`: one bounded load against a server that is already running, possibly on another
host (`--allow-remote`), with load from this host or from `polyperf worker`s on other hosts."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from polyperf.record.recorder import Metric

if TYPE_CHECKING:
    from polyperf.record.run import Run

SUITE = "remote_load"


def _cmd_worker(args: argparse.Namespace) -> int:
    from polyperf.common import procs
    from polyperf.common.cpus import parse_cpus
    from polyperf.common.logs import log_tail
    from polyperf.load.locust_driver import CHILD, parse_hostport

    host, port = parse_hostport(args.master)
    log_dir = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="polyperf-worker-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    cfg = {
        "master_host": host,
        "master_port": port,
        "allow_remote": args.allow_remote,
        "connect_wait": args.connect_wait,
        "idle": args.idle,
        "oha": _find_oha(),
        "log_dir": str(log_dir),
    }
    cfg_path = log_dir / f"worker-{os.getpid()}.config.json"
    cfg_path.write_text(json.dumps(cfg))
    log_path = log_dir / f"worker-{os.getpid()}.log"
    cpus = parse_cpus(args.client_cpus)
    print(f"polyperf worker: connecting to the master at {host}:{port} (log: {log_path})", flush=True)
    # pinned, in its own process group, and dying with this process (procs.spawn)
    proc = procs.spawn([sys.executable, str(CHILD), str(cfg_path), "worker"], log_path=log_path, cpus=cpus)
    try:
        # poll, never a blocking wait(): the SIGTERM handler (procs.stop_all) must be able to reap it
        while proc.poll() is None:
            time.sleep(0.1)
        code = proc.returncode
    finally:
        procs.stop(proc, grace=5.0)
    if code != 0:
        print(f"polyperf worker: exited with {code}: {log_tail(log_path)}", file=sys.stderr)
        return 1
    print("polyperf worker: the master quit (or nothing came within --idle); done", flush=True)
    return 0


def _find_oha() -> str | None:
    """The oha polyperf built at its pinned version, or None (the worker then refuses oha orders): never another
    oha on PATH, whose defaults (redirects, TLS) polyperf has not checked."""
    from polyperf.errors import ToolchainMissing
    from polyperf.load.native_driver import ensure_oha

    try:
        return str(ensure_oha(install=False))
    except (ToolchainMissing, OSError):
        return None


def _run(args: argparse.Namespace, log_dir: Path) -> Any:
    from polyperf.common.cpus import parse_cpus
    from polyperf.load import Bounds, run_locust, run_oha, run_oha_workers
    from polyperf.load.locust_driver import parse_hostport

    bounds = Bounds(args.duration, args.max_requests)
    cpus = parse_cpus(args.client_cpus) or sorted(os.sched_getaffinity(0))
    common = {"bounds": bounds, "client_cpus": cpus, "log_dir": log_dir, "allow_remote": args.allow_remote}
    bind = "{}:{}".format(*parse_hostport(args.master_bind or "127.0.0.1"))  # a fixed port: workers must find it
    remote = {"master_bind": bind, "worker_wait": args.worker_wait}
    if args.driver == "locust":
        return run_locust(args.url, users=args.users, external_workers=args.workers, **remote, **common)
    if args.workers:
        return run_oha_workers(
            args.url, workers=args.workers, connections=args.connections, rate=args.rate, **remote, **common
        )
    return run_oha(args.url, connections=args.connections, rate=args.rate, **common)


def _rows(result: Any) -> list[Metric]:
    """The client-side rows of one run (no server cost: the server may be on another host)."""
    rows: list[Metric] = [
        ("rps", result.rps, "1/s", {}),
        ("requests", float(result.requests), "count", {}),
        ("errors", float(result.failures), "count", {}),
        ("non_2xx", float(result.non_2xx), "count", {}),
        ("duration_s", result.duration, "s", {}),
    ]
    for p, name in ((0.5, "p50"), (0.9, "p90"), (0.99, "p99"), (0.999, "p999")):
        if p in result.latency:
            rows.append((f"latency_{name}_s", float(result.latency[p]), "s", {}))
    for worker in result.extra.get("per_worker", ()):
        extra = {"worker": worker["id"], "worker_host": worker["host"]}
        rows.append(("worker_rps", float(worker["rps"]), "1/s", extra))
        rows.append(("worker_requests", float(worker["requests"]), "count", extra))
    return rows


def _print(result: Any) -> None:
    lat = ", ".join(f"p{p * 100:g} {v * 1e3:.3f} ms" for p, v in sorted(result.latency.items()))
    print(
        f"{result.driver} against {result.url}: {result.requests} requests ({result.failures} failed) in "
        f"{result.duration:.2f} s = {result.rps:,.0f} req/s; {lat or 'no latencies'}"
    )
    per_worker = result.extra.get("per_worker", ())
    for worker in per_worker:
        print(f"  worker {worker['host']} ({worker['id']}): {worker['requests']} requests, {worker['rps']:,.0f} req/s")
    if per_worker:
        print(f"  percentiles: of all {result.extra['latency_count']} requests of every worker (HDR, within 0.1 %)")


def _cmd_load(args: argparse.Namespace) -> int:
    from polyperf.load import require_target
    from polyperf.record.run import Run

    # before anything is created or started; every generator then gets the one canonical URL
    args.url = require_target(args.url, allow_remote=args.allow_remote)
    if args.driver == "locust" and args.rate:
        raise ValueError("--rate is for --driver oha (locust runs a closed model)")
    with Run.create(Path(args.out), command="load", url=args.url, driver=args.driver, workers=args.workers) as run:
        return _load_into(run, args)


def _load_into(run: Run, args: argparse.Namespace) -> int:
    """The load of `polyperf load`, measured and recorded into `run`."""
    from polyperf.load.result import LoadUnanswered, require_answered

    run_dir = run.run_dir
    result = _run(args, run_dir / "logs")
    try:
        require_answered(result)  # a run most of whose requests failed measured nothing: no rows
    except LoadUnanswered as exc:
        print(f"polyperf: error: {exc}; nothing recorded (logs: {run_dir / 'logs'})", file=sys.stderr)
        return 1
    _print(result)
    params = {
        "url": args.url,
        "duration_s": args.duration,
        "max_requests": args.max_requests,
        "external_workers": args.workers,
        "client_processes": result.client_processes,
        **({"users": args.users} if args.driver == "locust" else {"connections": args.connections}),
        **({"offered_rate": args.rate} if args.rate else {}),
    }
    record = run.recorder(SUITE)
    record.many(_rows(result), case="remote", implementation=result.url, driver=result.driver, params=params)
    run.finish(latest=True)
    print(f"rows recorded in {run_dir} (suite {SUITE})")
    return 0


# The same add_parsers shape as export, new, runs, tools and verdicts: each module owns its sub-commands and flags.
def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "load",
        help="one bounded load against a running server (here, or on another host with --allow-remote)",
        description="Runs one bounded load (whichever comes first: --duration or --max-requests) against URL, a "
        "server already running (e.g. `polyperf serve APP --host ADDR` on another host), prints the result and "
        "records it into a new run directory (suite remote_load). A non-loopback URL needs --allow-remote. With "
        "--workers N the load comes from N `polyperf worker`s (other hosts) that connect to --master-bind: "
        "locust users spread over them, or one oha run on each, summed. A run in which no request succeeded, or "
        "more than half failed, exits 1 with the generator's own error and records nothing. The master-worker link "
        "is unauthenticated: keep --master-bind on loopback or a private network.",
    )
    p.add_argument("url", metavar="URL")
    p.add_argument("--driver", choices=("locust", "oha"), default="oha")
    p.add_argument("--duration", type=float, default=10.0, help="seconds (default 10)")
    p.add_argument("--max-requests", type=int, default=1_000_000, help="request bound (default 1000000)")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--users", type=int, default=10, help="locust users in all (default 10)")
    size.add_argument("--connections", type=int, default=64, help="oha connections in all (default 64)")
    p.add_argument("--rate", type=float, default=None, help="oha: fixed total rate in requests/s (open model)")
    p.add_argument("--workers", type=int, default=0, help="external `polyperf worker`s to wait for (default 0)")
    p.add_argument(
        "--master-bind", default=None, metavar="ADDR:PORT", help="where workers connect (default 127.0.0.1:5557)"
    )
    p.add_argument("--worker-wait", type=float, default=60.0, help="seconds to wait for the workers (default 60)")
    p.add_argument("--client-cpus", default=None, help="pin this host's load processes, e.g. 1 or 2-3")
    p.add_argument("--allow-remote", action="store_true", help="allow a non-loopback URL (a server that agreed)")
    p.add_argument("--out", default="reports", help="output directory (default: reports)")
    p.set_defaults(func=_cmd_load)

    p = sub.add_parser(
        "worker",
        help="a load worker for `polyperf load --workers N` running on another host",
        description="Runs a locust worker (pinned, dying with this command) that connects to the master at "
        "HOST:PORT and runs locust users or a bounded oha as the master asks. Exits when the master quits, "
        "when no master answers within --connect-wait, or after --idle seconds with nothing to do. It loads "
        "a non-loopback target only with --allow-remote. It takes typed jobs only (target, connections, duration, "
        "request bound, rate; each checked and bounded) and builds oha's command line itself. Anyone who reaches "
        "the master's port can give it orders (locust's link has no authentication): connect it only over "
        "loopback or a network you trust.",
    )
    p.add_argument("--master", required=True, metavar="HOST:PORT", help="the master (`polyperf load --master-bind`)")
    p.add_argument("--client-cpus", default=None, help="pin the worker (and its oha) to these CPUs")
    p.add_argument("--allow-remote", action="store_true", help="allow the master to point it at a non-loopback URL")
    p.add_argument("--connect-wait", type=float, default=60.0, help="seconds to find the master (default 60)")
    p.add_argument("--idle", type=float, default=120.0, help="quit after this many idle seconds (default 120)")
    p.add_argument("--out", default=None, help="log directory (default: a new temporary directory)")
    p.set_defaults(func=_cmd_worker)
