"""The distributed side of `locust_child.py` (a sibling it imports as a plain module, like `locust_post`):
the master's handling of its workers, and the worker role itself, which may run oha instead of users.

A worker takes orders, not options: each message is read back into a typed job (`worker_job`: known keys,
bounded values, the target checked again here by `target.parse_target` under the worker's own
`--allow-remote`), and the worker builds oha's command line itself. Anything else is refused in one line,
sent back to the master, which fails the run with it.

Imports locust (gevent-patched), so like the child it is never imported by the harness.
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gevent
import locust.runners
from locust.env import Environment
from locust.rpc import Message
from locust.runners import MasterRunner, WorkerRunner
from worker_job import GRACE_S, OhaJob, UsersJob, oha_command

__all__ = ["configure_workers", "oha_master", "quit_master", "read_job", "serve_worker", "wait_for_workers"]

_activity = {"last": time.monotonic(), "busy": 0}  # for the external worker's idle bound


def read_job(kind: type[OhaJob] | type[UsersJob], data: Any, allow_remote: bool) -> tuple[Any, str | None]:
    """(job, None) if this worker may run `data` as a `kind`, else (None, why not, one line)."""
    try:
        job, target = kind.from_message(data, allow_remote=allow_remote)
    except ValueError as exc:  # JobRefused, TargetRefused
        reason = " ".join(str(exc).split())
        if "not loopback" in reason:
            reason += "; start the worker with --allow-remote to allow it"
        return None, reason
    return (job, target), None


def wait_for_workers(runner: MasterRunner, expected: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while len(runner.clients.ready) < expected:
        if time.monotonic() > deadline:
            ready = len(runner.clients.ready)
            quit_master(runner, timeout=2.0)  # the workers that did come go home now, not at a heartbeat timeout
            raise SystemExit(f"only {ready} of {expected} locust workers connected in {timeout:g}s")
        gevent.sleep(0.05)


def configure_workers(runner: MasterRunner, job: dict[str, Any], acks: dict[str, str | None], timeout: float) -> None:
    """Tells every worker what to load, resending each second (a worker registers its handlers only once
    connected), until each has accepted; a refusal or silence ends the run (workers are told to quit)."""
    deadline = time.monotonic() + timeout
    waiting = [c.id for c in runner.clients.all]
    while waiting:
        for client_id in waiting:
            runner.send_message("polyperf_config", job, client_id)
        for _ in range(20):
            gevent.sleep(0.05)
            waiting = [c for c in waiting if c not in acks]
            if not waiting:
                break
        refused = {k: v for k, v in acks.items() if v}
        if refused or (waiting and time.monotonic() > deadline):
            quit_master(runner, timeout=2.0)
            raise SystemExit(
                "; ".join(f"worker {k}: {v}" for k, v in refused.items())
                or f"workers {waiting} did not accept the target in {timeout:g}s"
            )


def quit_master(runner: MasterRunner, timeout: float = 10.0) -> None:
    """Like `MasterRunner.quit()`, but waits for every worker's final report (a worker sends one when
    told to quit) instead of a fixed 0.5 s, so a busy machine does not lose the last requests."""
    expected = {client.id for client in runner.clients.all}
    reported: set[str] = set()
    runner.environment.events.worker_report.add_listener(lambda client_id, data: reported.add(client_id))
    runner.stop(send_stop_to_client=False)
    for client_id in expected:
        runner.server.send_to_client(Message("quit", None, client_id))
    deadline = time.monotonic() + timeout
    while not expected <= reported and time.monotonic() < deadline:
        gevent.sleep(0.02)
    runner.greenlet.kill(block=True)


def _die_with_parent() -> None:  # runs in oha between fork and exec
    ctypes.CDLL(None).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG


def _run_oha(data: Any, cfg: dict[str, Any], accepted: str | None) -> dict[str, Any]:
    """One bounded oha run on this worker's CPUs, built here from a checked `OhaJob` (its request bound, and a
    SIGINT at the duration in the closed model; killed after the grace) against the target this worker accepted
    (`accepted`, from the master's `polyperf_config`) and no other; returns oha's summary and an HDR histogram of
    every latency it wrote (`latency_hdr`), or an error."""
    checked, error = read_job(OhaJob, data, cfg.get("allow_remote", False))
    if error or not cfg.get("oha"):
        return {"error": error or "no oha built by polyperf on this worker's host (polyperf build oha)"}
    job: OhaJob = checked[0]
    if accepted is None or job.target != accepted:
        return {"error": f"an oha order for {job.target}, not the target this worker accepted ({accepted})"}
    log_dir = Path(cfg.get("log_dir") or ".")
    out = log_dir / f"oha-{time.time_ns()}.json"
    requests_db = out.with_suffix(".sqlite")
    threads = len(os.sched_getaffinity(0))
    cmd = oha_command(job, oha=cfg["oha"], out=str(out), requests_db=str(requests_db), threads=threads)
    with out.with_suffix(".log").open("ab") as log:
        proc = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )
    started, interrupted = time.monotonic(), False
    try:
        while proc.poll() is None:
            elapsed = time.monotonic() - started
            if job.interrupt and not interrupted and elapsed >= job.duration_s:
                proc.send_signal(signal.SIGINT)
                interrupted = True
            if elapsed > job.duration_s + GRACE_S:
                return {"error": f"oha still running {elapsed:.0f}s after start (bound {job.duration_s}s); killed"}
            gevent.sleep(0.01)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode != 0:
        tail = " ".join(out.with_suffix(".log").read_text(errors="replace").split()[-30:])
        return {"error": f"oha exited with {proc.returncode}; log {out.with_suffix('.log')}: {tail}"}
    # oha's window ends when it wrote its summary, before it stored every request: date it by the file
    exited = time.monotonic() - max(0.0, time.time() - out.stat().st_mtime)
    data = json.loads(out.read_text())
    keys = ("summary", "latencyPercentiles", "statusCodeDistribution", "errorDistribution")
    from latency_hdr import from_seconds, read_oha_db  # numpy: only when a worker runs oha

    latencies = read_oha_db(requests_db)
    return {
        "data": {k: data[k] for k in keys if k in data},
        "latency_hdr": from_seconds(latencies).encode().decode("ascii"),
        "requests_db": str(requests_db),
        "exited": exited,
        "host": socket.gethostname(),
        "cpus": sorted(os.sched_getaffinity(0)),
        "threads": threads,
    }


def serve_worker(env: Environment, cfg: dict[str, Any], accept: Callable[[UsersJob, Any], None]) -> int:
    """A worker: connects (bounded), runs what the master asks, quits with it or when idle too long.
    `accept(job, target)` takes a checked `UsersJob` (the child keeps what to load and the budget)."""
    # seconds, not locust's 5 min, to find the master; 15 s without its heartbeat means it is gone
    attempts = math.ceil(cfg.get("connect_wait", 60.0) / locust.runners.CONNECT_TIMEOUT)
    locust.runners.CONNECT_RETRY_COUNT = max(0, attempts - 1)  # it gives up when retry > count
    locust.runners.MASTER_HEARTBEAT_TIMEOUT = 15
    locust.runners.WORKER_REPORT_INTERVAL = 0.5  # the master sees the request count sooner
    try:
        runner = env.create_worker_runner(cfg.get("master_host", "127.0.0.1"), cfg["master_port"])
    except ConnectionError:
        print(f"no locust master answered at {cfg.get('master_host')}:{cfg['master_port']}", file=sys.stderr)
        return 3
    assert isinstance(runner, WorkerRunner)
    allow_remote = cfg.get("allow_remote", False)
    accepted: dict[str, str | None] = {"target": None}  # the first target accepted: every later order must name it

    def on_config(environment: Environment, msg: Message) -> None:
        _activity["last"] = time.monotonic()
        checked, error = read_job(UsersJob, msg.data, allow_remote)
        if error is None and accepted["target"] not in (None, checked[0].target):
            checked, error = None, f"a second target {checked[0].target}; this worker accepted {accepted['target']}"
        if error is None:
            accepted["target"] = checked[0].target
            accept(*checked)
        else:
            print(f"polyperf worker: refused a job: {error}", file=sys.stderr, flush=True)
        runner.send_message("polyperf_config_ack", {"error": error})

    def on_oha(environment: Environment, msg: Message) -> None:
        if _activity["busy"]:  # one oha at a time: a second order while one runs is refused, not queued
            runner.send_message("polyperf_oha_done", {"error": "this worker is already running an oha job"})
            return
        _activity["busy"] += 1
        try:
            report = _run_oha(msg.data, cfg, accepted["target"])
            if report.get("error"):
                print(f"polyperf worker: {report['error']}", file=sys.stderr, flush=True)
        except Exception as exc:  # reported to the master, which fails the run with it
            report = {"error": f"{type(exc).__name__}: {exc}"}
        finally:
            _activity["busy"] -= 1
            _activity["last"] = time.monotonic()
        report["lag"] = time.monotonic() - report.pop("exited", time.monotonic())  # oha's end, on any clock
        runner.send_message("polyperf_oha_done", report)

    runner.register_message("polyperf_config", on_config)
    runner.register_message("polyperf_oha", on_oha, concurrent=True)
    watch = gevent.spawn(_idle_watch, runner, cfg.get("idle", 120.0))
    runner.greenlet.join()
    watch.kill()
    return 0


def _idle_watch(runner: WorkerRunner, idle: float) -> None:
    _activity["last"] = time.monotonic()
    while True:
        gevent.sleep(0.5)
        if runner.user_count or _activity["busy"]:
            _activity["last"] = time.monotonic()
        elif time.monotonic() - _activity["last"] > idle:
            print(f"worker idle for {idle:g}s: quitting", file=sys.stderr, flush=True)
            runner.send_message("quit")
            runner.quit()
            return


def oha_master(runner: MasterRunner, cfg: dict[str, Any], reports: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Asks every worker for one bounded oha run and collects the summaries (`received_at`: master clock)."""
    expected = {c.id for c in runner.clients.all}
    sent_at = time.time()
    runner.send_message("polyperf_oha", cfg["oha_job"])
    deadline = time.monotonic() + cfg["duration"] + cfg["grace"] + 10.0
    while not expected <= set(reports) and time.monotonic() < deadline:
        gevent.sleep(0.05)
    quit_master(runner)
    return {"sent_at": sent_at, "expected": len(expected), "workers": [reports[k] for k in sorted(reports)]}
