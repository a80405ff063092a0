"""On the wire: a listener at 10.251.N.2 in a network namespace `far`, reached from a namespace `client` over a
veth pair (addresses and namespaces only this test creates, IPv6 off on the pair so nothing else crosses it).
Every load driver, the worker's job check and `polyperf load` itself get the table of tricky URLs in `client`:
each refused URL must send not one packet to `far` (its veth's receive counter and the listener's log stay
unchanged), each allowed URL must reach the loopback server only. A control at the end loads `far` on purpose,
so the counters are shown to see traffic. A hostile locust master then sends a real `polyperf worker` smuggled
and ambiguous jobs. Without root or iproute2, or where namespaces cannot be made, the tests skip with the reason."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_load_target import ALLOWED, AMBIGUOUS, REMOTE, fill

from polyperf.common.procs import stop
from polyperf.errors import ToolchainMissing
from polyperf.load import ensure_oha

pytestmark = pytest.mark.slow

PROBE = Path(__file__).with_name("load_target_probe.py")
POLYPERF = [sys.executable, "-m", "polyperf"]


@dataclass
class Wire:
    client: str  # namespace names
    far: str
    far_addr: str
    far_link: str
    listener_log: Path

    def run(self, args: list[str], timeout: float = 180) -> subprocess.CompletedProcess:
        cmd = ["ip", "netns", "exec", self.client, *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)

    def start(self, ns: str, args: list[str], log: Path) -> subprocess.Popen:
        with log.open("ab") as out:
            return subprocess.Popen(
                ["ip", "netns", "exec", ns, *args], stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def far_seen(self) -> tuple[int, list[str]]:
        """(packets the far veth received, connections the listener logged)."""
        shown = subprocess.run(
            ["ip", "-n", self.far, "-j", "-s", "link", "show", "dev", self.far_link],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout
        lines = self.listener_log.read_text().splitlines() if self.listener_log.exists() else []
        return int(json.loads(shown)[0]["stats64"]["rx"]["packets"]), lines


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=20)


def _wait_for(log: Path, text: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if log.exists() and text in log.read_text(errors="replace"):
            return
        time.sleep(0.1)
    raise AssertionError(f"no {text!r} in {log}: {log.read_text(errors='replace')[-2000:] if log.exists() else ''}")


@pytest.fixture(scope="module")
def wire(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root: loopback cannot stand in for another host")
    if shutil.which("ip") is None:
        pytest.skip("network namespaces need iproute2's `ip` (apt-get install iproute2)")
    try:
        ensure_oha(install=False)
    except ToolchainMissing as exc:
        pytest.skip(str(exc))
    tmp = tmp_path_factory.mktemp("wire")
    tag, net = secrets.token_hex(3), secrets.randbelow(250) + 1
    client, far = f"pp-tc-{tag}", f"pp-tf-{tag}"
    listener = None
    try:
        try:
            for ns in (client, far):
                _ip("netns", "add", ns)
                _ip("-n", ns, "link", "set", "lo", "up")
            legs = (f"ppc-{tag}", "netns", client, "type", "veth", "peer", "name", f"ppf-{tag}", "netns", far)
            _ip("link", "add", *legs)
            for ns, dev, host in ((client, f"ppc-{tag}", 1), (far, f"ppf-{tag}", 2)):
                _ip("netns", "exec", ns, "sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1")
                _ip("-n", ns, "addr", "add", f"10.251.{net}.{host}/30", "dev", dev)
                _ip("-n", ns, "link", "set", dev, "up")
        except subprocess.CalledProcessError as exc:
            pytest.skip(f"cannot create network namespaces here: {exc.cmd}: {exc.stderr.decode(errors='replace')}")
        wire = Wire(client, far, f"10.251.{net}.2", f"ppf-{tag}", tmp / "far.log")
        out = tmp / "far.out"
        listen = [sys.executable, str(PROBE), "listen", str(wire.listener_log), "18080", "18081"]
        listener = wire.start(far, listen, out)
        _wait_for(out, "listening", listener, timeout=30)
        yield wire
    finally:
        if listener is not None:
            stop(listener)
        for ns in (client, far):  # deleting a namespace deletes the veth leg in it
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=20, check=False)
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    assert tag not in left, f"namespaces left behind: {left}"


def test_a_worker_refuses_what_a_hostile_master_sends(wire, tmp_path):
    far, port = wire.far_addr, 15601
    smuggled = {"target": "http://127.0.0.1:18081/", "connections": 1, "duration_s": 1.0, "max_requests": 3}
    jobs = [
        ["polyperf_oha", smuggled | {"target": f"http://{far}:18080\\@127.0.0.1:18081/"}],
        ["polyperf_oha", smuggled | {"bound": ["--connect-to", f"127.0.0.1:18081:{far}:18080"]}],
        ["polyperf_oha", smuggled | {"connections": f"1 --connect-to 127.0.0.1:18081:{far}:18080"}],
        ["polyperf_oha", {"url": f"http://{far}:18080/", "bound": ["-n", "3"], "connections": 1, "duration": 1}],
        ["polyperf_oha", smuggled | {"target": f"http://0x{int.from_bytes(bytes(map(int, far.split('.')))):x}:18080/"}],
        ["polyperf_config", {"target": f"http://127.0.0.1:18081@{far}:18080/", "budget": 3}],
        ["polyperf_config", {"target": "http://127.0.0.1:18081/", "budget": 3, "requests_log": "/etc/x"}],
    ]
    accepted = {"target": "http://127.0.0.1:18081/", "budget": 3}  # nothing listens there: refused connections
    # once a target is accepted, orders naming another (allowed by --allow-remote on their own) are refused
    after = [
        ["polyperf_oha", smuggled | {"target": f"http://{far}:18080/"}],
        ["polyperf_config", {"target": f"http://{far}:18080/", "budget": 3}],
    ]
    config = {"port": port, "jobs": jobs, "accepted": accepted, "after": after, "spawn_host": f"http://{far}:18080"}
    (tmp_path / "master.json").write_text(json.dumps(config))
    before = wire.far_seen()
    worker_args = ["worker", "--master", f"127.0.0.1:{port}", "--allow-remote", "--idle", "60"]
    worker = wire.start(wire.client, [*POLYPERF, *worker_args, "--out", str(tmp_path / "w")], tmp_path / "w.out")
    try:
        done = wire.run([sys.executable, str(PROBE), "master", str(tmp_path / "master.json"), str(tmp_path / "r")])
        assert done.returncode == 0, done.stderr[-3000:]
        assert worker.wait(timeout=60) == 0, (tmp_path / "w.out").read_text()  # it quit with its master
    finally:
        stop(worker)
    report = json.loads((tmp_path / "r").read_text())
    *replies, ack, other_oha, other_config = report["replies"]
    expected = ["backslash", "unknown field(s) bound", "'connections'", "unknown field(s) bound, duration, url"]
    expected += ["form tools read differently", "user-info", "unknown field(s) requests_log"]
    assert "not the target this worker accepted" in other_oha and "this worker accepted" in other_config
    assert len(replies) == len(expected), replies
    for reply, reason in zip(replies, expected, strict=True):
        assert isinstance(reply, str) and reason in reply and "\n" not in reply, (reply, reason)
    # the accepted job's users sent their budget to it, not to the host locust's spawn message named
    assert ack is None and report["spawned_requests"] >= 1, report
    assert wire.far_seen() == before
    assert not list((tmp_path / "w").glob("oha-*")), "the worker started oha for a refused job"


_REDIRECTER = """
import http.server, sys
class Redirect(http.server.BaseHTTPRequestHandler):
    def _answer(self):
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        code = 307 if self.command == "POST" else 302
        self.send_response(code)
        self.send_header("Location", sys.argv[2])
        self.send_header("Content-Length", "0")
        self.end_headers()
    do_GET = do_POST = _answer
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Redirect)
print("listening", flush=True)
server.serve_forever()
"""


@pytest.mark.parametrize("driver", ["locust", "oha"])
def test_a_redirect_never_takes_load_off_host(wire, tmp_path, driver):
    """A loopback server answering 302/307 with the far host's address: every generator counts the 3xx as a
    failed request with its status, and the far side sees not one packet."""
    port = 20000 + secrets.randbelow(20000)
    log = tmp_path / "redirect.out"
    redirecter = wire.start(
        wire.client, [sys.executable, "-c", _REDIRECTER, str(port), f"http://{wire.far_addr}:18080/"], log
    )
    try:
        _wait_for(log, "listening", redirecter, timeout=30)
        before = wire.far_seen()
        args = ["load", f"http://127.0.0.1:{port}/", "--driver", driver, "--duration", "2", "--max-requests", "20"]
        size = ["--users", "2"] if driver == "locust" else ["--connections", "2"]
        done = wire.run([*POLYPERF, *args, *size, "--out", str(tmp_path / "out")])
        assert wire.far_seen() == before, f"{driver} followed a redirect to {wire.far_addr}"
        said = done.stdout + done.stderr
        assert done.returncode in (0, 1, 2) and "302" in said and "internal error" not in said, said
    finally:
        stop(redirecter)


def test_refused_urls_send_nothing_and_allowed_urls_reach_only_loopback(wire, tmp_path):
    far = wire.far_addr
    (tmp_path / "logs").mkdir()
    config = {
        "refused_always": [fill(url, far=far) for url, _ in AMBIGUOUS],
        "refused_without_opt_in": [fill(url, far=far) for url in REMOTE],
        "allowed": [url.replace("{far}", far) for url, _ in ALLOWED],
        "allowed_with_locust": [url.replace("{far}", far) for url, _ in ALLOWED[1::5]],
        "log_dir": str(tmp_path / "logs"),
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    before = wire.far_seen()
    done = wire.run([sys.executable, str(PROBE), "drive", str(tmp_path / "config.json"), str(tmp_path / "out.json")])
    assert done.returncode == 0, done.stderr[-3000:]
    # the issue's own attack, through the command line, with and without the opt-in
    attack = f"http://{far}:18080\\@127.0.0.1:18081/"
    for extra in ([], ["--allow-remote"]):
        args = ["load", attack, "--duration", "1", "--max-requests", "3", "--connections", "1", *extra]
        cli = wire.run([*POLYPERF, *args, "--out", str(tmp_path / "cli")])
        assert cli.returncode == 2 and len(cli.stderr.strip().splitlines()) == 1, cli.stderr
        assert "backslash" in cli.stderr, cli.stderr
    after = wire.far_seen()
    assert after == before, f"refused URLs reached {far}: {after[1]}"

    report = json.loads((tmp_path / "out.json").read_text())
    assert report["missed"] == {}, json.dumps(report["missed"], indent=1)
    assert report["left_in_log_dir"] == [], "a refused URL started something"
    ran = 0
    for url, canonical in ALLOWED:
        for run in report["allowed"][url.replace("{far}", far)]:
            if "skipped" in run:
                continue
            ran += 1
            want = fill(canonical, port=report["port"], far=far)
            assert run["url"] == want and run["successes"] >= 1 and run["hits"], run
    assert ran >= 2 * len(ALLOWED) + 2 and report["loopback_only"], report["local_addresses"]

    # control: with the opt-in and a plain URL the far listener is reached, so the counters above could see it
    # (last in this file: its connections' late packets, ARP among them, would show up in a later test)
    control = ["load", f"http://{far}:18080/control", "--allow-remote", "--duration", "1", "--max-requests", "3"]
    done = wire.run([*POLYPERF, *control, "--connections", "1", "--out", str(tmp_path / "control")])
    assert done.returncode == 0, done.stderr
    packets, lines = wire.far_seen()
    assert packets > after[0] and len(lines) > len(after[1]), (packets, lines)
