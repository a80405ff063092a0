"""The bombardier driver: its report parser on golden outputs captured from real runs (tests/testdata/
bombardier/), and live runs against a small loopback server: bounds, counts, statuses, errors, no orphans.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psutil
import pytest
from process_checks import gone

from polyperf.errors import ToolchainMissing
from polyperf.load import Bounds, LoadFailed, TargetNotLoopback
from polyperf.load.bombardier_driver import (
    bombardier_counts,
    ensure_bombardier,
    read_report,
    run_bombardier,
    to_load_result,
)

GOLDEN = Path(__file__).parent / "testdata" / "bombardier"
NO_LIMIT = 10**9
CLIENT_CPUS = (max(psutil.Process().cpu_affinity()),)


def _golden(name: str) -> dict:
    return read_report((GOLDEN / name).read_text())


class _Handler(BaseHTTPRequestHandler):
    """`/` answers 200; `/mixed` cycles through 200, 302, 404, 503; keep-alive (HTTP/1.1)."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes: Nagle would hold the second
    statuses = itertools.cycle((200, 302, 404, 503))
    lock = threading.Lock()

    def do_GET(self) -> None:
        with self.lock:
            status = next(self.statuses) if self.path == "/mixed" else 200
        body = b"hello"
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


@pytest.fixture(scope="session")
def bombardier() -> Path:
    return ensure_bombardier()


# -- golden outputs (pure) ------------------------------------------------------------------------------


def test_golden_closed_run_stopped_by_sigint():
    """hyper_hello, 64 connections, stopped by SIGINT after 2 s: all 2xx, the window is bombardier's own."""
    data = _golden("hello_closed.log")
    requests, successes, status, errors = bombardier_counts(data)
    assert requests == successes == data["req2xx"] > 10_000 and status == {200: requests} and errors == {}
    result = to_load_result(
        data, url="http://127.0.0.1:1/", spawned=100.0, ended=102.0, connections=64, client_cpus=[1]
    )
    assert result.duration == pytest.approx(data["timeTakenSeconds"]) and result.ended_at <= 102.0
    assert result.rps == pytest.approx(requests / data["timeTakenSeconds"])
    assert result.latency[0.5] == data["latencyUs"]["p50"] / 1e6
    assert list(result.latency) == [0.5, 0.9, 0.99, 0.999]


def test_golden_request_bound_is_exact():
    data = _golden("request_bound.log")
    assert bombardier_counts(data)[:2] == (5000, 5000)


def test_golden_status_classes_and_failures():
    """A server cycling 200/302/404/503: classes counted apart, only 2xx succeed, nothing is an error."""
    data = _golden("mixed_status.log")
    requests, _, status, errors = bombardier_counts(data)
    assert requests == 400 and status == {200: 100, 300: 100, 400: 100, 500: 100} and errors == {}
    result = to_load_result(data, url="http://127.0.0.1:1/", spawned=0.0, ended=5.0, connections=4, client_cpus=[1])
    assert result.successes == 100 and result.failures == 300 and result.non_2xx == 300


def test_golden_transport_errors_are_failures():
    data = _golden("refused.log")
    requests, successes, status, errors = bombardier_counts(data)
    assert (requests, successes, status) == (20, 0, {})
    assert errors == {"dial tcp 127.0.0.1:1: connect: connection refused": 20}


def test_counts_keep_an_unexplained_rest_of_others():
    data = {
        "req1xx": 0,
        "req2xx": 7,
        "req3xx": 0,
        "req4xx": 0,
        "req5xx": 1,
        "others": 5,
        "errors": [{"description": "timeout", "count": 3}],
    }
    assert bombardier_counts(data) == (13, 7, {200: 7, 500: 1}, {"timeout": 3, "status outside 1xx-5xx": 2})


def test_read_report_takes_the_tagged_line_and_rejects_junk():
    line = (GOLDEN / "refused.log").read_text().strip()
    assert read_report(f'panic: nothing\n{{"other": 1}}\n{line}\n') == read_report(line)
    with pytest.raises(LoadFailed, match="no bombardier report"):
        read_report("Bombarding http://127.0.0.1:1 with 10 request(s)\n")
    with pytest.raises(LoadFailed, match="not valid JSON"):
        read_report(line[:-3])


def test_missing_install_is_a_toolchain_error(tmp_path):
    with pytest.raises(ToolchainMissing, match=r"bombardier 1\.2\.6 not installed"):
        ensure_bombardier(root=tmp_path, install=False)


def test_failed_install_names_the_command_and_log(tmp_path, monkeypatch):
    fake = tmp_path / "fakebin" / "go"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'go: no network here' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:/usr/bin:/bin")
    with pytest.raises(ToolchainMissing, match=r"go mod init .* failed \(exit 1; log .*\): .*no network here"):
        ensure_bombardier(root=tmp_path / "tools")
    assert not (tmp_path / "tools" / "bin" / "bombardier").exists()


def test_refuses_non_loopback_targets(tmp_path):
    for url in ("http://10.0.0.1:8080/", "http://8.8.8.8/", "ftp://127.0.0.1/"):
        with pytest.raises(TargetNotLoopback):
            run_bombardier(url, bounds=Bounds(1.0, 10), client_cpus=CLIENT_CPUS, log_dir=tmp_path)
    assert not list(tmp_path.iterdir()), "nothing was started"


# -- live runs against a loopback server ---------------------------------------------------------------


def test_live_request_bound(server, bombardier, tmp_path):
    pids: list[int] = []
    result = run_bombardier(
        server + "/",
        bounds=Bounds(10.0, 300),
        client_cpus=CLIENT_CPUS,
        log_dir=tmp_path,
        connections=4,
        on_spawn=pids.append,
    )
    assert result.requests == result.successes == 300 and result.status_counts == {200: 300}
    assert result.duration < 10.0 and result.latency[0.5] <= result.latency[0.999] < 10.0
    assert len(pids) == 1 and gone(pids[0])


def test_live_duration_bound_and_window(server, bombardier, tmp_path):
    before = time.time()
    result = run_bombardier(
        server + "/", bounds=Bounds(1.0, NO_LIMIT), client_cpus=CLIENT_CPUS, log_dir=tmp_path, connections=4
    )
    after = time.time()
    assert result.requests > 0 and result.requests == result.successes + result.failures
    assert before <= result.started_at < result.ended_at <= after
    assert 0.5 < result.duration < 2.0, result.duration


def test_live_statuses_and_refused_connections(server, bombardier, tmp_path):
    mixed = run_bombardier(
        server + "/mixed", bounds=Bounds(10.0, 200), client_cpus=CLIENT_CPUS, log_dir=tmp_path, connections=1
    )
    assert mixed.requests == 200 and mixed.status_counts == {200: 50, 300: 50, 400: 50, 500: 50}
    assert mixed.failures == mixed.non_2xx == 150
    refused = run_bombardier(
        "http://127.0.0.1:1/", bounds=Bounds(10.0, 20), client_cpus=CLIENT_CPUS, log_dir=tmp_path, connections=2
    )
    assert refused.requests == refused.failures == 20 and sum(refused.errors.values()) == 20
