"""`Fleet.restart`: a fresh process of a running target, in the same CPU budget, answering on its own port; the
old process is gone and the process count goes up (a real hyper_hello server, built if needed)."""

from __future__ import annotations

import http.client
from pathlib import Path

import psutil

from polyperf.serve.cpu_budget import cpu_budget_support
from polyperf.serve.fleet import Fleet, Target


def _healthy(url: str) -> bool:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        conn.request("GET", "/healthz")
        return conn.getresponse().status == 200
    finally:
        conn.close()


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_restart_gives_a_fresh_process_in_the_same_budget(tmp_path):
    quota = 0.5 if cpu_budget_support() is None else None
    with Fleet([Target("hyper_hello", "/")], log_dir=tmp_path, server_cpus=[0], cpu_quota=quota) as fleet:
        key = "hyper_hello"
        old = fleet.servers[key].pid
        assert fleet.starts[key] == 0
        fleet.restart(key)
        new = fleet.servers[key]
        assert new.pid != old and _gone(old)
        assert fleet.starts[key] == 1 and key not in fleet.failed
        assert _healthy(new.url)
        assert fleet.affinity[key] == [0]
        if quota is not None:  # the new process is inside the target's budget cgroup
            assert fleet.budgets[key].name in Path(f"/proc/{new.pid}/cgroup").read_text()
    assert _gone(new.pid)
