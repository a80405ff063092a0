"""The locust side of `locust_driver`: one process of a locust run, driven through locust's library API.

Run as a script (`python locust_child.py CONFIG ROLE`), never imported by the harness: importing
locust monkey-patches the whole interpreter for gevent (sockets, threads, subprocess), which must not
happen inside pytest. It imports nothing from polyperf for the same reason and to start fast.

Roles: `local` (one process, LocalRunner), `master` (MasterRunner; waits for its workers, owns the
bounds and the stats) and `worker` (WorkerRunner; runs users until the master says quit). The local
runner or the master writes the result JSON that `locust_driver` reads back.
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
from locust import FastHttpUser, LoadTestShape, constant, task
from locust.env import Environment
from locust.exception import StopUser
from locust.rpc import Message
from locust.runners import STATE_STOPPED, MasterRunner, Runner, WorkerRunner

PERCENTILES = (0.50, 0.90, 0.99, 0.999)

_status = Counter()  # HTTP status -> responses, this process
_budget = {"left": math.inf}  # requests this process may still send (the request-count bound)


def make_user(path: str) -> type[FastHttpUser]:
    class PolyperfUser(FastHttpUser):
        """Closed model: each user sends the next request as soon as the previous one is answered."""

        wait_time = constant(0)
        network_timeout = 10.0
        connection_timeout = 5.0

        @task
        def get(self) -> None:
            if _budget["left"] <= 0:
                raise StopUser()
            _budget["left"] -= 1
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


def _wait_for_workers(runner: MasterRunner, expected: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while len(runner.clients.ready) < expected:
        if time.monotonic() > deadline:
            raise SystemExit(f"only {len(runner.clients.ready)} of {expected} locust workers connected")
        gevent.sleep(0.05)


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


def main(argv: list[str]) -> int:
    cfg = json.loads(Path(argv[1]).read_text())
    role = argv[2]
    user = make_user(cfg["path"])
    shape = make_shape(cfg["steps"], cfg["duration"]) if cfg["steps"] and role != "worker" else None
    env = Environment(user_classes=[user], shape_class=shape, host=cfg["host"], stop_timeout=0)
    _budget["left"] = cfg["process_budget"]
    _track_status(env)
    if role == "worker":
        import locust.runners

        locust.runners.WORKER_REPORT_INTERVAL = 0.5  # the master sees the request count sooner
        runner: Runner = env.create_worker_runner("127.0.0.1", cfg["master_port"])
        assert isinstance(runner, WorkerRunner)
        runner.greenlet.join()
        return 0
    if role == "master":
        runner = env.create_master_runner("127.0.0.1", cfg["master_port"])
        _wait_for_workers(runner, cfg["workers"])
    else:
        runner = env.create_local_runner()
    started, ended, users, peak = _run_bounded(runner, cfg)
    out = _result(env, started, ended, users, peak, cfg["workers"] if role == "master" else 0)
    Path(cfg["out"]).write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
