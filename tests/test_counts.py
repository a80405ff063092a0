"""Counts per request: the pure parsers (HTTP framing, perf stat, strace -c), /proc/PID/io against a known
number of writes, and a Go server's allocations and syscalls per request — two runs agree, one added
allocation per request shows as exactly one, and perf's counts by name agree with /proc/PID/io."""

from __future__ import annotations

import os
import shutil

import pandas as pd
import pytest

from polyperf.build import build
from polyperf.common.cpus import split_cpus
from polyperf.common.net import free_port
from polyperf.measure.count_parse import (
    IoCounts,
    frame_responses,
    parse_perf_stat,
    parse_strace_summary,
    per_request,
    read_write_family,
    request_bytes,
)
from polyperf.measure.counts import (
    ALLOC_COUNTER_ENV,
    CountFailed,
    SyscallTrace,
    drive,
    io_counts,
    read_alloc_counter,
)
from polyperf.orchestrate.count_runs import counting_spec, window_io_rows
from polyperf.report.count_figures import count_figures
from polyperf.serve.server import Server

SERVER_CPUS, _CLIENT_CPUS = split_cpus()


def _response(body: bytes, status: int = 200) -> bytes:
    return b"HTTP/1.1 %d OK\r\nContent-Length: %d\r\n\r\n%s" % (status, len(body), body)


def test_frame_responses_counts_complete_responses_only():
    two = _response(b"[1,2]") + _response(b"", 404)
    assert frame_responses(two) == ([200, 404], len(two))
    assert frame_responses(two + _response(b"abc")[:-1]) == ([200, 404], len(two))
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
    assert frame_responses(chunked + two) == ([200, 200, 404], len(chunked + two))
    assert frame_responses(chunked[:-2]) == ([], 0)
    with pytest.raises(ValueError, match="not an HTTP"):
        frame_responses(b"SSH-2.0\r\n\r\n")


def test_request_bytes_carries_a_body_length():
    assert request_bytes("GET", "/", "h:1") == b"GET / HTTP/1.1\r\nHost: h:1\r\nUser-Agent: polyperf-counts\r\n\r\n"
    post = request_bytes("POST", "/api/devices", "h:1", b'{"a":1}')
    assert post.endswith(b"Content-Length: 7\r\n\r\n" + b'{"a":1}')


def test_parse_perf_stat_names_and_other():
    text = (
        "# started on Tue\n\n"
        "4000,,raw_syscalls:sys_enter,1000,100.00,,\n"
        "2000,,syscalls:sys_enter_writev,1000,100.00,,\n"
        "1000,,syscalls:sys_enter_recvfrom,1000,100.00,,\n"
        "<not counted>,,syscalls:sys_enter_read,0,100.00,,\n"
        "0,,syscalls:sys_enter_write,1000,100.00,,\n"
    )
    assert parse_perf_stat(text) == {"writev": 2000, "recvfrom": 1000, "other": 1000}
    assert read_write_family(parse_perf_stat(text)) == 2000


def test_parse_strace_summary():
    text = """% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 60.00    0.000600           0      2000           write
 40.00    0.000400           0      2000      1000 read
------ ----------- ----------- --------- --------- ----------------
100.00    0.001000           0      4000      1000 total
"""
    assert parse_strace_summary(text) == {"write": 2000, "read": 2000}


def test_per_request_and_io_delta():
    assert (IoCounts(10, 7) - IoCounts(4, 3)).total == 10
    assert per_request(3000, 2000) == 1.5
    assert per_request(5, 0) != per_request(5, 0)  # NaN: nothing was requested


def test_io_counts_sees_every_write():
    fd = os.open(os.devnull, os.O_WRONLY)
    try:
        before = io_counts(os.getpid())
        for _ in range(500):
            os.write(fd, b"x")
        delta = io_counts(os.getpid()) - before
    finally:
        os.close(fd)
    assert 500 <= delta.writes <= 505  # pytest's own threads may write a line meanwhile


def _go_counts(tmp_path, extra: int, requests: int = 2000, depth: int = 1) -> tuple[float, float]:
    """(allocations, read+write syscalls) per request of nethttp_devices' GET /api/devices."""
    port = free_port()
    env = {ALLOC_COUNTER_ENV: str(port), "GOMAXPROCS": "1", "POLYPERF_TEST_EXTRA_ALLOCS": str(extra)}
    with Server("nethttp_devices", log_dir=tmp_path, cpus=SERVER_CPUS, workers=1, env=env) as server:
        request = request_bytes("GET", "/api/devices", f"127.0.0.1:{server.port}")
        drive(server.host, server.port, request, 500, depth=depth)
        io0, a0 = io_counts(server.pid), read_alloc_counter(port)
        drive(server.host, server.port, request, requests, depth=depth)
        a1, io1 = read_alloc_counter(port), io_counts(server.pid)
    return (a1 - a0) / requests, (io1 - io0).total / requests


@pytest.fixture(scope="module")
def go_server(tmp_path_factory):
    build("nethttp_devices", log_dir=tmp_path_factory.mktemp("build"))


def test_go_counts_repeat_and_see_one_more_allocation(go_server, tmp_path):
    allocs, syscalls = _go_counts(tmp_path, extra=0)
    again, syscalls_again = _go_counts(tmp_path, extra=0)
    more, _ = _go_counts(tmp_path, extra=1)
    assert allocs > 1 and syscalls >= 2  # a read and a write per request at least
    assert abs(again - allocs) <= 0.05 * allocs and abs(syscalls_again - syscalls) <= 0.05 * syscalls
    assert more - allocs == pytest.approx(1.0, abs=0.05)


def test_go_counter_is_off_without_the_variable(go_server, tmp_path):
    port = free_port()
    server = Server("nethttp_devices", log_dir=tmp_path, workers=1)
    with server, pytest.raises(CountFailed, match=r"allocation counter on 127\.0\.0\.1"):
        read_alloc_counter(port, timeout=1.0)


@pytest.mark.parametrize("tool", ["perf", "strace"])
def test_by_name_agrees_with_proc_io(go_server, tmp_path, tool):
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} not installed: apt-get install {'linux-perf' if tool == 'perf' else tool}")
    with Server("nethttp_devices", log_dir=tmp_path, cpus=SERVER_CPUS, workers=1) as server:
        request = request_bytes("GET", "/api/devices", f"127.0.0.1:{server.port}")
        drive(server.host, server.port, request, 200)
        before = io_counts(server.pid)
        with SyscallTrace(server.pid, tmp_path / f"{tool}.txt", tool=tool) as trace:
            drive(server.host, server.port, request, 1000)
        proc_io = (io_counts(server.pid) - before).total
    by_name = read_write_family(trace.counts)
    assert by_name > 0 and abs(by_name - proc_io) <= 0.02 * proc_io, (trace.counts, proc_io)


def _count_rows(suite: str) -> pd.DataFrame:
    rows = []
    for impl, allocs, depth, case in (
        ("gnet_devices", 1.0, 1, "counts"),
        ("axum_devices", 9.0, 16, "counts_pipelined"),
    ):
        common = dict(suite=suite, case=case, implementation=impl, variant="", driver="polyperf-counts", unit="count")
        params = {"pipeline_depth": depth, "requests": 2000}
        rows += [
            dict(common, metric="allocations_per_request", value=allocs, params=params),
            dict(common, metric="syscalls_per_request", value=2.0, params=params),
            dict(
                common, metric="syscalls_per_request_by_name", value=1.0, params={"syscall": "writev", "tracer": "perf"}
            ),
        ]
    rows.append(dict(rows[1], case="ceiling", driver="oha", value=1.2))
    rows.append(dict(rows[1], metric="syscall_trace_overhead", unit="ratio", value=1.4))
    return pd.DataFrame(rows)


def test_count_figures_show_counts_per_request_and_by_name():
    figures = count_figures(_count_rows("http_frameworks"), "http_frameworks")
    assert [f.name for f in figures] == ["counts_per_request", "syscalls_by_name"]
    assert len(figures[0].figure.axes) == 3 and "2000 requests" in figures[0].caption
    assert count_figures(_count_rows("http_frameworks"), "bson_server") == []


def test_window_rows_need_both_ends_and_requests():
    rows = window_io_rows([IoCounts(10, 20), IoCounts(2010, 1020)], 1000)
    assert {m: v for m, v, _u, _p in rows} == {
        "syscalls_per_request": 3.0,
        "read_syscalls_per_request": 2.0,
        "write_syscalls_per_request": 1.0,
    }
    assert window_io_rows([IoCounts(0, 0), None], 1000) == []
    assert window_io_rows([IoCounts(0, 0), IoCounts(5, 5)], 0) == []


def test_counting_spec_picks_the_counting_build():
    assert counting_spec("hyper_hello")[0] == "hyper_hello:counting"
    assert counting_spec("actix_matrix:native-mimalloc")[0] == "actix_matrix:counting-native-mimalloc"
    assert counting_spec("actix_matrix:native")[0] == "actix_matrix:counting"
    assert counting_spec("gnet_devices") == ("gnet_devices", "go runtime Mallocs")
