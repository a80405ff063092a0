"""The locust side of `locust_driver`: one process of a locust run, driven through locust's library API.

Run as a script (`python locust_child.py CONFIG ROLE`), never imported by the harness: importing
locust monkey-patches the whole interpreter for gevent (sockets, threads, subprocess), which must not
happen inside pytest. It imports nothing from polyperf for the same reason and to start fast.

Roles: `local` (one process, LocalRunner), `master` (MasterRunner; waits for its workers, owns the
bounds and the stats), `oha-master` (MasterRunner that has each worker run a bounded oha and send its
JSON summary back) and `worker` (WorkerRunner; runs users, or oha, until the master says quit; an
external `polyperf worker` on another host is this same role). The master tells each worker what to
load with a `polyperf_config` message (locust's `register_message`/`send_message`), a typed `UsersJob`, and
starts only once every worker has accepted it: a worker refuses a non-loopback target unless its own config
says `allow_remote`. A worker's users send only to the target it accepted, whatever host locust's own
spawn message names. The local runner or the master writes the result JSON that `locust_driver` reads back.
The master's handling of its workers and the worker role live in the sibling `locust_remote.py`.

POST mode (`method`, `body`: a fixed string or "devices", a random device per request): users wait
`think` seconds between requests, give up after `timeout`, finish their request when stopped
(`stop_timeout`), and each process logs every request (end time, latency, status, returned id, the mac
and firmware sent) to `<requests_log>-<pid>.jsonl`, for the rows-vs-acknowledged check.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import gevent
from locust import FastHttpUser, LoadTestShape, task
from locust.env import Environment
from locust.exception import StopUser
from locust.runners import STATE_STOPPED, MasterRunner, Runner

# this script's siblings (run as a script, it cannot import polyperf)
from locust_post import RequestLog, send_body
from locust_remote import configure_workers, oha_master, quit_master, serve_worker, wait_for_workers
from worker_job import GRACE_S, UsersJob

PERCENTILES = (0.50, 0.90, 0.99, 0.999)

_status = Counter()  # HTTP status -> responses, this process
_budget = {"left": math.inf}  # requests this process may still send (the request-count bound)
_target = {"origin": None, "path": "/", "ok": False}  # what to GET; `ok` once the master's config was accepted
# POST mode (see the module doc); GET runs keep these defaults
_POST_KEYS = ("method", "body", "think", "timeout", "requests_log")
_target.update(method="GET", body=None, think=0.0, timeout=None, requests_log=None)
# a worker's bounds from its accepted job: users at once, and a deadline (monotonic) after which none sends
_limits = {"users": math.inf, "deadline": math.inf, "running": 0}
_request_log = RequestLog()


def make_user() -> type[FastHttpUser]:
    class PolyperfUser(FastHttpUser):
        """Closed model: each user sends the next request as soon as the previous one is answered (after
        `think` seconds in POST mode)."""

        network_timeout = 10.0
        connection_timeout = 5.0
        insecure = False  # https: the certificate is verified (locust's FastHttpUser accepts any by default)
        max_redirects = 0  # a 3xx is an answer, counted as a failure with its status, never followed

        def __init__(self, environment: Environment) -> None:
            if _target["origin"]:  # the accepted target, never the host a master's spawn message names
                self.host = _target["origin"]
            if _target["timeout"]:  # POST mode: the client's own timeout (the article's client gave up at 1 s)
                self.network_timeout = self.connection_timeout = float(_target["timeout"])
            super().__init__(environment)

        def wait_time(self) -> float:
            return float(_target["think"])

        def on_start(self) -> None:
            _limits["running"] += 1
            self.within = _limits["running"] <= _limits["users"]  # users past the job's bound never send

        def on_stop(self) -> None:
            _limits["running"] -= 1

        @task
        def get(self) -> None:
            if _budget["left"] <= 0 or not _target["ok"] or not getattr(self, "within", True):
                raise StopUser()
            if time.monotonic() > _limits["deadline"]:
                raise StopUser()
            _budget["left"] -= 1
            path = _target["path"]
            if _target["method"] != "GET":
                send_body(self.client, path, _target, _status, _request_log)
                return
            with self.client.get(path, name=path, catch_response=True, allow_redirects=False) as resp:
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
        quit_master(runner)
    else:
        runner.quit()
    return started, ended, users, peak


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


def _accepter(cfg: dict[str, Any]) -> Any:
    """How a worker takes the master's first accepted job: what to load and its share of the request budget.
    Its request log, if the job asks for one, is a file the worker names (its config's, else in its log folder)."""

    def accept(job: UsersJob, target: Any) -> None:
        if _target["ok"]:
            return
        log = cfg.get("requests_log") or str(Path(cfg.get("log_dir") or ".") / "locust-requests")
        _target.update(origin=target.origin, path=target.path, method=job.method, body=job.body)
        _target.update(think=job.think, timeout=job.timeout, requests_log=log if job.log_requests else None)
        _budget["left"] = job.budget
        _limits.update(users=job.users, deadline=time.monotonic() + job.duration_s + GRACE_S)
        _target["ok"] = True

    return accept


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
        return serve_worker(env, cfg, _accepter(cfg))
    _target.update(origin=cfg["host"], path=cfg["path"], ok=True)
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
        wait_for_workers(runner, cfg["workers"], cfg.get("worker_wait", 60.0))
        job = UsersJob(
            target=cfg["host"] + cfg["path"],
            budget=max(1, cfg["process_budget"]),
            users=max(1, cfg.get("users") or 1, *(int(s[0]) for s in cfg.get("steps") or [])),
            duration_s=float(cfg["duration"]),
            method=cfg.get("method", "GET"),
            body=cfg.get("body"),
            think=cfg.get("think", 0.0),
            timeout=cfg.get("timeout"),
            log_requests=bool(cfg.get("requests_log")),
        )
        configure_workers(runner, job.to_message(), acks, timeout=15.0)
        if role == "oha-master":
            Path(cfg["out"]).write_text(json.dumps(oha_master(runner, cfg, reports)))
            return 0
    started, ended, users, peak = _run_bounded(runner, cfg)
    out = _result(env, started, ended, users, peak, cfg["workers"] if role == "master" else 0)
    Path(cfg["out"]).write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
