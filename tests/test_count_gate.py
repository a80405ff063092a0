"""The CI gate on counts per request, end to end through the CLI: nethttp_devices counted twice as it is and
once with one more heap allocation per GET (`POLYPERF_TEST_EXTRA_ALLOCS=1`, a flag only this test sets);
`polyperf compare --fail-on-regression 0` passes the two equal runs and fails the change, naming the metric."""

from __future__ import annotations

import subprocess
import sys

import pytest

from polyperf.build import build
from polyperf.common.cpus import split_cpus
from polyperf.orchestrate.count_runs import CountPlan
from polyperf.orchestrate.load_suite import LoadEnv
from polyperf.record import Recorder
from polyperf.record.run_dir import RowWriter, load_run
from polyperf.serve.fleet import Fleet, Target

SERVER_CPUS, CLIENT_CPUS = split_cpus()
TARGET = Target("nethttp_devices", "/api/devices")


def _counted_run(tmp_path, name: str, extra: int):
    run_dir = tmp_path / name
    (run_dir / "logs").mkdir(parents=True)
    env_vars = {"POLYPERF_TEST_EXTRA_ALLOCS": str(extra)}
    with Fleet([TARGET], log_dir=run_dir / "logs", server_cpus=SERVER_CPUS, env=env_vars) as fleet:
        env = LoadEnv(
            fleet,
            Recorder(RowWriter(run_dir), "http_frameworks"),
            client_cpus=CLIENT_CPUS,
            log_dir=run_dir / "logs",
        )
        assert env.count(TARGET, plan=CountPlan(trace=False)), env.problems
    return run_dir


def _compare(a, b) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "polyperf", "compare", str(a), str(b), "--fail-on-regression", "0"]
    return subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120)


@pytest.mark.slow
def test_one_more_allocation_per_request_fails_the_gate(tmp_path):
    build("nethttp_devices", log_dir=tmp_path)
    base, again, more = (_counted_run(tmp_path, n, e) for n, e in (("base", 0), ("again", 0), ("more", 1)))
    allocs = {
        name: float(load_run(run).query("metric == 'allocations_per_request'")["value"].iloc[0])
        for name, run in (("base", base), ("more", more))
    }
    assert allocs["more"] - allocs["base"] == pytest.approx(1.0, abs=0.05)

    same = _compare(base, again)
    assert same.returncode == 0, same.stdout + same.stderr

    worse = _compare(base, more)
    assert worse.returncode != 0, worse.stdout
    line = next(line for line in worse.stdout.splitlines() if "allocations_per_request" in line)
    assert "regressed" in line, worse.stdout
