"""What a worker sends back, and what a master orders, is not trusted: bounded jobs, bounded histograms, counts
within their bound; and every generator is told not to follow a redirect, nor to accept a bad certificate."""

from __future__ import annotations

import base64
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

from polyperf.load import latency_hdr
from polyperf.load.distributed import combine_oha
from polyperf.load.result import Bounds, LoadFailed
from polyperf.load.worker_job import JobRefused, OhaJob, UsersJob, oha_command


def _encoded(payload: bytes) -> str:
    compressed = zlib.compress(payload)
    return base64.b64encode(struct.pack(">II", 0x1C849303, len(compressed)) + compressed).decode()


def test_a_histogram_that_expands_without_bound_is_refused_before_it_is_decoded() -> None:
    with pytest.raises(ValueError, match="expands past"):
        latency_hdr.decode(_encoded(b"\0" * (64 * 2**20)))
    with pytest.raises(ValueError, match="at most"):
        latency_hdr.decode("A" * (latency_hdr.MAX_ENCODED + 4))


def test_a_histogram_with_other_settings_is_refused_before_its_counts_are_allocated() -> None:
    # 5 digits up to 2**62 ns would allocate gigabytes of counters if taken on trust
    header = struct.pack(">IIIIQQd", 0x1C849304, 0, 0, 5, 1, 2**62, 1.0)
    with pytest.raises(ValueError, match="not polyperf's"):
        latency_hdr.decode(_encoded(header))
    good = latency_hdr.from_seconds([0.001, 0.002])
    assert latency_hdr.decode(good.encode().decode()).get_total_count() == 2


def _report(n: int) -> dict:
    data = {"summary": {"total": 1.0}, "statusCodeDistribution": {"200": n}}
    data["latencyPercentiles"] = {"p50": 0.001, "p90": 0.001, "p99": 0.001, "p99.9": 0.001}
    hdr = latency_hdr.from_seconds(np.full(n, 0.001)).encode().decode()
    return {"id": "w", "received_at": 10.0, "lag": 0.0, "data": data, "latency_hdr": hdr}


def test_a_worker_counting_more_requests_than_its_bound_fails_the_run() -> None:
    combine_oha([_report(10)], url="http://127.0.0.1/", expected=1, connections=1, rate=None, max_requests_each=10)
    with pytest.raises(LoadFailed, match="over its bound of 10"):
        combine_oha([_report(11)], url="http://127.0.0.1/", expected=1, connections=1, rate=None, max_requests_each=10)


@pytest.mark.parametrize("data", [{"summary": "x"}, {}, {"summary": {"total": "x"}, "statusCodeDistribution": 3}])
def test_a_malformed_worker_summary_is_one_line(data: dict) -> None:
    report = {**_report(1), "data": data}
    with pytest.raises(LoadFailed) as caught:
        combine_oha([report], url="http://127.0.0.1/", expected=1, connections=1, rate=None)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("field", "value"), [("users", 0), ("users", 10**7), ("users", True), ("duration_s", 10**6), ("duration_s", "1")]
)
def test_users_jobs_bound_users_and_time(field: str, value: object) -> None:
    with pytest.raises(JobRefused, match=field):
        UsersJob.from_message({"target": "http://127.0.0.1:1/", "budget": 3, field: value}, allow_remote=False)
    job, _ = UsersJob.from_message({"target": "http://127.0.0.1:1/", "budget": 3}, allow_remote=False)
    assert job.users <= 100_000 and job.duration_s <= 3_600


def test_oha_is_told_not_to_follow_redirects() -> None:
    job, _ = OhaJob.from_message(
        {"target": "http://127.0.0.1:1/", "connections": 1, "duration_s": 1.0, "max_requests": 3}, allow_remote=False
    )
    cmd = oha_command(job, oha="oha", out="o", requests_db="d", threads=1)
    assert cmd[cmd.index("--redirect") + 1] == "0" and "--insecure" not in cmd


def test_wrk_refuses_https_it_cannot_verify(tmp_path: Path) -> None:
    from polyperf.load.native_driver import run_wrk

    with pytest.raises(LoadFailed, match="verifies no TLS certificate"):
        run_wrk("https://127.0.0.1:1/", bounds=Bounds(1.0, 10**9), client_cpus=[0], log_dir=tmp_path)


def test_drill_can_reach_no_host_but_the_target() -> None:
    from polyperf.load.drill_driver import _no_other_hosts

    env = _no_other_hosts("127.0.0.1")
    assert env["NO_PROXY"] == "127.0.0.1" and env["http_proxy"] == env["HTTPS_PROXY"] == "http://127.0.0.1:9"


def test_the_worker_uses_only_the_oha_polyperf_built(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from polyperf.cli import remote
    from polyperf.errors import ToolchainMissing
    from polyperf.load import native_driver

    fake = tmp_path / "oha"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")

    def missing(**_: object) -> Path:
        raise ToolchainMissing("oha not built")

    monkeypatch.setattr(native_driver, "ensure_oha", missing)
    assert remote._find_oha() is None
