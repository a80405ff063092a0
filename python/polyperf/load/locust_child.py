"""The locust side of `locust_driver`: one process of a locust run, driven through locust's library API.

Run as a script (`python locust_child.py CONFIG ROLE`), never imported by the harness: importing
locust monkey-patches the whole interpreter for gevent (sockets, threads, subprocess), which must not
happen inside pytest. It imports nothing from polyperf for the same reason and to start fast.

Roles: `local` (one process, LocalRunner), `master` (MasterRunner; waits for its workers, owns the
bounds and the stats), `oha-master` (MasterRunner that has each worker run a bounded oha and send its
JSON summary back) and `worker` (WorkerRunner; runs users, or oha, until the master says quit; an
external `polyperf worker` on another host is this same role). The master tells each worker what to
load with a `polyperf_config` message (locust's `register_message`/`send_message`) and starts only
once every worker has accepted it: a worker refuses a non-loopback target unless its own config says
`allow_remote`. The local runner or the master writes the result JSON that `locust_driver` reads back.

POST mode (`method`, `body`: a fixed string or "devices", a random device per request): users wait
`think` seconds between requests, give up after `timeout`, finish their request when stopped
(`stop_timeout`), and each process logs every request (end time, latency, status, returned id, the mac
and firmware sent) to `<requests_log>-<pid>.jsonl`, for the rows-vs-acknowledged check.
"""

from __future__ import annotations

import ctypes
import ipaddress
import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import gevent
import locust.runners
from locust import FastHttpUser, LoadTestShape, task
from locust.env import Environment
from locust.exception import StopUser
from locust.rpc import Message
from locust.runners import STATE_STOPPED, MasterRunner, Runner, WorkerRunner
from locust_post import RequestLog, send_body  # this script's sibling (run as a script, it cannot import polyperf)

PERCENTILES = (0.50, 0.90, 0.99, 0.999)

_status = Counter()  # HTTP status -> responses, this process
_budget = {"left": math.inf}  # requests this process may still send (the request-count bound)
_target = {"path": "/", "ok": False}  # what to GET; `ok` once the master's config was accepted
# POST mode (see the module doc); GET runs keep these defaults
_POST_KEYS = ("method", "body", "think", "timeout", "requests_log")
_target.update(method="GET", body=None, think=0.0, timeout=None, requests_log=None)
_request_log = RequestLog()
_activity = {"last": time.monotonic(), "busy": 0}  # for the external worker's idle bound


def make_user() -> type[FastHttpUser]:
    class PolyperfUser(FastHttpUser):
        """Closed model: each user sends the next request as soon as the previous one is answered (after
        `think` seconds in POST mode)."""

        network_timeout = 10.0
        connection_timeout = 5.0

        def __init__(self, environment: Environment) -> None:
            if _target["timeout"]:  # POST mode: the client's own timeout (the article's client gave up at 1 s)
                self.network_timeout = self.connection_timeout = float(_target["timeout"])
            super().__init__(environment)

        def wait_time(self) -> float:
            return float(_target["think"])

        @task
        def get(self) -> None:
            if _budget["left"] <= 0 or not _target["ok"]:
                raise StopUser()
            _budget["left"] -= 1
            path = _target["path"]
            if _target["method"] != "GET":
                send_body(self.client, path, _target, _status, _request_log)
                return
            with self.client.get(path, name=path, catch_response=True) as resp:
                code = resp.status_code or 0
                if code:
                    _status[code] += 1
                if 200 <= code < 300:
                    resp.success()
                elif code:
                    resp.failure(f"HTTP {code}")
                else:
                    resp.failure(f"connection: {type(resp.error).__name__ if resp.error else 'no response'}")

    return PolyperfUser


def make_shape(steps: list[list[float]], bound: float) -> LoadTestShape:
    class StepRamp(LoadTestShape):
        """Adds users stage by stage (users, seconds), like the Rust-vs-Go article's ramp; stops after
        the last stage or at the time bound, whichever is first."""

        def tick(self) -> tuple[int, float] | None:
            elapsed = self.get_run_time()
            if elapsed >= bound:
                return None
            end = 0.0
            for users, seconds in steps:
                end += seconds
                if elapsed < end:
                    # spawn the stage's new users within its first second
                    return int(users), max(float(users), 1.0)
            return None

    return StepRamp()


def _track_status(env: Environment) -> None:
    """Per-status counts travel with locust's own worker reports and are summed on the master."""

    def on_report_to_master(client_id: str, data: dict[str, Any]) -> None:
        data["polyperf_status"] = {str(k): v for k, v in _status.items()}
        _status.clear()

    def on_worker_report(client_id: str, data: dict[str, Any]) -> None:
        for code, count in data.get("polyperf_status", {}).items():
            _status[int(code)] += count

    env.events.report_to_master.add_listener(on_report_to_master)
    env.events.worker_report.add_listener(on_worker_report)


def _refusal(url: str, allow_remote: bool) -> str | None:
    """None if this process may load `url`, else why not (the rule of polyperf.load.common.require_target)."""
    host = urlsplit(url).hostname
    if not host:
        return f"{url!r} has no host"
    try:
        found = {info[4][0] for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)}
    except OSError as exc:
        return f"cannot resolve {host!r}: {exc}"
    foreign = sorted(a for a in found if not ipaddress.ip_address(a.split("%")[0]).is_loopback)
    if foreign and not allow_remote:
        return f"refusing to load {url!r} ({', '.join(foreign)} is not loopback): start the worker with --allow-remote"
    return None


def _wait_for_workers(runner: MasterRunner, expected: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while len(runner.clients.ready) < expected:
        if time.monotonic() > deadline:
            ready = len(runner.clients.ready)
            _quit_master(runner, timeout=2.0)  # the workers that did come go home now, not at a heartbeat timeout
            raise SystemExit(f"only {ready} of {expected} locust workers connected in {timeout:g}s")
        gevent.sleep(0.05)


def _configure_workers(runner: MasterRunner, job: dict[str, Any], acks: dict[str, str | None], timeout: float) -> None:
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
            _quit_master(runner, timeout=2.0)
            raise SystemExit(
                "; ".join(f"worker {k}: {v}" for k, v in refused.items())
                or f"workers {waiting} did not accept the target in {timeout:g}s"
            )


def _run_bounded(runner: Runner, cfg: dict[str, Any]) -> tuple[float, float, dict[int, int], int]:
    """Starts the load, stops it at the time or request bound; returns (start, end, users per second, peak)."""
    env = runner.environment
    started = time.time()  # the measured window opens here; locust clears its stats as it starts
    if cfg["steps"]:
        runner.start_shape()
    else:
        runner.start(cfg["users"], spawn_rate=cfg["spawn_rate"])
    users: dict[int, int] = {}
    peak = 0
    while True:
        now = time.time()
        peak = max(peak, runner.user_count)
        users[int(now)] = runner.user_count
        spent = now - started
        done_shape = cfg["steps"] and spent > 1.0 and runner.state == STATE_STOPPED
        if spent >= cfg["duration"] or env.stats.total.num_requests >= cfg["max_requests"] or done_shape:
            break
        if isinstance(runner, MasterRunner) or _budget["left"] > 0 or runner.user_count:
            gevent.sleep(0.02)
            continue
        break  # local: the budget is spent and every user has stopped
    ended = time.time()
    if isinstance(runner, MasterRunner):
        _quit_master(runner)
    else:
        runner.quit()
    return started, ended, users, peak


def _quit_master(runner: MasterRunner, timeout: float = 10.0) -> None:
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


def _result(
    env: Environment, started: float, ended: float, users: dict[int, int], peak: int, workers: int
) -> dict[str, Any]:
    total = env.stats.total
    history = [
        [second - int(started), count, users.get(second, 0)]  # whole seconds inside the window only
        for second, count in sorted(total.num_reqs_per_sec.items())
        if started <= second and second + 1 <= ended
    ]
    errors: Counter[str] = Counter()
    for err in env.stats.errors.values():
        text = err.error if isinstance(err.error, str) else str(err.error)
        errors[text.removeprefix("CatchResponseError(").rstrip(")").strip("'\"")] += err.occurrences
    return {
        "started_at": started,
        "ended_at": ended,
        "requests": total.num_requests,
        "failures": total.num_failures,
        "percentiles_ms": {str(p): total.get_response_time_percentile(p) for p in PERCENTILES}
        if total.num_requests
        else {},
        "errors": dict(errors),
        "status_counts": {str(k): v for k, v in _status.items()},
        "history": history,
        "peak_users": peak,
        "workers": workers,
    }


def _die_with_parent() -> None:  # runs in oha between fork and exec
    ctypes.CDLL(None).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG


def _run_oha(job: dict[str, Any], cfg: dict[str, Any]) -> dict[str, Any]:
    """One bounded oha run on this worker's CPUs: `-n` its share of the request budget, SIGINT (oha then
    reports) at the duration, killed after the grace; returns oha's summary or an error."""
    error = _refusal(job["url"], cfg.get("allow_remote", False))
    if error or not cfg.get("oha"):
        return {"error": error or "no oha on this worker's host (polyperf worker --oha PATH)"}
    log_dir = Path(cfg.get("log_dir") or ".")
    out = log_dir / f"oha-{time.time_ns()}.json"
    threads = len(os.sched_getaffinity(0))
    cmd = [cfg["oha"], "-n", str(job["budget"]), "-c", str(job["connections"]), "--no-tui"]
    cmd += ["--output-format", "json", "-o", str(out), "--worker-threads", str(threads), "-t", "10s"]
    if job.get("rate"):
        cmd += ["-q", f"{job['rate']:g}", "--latency-correction"]
    with out.with_suffix(".log").open("ab") as log:
        proc = subprocess.Popen(
            [*cmd, job["url"]],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )
    started, interrupted = time.monotonic(), False
    try:
        while proc.poll() is None:
            elapsed = time.monotonic() - started
            if not interrupted and elapsed >= job["duration"]:
                proc.send_signal(signal.SIGINT)
                interrupted = True
            if elapsed > job["duration"] + job["grace"]:
                return {"error": f"oha still running {elapsed:.0f}s after start (bound {job['duration']}s); killed"}
            gevent.sleep(0.01)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    exited = time.monotonic()
    if proc.returncode != 0:
        return {"error": f"oha exited with {proc.returncode}; log {out.with_suffix('.log')}"}
    data = json.loads(out.read_text())
    keys = ("summary", "latencyPercentiles", "statusCodeDistribution", "errorDistribution")
    return {
        "data": {k: data[k] for k in keys if k in data},
        "exited": exited,
        "host": socket.gethostname(),
        "cpus": sorted(os.sched_getaffinity(0)),
        "threads": threads,
    }


def _serve_worker(env: Environment, cfg: dict[str, Any]) -> int:
    """A worker: connects (bounded), runs what the master asks, quits with it or when idle too long."""
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

    def on_config(environment: Environment, msg: Message) -> None:
        _activity["last"] = time.monotonic()
        error = _refusal(msg.data["url"], allow_remote)
        if error is None and not _target["ok"]:
            _target.update(path=msg.data["path"], ok=True)
            _target.update({k: msg.data[k] for k in _POST_KEYS if k in msg.data})
            _budget["left"] = msg.data["budget"]
        runner.send_message("polyperf_config_ack", {"error": error})

    def on_oha(environment: Environment, msg: Message) -> None:
        _activity["busy"] += 1
        try:
            report = _run_oha(msg.data, cfg)
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


def _oha_master(runner: MasterRunner, cfg: dict[str, Any], reports: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Asks every worker for one bounded oha run and collects the summaries (`received_at`: master clock)."""
    expected = {c.id for c in runner.clients.all}
    sent_at = time.time()
    runner.send_message("polyperf_oha", cfg["oha_job"])
    deadline = time.monotonic() + cfg["duration"] + cfg["grace"] + 10.0
    while not expected <= set(reports) and time.monotonic() < deadline:
        gevent.sleep(0.05)
    _quit_master(runner)
    return {"sent_at": sent_at, "expected": len(expected), "workers": [reports[k] for k in sorted(reports)]}


def main(argv: list[str]) -> int:
    cfg = json.loads(Path(argv[1]).read_text())
    role = argv[2]
    user = make_user()
    shape = make_shape(cfg["steps"], cfg["duration"]) if cfg.get("steps") and role != "worker" else None
    # stop_timeout > 0 (POST mode): stopped users finish their request, so no answer is lost at the end
    env = Environment(
        user_classes=[user], shape_class=shape, host=cfg.get("host"), stop_timeout=cfg.get("stop_timeout", 0)
    )
    _track_status(env)
    if role == "worker":
        return _serve_worker(env, cfg)
    _target.update(path=cfg["path"], ok=True)
    _target.update({k: cfg[k] for k in _POST_KEYS if k in cfg})
    _budget["left"] = cfg["process_budget"]
    if role == "local":
        runner: Runner = env.create_local_runner()
    else:
        runner = env.create_master_runner(cfg.get("master_bind", "127.0.0.1"), cfg["master_port"])
        acks: dict[str, str | None] = {}
        reports: dict[str, dict[str, Any]] = {}
        runner.register_message(
            "polyperf_config_ack", lambda environment, msg: acks.update({msg.node_id: msg.data["error"]})
        )
        runner.register_message(
            "polyperf_oha_done",
            lambda environment, msg: reports.update(
                {msg.node_id: {"id": msg.node_id, "received_at": time.time(), **msg.data}}
            ),
        )
        assert isinstance(runner, MasterRunner)
        _wait_for_workers(runner, cfg["workers"], cfg.get("worker_wait", 60.0))
        job = {"url": cfg["host"] + cfg["path"], "path": cfg["path"], "budget": cfg["process_budget"]}
        job |= {k: cfg[k] for k in _POST_KEYS if k in cfg}
        _configure_workers(runner, job, acks, timeout=15.0)
        if role == "oha-master":
            Path(cfg["out"]).write_text(json.dumps(_oha_master(runner, cfg, reports)))
            return 0
    started, ended, users, peak = _run_bounded(runner, cfg)
    out = _result(env, started, ended, users, peak, cfg["workers"] if role == "master" else 0)
    Path(cfg["out"]).write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
