"""SEEDS.md §4 test 1 (gnet vs axum vs net/http, `GET /api/devices`) and §5's hyper hello world
(Tokio multi-thread vs current-thread runtime), under load on this machine.

Every server runs pinned to the server CPU set with one worker per CPU, every load generator to the
client set (on 2 cores: server CPU 0, client CPU 1; the rows' params say which). Apps are verified
before any load. Each case interleaves the targets repeat by repeat (A B C A B C ...), so drift of
this shared machine hits all of them alike:

- `ceiling`: oha, closed model, several connection counts: the most each server answers;
- `fixed_rate`: oha at one rate all apps sustain, latency corrected for coordinated omission;
- `locust`: locust's FastHttpUser, a step ramp of users (its rps history is kept): what a Python
  client sees, ~10x below the native driver's ceiling — the report says which driver made which number;
- `driver_ceiling`: oha vs wrk on the fastest target, to show oha's ceiling is wrk's.
"""

from __future__ import annotations

import statistics

import pytest

from polyperf.load import Bounds, ensure_wrk, run_locust, run_oha, run_wrk
from polyperf.load.bench import Fleet, Target

TARGETS = [
    Target("gnet_devices", "/api/devices"),
    Target("axum_devices", "/api/devices"),
    Target("nethttp_devices", "/api/devices"),
    Target("hyper_hello", "/", "multi", ("--runtime", "multi"), {"runtime": "multi"}),
    Target("hyper_hello", "/", "current", ("--runtime", "current"), {"runtime": "current"}),
]
MAX_REQUESTS = 50_000_000  # the safety bound; durations are what end these runs


@pytest.fixture(scope="module")
def plan(profile):
    return {
        "repeats": profile.pick(smoke=1, quick=3, full=5),
        "connections": profile.pick(smoke=[64], quick=[16, 64, 256], full=[16, 64, 256]),
        "ceiling_s": profile.pick(smoke=1.0, quick=2.0, full=5.0),
        "rate": profile.pick(smoke=2_000, quick=10_000, full=20_000),
        "fixed_s": profile.pick(smoke=1.0, quick=3.0, full=8.0),
        "locust_steps": profile.pick(smoke=[(32, 1.5)], quick=[(8, 1.5), (32, 1.5), (128, 1.5), (512, 1.5)],
                                     full=[(8, 3.0), (32, 3.0), (128, 3.0), (512, 3.0)]),
        "wrk_repeats": profile.pick(smoke=1, quick=3, full=5),
    }


@pytest.fixture(scope="module")
def fleet(cpus, run_dir):
    server_cpus, _client = cpus
    with Fleet(TARGETS, log_dir=run_dir / "logs", server_cpus=server_cpus) as fleet:
        yield fleet


def _finish(campaign):
    if campaign.problems:
        pytest.fail("\n".join(campaign.problems), pytrace=False)


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.key)
def test_verified(fleet, target):
    """Built, started pinned, and passed verification: the others are measured without it."""
    assert target.key not in fleet.failed, fleet.failed.get(target.key)


def test_ceiling(fleet, campaign, plan, cpus, run_dir, ceilings):
    _server, client_cpus = cpus
    logs = run_dir / "logs"
    bounds = Bounds(plan["ceiling_s"], MAX_REQUESTS)
    for target, _server in fleet.running:  # warm-up, not recorded: JIT-free, but caches, pools, page faults
        campaign.run(target, "oha", lambda on_spawn, alive, t=target: run_oha(
            fleet.servers[t.key].url + t.path, bounds=Bounds(0.5, MAX_REQUESTS), client_cpus=client_cpus,
            log_dir=logs, connections=64, on_spawn=on_spawn, alive=alive), case="warmup", repeat=0, params={},
            keep=False)
    for repeat in range(plan["repeats"]):
        for connections in plan["connections"]:
            for target, server in fleet.running:
                m = campaign.run(target, "oha", lambda on_spawn, alive, url=server.url + target.path, c=connections:
                                 run_oha(url, bounds=bounds, client_cpus=client_cpus, log_dir=logs, connections=c,
                                         on_spawn=on_spawn, alive=alive),
                                 case="ceiling", repeat=repeat,
                                 params={"connections": connections, "duration_s": bounds.duration})
                if m is not None and connections == 64:
                    ceilings.setdefault(target.key, []).append(m.load.rps)
                    assert m.load.rps > 0 and m.load.failures == 0, m.load
    for target, server in fleet.running:  # --flamegraph: one extra, unrecorded run each under perf
        campaign.flamegraph(target, "oha", lambda on_spawn, alive, url=server.url + target.path: run_oha(
            url, bounds=bounds, client_cpus=client_cpus, log_dir=logs, connections=64, on_spawn=on_spawn,
            alive=alive), name=f"ceiling-{target.key.replace('/', '-')}")
    _finish(campaign)


def test_fixed_rate(fleet, campaign, plan, cpus, run_dir, ceilings):
    """One rate for every app: the profile's, lowered to half the slowest measured ceiling if needed."""
    _server, client_cpus = cpus
    slowest = min((statistics.median(v) for v in ceilings.values()), default=None)
    rate = plan["rate"] if slowest is None else min(plan["rate"], max(100, round(slowest / 2, -2)))
    bounds = Bounds(plan["fixed_s"], MAX_REQUESTS)
    for repeat in range(plan["repeats"]):
        for target, server in fleet.running:
            campaign.run(target, "oha", lambda on_spawn, alive, url=server.url + target.path:
                         run_oha(url, bounds=bounds, client_cpus=client_cpus, log_dir=run_dir / "logs",
                                 connections=64, rate=rate, on_spawn=on_spawn, alive=alive),
                         case="fixed_rate", repeat=repeat,
                         params={"connections": 64, "rate": rate, "duration_s": bounds.duration})
    _finish(campaign)


def test_locust(fleet, campaign, plan, cpus, run_dir):
    """locust's step ramp; its per-second history is kept for the rps-over-time figure."""
    _server, client_cpus = cpus
    steps = plan["locust_steps"]
    bounds = Bounds(sum(s for _u, s in steps), MAX_REQUESTS)
    for repeat in range(plan["repeats"]):
        for target, server in fleet.running:
            m = campaign.run(target, "locust", lambda on_spawn, alive, url=server.url + target.path:
                             run_locust(url, bounds=bounds, client_cpus=client_cpus, log_dir=run_dir / "logs",
                                        steps=steps, on_spawn=on_spawn, alive=alive),
                             case="locust", repeat=repeat,
                             params={"users": max(u for u, _s in steps), "steps": [list(s) for s in steps],
                                     "duration_s": bounds.duration, "processes": max(1, len(client_cpus))})
            if m is not None and repeat == 0:
                for second, rps, users in m.load.history:
                    common = {"case": "locust_history", "implementation": target.app,
                              "variant": target.variant("locust"), "repeat": repeat,
                              "params": {"second": second, **target.params}}
                    campaign.record("history_rps", rps, "req/s", **common)
                    campaign.record("history_users", users, "count", **common)
    _finish(campaign)


def test_driver_ceiling(fleet, campaign, plan, cpus, run_dir, ceilings):
    """oha and wrk, interleaved, same connections and duration, on the fastest target."""
    ensure_wrk()
    _server, client_cpus = cpus
    fastest = max(ceilings, key=lambda k: statistics.median(ceilings[k]), default="hyper_hello/current")
    target = next((t for t in TARGETS if t.key == fastest), None)
    if target is None or target.key not in fleet.servers:
        pytest.skip(f"fastest target {fastest} is not running")
    url = fleet.servers[target.key].url + target.path
    bounds = Bounds(plan["ceiling_s"], MAX_REQUESTS)
    drivers = {"oha": run_oha, "wrk": run_wrk}
    for repeat in range(plan["wrk_repeats"]):
        for name, run in drivers.items():
            campaign.run(target, name, lambda on_spawn, alive, run=run:
                         run(url, bounds=bounds, client_cpus=client_cpus, log_dir=run_dir / "logs",
                             connections=64, on_spawn=on_spawn, alive=alive),
                         case="driver_ceiling", repeat=repeat,
                         params={"connections": 64, "duration_s": bounds.duration})
    _finish(campaign)
