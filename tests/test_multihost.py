"""Beyond one machine: the server on one "host", a `polyperf worker` on another and the master (`polyperf
load --workers 1`) on a third, each a network namespace joined by veth pairs (10.213.N.0/30 server-client,
10.213.N.4/30 client-master, addresses only this test creates; the master cannot reach the server, so all
load crosses the client's veth). Without root or iproute2 the "remote" server is 127.0.0.2 and the master
127.0.0.1. Also the fast facts: the opt-in rule, the refusal line, and how oha summaries are combined."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from polyperf.build import build
from polyperf.common.net import free_port
from polyperf.load import LoadFailed, TargetNotLoopback, require_target
from polyperf.load.distributed import combine_oha, split_evenly
from polyperf.load.locust_driver import parse_hostport

POLYPERF = [sys.executable, "-m", "polyperf"]
CPUS = sorted(os.sched_getaffinity(0))
SERVER_CPU, CLIENT_CPU = str(CPUS[0]), str(CPUS[-1])
MAX_REQUESTS = 30_000


@dataclass
class Lab:
    """Where each role runs: `ns[role]` is a namespace name (None: this namespace) and `addr` its address."""

    ns: dict[str, str | None]
    addr: dict[str, str]
    server_link: str | None = None
    procs: list[subprocess.Popen] = field(default_factory=list)
    url: str = ""
    tmp: Path = Path()
    server: subprocess.Popen | None = None

    def cmd(self, role: str, args: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.ns[role], *args] if self.ns[role] else args

    def start(self, role: str, args: list[str], log: Path) -> subprocess.Popen:
        with log.open("ab") as out:
            proc = subprocess.Popen(
                self.cmd(role, args),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.procs.append(proc)
        return proc

    def server_rx_bytes(self) -> int | None:
        if not self.server_link:
            return None
        out = subprocess.run(
            ["ip", "-n", self.ns["server"], "-j", "-s", "link", "show", "dev", self.server_link],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout
        return int(json.loads(out)[0]["stats64"]["rx"]["bytes"])


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=20)


def _make_namespaces(tag: str, net: int) -> Lab:
    ns = {role: f"pp-{role[:3]}-{tag}" for role in ("ser", "cli", "mas")}
    ns = {"server": ns["ser"], "client": ns["cli"], "master": ns["mas"]}
    for name in ns.values():
        _ip("netns", "add", name)
        _ip("-n", name, "link", "set", "lo", "up")
    links = [("server", "client", f"pps-{tag}", f"ppc-{tag}", 1), ("master", "client", f"ppm-{tag}", f"ppd-{tag}", 5)]
    for a, b, leg_a, leg_b, first in links:
        _ip("link", "add", leg_a, "netns", ns[a], "type", "veth", "peer", "name", leg_b, "netns", ns[b])
        for name, leg, host in ((ns[a], leg_a, first), (ns[b], leg_b, first + 1)):
            _ip("-n", name, "addr", "add", f"10.213.{net}.{host}/30", "dev", leg)
            _ip("-n", name, "link", "set", leg, "up")
    addr = {"server": f"10.213.{net}.1", "worker": f"10.213.{net}.2", "master": f"10.213.{net}.5"}
    return Lab(
        ns={"server": ns["server"], "worker": ns["client"], "master": ns["master"]}, addr=addr, server_link=f"pps-{tag}"
    )


def _namespaces_usable() -> bool:
    if os.environ.get("POLYPERF_TEST_NO_NETNS"):  # to exercise the loopback fallback on a root machine
        return False
    return os.geteuid() == 0 and shutil.which("ip") is not None


def _wait_for_line(log: Path, text: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    raise AssertionError(f"no {text!r} in {log}: {log.read_text(errors='replace')[-2000:]}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    build("hyper_hello")
    tmp = tmp_path_factory.mktemp("multihost")
    tag, net = secrets.token_hex(3), secrets.randbelow(250) + 1
    namespaces = [f"pp-{role}-{tag}" for role in ("ser", "cli", "mas")]
    lab = Lab(
        ns={"server": None, "worker": None, "master": None},
        addr={"server": "127.0.0.2", "worker": "127.0.0.1", "master": "127.0.0.1"},
    )
    try:
        if _namespaces_usable():
            try:
                lab = _make_namespaces(tag, net)
            except subprocess.CalledProcessError as exc:
                print(f"no namespaces ({exc.stderr!r}): falling back to 127.0.0.2")
        port = 18080 if lab.ns["server"] else free_port("127.0.0.2")
        lab.tmp, lab.url = tmp, f"http://{lab.addr['server']}:{port}/"
        args = ["serve", "hyper_hello", "--host", lab.addr["server"], "--port", str(port)]
        lab.server = lab.start("server", [*POLYPERF, *args, "--server-cpus", SERVER_CPU, "--out", str(tmp)], tmp / "s")
        _wait_for_line(tmp / "s", "serving at", lab.server, timeout=60)
        yield lab
    finally:
        for proc in reversed(lab.procs):
            _stop(proc)
        for name in namespaces:  # deleting a namespace deletes the veth legs in it
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=20, check=False)
    if shutil.which("ip"):
        left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
        assert tag not in left, f"namespaces left behind: {left}"


@pytest.mark.slow
@pytest.mark.parametrize("driver", ["oha", "locust"])
def test_load_from_a_worker_on_another_host(lab, driver):
    port = 15557 if lab.ns["master"] else free_port()
    bind = f"{lab.addr['master']}:{port}"
    tmp = lab.tmp / driver
    tmp.mkdir()
    worker_log = tmp / "worker.out"
    worker = lab.start(
        "worker",
        [
            *POLYPERF,
            "worker",
            "--master",
            bind,
            "--allow-remote",
            "--client-cpus",
            CLIENT_CPU,
            "--idle",
            "60",
            "--connect-wait",
            "60",
            "--out",
            str(tmp / "worker"),
        ],
        worker_log,
    )
    rx_before = lab.server_rx_bytes()
    size = ["--connections", "16"] if driver == "oha" else ["--users", "10"]
    done = subprocess.run(
        lab.cmd(
            "master",
            [
                *POLYPERF,
                "load",
                lab.url,
                "--driver",
                driver,
                "--workers",
                "1",
                "--allow-remote",
                "--master-bind",
                bind,
                "--duration",
                "3",
                "--max-requests",
                str(MAX_REQUESTS),
                *size,
                "--client-cpus",
                CLIENT_CPU,
                "--worker-wait",
                "60",
                "--out",
                str(tmp / "out"),
            ],
        ),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    print(done.stdout, done.stderr)
    assert done.returncode == 0, done.stderr
    # the worker leaves with the master (bounded), the server stays up
    assert worker.wait(timeout=30) == 0, worker_log.read_text()
    assert lab.server.poll() is None

    rows = [json.loads(line) for line in next((tmp / "out" / "runs").iterdir()).joinpath("results.jsonl").open()]
    value = {r["metric"]: r["value"] for r in rows if "worker" not in r["params"]}
    assert {r["suite"] for r in rows} == {"remote_load"} and {r["driver"] for r in rows} == {driver}
    assert 0 < value["requests"] <= MAX_REQUESTS and value["errors"] == 0 and value["rps"] > 0
    assert value["latency_p50_s"] <= value["latency_p99_s"]
    if driver == "oha":  # one summary per worker, summed
        per_worker = [r for r in rows if r["metric"] == "worker_requests"]
        assert len(per_worker) == 1 and per_worker[0]["value"] == value["requests"]
        assert "worker" in done.stdout
    rx_after = lab.server_rx_bytes()
    if rx_before is not None:  # every request crossed the server's veth: at least ~40 bytes each
        assert rx_after - rx_before > 40 * value["requests"]


@pytest.mark.slow
def test_a_worker_without_the_opt_in_refuses_a_remote_target(lab):
    if not lab.ns["server"]:
        pytest.skip("needs namespaces: on loopback every target is allowed")
    bind = f"{lab.addr['master']}:15558"
    tmp = lab.tmp / "refusing"
    tmp.mkdir()
    worker = lab.start("worker", [*POLYPERF, "worker", "--master", bind, "--idle", "60"], tmp / "worker.out")
    load = ["load", lab.url, "--workers", "1", "--allow-remote", "--master-bind", bind, "--duration", "1"]
    done = subprocess.run(
        lab.cmd("master", [*POLYPERF, *load, "--max-requests", "10", "--out", str(tmp / "out")]),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2 and "start the worker with --allow-remote" in done.stderr, done.stderr
    assert worker.wait(timeout=30) == 0  # told to quit by the master


def test_remote_target_needs_the_opt_in_and_is_refused_in_one_line(tmp_path):
    # 192.0.2.1 is TEST-NET-1: only ever resolved here, never sent anything
    done = subprocess.run(
        [*POLYPERF, "load", "http://192.0.2.1:8080/", "--duration", "1", "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--allow-remote" in lines[0], done.stderr
    assert not (tmp_path / "out").exists(), "nothing was created or started"


def test_require_target_opt_in():
    with pytest.raises(TargetNotLoopback, match="--allow-remote"):
        require_target("http://192.0.2.1/")
    assert require_target("http://192.0.2.1/", allow_remote=True) == "http://192.0.2.1/"
    assert require_target("http://127.0.0.2:80/") == "http://127.0.0.2:80/"
    for bad in ("ftp://127.0.0.1/", "http:///nohost"):
        with pytest.raises(TargetNotLoopback):
            require_target(bad, allow_remote=True)


def test_hostport_and_split():
    assert parse_hostport("10.0.0.1:6000") == ("10.0.0.1", 6000)
    assert parse_hostport("10.0.0.1") == ("10.0.0.1", 5557)
    assert parse_hostport("[::1]:7") == ("::1", 7)
    assert split_evenly(10, 3) == 4 and split_evenly(1, 4) == 1


def _report(worker: str, received: float, lag: float, total: float, ok: int, p: dict[str, float]) -> dict:
    data = {"summary": {"total": total}, "latencyPercentiles": p, "statusCodeDistribution": {"200": ok}}
    return {"id": worker, "host": worker, "received_at": received, "lag": lag, "data": data}


def test_combine_oha_sums_counts_unions_windows_and_takes_the_worst_percentile():
    a = _report("a", 110.0, 0.5, 4.0, 4000, {"p50": 0.001, "p90": 0.002, "p99": 0.004, "p99.9": 0.009})
    b = _report("b", 111.0, 0.5, 4.0, 2000, {"p50": 0.002, "p90": 0.003, "p99": 0.003, "p99.9": 0.005})
    result = combine_oha([a, b], url="http://10.0.0.1/", expected=2, connections=32, rate=None)
    assert result.requests == result.successes == 6000 and result.failures == 0
    assert (result.started_at, result.ended_at) == (105.5, 110.5)  # windows on the master's clock, unioned
    assert result.rps == 6000 / 5.0
    assert result.latency == {0.5: 0.002, 0.9: 0.003, 0.99: 0.004, 0.999: 0.009}
    assert result.extra["latency_lower_bound"]["0.99"] == 0.003
    assert [w["rps"] for w in result.extra["per_worker"]] == [1000.0, 500.0]


def test_combine_oha_fails_on_a_missing_or_failed_worker():
    a = _report("a", 110.0, 0.0, 1.0, 10, {"p50": 0.001})
    with pytest.raises(LoadFailed, match="1 of 2 workers sent no result"):
        combine_oha([a], url="http://10.0.0.1/", expected=2, connections=2, rate=None)
    with pytest.raises(LoadFailed, match="refusing"):
        combine_oha(
            [a, {"id": "b", "error": "refusing to load"}], url="http://x/", expected=2, connections=2, rate=None
        )
