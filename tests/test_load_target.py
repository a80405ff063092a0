"""The one reading of a load target (`polyperf.load.target`), the worker's typed jobs (`worker_job`) and the rule
that a load most of whose requests failed is a failed run. Fast: nothing here sends a packet (names resolve
through a stub where a test makes them up); `test_load_target_netns.py` proves the same table on the wire."""

from __future__ import annotations

import ipaddress
import subprocess
import sys
from unittest import mock
from urllib.parse import urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from urllib3.util import parse_url

from polyperf.errors import ToolchainMissing
from polyperf.load import TargetNotLoopback, require_target
from polyperf.load.locust_driver import parse_hostport
from polyperf.load.result import LoadResult, failure_reason, require_answered
from polyperf.load.target import Target, TargetRefused, parse_target
from polyperf.load.worker_job import JobRefused, OhaJob, UsersJob, oha_command

POLYPERF = [sys.executable, "-m", "polyperf"]
FAR = "10.251.7.2"  # the listener's address in the namespace test; here only parsed, never sent to
FAR_INT = int(ipaddress.IPv4Address(FAR))

# (URL, part of the one-line reason): refused even with allow_remote, since tools read them differently
AMBIGUOUS = [
    ("http://{far}:18080\\@127.0.0.1:18081/", "backslash"),
    ("HTTP://127.0.0.1:18081\\@{far}:18080/", "backslash"),
    ("http://{far}:18080@127.0.0.1:18081/", "user-info"),
    ("http://127.0.0.1:18081@{far}:18080/", "user-info"),
    ("http://user:pw@127.0.0.1:18081/", "user-info"),
    ("http://127.0.0.1%2F@{far}:18080/", "user-info"),
    ("http://127.0.0.1:18081/#@{far}:18080/", "fragment"),
    ("http://%31%32%37.0.0.1:18081/", "percent-encoding in the host"),
    ("http://127.0.0.1%2e{far}:18080/", "percent-encoding in the host"),
    ("http://127.0.0.1:1808%31/", "percent-encoding in the host or port"),
    ("http://127.0.0.1:18081/%zz", "'%' not followed by two hex digits"),
    ("http://[::ffff:127.0.0.1]:18081/", "embeds the IPv4 address 127.0.0.1"),
    ("http://[::ffff:{far}]:18080/", f"embeds the IPv4 address {FAR}"),
    ("http://[::ffff:7f00:1]:18081/", "embeds the IPv4 address 127.0.0.1"),
    ("http://[::127.0.0.1]:18081/", "embeds the IPv4 address 127.0.0.1"),
    ("http://[fe80::1%25lo]:18081/", "percent-encoding in the host"),
    ("http://2130706433:18081/", "form tools read differently"),
    (f"http://{FAR_INT}:18080/", "form tools read differently"),
    ("http://0x7f.1:18081/", "form tools read differently"),
    ("http://0x7f000001:18081/", "form tools read differently"),
    ("http://0177.0.0.1:18081/", "form tools read differently"),
    ("http://127.0.0.01:18081/", "form tools read differently"),
    ("http://127.1:18081/", "form tools read differently"),
    ("http://017700000001:18081/", "form tools read differently"),
    ("http://1.2.3.4.5/", "form tools read differently"),
    ("http://１２７.0.0.1:18081/", "non-ASCII"),
    ("http://ⓛocalhost:18081/", "non-ASCII"),
    (" http://127.0.0.1:18081/", "whitespace or a control character (U+0020)"),
    ("http://127.0.0.1:18081/ ", "whitespace"),
    ("http://127.0.0.1:18081/\r\nHost: {far}", "U+000D"),
    ("http://127.0.0.1\t:18081/", "U+0009"),
    ("http://{far}\x00.127.0.0.1/", "U+0000"),
    ('http://127.0.0.1:18081/"', "not accepted"),
    ("ftp://127.0.0.1:18081/", "scheme 'ftp'"),
    ("ws://127.0.0.1:18081/", "scheme 'ws'"),
    ("gopher://127.0.0.1:18081/_GET", "scheme 'gopher'"),
    ("file:///etc/passwd", "not of the form"),
    ("javascript:alert(1)", "not of the form"),
    ("http:127.0.0.1:18081/", "not of the form"),
    ("http:/127.0.0.1:18081/", "not of the form"),
    ("//127.0.0.1:18081/", "not of the form"),
    ("http://", "not of the form"),
    ("http:///x", "not of the form"),
    ("http://:18081/", "not of the form"),
    ("http://127.0.0.1:/", "not of the form"),
    ("http://127.0.0.1:18081:18080/", "not of the form"),
    ("http://127.0.0.1:0/", "port 0 is outside"),
    ("http://127.0.0.1:65536/", "port 65536 is outside"),
    ("http://0.0.0.0:18081/", "not an address to send load to"),
    ("http://[::]:18081/", "not an address to send load to"),
    ("http://224.0.0.1:18081/", "not an address to send load to"),
    ("http://localhost.:18081/", "not a host name"),
    ("http://-localhost:18081/", "not a host name"),
    ("http://a..b:18081/", "not a host name"),
    ("http://127.0.0.1:18081/" + "a" * 2048, "longer than 2048"),
]
REMOTE = ["http://{far}:18080/", "http://{far}:18080/x?y=1", "http://[2001:db8::1]:18080/", "http://192.0.2.1/"]
# (URL, canonical URL); {port} is a loopback listener's in the namespace test
ALLOWED = [
    ("http://127.0.0.1:{port}/", "http://127.0.0.1:{port}/"),
    ("http://localhost:{port}/x?y=1", "http://127.0.0.1:{port}/x?y=1"),
    ("HTTP://LocalHost:{port}", "http://127.0.0.1:{port}/"),
    ("http://127.0.0.1:{port}?q", "http://127.0.0.1:{port}/?q"),
    ("http://[::1]:{port}/a%20b", "http://[::1]:{port}/a%20b"),
    ("http://127.0.0.1:{port}//{far}:18080/", "http://127.0.0.1:{port}//{far}:18080/"),
    ("http://127.0.0.1:{port}/?next=http://{far}:18080/", "http://127.0.0.1:{port}/?next=http://{far}:18080/"),
]


def fill(template: str, port: int = 18081, far: str = FAR) -> str:
    return template.replace("{far}", far).replace("{port}", str(port))


@pytest.mark.parametrize("allow_remote", [False, True])
@pytest.mark.parametrize(("url", "reason"), AMBIGUOUS)
def test_ambiguous_targets_are_refused_in_one_line_whatever_the_opt_in(url, reason, allow_remote):
    with pytest.raises(TargetRefused) as caught:
        parse_target(fill(url), allow_remote=allow_remote)
    message = str(caught.value)
    assert reason in message and "\n" not in message, message


@pytest.mark.parametrize("url", REMOTE)
def test_remote_targets_need_the_opt_in(url):
    with pytest.raises(TargetRefused, match="not loopback; pass --allow-remote"):
        parse_target(fill(url))
    target = parse_target(fill(url), allow_remote=True)
    assert not target.is_loopback and target.url.startswith("http://")


@pytest.mark.parametrize(("url", "canonical"), ALLOWED)
def test_loopback_targets_become_one_canonical_url(url, canonical):
    target = parse_target(fill(url))
    assert target.is_loopback and target.url == fill(canonical)
    assert require_target(fill(url)) == fill(canonical)
    assert parse_target(target.url).url == target.url  # the canonical URL reads back as itself


def test_a_name_that_resolves_anywhere_but_loopback_is_refused_and_the_address_is_what_gets_loaded():
    def resolver(answers):
        return lambda host, port, *a, **k: [(2 if ":" not in ip else 10, 1, 6, "", (ip, port)) for ip in answers]

    with mock.patch("socket.getaddrinfo", resolver(["127.0.0.1", FAR])):
        with pytest.raises(TargetRefused, match=f"resolves to {FAR}.*not loopback"):
            parse_target("http://both.test:80/")
        assert parse_target("http://both.test:80/", allow_remote=True).address == "127.0.0.1"
    with mock.patch("socket.getaddrinfo", resolver(["::1", "127.0.0.1"])):
        assert parse_target("http://dual.test:8/p").url == "http://127.0.0.1:8/p"  # IPv4 first: servers bind it
    mapped = mock.patch("socket.getaddrinfo", resolver(["::ffff:127.0.0.1"]))
    with mapped, pytest.raises(TargetRefused, match="not an address to send load to"):
        parse_target("http://mapped.test/")


def test_refusals_reach_the_driver_api_as_target_not_loopback():
    with pytest.raises(TargetNotLoopback, match="backslash"):
        require_target(fill(AMBIGUOUS[0][0]), allow_remote=True)


_TRICKY = st.text(alphabet="aAl1270.:/@\\%?#[]fx-~ \t", max_size=24)
_LOCAL_NAMES = {"localhost": "127.0.0.1", "a": "127.0.0.9", "x": "10.0.0.1"}


def _stub_resolver(host, port, *args, **kwargs):
    if host not in _LOCAL_NAMES:
        raise OSError(f"stub resolver: no {host}")
    return [(2, 1, 6, "", (_LOCAL_NAMES[host], port))]


@settings(max_examples=400, deadline=None)
@given(scheme=st.sampled_from(["http://", "HTTP://", "https://", "http:/", ""]), rest=_TRICKY)
def test_whatever_is_accepted_every_parser_reads_alike(scheme, rest):
    """Random URLs from the characters that confuse parsers: an accepted one is read the same way by urllib3
    (close to the WHATWG reading oha and reqwest use) and by urllib.parse, before and after canonicalisation."""
    url = scheme + rest
    with mock.patch("socket.getaddrinfo", _stub_resolver):
        try:
            target = parse_target(url, allow_remote=True)
        except TargetRefused as exc:
            assert "\n" not in str(exc)
            return
        assert parse_target(target.url, allow_remote=True).url == target.url
    for text in (url, target.url):
        lib3 = parse_url(text)
        std = urlsplit(text)
        assert (lib3.scheme, std.scheme.lower()) == (target.scheme, target.scheme)
        assert lib3.port in (None, target.port) and (std.port or target.port) == target.port
        assert (lib3.path or "/") + (f"?{lib3.query}" if lib3.query is not None else "") == target.path
    assert parse_url(target.url).host.strip("[]") == target.address == urlsplit(target.url).hostname


def _job(**over):
    return {"target": "http://127.0.0.1:18081/", "connections": 4, "duration_s": 1.0, "max_requests": 10} | over


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (_job(bound=["--connect-to", f"127.0.0.1:18081:{FAR}:18080"]), "unknown field(s) bound"),
        (_job(interrupt=False, grace=1e9), "unknown field(s) grace, interrupt"),
        ({"target": "http://127.0.0.1:18081/"}, "missing field(s) connections, duration_s, max_requests"),
        (_job(connections="4 --unix-socket /run/docker.sock"), "'connections'"),
        (_job(connections=["-D", "/etc/shadow"]), "'connections'"),
        (_job(max_requests="-D/etc/passwd"), "'max_requests'"),
        (_job(max_requests=10.5), "is not an integer"),
        (_job(max_requests=True), "is not an integer"),
        (_job(connections=0), "outside [1, 10000]"),
        (_job(connections=10**6), "outside"),
        (_job(duration_s=float("inf")), "outside"),
        (_job(duration_s=float("nan")), "outside"),
        (_job(duration_s=-1), "outside"),
        (_job(max_requests=0), "outside"),
        (_job(rate=0.0), "outside"),
        (_job(rate="100 --insecure"), "is not a number"),
        (_job(target="--unix-socket=/run/x.sock"), "not of the form"),
        (_job(target=f"http://{FAR}:18080/"), "not loopback"),
        (_job(target=f"http://{FAR}:18080\\@127.0.0.1:18081/"), "backslash"),
        (_job(target=["http://127.0.0.1/"]), "is not a string"),
        ("-n 1 http://127.0.0.1/", "is a mapping"),
    ],
)
def test_a_worker_refuses_any_job_but_a_well_formed_bounded_one(data, reason):
    with pytest.raises(ValueError) as caught:  # JobRefused or TargetRefused
        OhaJob.from_message(data, allow_remote=False)
    assert isinstance(caught.value, (JobRefused, TargetRefused))
    assert reason in str(caught.value) and "\n" not in str(caught.value), caught.value


def test_a_worker_builds_ohas_command_line_itself_from_numbers_and_the_canonical_url():
    job, target = OhaJob.from_message(_job(target="http://localhost:18081/x", rate=50), allow_remote=False)
    assert isinstance(target, Target) and job.target == "http://127.0.0.1:18081/x" and not job.interrupt
    cmd = oha_command(job, oha="/opt/oha", out="/tmp/o.json", requests_db="/tmp/o.sqlite", threads=2)
    assert cmd == [
        "/opt/oha", "-z", "0.2s", "-q", "50", "--latency-correction", "-c", "4", "--no-tui",
        "--db-url", "/tmp/o.sqlite", "--output-format", "json", "-o", "/tmp/o.json", "--worker-threads", "2",
        "-t", "10s", "--redirect", "0", "http://127.0.0.1:18081/x",
    ]  # fmt: skip
    closed, _ = OhaJob.from_message(_job(), allow_remote=False)
    assert closed.interrupt and closed.to_message() == _job(rate=None)


def test_a_users_job_is_checked_too_and_names_no_file():
    job, _ = UsersJob.from_message({"target": "http://127.0.0.1:1/", "budget": 5, "method": "POST"}, allow_remote=False)
    assert (job.budget, job.method, job.log_requests) == (5, "POST", False)
    bad = [
        ({"target": "http://127.0.0.1:1/", "budget": 5, "requests_log": "/etc/cron.d/x"}, "unknown field(s)"),
        ({"target": "http://127.0.0.1:1/", "budget": 5, "method": "DELETE"}, "'method'"),
        ({"target": "http://127.0.0.1:1/", "budget": 5, "body": "x" * 70_000}, "'body'"),
        ({"target": "http://127.0.0.1:1/", "budget": 5, "think": 1e9}, "'think'"),
        ({"target": "http://127.0.0.1:1/", "budget": 5, "log_requests": "yes"}, "'log_requests'"),
        ({"target": "http://127.0.0.1:1/", "budget": -1}, "'budget'"),
    ]
    for data, reason in bad:
        with pytest.raises(JobRefused, match=reason.replace("(", r"\(").replace(")", r"\)")):
            UsersJob.from_message(data, allow_remote=False)


@pytest.mark.parametrize("text", ["user@10.0.0.1:5557", "10.0.0.1:5557/x", "10.0.0.1:99999", "", "a b:1", "[::1"])
def test_master_addresses_are_read_strictly(text):
    with pytest.raises(ValueError, match="is not ADDR"):
        parse_hostport(text)


def _result(successes: int, failures: int, errors=None, status=None) -> LoadResult:
    return LoadResult(
        driver="oha",
        mode="closed",
        url="http://127.0.0.1:1/",
        started_at=0.0,
        ended_at=1.0,
        requests=successes + failures,
        successes=successes,
        failures=failures,
        latency={},
        latency_resolution=1e-6,
        errors=errors or {},
        status_counts=status or {},
    )


def test_a_load_most_of_whose_requests_failed_is_a_failed_run_with_the_generators_words():
    refused = {"error trying to connect: tcp connect error: Connection refused\n(os error 111)": 3}
    reason = failure_reason(_result(0, 3, errors=refused))
    assert reason == (
        "oha against http://127.0.0.1:1/: 3 of 3 requests failed (100%); oha says: error trying to connect: "
        "tcp connect error: Connection refused (os error 111) (3x)"
    )
    assert "HTTP 503 (6x)" in failure_reason(_result(4, 6, status={200: 4, 503: 6}))
    assert "no request completed" in failure_reason(_result(0, 0))
    assert failure_reason(_result(5, 5, status={200: 5, 500: 5})) is None  # exactly half: still a result
    assert require_answered(_result(99, 1)).successes == 99


def test_load_against_nothing_exits_non_zero_with_ohas_refused_connection_line(tmp_path):
    from polyperf.load import ensure_oha

    try:
        ensure_oha(install=False)
    except ToolchainMissing as exc:
        pytest.skip(str(exc))
    args = ["load", "http://127.0.0.1:1/", "--duration", "1", "--max-requests", "3", "--out", str(tmp_path)]
    done = subprocess.run([*POLYPERF, *args], capture_output=True, text=True, timeout=120, check=False)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert "3 of 3 requests failed" in lines[0] and "Connection refused" in lines[0], lines[0]
    assert "req/s" not in done.stdout
    assert not [p for p in tmp_path.rglob("results.jsonl") if p.stat().st_size], "nothing recorded as throughput"
