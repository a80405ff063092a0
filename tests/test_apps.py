"""The app fleet end to end: every app builds, starts on loopback, passes verification (POSTs against
a real throwaway PostgreSQL, rows read back), handles raw-socket edge cases, and is gone after stop —
also when the harness itself is killed."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import psutil
import pytest
from process_checks import gone

from polyperf.build import build
from polyperf.build.registry import APPS
from polyperf.errors import ServerFailed
from polyperf.serve.postgres import ThrowawayPostgres
from polyperf.serve.server import Server
from polyperf.serve.verify import verify

DEVICE_APPS = [name for name, app in APPS.items() if app.uses_database]

pytestmark = pytest.mark.slow  # builds and starts real servers


@pytest.fixture(scope="session")
def built():
    """Builds every app once (default variants); a build failure fails the tests that need it."""
    return {name: build(name) for name in APPS}


@pytest.fixture(scope="module")
def postgres(tmp_path_factory):
    with ThrowawayPostgres(tmp_path_factory.mktemp("pg")) as pg:
        yield pg


@pytest.mark.parametrize("name", list(APPS))
def test_app_passes_verification_and_stops(name, built, tmp_path):
    server = Server(name, log_dir=tmp_path).start()
    try:
        checks = verify(server.url, APPS[name].checks)
    finally:
        code = server.stop()
    failed = [f"{c.name}: {c.detail}" for c in checks if not c.ok]
    assert not failed, failed
    assert code == 0, f"{name} exited with {code} on SIGTERM"
    assert gone(server.pid)


@pytest.mark.parametrize("name", DEVICE_APPS)
def test_devices_post_inserts_rows(name, built, postgres, tmp_path):
    with Server(name, log_dir=tmp_path, database_url=postgres.dsn) as server:
        checks = verify(server.url, "devices", with_db=True)
        assert all(c.ok for c in checks), [f"{c.name}: {c.detail}" for c in checks if not c.ok]
        acknowledged = []
        conn = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        reader = conn.makefile("rb")
        for i in range(20):
            body = json.dumps({"mac": f"00-00-00-00-00-{i:02X}", "firmware": f"1.0.{i}"}).encode()
            conn.sendall(b"POST /api/devices HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            status, _headers, payload = _read_response(reader)
            assert status == 201
            acknowledged.append(json.loads(payload))
        conn.close()
    table = f"{name.split('_')[0]}_device"
    rows = postgres.query(f"SELECT id, mac, firmware FROM {table} WHERE mac LIKE '00-00-00-00-00-%' ORDER BY id")
    assert [{"id": r[0], "mac": r[1], "firmware": r[2]} for r in rows] == acknowledged


def _read_response(reader) -> tuple[int, dict[str, str], bytes]:
    status_line = reader.readline()
    assert status_line.startswith(b"HTTP/1."), status_line
    status = int(status_line.split()[1])
    headers = {}
    while (line := reader.readline()) not in (b"\r\n", b""):
        key, _, value = line.decode().partition(":")
        headers[key.strip().lower()] = value.strip()
    body = reader.read(int(headers.get("content-length", 0)))
    return status, headers, body


@pytest.mark.parametrize("name", DEVICE_APPS)
def test_pipelined_and_split_requests(name, built, tmp_path):
    with Server(name, log_dir=tmp_path) as server:
        request = b"GET /api/devices HTTP/1.1\r\nHost: x\r\n\r\n"
        conn = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        reader = conn.makefile("rb")
        conn.sendall(request * 5 + b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")  # pipelined in one packet
        bodies = [_read_response(reader)[2] for _ in range(6)]
        assert all(json.loads(b)[0]["id"] == 1 for b in bodies[:5])
        assert json.loads(bodies[5]) == {"status": "ok"}
        for byte in request:  # one byte per packet
            conn.sendall(bytes([byte]))
            time.sleep(0.001)
        assert _read_response(reader)[0] == 200
        body = b'{"mac": "AA", "firmware": 3}'
        post = b"POST /api/devices HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        conn.sendall(post[:30])
        time.sleep(0.05)
        conn.sendall(post[30:] + request)  # body split across packets, next request behind it
        assert _read_response(reader)[0] == 400
        assert _read_response(reader)[0] == 200
        conn.close()


@pytest.mark.parametrize("name", list(APPS))
def test_garbage_gets_400_and_server_survives(name, built, tmp_path):
    with Server(name, log_dir=tmp_path) as server:
        for junk in (
            b"GARBAGE\r\n\r\n",
            b"GET / HTTP/1.1\r\nBad Header Line\r\n\r\n",
            b"POST /api/devices HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n",
        ):
            with socket.create_connection(("127.0.0.1", server.port), timeout=10) as conn:
                conn.sendall(junk)
                reply = conn.recv(200)
                assert reply.startswith(b"HTTP/1.1 4"), (junk, reply)
        server.check_alive()
        assert verify(server.url, APPS[name].checks)[0].ok


def test_dead_server_is_reported_with_exit_code_and_log(built, tmp_path):
    server = Server("hyper_hello", log_dir=tmp_path).start()
    os.kill(server.pid, signal.SIGKILL)
    # wait for the whole thread group: the leader shows as a zombie before its threads are gone
    server.proc.wait(timeout=10)
    with pytest.raises(ServerFailed, match=r"hyper_hello:release on port \d+ exited with code -9; log .*listening"):
        server.check_alive()


_HARNESS = """
import sys, time
from pathlib import Path
from polyperf.serve.server import Server
s = Server("hyper_hello", log_dir=Path(sys.argv[1])).start()
print(s.pid, flush=True)
time.sleep(120)
"""


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_no_orphan_when_the_harness_is_killed(sig, built, tmp_path):
    harness = subprocess.Popen([sys.executable, "-c", _HARNESS, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        server_pid = int(harness.stdout.readline())
        assert psutil.pid_exists(server_pid)
        harness.send_signal(sig)
        harness.wait(timeout=30)
        assert gone(server_pid), f"server {server_pid} survived the harness dying by {sig!r}"
    finally:
        harness.kill()


def test_serve_command_stops_its_app_on_sigterm(built, tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "polyperf", "serve", "hyper_hello", "--out", str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert "serving at http://127.0.0.1:" in line
        port = int(line.split("127.0.0.1:")[1].split()[0])
        server_pids = [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]
        assert server_pids
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        assert all(gone(pid) for pid in server_pids)
    finally:
        proc.kill()


def test_build_is_cached_and_recorded(built):
    again = build("hyper_hello")
    assert again.cached and again.binary_bytes > 0 and again.seconds > 0
