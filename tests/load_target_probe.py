"""The processes of `test_load_target_netns.py`, each run inside a network namespace the test made:

- `listen LOG PORT...`: the far listener (a tiny HTTP server) that logs every connection it accepts;
- `drive CONFIG OUT`: runs every load driver and the worker's job check on every URL of the table, in one process,
  with a loopback HTTP server of its own, and writes what was refused and what reached where;
- `master CONFIG OUT`: a hostile locust master that sends a real `polyperf worker` smuggled and ambiguous jobs.

Not a test module (no `test_` prefix): the test starts these with `ip netns exec`.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar


class OkHandler(BaseHTTPRequestHandler):
    """Answers every GET with 200 `ok` and logs nothing (also the loopback server of `test_per_second.py`)."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        return


class _Handler(OkHandler):
    log_file: Path | None = None
    seen: ClassVar[list] = []

    def setup(self) -> None:
        super().setup()
        local = self.connection.getsockname()[0]
        self.seen.append(["connect", local])
        if self.log_file is not None:
            with self.log_file.open("a") as fh:
                fh.write(json.dumps(["connect", local, self.client_address[0]]) + "\n")

    def do_GET(self) -> None:
        self.seen.append(["GET", self.connection.getsockname()[0], self.path])
        super().do_GET()


class _DualStack(ThreadingHTTPServer):
    address_family = socket.AF_INET6
    daemon_threads = True

    def server_bind(self) -> None:
        self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()


def listen(log: str, ports: list[int]) -> None:
    _Handler.log_file = Path(log)
    servers = [ThreadingHTTPServer(("0.0.0.0", port), _Handler) for port in ports]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    print("listening", flush=True)
    time.sleep(600)  # the test stops it long before


def _refusals(url: str, allow_remote: bool, log_dir: Path) -> list[str]:
    """The drivers and job checks that did NOT refuse `url` (each must raise before starting anything)."""
    from polyperf.load import Bounds, TargetNotLoopback, run_bombardier, run_locust, run_oha, run_oha_workers, run_wrk
    from polyperf.load.drill_driver import run_drill
    from polyperf.load.target import TargetRefused
    from polyperf.load.worker_job import OhaJob, UsersJob

    common = {"bounds": Bounds(1.0, 3), "client_cpus": [0], "log_dir": log_dir}
    common_drill = {"client_cpus": [0], "log_dir": log_dir}
    calls = {
        "oha": lambda: run_oha(url, allow_remote=allow_remote, connections=1, **common),
        "wrk": lambda: run_wrk(url, allow_remote=allow_remote, connections=1, **common),
        "bombardier": lambda: run_bombardier(url, connections=1, **common),
        "locust": lambda: run_locust(url, allow_remote=allow_remote, users=1, **common),
        "distributed": lambda: run_oha_workers(url, workers=1, allow_remote=allow_remote, worker_wait=1, **common),
        "drill": lambda: run_drill(url, "", None, concurrency=1, requests=3, timeout=5, **common_drill),
        "worker-oha": lambda: OhaJob.from_message(
            {"target": url, "connections": 1, "duration_s": 1.0, "max_requests": 3}, allow_remote=allow_remote
        ),
        "worker-users": lambda: UsersJob.from_message({"target": url, "budget": 3}, allow_remote=allow_remote),
    }
    if allow_remote:  # bombardier and drill have no opt-in: they refuse every non-loopback target
        calls = {k: v for k, v in calls.items() if k not in ("bombardier", "drill")}
    missed = []
    for name, call in calls.items():
        try:
            call()
        except (TargetNotLoopback, TargetRefused):
            continue
        except Exception as exc:
            missed.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        missed.append(f"{name}: accepted")
    return missed


def _allowed(url: str, log_dir: Path, seen: list, locust: bool) -> list[dict]:
    """Runs every installed generator once against an allowed URL (locust too if `locust`: it starts slowly);
    where each one's requests arrived."""
    from polyperf.errors import ToolchainMissing
    from polyperf.load import Bounds, run_bombardier, run_locust, run_oha
    from polyperf.load.drill_driver import ensure_drill, run_drill, to_load_result

    common = {"bounds": Bounds(2.0, 3), "client_cpus": [0], "log_dir": log_dir, "connections": 1}
    runs = {
        "oha": lambda: run_oha(url, **common),
        "bombardier": lambda: run_bombardier(url, **common),
        "drill": lambda: to_load_result(
            run_drill(url, "", None, concurrency=1, requests=3, client_cpus=[0], log_dir=log_dir, timeout=20,
                      drill=ensure_drill(install=False), method="GET")
        ),
    }  # fmt: skip
    if locust:
        runs["locust"] = lambda: run_locust(url, bounds=Bounds(3.0, 3), client_cpus=[0], log_dir=log_dir, users=1)
    out = []
    for name, run in runs.items():
        before = len(seen)
        try:
            result = run()
        except ToolchainMissing as exc:
            out.append({"driver": name, "skipped": str(exc)})
            continue
        out.append({"driver": name, "url": result.url, "successes": result.successes, "hits": seen[before:]})
    return out


def _is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%")[0])
    mapped = getattr(ip, "ipv4_mapped", None)  # a dual-stack socket sees 127.0.0.1 as ::ffff:127.0.0.1
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


def drive(config: str, out: str) -> None:
    cfg = json.loads(Path(config).read_text())
    server = _DualStack(("::", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    log_dir = Path(cfg["log_dir"])
    report: dict = {"port": port, "missed": {}, "allowed": {}}
    for url in cfg["refused_always"]:
        for allow_remote in (False, True):
            missed = _refusals(url, allow_remote, log_dir)
            if missed:
                report["missed"][f"{url!r} allow_remote={allow_remote}"] = missed
    for url in cfg["refused_without_opt_in"]:
        missed = _refusals(url, False, log_dir)
        if missed:
            report["missed"][repr(url)] = missed
    report["left_in_log_dir"] = sorted(p.name for p in log_dir.iterdir())
    for url in cfg["allowed"]:
        locust = url in cfg["allowed_with_locust"]
        report["allowed"][url] = _allowed(url.replace("{port}", str(port)), log_dir, _Handler.seen, locust)
    report["local_addresses"] = sorted({hit[1] for hit in _Handler.seen})
    report["loopback_only"] = bool(_Handler.seen) and all(_is_loopback(hit[1]) for hit in _Handler.seen)
    Path(out).write_text(json.dumps(report, indent=1))


def master(config: str, out: str) -> None:
    """A hostile master: every job it sends must come back refused; then, after a job the worker accepts, it
    spawns users with locust's own spawn message naming another host. Nothing may reach the far listener."""
    import gevent
    from locust import User
    from locust.env import Environment

    cfg = json.loads(Path(config).read_text())

    class PolyperfUser(User):  # the worker's user class name: locust spawns users by class name
        pass

    env = Environment(user_classes=[PolyperfUser], host=cfg["spawn_host"])
    runner = env.create_master_runner("127.0.0.1", cfg["port"])
    replies: list = []

    def reply(environment: Environment, msg: object) -> None:  # locust passes both by keyword
        replies.append(msg.data.get("error", msg.data))

    runner.register_message("polyperf_oha_done", reply)
    runner.register_message("polyperf_config_ack", reply)
    deadline = time.monotonic() + 60
    while not runner.clients.ready and time.monotonic() < deadline:
        gevent.sleep(0.1)
    if not runner.clients.ready:
        raise SystemExit("no worker connected")
    gevent.sleep(1.0)  # the worker registers its handlers once connected
    for kind, job in [*cfg["jobs"], ["polyperf_config", cfg["accepted"]], *cfg.get("after", [])]:
        count = len(replies)
        runner.send_message(kind, job)
        wait = time.monotonic() + 20
        while len(replies) == count and time.monotonic() < wait:
            gevent.sleep(0.05)
        if len(replies) == count:
            replies.append({"no reply": job})
    runner.start(1, spawn_rate=10)  # locust's spawn message carries env.host: the far listener
    gevent.sleep(4.0)
    runner.stop()
    gevent.sleep(1.0)
    sent = runner.stats.total.num_requests
    runner.quit()
    Path(out).write_text(json.dumps({"replies": replies, "spawned_requests": sent}, indent=1))


if __name__ == "__main__":
    role, *rest = sys.argv[1:]
    if role == "listen":
        listen(rest[0], [int(p) for p in rest[1:]])
    elif role == "drive":
        drive(rest[0], rest[1])
    else:
        master(rest[0], rest[1])
