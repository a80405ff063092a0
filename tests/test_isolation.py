"""One server at a time, its CPU counted exactly: disjoint CPU sets, random order per repeat, the drain before
each window, cgroup accounting and clean-up on every exit path, and one window rule for every generator."""

from __future__ import annotations

import itertools
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

import polyperf
from polyperf.common.cpus import CpuSplitError, cpu_label, split_cpus
from polyperf.load.native_driver import _WRK_SCRIPT, driver_window
from polyperf.orchestrate.load_suite import LoadEnv
from polyperf.serve import cpu_budget
from polyperf.serve.cpu_account import (
    CpuAccount,
    account_support,
    find_account_hierarchy,
    parse_usage,
    remove_stale,
    stale_cgroups,
)
from polyperf.serve.cpu_budget import CpuBudget, Hierarchy, MountEntry, parse_mounts
from polyperf.serve.drain import open_connections, wait_quiet
from polyperf.serve.fleet import Fleet, FleetStopFailed, Target

# -- CPU sets -------------------------------------------------------------------------------------------------


def test_overlapping_cpu_sets_are_refused_in_one_line():
    with pytest.raises(CpuSplitError) as info:
        split_cpus("0", "0", available=[0, 1])
    assert "\n" not in str(info.value) and "overlap on CPU 0" in str(info.value)
    with pytest.raises(CpuSplitError, match="overlap on CPU 1"):
        split_cpus("0-1", "1", available=[0, 1])


def test_no_silent_fallback_to_shared_cpus():
    with pytest.raises(CpuSplitError, match="no CPU left for the client"):
        split_cpus(available=[0])
    with pytest.raises(CpuSplitError, match="no CPU left for the server"):
        split_cpus(client="0-1", available=[0, 1])


def test_default_and_given_splits_are_disjoint():
    assert split_cpus(available=[0, 1]) == ([0], [1])
    assert split_cpus(available=[0, 1, 2, 3]) == ([0, 1], [2, 3])
    assert split_cpus(client="0", available=[0, 1]) == ([1], [0])
    assert split_cpus("1", "0", available=[0, 1]) == ([1], [0])


def test_polyperf_run_refuses_overlap_before_anything_starts(tmp_path):
    args = ["http_frameworks", "--profile", "smoke", "--server-cpus", "0", "--client-cpus", "0"]
    done = subprocess.run(
        [sys.executable, "-m", "polyperf", "run", *args, "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "overlap on CPU 0" in done.stderr
    assert not (tmp_path / "out").exists(), "nothing was started"


# -- random order -----------------------------------------------------------------------------------------------


class _Record:
    suite = "isolation"

    def narrows(self) -> None:
        pass

    def many(self, *args, **kwargs):
        raise AssertionError("nothing is recorded here")


def _env(seed: int, keys=("a", "b", "c", "d", "e")) -> LoadEnv:
    targets = [Target(key, "/") for key in keys]
    fleet = SimpleNamespace(
        targets=targets, servers={t.key: object() for t in targets}, server_cpus=[0], workers=1, budgets={}
    )
    return LoadEnv(
        fleet, _Record(), client_cpus=[1], log_dir=Path(tempfile.mkdtemp(prefix="polyperf-isolation-")), seed=seed
    )


def _orders(env: LoadEnv, repeats: int) -> list[list[str]]:
    orders: list[list[str]] = [[] for _ in range(repeats)]
    for repeat, target in env.interleave(repeats):
        assert env._slot == (repeat, target.key, len(orders[repeat]))
        orders[repeat].append(target.key)
    return orders


def test_interleave_draws_a_seeded_order_per_repeat():
    orders = _orders(_env(7), 6)
    assert all(sorted(order) == ["a", "b", "c", "d", "e"] for order in orders)
    assert len({tuple(order) for order in orders}) > 1, "the order differs between repeats"
    assert _orders(_env(7), 6) == orders, "the same seed gives the same orders"
    assert _orders(_env(8), 6) != orders
    env = _env(7)
    list(env.interleave(1))
    assert env._slot is None, "no slot outlives its interleave"


def test_an_unseeded_env_draws_and_keeps_its_seed():
    env = _env(None)  # type: ignore[arg-type]
    assert isinstance(env.seed, int) and 0 <= env.seed < 2**32
    assert sorted(env.order([3, 1, 2])) == [1, 2, 3]


# -- drain --------------------------------------------------------------------------------------------------

_TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1
   1: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 2 1
   2: 0100007F:D431 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 3 1
   3: 0100007F:D432 0100007F:1F90 06 00000000:00000000 00:00000000 00000000     0        0 0 3
   4: 0100007F:1F91 0100007F:D433 08 00000000:00000000 00:00000000 00000000     0        0 4 1
"""


def test_open_connections_counts_both_ends_and_skips_listen_and_time_wait():
    # port 8080 (0x1F90): one established connection, seen from both ends; 8081: one in CLOSE_WAIT
    assert open_connections(_TCP, [8080, 8081, 9999]) == {8080: 2, 8081: 1, 9999: 0}


def test_wait_quiet_waits_for_open_connections_and_rising_cpu_bounded():
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    assert not wait_quiet([port], {}, timeout=1.0).timed_out, "a listening socket is no connection"
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = listener.accept()
    try:
        started = time.monotonic()
        held = wait_quiet([port], {}, timeout=0.3)
        assert held.timed_out and held.open_connections == 2 and time.monotonic() - started < 1.0
    finally:
        client.close()
        accepted.close()
        listener.close()
    rising = itertools.count(step=0.01)
    busy = wait_quiet([], {"server": lambda: next(rising)}, timeout=0.2)
    assert busy.timed_out and busy.busy == ("server",)
    assert not wait_quiet([], {"server": lambda: 1.0}, timeout=0.2).timed_out


# -- one window rule -----------------------------------------------------------------------------------------


def test_driver_window_is_clamped_to_the_harness_span():
    assert driver_window(100.0, 102.0, 1.5) == (100.5, 1.5)
    assert driver_window(100.0, 102.0, 2.4) == (100.0, 2.0), "a longer own time starts no earlier than the spawn"


def test_wrk_script_keeps_fixed_request_mode():
    script = _WRK_SCRIPT.format(out='"x.json"', percentiles="50, 99")
    assert "request =" not in script and "response =" not in script and "done = function" in script


# -- cgroups: pure parts -----------------------------------------------------------------------------------


def test_account_hierarchy_prefers_v1_cpuacct_then_v2():
    mounts = parse_mounts(
        "cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n"
        "cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0\n"
        "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n"
    )
    assert find_account_hierarchy(mounts) == Hierarchy(1, Path("/sys/fs/cgroup/cpuacct"))
    assert find_account_hierarchy(mounts[2:]) == Hierarchy(2, Path("/sys/fs/cgroup/unified"))
    read_only = [MountEntry(Path("/sys/fs/cgroup"), "cgroup2", frozenset({"ro"}))]
    assert find_account_hierarchy(read_only) is None


def test_parse_usage_in_seconds():
    assert parse_usage("1500000000\n", 1) == 1.5
    assert parse_usage("usage_usec 2500000\nuser_usec 1\nsystem_usec 2\n", 2) == 2.5
    with pytest.raises(ValueError):
        parse_usage("nr_periods 1\n", 2)


def test_account_reads_the_budgets_cgroup_when_both_share_a_hierarchy(tmp_path, monkeypatch):
    shared = Hierarchy(2, tmp_path)
    (tmp_path / "budget").mkdir()
    (tmp_path / "budget" / "cpu.stat").write_text("usage_usec 1500000\nnr_periods 3\n")
    monkeypatch.setattr("polyperf.serve.cpu_account.find_account_hierarchy", lambda _mounts: shared)
    account = CpuAccount("x").create(SimpleNamespace(path=tmp_path / "budget", hierarchy=shared))
    assert account.path == tmp_path / "budget" and not account.owned and account.usage_s() == 1.5
    account.remove()
    assert (tmp_path / "budget").exists(), "the budget's cgroup is the budget's to remove"


def test_stale_cgroups_are_polyperf_ones_of_dead_pids():
    names = ["polyperf-cpu-gnet-11-5", "polyperf-budget-a-b-12-6", "polyperf-x-13-7", "other-11-5", "polyperf-cpu"]
    assert stale_cgroups(names, alive={12}) == ["polyperf-cpu-gnet-11-5", "polyperf-x-13-7"]


# -- the fleet stops everything ----------------------------------------------------------------------------


class _Part:
    def __init__(self, log: list[str], name: str, fail: BaseException | None = None) -> None:
        self.log, self.name, self.fail = log, name, fail

    def stop(self) -> None:
        self.log.append(self.name)
        if self.fail:
            raise self.fail

    remove = stop


def _fleet(tmp_path: Path) -> Fleet:
    return Fleet([Target("hyper_hello", "/")], log_dir=tmp_path, server_cpus=[0])


def test_fleet_stop_stops_every_server_whatever_one_does(tmp_path):
    fleet, log = _fleet(tmp_path), []
    fleet.servers = {"a": _Part(log, "a", RuntimeError("boom")), "b": _Part(log, "b")}
    fleet.accounts = {"a": _Part(log, "a-cpu"), "b": _Part(log, "b-cpu", OSError("busy"))}
    fleet.budgets = {"c": _Part(log, "c-budget")}
    with pytest.raises(FleetStopFailed) as info:
        fleet.stop()
    assert sorted(log) == ["a", "a-cpu", "b", "b-cpu", "c-budget"]
    assert "a: RuntimeError: boom" in str(info.value) and "b: OSError: busy" in str(info.value)
    assert not fleet.servers and not fleet.accounts and not fleet.budgets


def test_fleet_stop_finishes_before_an_interrupt_propagates(tmp_path):
    fleet, log = _fleet(tmp_path), []
    fleet.servers = {"a": _Part(log, "a", KeyboardInterrupt()), "b": _Part(log, "b")}
    fleet.accounts = {"a": _Part(log, "a-cpu")}
    with pytest.raises(KeyboardInterrupt):
        fleet.stop()
    assert sorted(log) == ["a", "a-cpu", "b"]


# -- cgroups: live (root, writable cgroups) ------------------------------------------------------------------

_UNSUPPORTED = account_support()
live = pytest.mark.skipif(_UNSUPPORTED is not None, reason=f"cgroup accounting unsupported: {_UNSUPPORTED}")
_BUDGETS = cpu_budget.cpu_budget_support()
live_budget = pytest.mark.skipif(_BUDGETS is not None, reason=f"CPU budgets unsupported: {_BUDGETS}")


def _ours() -> set[str]:
    """This process's polyperf cgroups, in every hierarchy."""
    found = set()
    for entry in parse_mounts(Path("/proc/self/mounts").read_text()):
        try:
            found |= {p.name for p in entry.mountpoint.iterdir() if p.name.startswith("polyperf-")}
        except OSError:
            continue
    return {name for name in found if name.rsplit("-", 2)[-2] == str(os.getpid())}


_BUSY = "import time\ninput()\nt = time.process_time()\nwhile time.process_time() - t < 0.3:\n    pass\n"


def _writable(version: int) -> Hierarchy | None:
    fstype = "cgroup2" if version == 2 else "cgroup"
    for entry in parse_mounts(Path("/proc/self/mounts").read_text()):
        if entry.fstype == fstype and "rw" in entry.options and (version == 2 or "cpuacct" in entry.options):
            return Hierarchy(version, entry.mountpoint)
    return None


@live
@pytest.mark.parametrize("version", [1, 2])
def test_account_counts_the_cpu_the_process_used(monkeypatch, version):
    hierarchy = _writable(version)
    if hierarchy is None:
        pytest.skip(f"no writable cgroup v{version} hierarchy that counts CPU here")
    monkeypatch.setattr("polyperf.serve.cpu_account.find_account_hierarchy", lambda _mounts: hierarchy)
    child = subprocess.Popen([sys.executable, "-c", _BUSY], stdin=subprocess.PIPE)
    try:
        with CpuAccount("exact") as account:
            time.sleep(0.3)  # blocked in input(): its CPU so far is its start-up's
            started = sum(psutil.Process(child.pid).cpu_times()[:2])
            account.add(child.pid)
            before = account.usage_s()
            child.stdin.write(b"\n")
            child.stdin.close()
            _pid, _status, usage = os.wait4(child.pid, 0)
            used = account.usage_s() - before
    finally:
        child.kill()
    # the kernel's counter against the child's own rusage, less its start-up (two 10 ms ticks at most)
    assert used >= 0.3
    assert abs(used - (usage.ru_utime + usage.ru_stime - started)) < 0.03, used


@live_budget
def test_interrupt_while_setting_the_limit_leaks_no_cgroup(monkeypatch):
    before = _ours()

    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(CpuBudget, "_set_limit", interrupted)
    with pytest.raises(KeyboardInterrupt):
        CpuBudget(0.5, 0.01, "interrupted").create()
    assert _ours() == before


@live_budget
def test_interrupt_between_budget_and_account_is_cleaned_by_stop(tmp_path, monkeypatch):
    fleet = Fleet([Target("hyper_hello", "/")], log_dir=tmp_path, server_cpus=[0], cpu_quota=0.5)
    fleet.cpu_source = "cgroup"
    before = _ours()

    def interrupted(self, pid, *, children=True):
        raise KeyboardInterrupt

    monkeypatch.setattr(CpuBudget, "add", interrupted)
    with pytest.raises(KeyboardInterrupt):
        fleet._cgroups("hyper_hello", SimpleNamespace(pid=os.getpid()))
    assert _ours() != before, "the budget was made"
    fleet.stop()
    assert _ours() == before


@live
def test_a_later_run_removes_what_a_killed_one_left(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    hierarchy = find_account_hierarchy(parse_mounts(Path("/proc/self/mounts").read_text()))
    assert hierarchy is not None
    left = hierarchy.mountpoint / f"polyperf-cpu-left-{gone.pid}-1"
    left.mkdir()
    try:
        assert left in remove_stale()
        assert not left.exists()
    finally:
        if left.exists():
            left.rmdir()


# -- a real run ----------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_smoke_run_counts_server_cpu_in_cgroups_and_records_seed_and_slots(tmp_path):
    out = tmp_path / "reports"
    args = ["http_frameworks", "--profile", "smoke", "--seed", "11", "--server-cpu-quota", "none", "--no-report"]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "polyperf",
            "run",
            *args,
            "--out",
            str(out),
            "--pytest-args",
            "-k",
            "verified or ceiling",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    run_dir = next(out.glob("runs/*"))
    rows = polyperf.load_run(run_dir)
    assert polyperf.load_env(run_dir)["seed"] == 11
    ceiling = [p for case, p in zip(rows["case"], rows["params"], strict=True) if case == "ceiling"]
    assert ceiling and {p["cpu_source"] for p in ceiling} == {"cgroup" if _UNSUPPORTED is None else "proc"}
    server, client = split_cpus()
    assert {(p["server_affinity"], p["client_affinity"]) for p in ceiling} == {(cpu_label(server), cpu_label(client))}
    assert {p["slot"] for p in ceiling} == set(range(5)), "five servers, five slots"


def _cgroups_of(pid: int) -> list[Path]:
    found = []
    for entry in parse_mounts(Path("/proc/self/mounts").read_text()):
        try:
            found += [p for p in entry.mountpoint.iterdir() if p.name.startswith("polyperf-")]
        except OSError:
            continue
    return [p for p in found if p.name.rsplit("-", 2)[-2] == str(pid)]


def _suite_under_load(tmp_path: Path) -> subprocess.Popen:
    """pytest running bson_server (smoke) directly, returned once its first ceiling row is written."""
    cmd = [sys.executable, "-m", "pytest", "suites/test_bson_server.py", "--polyperf-profile=smoke", "-q"]
    proc = subprocess.Popen(
        [*cmd, f"--polyperf-out={tmp_path}"],
        cwd=Path(__file__).resolve().parents[1],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 240
    while not any('"case": "ceiling"' in p.read_text() for p in tmp_path.glob("runs/*/results.jsonl")):
        assert proc.poll() is None and time.monotonic() < deadline, "no ceiling row"
        time.sleep(0.1)
    return proc


@live
@pytest.mark.slow
@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_cgroups_are_removed_on_a_stop_or_by_the_next_run(tmp_path, how):
    proc = _suite_under_load(tmp_path)
    try:
        assert len(_cgroups_of(proc.pid)) >= 3, "each server has its cgroup while it is loaded"
        proc.send_signal(getattr(signal, how))
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if how == "SIGTERM":
        assert _cgroups_of(proc.pid) == [], "an orderly stop removes every cgroup"
        return
    time.sleep(1.0)  # the servers die of their parent-death signal
    left = _cgroups_of(proc.pid)
    assert left, "a killed run cannot remove its cgroups"
    assert set(left) <= set(remove_stale()) and _cgroups_of(proc.pid) == []
