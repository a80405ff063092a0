"""Rust vs Go, fastest frameworks (Anton Putra: gnet vs axum vs net/http, `GET /api/devices`) and the hyper
hello world of "Making the Tokio scheduler 10x faster" (multi-thread vs current-thread runtime), under load.

Every server runs pinned to the server CPU set with one worker per CPU, every load generator to the
client set (on 2 cores: server CPU 0, client CPU 1; the rows' params say which). Apps are verified
before any load, each in a cgroup of its own that counts its CPU exactly. Each case interleaves the targets
repeat by repeat in a seeded random order (C A B, B C A, ...; `--seed`), so neither drift of this shared
machine nor a fixed neighbour favours one, and before every timed window every server has drained:

- `ramp`: Anton Putra's test 1 as the article ran it: gnet and axum (net/http too in full) under oha with the
  connections stepped up (bounded steps of bounded time) until throughput stops rising or requests fail; per step
  requests/s, p90 latency, server CPU and RSS (`ramp_step`); per ramp the peak requests/s and the p90 at that
  step (`ramp`), flagged client-bound when the client, not the server, was the limit at the peak. Each ramp runs
  in a fresh server process;
- `ceiling`: oha, closed model, several connection counts: the most each server answers (each repeat a fresh
  server process, so the repeats span server processes);
- `fixed_rate`: oha at one rate all apps sustain, latency corrected for coordinated omission;
- `locust`: locust's FastHttpUser, a step ramp of users (its rps history is kept): what a Python
  client sees, ~10x below the native driver's ceiling — the report says which driver made which number;
- `driver_ceiling`: oha vs bombardier (and wrk where installed) on hyper's hello world (multi-thread), like for
  like: oha is not the limit.

The fixed rate comes from an explicit, unrecorded calibration (`ceilings`).
"""

from __future__ import annotations

import pytest

from polyperf.common.repeats import repeat_numbers
from polyperf.errors import ToolchainMissing
from polyperf.load import ensure_wrk
from polyperf.measure.counts import syscall_tracer
from polyperf.orchestrate.count_runs import CountPlan
from polyperf.record.env import add_note
from polyperf.serve.fleet import Fleet
from polyperf.serve.suite_targets import HTTP_FRAMEWORKS

TARGETS = list(HTTP_FRAMEWORKS)
# The generators' cross-check loads one fixed target, so every run of a profile holds the same series (the fastest
# by calibration moved between hyper's two runtimes from run to run): hyper's hello world, multi-thread runtime.
CEILING_TARGET = next(t for t in TARGETS if t.app == "hyper_hello" and t.variant == "multi")


@pytest.fixture(scope="module")
def plan(profile):
    # quick spends its time on repeats, not breadth: twelve interleaved repeats of 0.5 s windows for every series
    # a claim uses (the 64-connection ceiling per server, the generators' cross-check, the ramp). Each repeat is a
    # pair of a sign test, whose smallest p-value is 0.031 at six pairs (never through the run's family control)
    # and 0.0005 at twelve; repeats across server processes vary more than windows inside one, so shorter windows
    # cost less than fewer repeats. The sweep and longer runs are full's.
    return {
        "repeats": profile.pick(smoke=1, quick=12, full=12),
        "connections": profile.pick(smoke=[64], quick=[64], full=[16, 64, 256]),
        "ceiling_s": profile.pick(smoke=1.0, quick=0.5, full=5.0),
        "rate": profile.pick(smoke=2_000, quick=10_000, full=20_000),
        "fixed_repeats": profile.pick(smoke=1, quick=1, full=5),
        "fixed_s": profile.pick(smoke=1.0, quick=1.0, full=8.0),
        "locust_steps": profile.pick(
            smoke=[(32, 1.5)],
            quick=[(64, 1.5)],
            full=[(8, 3.0), (32, 3.0), (128, 3.0), (512, 3.0)],
        ),
        "locust_repeats": profile.pick(smoke=1, quick=1, full=3),
        "wrk_repeats": profile.pick(smoke=1, quick=12, full=12),
        "periods": profile.pick(smoke=[], quick=[], full=[0.005, 0.010, 0.100]),
        # the ramp: connections stepped up x4 (bounded), each step a short window; twelve ramps give the peaks'
        # ratio a sign test the family can pass
        "ramp_repeats": profile.pick(smoke=1, quick=12, full=12),
        "ramp_connections": profile.pick(smoke=[16, 64], quick=[4, 16, 64, 256], full=[1, 4, 16, 64, 256, 1024]),
        "ramp_step_s": profile.pick(smoke=0.3, quick=0.2, full=3.0),
        "ramp_apps": profile.pick(
            smoke=("gnet_devices", "axum_devices"),
            quick=("gnet_devices", "axum_devices"),
            full=("gnet_devices", "axum_devices", "nethttp_devices"),
        ),
    }


@pytest.fixture(scope="module")
def load_options(load_options):
    """Server-vs-server claims need the server to be the limit: a CPU budget by default where one client
    core cannot outpace the server's (`--server-cpu-quota none` measures without one)."""
    return load_options.budget_by_default()


@pytest.fixture(scope="module")
def fleet(load_options, run_dir):
    with Fleet(TARGETS, log_dir=run_dir / "logs", **load_options.fleet) as fleet:
        yield fleet


@pytest.fixture(scope="module")
def ceilings(load_env):
    """Calibration, also the warm-up: each target's oha ceiling over a short unrecorded run."""
    return load_env.calibrate(duration=0.5)


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.key)
def test_verified(fleet, target):
    """Built, started pinned, and passed verification: the others are measured without it."""
    assert target.key not in fleet.failed, fleet.failed.get(target.key)


def test_ceiling(env, plan, ceilings):
    for repeat, target in env.interleave(plan["repeats"], processes=plan["repeats"]):
        for connections in plan["connections"]:
            m = env.oha(target, case="ceiling", repeat=repeat, duration=plan["ceiling_s"], connections=connections)
            if m is not None:
                assert m.load.rps > 0 and m.load.failures == 0, m.load
    for _repeat, target in env.interleave(1):  # --flamegraph: one extra, unrecorded run each under perf
        env.flamegraph(target, name=f"ceiling-{target.key.replace('/', '-')}", duration=plan["ceiling_s"])


# A ramp stops at the step after the peak where throughput fell below this share of the best so far: the app broke
RAMP_FALL = 0.9


def _ramp(env, plan, target, repeat: int) -> list[tuple[int, object, bool]]:
    """One ramp: (connections, measurement, client-bound) per step, until requests fail or throughput falls."""
    steps: list[tuple[int, object, bool]] = []
    for connections in plan["ramp_connections"]:
        m = env.oha(target, case="ramp_step", repeat=repeat, duration=plan["ramp_step_s"], connections=connections)
        if m is None:
            break
        steps.append((connections, m, bool(env.last_client_bound)))
        best = max(step.load.rps for _c, step, _b in steps)
        if m.load.failures or m.load.rps < RAMP_FALL * best:
            break
    return steps


def test_ramp(env, plan, ceilings):
    """The article's own quantities (its test 1): peak throughput and the p90 latency at the peak, from a ramp of
    clients until the app breaks, each ramp in a fresh server process."""
    targets = [t for t in TARGETS if t.name in plan["ramp_apps"]]
    repeats = plan["ramp_repeats"]
    # a ramp starts on a fresh, cold process, as a newly deployed app does: its lightest step is the warm-up
    for repeat, target in env.interleave(repeats, targets, processes=repeats, warm_up=lambda _target: None):
        steps = _ramp(env, plan, target, repeat)
        if not steps:
            continue
        connections, peak, client_bound = max(steps, key=lambda step: step[1].load.rps)
        assert peak.load.rps > 0, peak.load
        budget = env.fleet.budgets.get(target.key)
        params = {
            **env.params,
            **target.params,
            "ramp_connections": list(plan["ramp_connections"]),
            "step_s": plan["ramp_step_s"],
            "server_process": env.fleet.starts.get(target.key, 0),
            **({"cpu_quota": budget.fraction} if budget else {}),
        }
        rows = [
            ("peak_requests_per_s", peak.load.rps, "1/s", {}),
            ("peak_connections", float(connections), "count", {}),
            ("ramp_steps", float(len(steps)), "count", {}),
            ("server_cpu_share", peak.server_cpu_fraction, "ratio", {}),
            ("rss_peak_bytes", float(peak.server.rss_peak), "bytes", {}),
        ]
        if 0.9 in peak.load.latency:
            rows.append(("p90_latency_s", peak.load.latency[0.9], "s", {}))
        env.record.many(
            rows,
            case="ramp",
            implementation=target.name,
            variant=target.variant,
            driver="oha",
            repeat=repeat,
            client_bound=client_bound,
            params=params,
        )


def test_budget_period(env, plan, fleet):
    """How the CFS period of the CPU budget moves capacity and the ratios between servers (full profile, with
    --server-cpu-quota): the same quota at 5, 10 and 100 ms periods, interleaved."""
    if not fleet.budgets or not plan["periods"]:
        pytest.skip("runs in the full profile with --server-cpu-quota")
    default = fleet.quota_period_s
    try:
        for repeat in repeat_numbers(plan["repeats"]):  # a top-up measures new repeats only
            for period in plan["periods"]:
                for budget in fleet.budgets.values():
                    budget.set_period(period)
                for _repeat, target in env.interleave(1):
                    env.oha(target, case="budget_period", repeat=repeat, duration=plan["ceiling_s"], connections=64)
    finally:
        for budget in fleet.budgets.values():
            budget.set_period(default)


def test_fixed_rate(env, plan, ceilings):
    """One rate for every app: the profile's, lowered to half the slowest calibrated ceiling if needed."""
    slowest = min(ceilings.values(), default=None)
    rate = plan["rate"] if slowest is None else min(plan["rate"], max(100, round(slowest / 2, -2)))
    for repeat, target in env.interleave(plan["fixed_repeats"]):
        env.oha(target, case="fixed_rate", repeat=repeat, duration=plan["fixed_s"], connections=64, rate=rate)


def test_locust(env, plan):
    """locust's step ramp; its per-second history is kept for the rps-over-time figure."""
    steps = plan["locust_steps"]
    duration = sum(s for _u, s in steps)
    for repeat, target in env.interleave(plan["locust_repeats"]):
        m = env.locust(
            target,
            case="locust",
            repeat=repeat,
            duration=duration,
            steps=steps,
            params={"users": max(u for u, _s in steps), "processes": max(1, len(env.client_cpus))},
        )
        if m is not None and repeat == 0:
            for second, rps, users in m.load.history:
                common = {
                    "case": "locust_history",
                    "implementation": target.name,
                    "variant": target.variant,
                    "driver": "locust",
                    "repeat": repeat,
                    "params": {"second": second, **target.params},
                }
                env.record("history_rps", rps, "1/s", **common)
                env.record("history_users", users, "count", **common)


def test_driver_ceiling(env, plan, ceilings, run_dir):
    """oha against a second native generator on one fixed target (`CEILING_TARGET`), like for like: the same fixed
    GET (wrk without a per-request Lua hook), connections, duration and CPU budget, windows by one rule
    (`driver_window`), in a random order per repeat (the slot is in params). bombardier (installed by the
    project) runs everywhere, wrk, the articles' tool, where present. Each run also records the client's
    CPU per request, which shows why generators differ where they do."""
    target = CEILING_TARGET
    if target.key not in ceilings:
        pytest.fail(f"driver_ceiling: {target.key} was not calibrated (see test_verified)", pytrace=False)
    drivers = ["oha", "bombardier"]
    try:
        ensure_wrk()
        drivers.append("wrk")
    except ToolchainMissing as exc:
        add_note(run_dir, f"http_frameworks: oha vs wrk ({exc})")
    # Under a CPU budget, half of it for this case, the same for every generator: bombardier and wrk spend
    # more client CPU per request than oha, and the check means something only where the server is the limit.
    budget = env.fleet.budgets.get(target.key)
    full = budget.fraction if budget else None
    if budget:
        budget.set_fraction(max(0.1, full / 2))
    try:
        for repeat in repeat_numbers(plan["wrk_repeats"]):  # a top-up measures new repeats only
            for slot, driver in enumerate(env.order(drivers)):
                env.run(
                    target,
                    driver,
                    case="driver_ceiling",
                    repeat=repeat,
                    duration=plan["ceiling_s"],
                    connections=64,
                    params={"slot": slot},
                )
    finally:
        if budget:
            budget.set_fraction(full)


# Counts per request: depth 1 (one request at a time) and pipelined batches of 16 in one write (oha and
# bombardier never pipeline): gnet answers a batch with one write, hyper (axum) once per response.
PIPELINED = ("gnet_devices", "axum_devices", "nethttp_devices")


def test_counts(env, run_dir):
    """Syscalls and allocations per request of every target over 2,000 requests after 500 (a second, untimed
    server each: the Rust apps' counting build, the Go runtime's counter), and pipelined where it decides."""
    if syscall_tracer() is None:
        add_note(run_dir, "http_frameworks: syscalls by name not counted (apt-get install linux-perf or strace)")
    for _repeat, target in env.interleave(1):
        plan = CountPlan(pipelined=(16,) if target.name in PIPELINED else ())
        assert env.count(target, case="counts", plan=plan), env.problems
