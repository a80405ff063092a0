"""SEEDS.md §2 end to end: bson_server deserializes a pre-encoded find reply on every request by one of
three paths — `clone` (the article's baseline), `document` (the clone removed), `raw` (serde straight
from the raw bytes) — and polyperf loads each path the same way. The article's wrk run went from
12,168 to 23,964 req/s (raw vs clone, ≈2x); here the ratio is measured in rps and in CPU µs per request.

One server per path, all pinned to the server CPU set; the load generator pinned to the client set.
Paths are interleaved repeat by repeat. Cases as in test_http_frameworks: `ceiling` (oha, closed),
`fixed_rate` (oha, latency-corrected) and `locust` (locust's FastHttpUser, closed model).
"""

from __future__ import annotations

import statistics

import pytest

from polyperf.load import Bounds, run_locust, run_oha
from polyperf.load.bench import Fleet, Target

PATHS = ("clone", "document", "raw")
MAX_REQUESTS = 50_000_000  # the safety bound; durations are what end these runs


@pytest.fixture(scope="module")
def plan(profile):
    return {
        "documents": profile.pick(smoke=[100], quick=[100], full=[10, 100, 1000]),
        "repeats": profile.pick(smoke=1, quick=5, full=7),
        "connections": 64,
        "ceiling_s": profile.pick(smoke=1.0, quick=3.0, full=5.0),
        "fixed_s": profile.pick(smoke=1.0, quick=3.0, full=8.0),
        "locust_s": profile.pick(smoke=1.5, quick=4.0, full=8.0),
        "locust_users": 32,
    }


def _targets(documents):
    return [Target("bson_server", f"/find?path={path}", path, ("--documents", str(n)), {"documents": n},
                   instance=str(n))
            for n in documents for path in PATHS]


@pytest.fixture(scope="module")
def fleet(cpus, run_dir, plan):
    with Fleet(_targets(plan["documents"]), log_dir=run_dir / "logs", server_cpus=cpus[0]) as fleet:
        yield fleet


def _finish(campaign):
    if campaign.problems:
        pytest.fail("\n".join(campaign.problems), pytrace=False)


def test_verified(fleet, plan):
    assert not fleet.failed, fleet.failed
    assert len(fleet.running) == len(PATHS) * len(plan["documents"])


def test_ceiling(fleet, campaign, plan, cpus, run_dir, ceilings):
    client_cpus = cpus[1]
    bounds = Bounds(plan["ceiling_s"], MAX_REQUESTS)
    c = plan["connections"]
    for target, server in fleet.running:  # warm-up, not recorded
        campaign.run(target, "oha", lambda on_spawn, alive, url=server.url + target.path: run_oha(
            url, bounds=Bounds(0.5, MAX_REQUESTS), client_cpus=client_cpus, log_dir=run_dir / "logs",
            connections=c, on_spawn=on_spawn, alive=alive), case="warmup", repeat=0, params={}, keep=False)
    for repeat in range(plan["repeats"]):
        for target, server in fleet.running:
            m = campaign.run(target, "oha", lambda on_spawn, alive, url=server.url + target.path:
                             run_oha(url, bounds=bounds, client_cpus=client_cpus, log_dir=run_dir / "logs",
                                     connections=c, on_spawn=on_spawn, alive=alive),
                             case="ceiling", repeat=repeat, params={"connections": c, "duration_s": bounds.duration})
            if m is not None:
                ceilings.setdefault(target.key, []).append(m.load.rps)
                assert m.load.rps > 0 and m.load.failures == 0, m.load
    for target, server in fleet.running:  # --flamegraph: one extra, unrecorded run each under perf
        campaign.flamegraph(target, "oha", lambda on_spawn, alive, url=server.url + target.path: run_oha(
            url, bounds=bounds, client_cpus=client_cpus, log_dir=run_dir / "logs", connections=c,
            on_spawn=on_spawn, alive=alive), name=f"ceiling-{target.key.replace('/', '-').replace('#', '-')}")
    _finish(campaign)


def test_fixed_rate(fleet, campaign, plan, cpus, run_dir, ceilings):
    """Per document count, one rate every path sustains: half the slowest path's ceiling."""
    client_cpus = cpus[1]
    bounds = Bounds(plan["fixed_s"], MAX_REQUESTS)
    rates = {}
    for n in plan["documents"]:
        keys = [t.key for t, _s in fleet.running if t.params["documents"] == n]
        slowest = min((statistics.median(ceilings[k]) for k in keys if k in ceilings), default=2_000)
        rates[n] = max(50, round(slowest / 2, -1))
    for repeat in range(plan["repeats"]):
        for target, server in fleet.running:
            rate = rates[target.params["documents"]]
            campaign.run(target, "oha", lambda on_spawn, alive, url=server.url + target.path, rate=rate:
                         run_oha(url, bounds=bounds, client_cpus=client_cpus, log_dir=run_dir / "logs",
                                 connections=plan["connections"], rate=rate, on_spawn=on_spawn, alive=alive),
                         case="fixed_rate", repeat=repeat,
                         params={"connections": plan["connections"], "rate": rate, "duration_s": bounds.duration})
    _finish(campaign)


def test_locust(fleet, campaign, plan, cpus, run_dir):
    client_cpus = cpus[1]
    bounds = Bounds(plan["locust_s"], MAX_REQUESTS)
    users = plan["locust_users"]
    repeats = min(plan["repeats"], 3)  # locust is the context here, oha the measurement
    for repeat in range(repeats):
        for target, server in fleet.running:
            campaign.run(target, "locust", lambda on_spawn, alive, url=server.url + target.path:
                         run_locust(url, bounds=bounds, client_cpus=client_cpus, log_dir=run_dir / "logs",
                                    users=users, spawn_rate=users * 10, on_spawn=on_spawn, alive=alive),
                         case="locust", repeat=repeat,
                         params={"users": users, "duration_s": bounds.duration,
                                 "processes": max(1, len(client_cpus))})
    _finish(campaign)
