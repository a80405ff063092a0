"""Beyond one machine: the server on one "host", two `polyperf worker`s on two others and the master
(`polyperf load --workers 2`) on a fourth, each a network namespace joined by veth pairs (client i has
10.213.N.8i/30 to the server and 10.213.N.8i+4/30 to the master, addresses only this test creates; the
master cannot reach the server, so all load crosses the clients' veths). Without root or iproute2, or where
the kernel refuses namespaces, those tests skip with the reason: loopback is never taken for another host.
Also the fast facts: the opt-in rule, the refusal line, and how oha summaries and latencies are merged."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from polyperf.build import build
from polyperf.common.procs import stop
from polyperf.load import LoadFailed, TargetNotLoopback, latency_hdr, require_target
from polyperf.load.distributed import combine_oha, oha_bound, split_evenly
from polyperf.load.locust_driver import parse_hostport
from polyperf.load.result import PERCENTILES

POLYPERF = [sys.executable, "-m", "polyperf"]
CPUS = sorted(os.sched_getaffinity(0))
SERVER_CPU, CLIENT_CPU = str(CPUS[0]), str(CPUS[-1])
MAX_REQUESTS = 30_000
WORKERS = 2


@dataclass
class Lab:
    """Where each role runs: `ns[role]` is a namespace name, `addr[role]` its address (roles: server,
    master, worker0, worker1)."""

    ns: dict[str, str]
    addr: dict[str, str]
    server_links: list[str]
    procs: list[subprocess.Popen] = field(default_factory=list)
    url: str = ""
    tmp: Path = Path()
    server: subprocess.Popen | None = None

    def cmd(self, role: str, args: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.ns[role], *args]

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

    def run(self, role: str, args: list[str], timeout: float) -> subprocess.CompletedProcess:
        """Runs `args` in `role`'s namespace to its end (bounded by `timeout`), its output captured as text."""
        return subprocess.run(self.cmd(role, args), capture_output=True, text=True, timeout=timeout, check=False)

    def server_rx_bytes(self) -> int:
        total = 0
        for link in self.server_links:
            out = subprocess.run(
                ["ip", "-n", self.ns["server"], "-j", "-s", "link", "show", "dev", link],
                capture_output=True,
                text=True,
                check=True,
                timeout=10,
            ).stdout
            total += int(json.loads(out)[0]["stats64"]["rx"]["bytes"])
        return total


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=20)


def _namespace_names(tag: str) -> dict[str, str]:
    return {role: f"pp-{role[:3]}{role[-1]}-{tag}" for role in ("server", "master", *_workers())}


def _workers() -> list[str]:
    return [f"worker{i}" for i in range(WORKERS)]


def _make_namespaces(tag: str, net: int) -> Lab:
    """Worker i: a veth to the server (10.213.net.8i+1 server side, +2 its own) and one to the master
    (+5 master side, +6 its own). The server listens on worker0's link and the master on worker0's link;
    the other workers reach them through a host route over their own veth (no forwarding anywhere)."""
    ns = _namespace_names(tag)
    for name in ns.values():
        _ip("netns", "add", name)
        _ip("-n", name, "link", "set", "lo", "up")
    addr = {"server": f"10.213.{net}.1", "master": f"10.213.{net}.5"}
    server_links = []
    for i, worker in enumerate(_workers()):
        legs = (
            ("server", f"pps{i}-{tag}", f"ppc{i}-{tag}", 8 * i + 1),
            ("master", f"ppm{i}-{tag}", f"ppd{i}-{tag}", 8 * i + 5),
        )
        for peer, leg, own, first in legs:
            _ip("link", "add", leg, "netns", ns[peer], "type", "veth", "peer", "name", own, "netns", ns[worker])
            for name, dev, host in ((ns[peer], leg, first), (ns[worker], own, first + 1)):
                _ip("-n", name, "addr", "add", f"10.213.{net}.{host}/30", "dev", dev)
                _ip("-n", name, "link", "set", dev, "up")
            if i:  # the server's and the master's addresses sit on worker0's links
                _ip("-n", ns[worker], "route", "add", f"{addr[peer]}/32", "dev", own)
        server_links.append(f"pps{i}-{tag}")
        addr[worker] = f"10.213.{net}.{8 * i + 2}"
    return Lab(ns=ns, addr=addr, server_links=server_links)


def _namespaces_refused() -> str | None:
    """Why this machine cannot build the lab, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "network namespaces need iproute2's `ip` (apt-get install iproute2)"
    return None


def _wait_for_line(log: Path, text: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    raise AssertionError(f"no {text!r} in {log}: {log.read_text(errors='replace')[-2000:]}")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    refused = _namespaces_refused()
    if refused:
        pytest.skip(f"{refused}: loopback would not be another host")
    build("hyper_hello")
    tmp = tmp_path_factory.mktemp("multihost")
    tag, net = secrets.token_hex(3), secrets.randbelow(250) + 1
    names = _namespace_names(tag)
    lab = None
    try:
        try:
            lab = _make_namespaces(tag, net)
        except subprocess.CalledProcessError as exc:
            pytest.skip(f"cannot create network namespaces here: {exc.cmd}: {exc.stderr.decode(errors='replace')}")
        port = 18080
        lab.tmp, lab.url = tmp, f"http://{lab.addr['server']}:{port}/"
        args = ["serve", "hyper_hello", "--host", lab.addr["server"], "--port", str(port)]
        lab.server = lab.start("server", [*POLYPERF, *args, "--server-cpus", SERVER_CPU, "--out", str(tmp)], tmp / "s")
        _wait_for_line(tmp / "s", "serving at", lab.server, timeout=60)
        yield lab
    finally:
        for proc in reversed(lab.procs if lab else []):
            stop(proc)
        for name in names.values():  # deleting a namespace deletes the veth legs in it
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=20, check=False)
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    assert tag not in left, f"namespaces left behind: {left}"


def _raw_latencies(worker_dirs: list[Path]) -> np.ndarray:
    """Every latency the workers' oha wrote, from their own per-request files (seconds, whole ns)."""
    files = [f for d in worker_dirs for f in sorted(d.glob("oha-*.sqlite"))]
    assert len(files) == len(worker_dirs), files
    return np.rint(np.concatenate([latency_hdr.read_oha_db(f) for f in files]) * 1e9) / 1e9


@pytest.mark.slow
@pytest.mark.parametrize("driver", ["oha", "locust"])
def test_load_from_workers_on_two_other_hosts(lab, driver):
    bind = f"{lab.addr['master']}:15557"
    tmp = lab.tmp / driver
    tmp.mkdir()
    workers = {}
    for role in _workers():
        args = ["worker", "--master", bind, "--allow-remote", "--client-cpus", CLIENT_CPU, "--idle", "60"]
        args += ["--connect-wait", "60", "--out", str(tmp / role)]
        workers[role] = lab.start(role, [*POLYPERF, *args], tmp / f"{role}.out")
    rx_before = lab.server_rx_bytes()
    size = ["--connections", "16"] if driver == "oha" else ["--users", "10"]
    load = ["load", lab.url, "--driver", driver, "--workers", str(WORKERS), "--allow-remote", "--master-bind", bind]
    load += ["--duration", "3", "--max-requests", str(MAX_REQUESTS), *size, "--client-cpus", CLIENT_CPU]
    done = lab.run("master", [*POLYPERF, *load, "--worker-wait", "60", "--out", str(tmp / "out")], timeout=180)
    print(done.stdout, done.stderr)
    assert done.returncode == 0, done.stderr
    # the workers leave with the master (bounded), the server stays up
    for role, worker in workers.items():
        assert worker.wait(timeout=30) == 0, (tmp / f"{role}.out").read_text()
    assert lab.server.poll() is None

    rows = [json.loads(line) for line in next((tmp / "out" / "runs").iterdir()).joinpath("results.jsonl").open()]
    value = {r["metric"]: r["value"] for r in rows if "worker" not in r["params"]}
    assert {r["suite"] for r in rows} == {"remote_load"} and {r["driver"] for r in rows} == {driver}
    assert 0 < value["requests"] <= MAX_REQUESTS and value["errors"] == 0 and value["rps"] > 0
    assert value["latency_p50_s"] <= value["latency_p99_s"]
    if driver == "oha":  # one summary per worker host, summed; percentiles of every request of both
        per_worker = [r for r in rows if r["metric"] == "worker_requests"]
        assert len({r["params"]["worker"] for r in per_worker}) == WORKERS
        assert sum(r["value"] for r in per_worker) == value["requests"]
        raw = _raw_latencies([tmp / role for role in _workers()])
        assert raw.size == value["requests"]
        for p, name in ((0.5, "p50"), (0.99, "p99")):
            exact = float(np.percentile(raw, p * 100, method="inverted_cdf"))
            assert exact <= value[f"latency_{name}_s"] <= exact * (1 + latency_hdr.RELATIVE_ERROR) + 1e-9
    # every request crossed the server's veths: at least ~40 bytes each
    assert lab.server_rx_bytes() - rx_before > 40 * value["requests"]


@pytest.mark.slow
def test_a_worker_without_the_opt_in_refuses_a_remote_target(lab):
    bind = f"{lab.addr['master']}:15558"
    tmp = lab.tmp / "refusing"
    tmp.mkdir()
    worker = lab.start("worker0", [*POLYPERF, "worker", "--master", bind, "--idle", "60"], tmp / "worker.out")
    load = ["load", lab.url, "--workers", "1", "--allow-remote", "--master-bind", bind, "--duration", "1"]
    done = lab.run("master", [*POLYPERF, *load, "--max-requests", "10", "--out", str(tmp / "out")], timeout=120)
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
    assert require_target("http://192.0.2.1/", allow_remote=True) == "http://192.0.2.1:80/"
    assert require_target("http://127.0.0.2:80/") == "http://127.0.0.2:80/"
    for bad in ("ftp://127.0.0.1/", "http:///nohost"):
        with pytest.raises(TargetNotLoopback):
            require_target(bad, allow_remote=True)


def test_hostport_and_split():
    assert parse_hostport("10.0.0.1:6000") == ("10.0.0.1", 6000)
    assert parse_hostport("10.0.0.1") == ("10.0.0.1", 5557)
    assert parse_hostport("[::1]:7") == ("::1", 7)
    assert split_evenly(10, 3) == 4 and split_evenly(1, 4) == 1


def test_oha_bound_lets_oha_end_by_itself_where_a_sigint_would_lose_its_requests():
    assert oha_bound(500, 3.0, None) == ["-n", "500"]  # closed: SIGINT at the duration, requests kept
    paced = ["-q", "100", "--latency-correction"]
    assert oha_bound(200, 3.0, 100.0) == ["-z", "2s", *paced]  # the budget ends it at 2 s
    assert oha_bound(300, 3.0, 100.0) == ["-z", "3s", *paced]  # the duration ends it
    assert oha_bound(1000, 2.5, 100.0) == ["-z", "2.5s", *paced]


def _report(worker: str, received: float, lag: float, total: float, latencies: np.ndarray) -> dict:
    p = {"p50": 0.001, "p90": 0.002, "p99": 0.004, "p99.9": 0.009}  # oha's own, per worker: kept, not merged
    data = {"summary": {"total": total}, "latencyPercentiles": p, "statusCodeDistribution": {"200": len(latencies)}}
    hdr = latency_hdr.from_seconds(latencies).encode().decode("ascii")
    return {"id": worker, "host": worker, "received_at": received, "lag": lag, "data": data, "latency_hdr": hdr}


def test_combine_oha_sums_counts_and_unions_windows():
    a = _report("a", 110.0, 0.5, 4.0, np.full(4000, 0.001))
    b = _report("b", 111.0, 0.5, 4.0, np.full(2000, 0.002))
    result = combine_oha([a, b], url="http://10.0.0.1/", expected=2, connections=32, rate=None)
    assert result.requests == result.successes == 6000 and result.failures == 0
    assert (result.started_at, result.ended_at) == (105.5, 110.5)  # windows on the master's clock, unioned
    assert result.rps == 6000 / 5.0
    assert [w["rps"] for w in result.extra["per_worker"]] == [1000.0, 500.0]
    assert result.extra["per_worker"][0]["latency"]["0.99"] == 0.004 and result.extra["latency_count"] == 6000


def test_merged_p99_is_the_p99_of_both_hosts_raw_latencies():
    rng = np.random.default_rng(18)
    fast = rng.lognormal(np.log(0.0008), 0.3, 9000)  # host a: 9000 requests near 0.8 ms
    slow = rng.lognormal(np.log(0.004), 0.5, 1001)  # host b: 1001 near 4 ms (p * n never whole: numpy's
    # float p * n would then pick the next rank)
    result = combine_oha(
        [_report("a", 10.0, 0.0, 2.0, fast), _report("b", 10.0, 0.0, 2.0, slow)],
        url="http://10.0.0.1/",
        expected=2,
        connections=2,
        rate=None,
    )
    every = np.rint(np.concatenate([fast, slow]) * 1e9) / 1e9
    for p in PERCENTILES:
        exact = float(np.percentile(every, p * 100, method="inverted_cdf"))
        assert exact <= result.latency[p] <= exact * (1 + latency_hdr.RELATIVE_ERROR) + 1e-9, p
    # neither host's p99 is the merged one: the slow host's is far above, the fast host's far below
    assert np.percentile(fast, 99) < result.latency[0.99] < 0.9 * np.percentile(slow, 99)


def test_combine_oha_fails_on_a_missing_or_failed_worker_or_a_short_histogram():
    a = _report("a", 110.0, 0.0, 1.0, np.full(10, 0.001))
    with pytest.raises(LoadFailed, match="1 of 2 workers sent no result"):
        combine_oha([a], url="http://10.0.0.1/", expected=2, connections=2, rate=None)
    with pytest.raises(LoadFailed, match="refusing"):
        combine_oha(
            [a, {"id": "b", "error": "refusing to load"}], url="http://x/", expected=2, connections=2, rate=None
        )
    short = {**a, "latency_hdr": latency_hdr.from_seconds([0.001] * 9).encode().decode("ascii")}
    with pytest.raises(LoadFailed, match="holds 9 latencies for 10 completed requests"):
        combine_oha([short], url="http://x/", expected=1, connections=2, rate=None)
    with pytest.raises(LoadFailed, match="sent no latency histogram"):
        combine_oha([{**a, "latency_hdr": None}], url="http://x/", expected=1, connections=2, rate=None)
