"""Patrick Freed's "Making slow Rust code fast", end to end: bson_server deserializes a pre-encoded find reply on
every request by one of three paths — `clone` (the article's baseline), `document` (the clone removed), `raw`
(serde straight from the raw bytes) — and polyperf loads each path the same way. The article's wrk run went
from 12,168 to 23,964 req/s (raw vs clone, ≈2x); here the ratio is measured in rps and in server CPU per
request.

One server per path, all pinned to the server CPU set, each in a cgroup of its own that counts its CPU exactly;
the load generator pinned to the client set. Paths are interleaved repeat by repeat in a seeded random
order, and every server has drained before each timed window. Cases as in test_http_frameworks: `ceiling`
(oha, closed), `fixed_rate` (oha, latency-corrected) and `locust` (locust's FastHttpUser, closed model)."""

from __future__ import annotations

import pytest

from polyperf.orchestrate.count_runs import CountPlan
from polyperf.serve.fleet import Fleet, Target

PATHS = ("clone", "document", "raw")


@pytest.fixture(scope="module")
def plan(profile):
    # quick: nine interleaved repeats of the ceiling in 0.5 s windows (nine of nine pairs beyond the bound give an
    # e-value e-BH declares once a fifth of the family is; the run's top-ups add repeats where they are needed);
    # fixed rate and locust are context, so fewer and shorter
    return {
        "documents": profile.pick(smoke=[100], quick=[100], full=[10, 100, 1000]),
        "repeats": profile.pick(smoke=1, quick=9, full=12),
        "fixed_repeats": profile.pick(smoke=1, quick=1, full=8),
        "locust_repeats": profile.pick(smoke=1, quick=1, full=3),  # locust is context here; oha measures
        "connections": 64,
        "ceiling_s": profile.pick(smoke=1.0, quick=0.5, full=5.0),
        "fixed_s": profile.pick(smoke=1.0, quick=1.0, full=8.0),
        "locust_s": profile.pick(smoke=1.0, quick=1.0, full=8.0),
        "locust_users": 32,
    }


def _targets(documents):
    return [
        Target("bson_server", f"/find?path={path}", path, ("--documents", str(n)), {"documents": n}, instance=str(n))
        for n in documents
        for path in PATHS
    ]


@pytest.fixture(scope="module")
def fleet(load_options, run_dir, plan):
    with Fleet(_targets(plan["documents"]), log_dir=run_dir / "logs", **load_options.fleet) as fleet:
        yield fleet


@pytest.fixture(scope="module")
def ceilings(load_env):
    """Calibration, also the warm-up: each path's oha ceiling over a short unrecorded run."""
    return load_env.calibrate(duration=0.5)


def test_verified(fleet, plan):
    assert not fleet.failed, fleet.failed
    assert len(fleet.running) == len(PATHS) * len(plan["documents"])


def test_ceiling(env, plan, ceilings):
    # a fresh server process per repeat, as http_frameworks does: a process keeps one speed for its life, so repeats
    # inside one are not independent; each new one is warmed up unrecorded
    for repeat, target in env.interleave(plan["repeats"], processes=plan["repeats"]):
        m = env.oha(target, case="ceiling", repeat=repeat, duration=plan["ceiling_s"], connections=plan["connections"])
        if m is not None:
            assert m.load.rps > 0 and m.load.failures == 0, m.load
    for _repeat, target in env.interleave(1):  # --flamegraph: one extra, unrecorded run each under perf
        env.flamegraph(
            target, name=f"ceiling-{target.key.replace('/', '-').replace('#', '-')}", duration=plan["ceiling_s"]
        )


def test_fixed_rate(env, plan, fleet, ceilings):
    """Per document count, one rate every path sustains: half the slowest path's calibrated ceiling."""
    rates = {}
    for n in plan["documents"]:
        slowest = min(
            (ceilings[t.key] for t in fleet.targets if t.params["documents"] == n and t.key in ceilings), default=2_000
        )
        rates[n] = max(50, round(slowest / 2, -1))
    for repeat, target in env.interleave(plan["fixed_repeats"]):
        env.oha(
            target,
            case="fixed_rate",
            repeat=repeat,
            duration=plan["fixed_s"],
            connections=plan["connections"],
            rate=rates[target.params["documents"]],
        )


def test_locust(env, plan):
    users = plan["locust_users"]
    # The interleave-and-drive loop of test_fixed_rate (and test_build_profiles.py): each case has its own driver.
    for repeat, target in env.interleave(plan["locust_repeats"]):
        env.locust(
            target,
            case="locust",
            repeat=repeat,
            duration=plan["locust_s"],
            users=users,
            spawn_rate=users * 10,
            params={"processes": max(1, len(env.client_cpus))},
        )


def test_counts(env):
    """Allocations and syscalls per request of each path over 1,000 requests after 200 (its counting build, an
    untimed second server): the article's explanation — the clone allocates — as a count."""
    for _repeat, target in env.interleave(1):
        assert env.count(target, case="counts", plan=CountPlan(requests=1_000, warmup=200, trace=False)), env.problems
