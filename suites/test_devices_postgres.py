"""Rust vs Go with PostgreSQL (Anton Putra's test 2): axum_devices, gnet_devices and nethttp_devices insert devices
(`POST /api/devices` → `INSERT … RETURNING id`) under load, at several pool sizes, with nothing lost.

PostgreSQL is a throwaway cluster per run (`max_connections` sized for every pool at once), or the user's
own server (`--database-url`; tables `pp_<run id>_<app>_p<pool>`, never dropped). Servers run on the server
CPUs, load generators on the client CPUs; a throwaway PostgreSQL shares the server CPUs (on 2 cores: CPU 0
holds app + database, CPU 1 the client, so the client is never disturbed and the database's cost is part of
the server side; the rows say so in `db_cpus`/`db_placement`). After every run the app's table is read back:
rows found == POSTs acknowledged (ids one by one where the client kept them), else the test fails.

- `ceiling`: oha, the same device in every POST, closed model; the request count comes from an unrecorded
  calibration so each run ends with no request in flight (an exact count). The first pool (8) is repeated
  (`repeats`): the claims' insert ceiling, inserts per CPU-second and "PostgreSQL was not the bottleneck";
  the other pools show the shape by pool size;
- `fixed_rate`: oha at one rate every app sustains (latency corrected for coordinated omission), on the first
  pool (axum and gnet repeated) with every request kept by oha (`--db-url`): p50/p99 of every second, unrounded, and one
  `p99_spike_ratio` per run (worst second's p99 / median second's p99: the article saw Go's latency spike);
- `locust`: the article's step ramp (users added stage by stage, 0.2 s between a user's requests, 1 s
  timeout), a random device per request; p99 per second kept (full profile);
- `restart_fast` / `restart_immediate`: PostgreSQL restarted mid-run (`pg_ctl -m fast|immediate`): answers
  stay bounded (5xx within the apps' DB timeout), the apps recover alone, no acknowledged row is lost;
- `pool_overflow`: a pool larger than `max_connections`: clear 5xx, no crash;
- `rows_total`: rows found vs acknowledged per app over the whole run.

Every measured run also records PostgreSQL's side: its CPU per insert beside the app's, its memory (summed
RSS sampled during the run, summed PSS after it), its connections in use, and whether it was the limit.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from pathlib import Path
from urllib.parse import urlsplit

import psutil
import pytest

from polyperf.common.paths import log_part
from polyperf.load.post_probe import PostProbe
from polyperf.measure.database import account_tree, pin_tree, postmaster_pid
from polyperf.measure.device_table import table_name
from polyperf.measure.per_second import per_second, read_oha_requests, spike_ratio
from polyperf.orchestrate.count_runs import CountPlan
from polyperf.orchestrate.db_restart import RestartPlan, restart_under_load
from polyperf.orchestrate.db_runs import Database, PostRuns, ceiling_requests
from polyperf.orchestrate.load_suite import LoadEnv
from polyperf.record.env import add_note
from polyperf.serve.cpu_account import CpuAccount
from polyperf.serve.cpu_budget import CpuBudgetError
from polyperf.serve.fleet import Fleet, Target
from polyperf.serve.postgres import ThrowawayPostgres

APPS = ("axum_devices", "gnet_devices", "nethttp_devices")
SPIKE_APPS = ("axum_devices", "gnet_devices")  # the spike claim's two: their fixed-rate runs are repeated
DB_TIMEOUT_S = 2.0  # the apps' bound on one POST's database work (pool wait, connect, INSERT) before a 503
THINK_S, CLIENT_TIMEOUT_S = 0.2, 1.0  # the article's client: 200 ms between a client's requests, 1 s timeout
OHA_BODY = {"mac": "3C-5A-B4-0E-71-9F", "firmware": "2.4.17"}  # oha sends one body: a realistic device


@pytest.fixture(scope="module")
def plan(profile):
    return {
        "pools": profile.pick(smoke=[8], quick=[8, 64], full=[8, 32, 128, 500]),
        # the first pool's ceiling runs carry the claims: twelve repeats of short windows give their sign tests a
        # p-value (0.0005) the run's family control can pass; six at a fixed rate give the spikes an interval
        "repeats": profile.pick(smoke=1, quick=12, full=12),
        "fixed_repeats": profile.pick(smoke=1, quick=6, full=10),
        "other_repeats": profile.pick(smoke=1, quick=1, full=3),  # the other pools: the shape by pool size
        "connections": profile.pick(smoke=64, quick=256, full=512),
        "calibrate_requests": profile.pick(smoke=1_500, quick=2_000, full=20_000),
        "ceiling_s": profile.pick(smoke=0.7, quick=0.3, full=5.0),
        "fixed_s": profile.pick(smoke=3.0, quick=3.0, full=10.0),  # whole seconds: one p99 each
        "rate": profile.pick(smoke=500, quick=1_000, full=2_000),
        "locust_steps": profile.pick(
            smoke=[(40, 2.0)],
            quick=[],
            full=[(50, 15.0), (200, 15.0), (500, 15.0), (1000, 15.0)],
        ),
        "restart": {"rate": 300, "seconds": profile.pick(smoke=1.5, quick=1.5, full=6.0), "at": 0.5},
        "overflow": {
            "pool": 16,
            "max_connections": 8,
            "connections": 32,
            "requests": profile.pick(smoke=600, quick=600, full=3_000),
        },
    }


def _by_repeats(env, plan, targets, apps=APPS, repeats="repeats"):
    """(repeat, target): the first pool's targets of `apps` `plan[repeats]` times (the claims' series), every other
    target `other_repeats` times; each repeat in the environment's random order."""
    claimed = [t for t in targets if t.params["pool_size"] == plan["pools"][0] and t.name in apps]
    others = [t for t in targets if t not in claimed]
    yield from env.interleave(plan[repeats], claimed)
    if others:
        yield from env.interleave(plan["other_repeats"], others)


@pytest.fixture(scope="module")
def database(database_url, plan, load_options, run_dir):
    """The user's server as given, or a throwaway cluster pinned to the server CPUs (shared with the apps)."""
    server_cpus = load_options.server_cpus
    if database_url:
        parts = urlsplit(database_url)
        pid = postmaster_pid(database_url)
        cpus = sorted(psutil.Process(pid).cpu_affinity()) if pid else []
        where = f"{parts.hostname}:{parts.port or 5432}{parts.path}"  # never the credentials
        params = {"database": "user", "db_server": where, "db_cpus": ",".join(map(str, cpus)) or "not seen"}
        yield Database(database_url, pid, cpus, bool(set(cpus) & set(server_cpus)), None, params)
        return
    need = len(APPS) * sum(plan["pools"]) + 20  # every pool full at once, plus the checks and probes
    # stopped before its cgroup is removed: the cluster is the inner context
    with (
        _own_cgroup(run_dir) as account,
        ThrowawayPostgres(log_part(run_dir / "logs", "servers"), max_connections=need) as pg,
    ):
        pin_tree(pg.proc.pid, server_cpus)
        if account is not None:
            account_tree(account, pg.proc.pid)
        if pg.binaries_note:
            add_note(run_dir, f"devices_postgres: PostgreSQL binaries {pg.binaries_note}")
        params = {
            "database": "throwaway",
            "pg_version": pg.query("SHOW server_version")[0][0].split()[0],
            "pg_binaries": pg.binaries,
            "pg_max_connections": need,
            "db_cpus": ",".join(map(str, server_cpus)),
            "db_placement": "shares the server CPUs",
        }
        yield Database(pg.dsn, pg.proc.pid, list(server_cpus), True, pg, params, account)


@contextlib.contextmanager
def _own_cgroup(run_dir):
    """A cgroup that counts the throwaway cluster's CPU exactly, or None (then /proc samples; noted)."""
    try:
        account = CpuAccount("postgres").create()
    except (CpuBudgetError, OSError) as exc:
        add_note(run_dir, f"devices_postgres: PostgreSQL's CPU from /proc samples (no cgroup: {exc})")
        yield None
        return
    try:
        yield account
    finally:
        account.remove()


@pytest.fixture(scope="module")
def targets(plan, run_dir):
    out = []
    for pool in plan["pools"]:
        for app in APPS:
            table = table_name(run_dir.name, app, pool)
            args = ("--pool-size", str(pool), "--table", table, "--db-timeout", f"{DB_TIMEOUT_S:g}")
            params = {"pool_size": pool, "db_timeout_s": DB_TIMEOUT_S}
            out.append(Target(app, "/api/devices", args=args, params=params, instance=f"pool{pool}"))
    return out


def _table(target: Target) -> str:
    return target.args[target.args.index("--table") + 1]


def _app_dsn(database: Database) -> str:
    """Apps get a role that owns only their own tables on a throwaway cluster, never its superuser."""
    return database.throwaway.app_dsn() if database.throwaway is not None else database.dsn


@pytest.fixture(scope="module")
def fleet(targets, database, load_options, run_dir):
    with Fleet(targets, log_dir=run_dir / "logs", database_url=_app_dsn(database), **load_options.fleet) as fleet:
        yield fleet


@pytest.fixture(scope="module")
def runs(load_env, database, targets):
    load_env.add_params(**database.params)
    return PostRuns(load_env, database, {t.key: _table(t) for t in targets}, body=OHA_BODY)


@pytest.fixture(scope="module")
def ceilings(load_env, runs, plan):
    """Unrecorded POST runs (also the warm-up: pools filled, tables cached): each target's insert rate. They
    end after a request count too, so even these rows are exactly accounted for."""
    found = {}
    for _repeat, target in load_env.interleave(1, series=False):  # a warm-up: run in every top-up too
        m, _check = runs.oha(
            target,
            case="calibration",
            requests=plan["calibrate_requests"],
            bound_s=10.0,
            connections=plan["connections"],
            keep=False,
        )
        if m is not None and m.load.rps > 0:
            found[target.key] = m.load.rps
    return found


def test_verified(fleet):
    """Built, started pinned, passed verification (POSTs read back): the others are measured without it."""
    assert not fleet.failed, fleet.failed


def test_ceiling(env, runs, plan, ceilings, targets):
    for repeat, target in _by_repeats(env, plan, targets):
        if target.key in ceilings:
            runs.oha(
                target,
                case="ceiling",
                requests=ceiling_requests(ceilings[target.key], plan["ceiling_s"], plan["connections"]),
                bound_s=3 * plan["ceiling_s"] + 2,
                connections=plan["connections"],
                repeat=repeat,
                pss=repeat == 0,  # PostgreSQL's footprint once per target: ~1 ms per backend to read
            )


def test_fixed_rate(env, runs, plan, ceilings, targets):
    """One rate for every app and pool: the profile's, lowered to half the slowest calibrated rate if needed.
    oha keeps every request: each run's p50/p99 second by second and its p99 spike ratio."""
    slowest = min(ceilings.values(), default=None)
    rate = plan["rate"] if slowest is None else min(plan["rate"], max(100, round(slowest / 2, -2)))
    first = [t for t in targets if t.params["pool_size"] == plan["pools"][0]]
    for repeat, target in _by_repeats(env, plan, first, SPIKE_APPS, repeats="fixed_repeats"):
        m, _check = runs.oha(
            target,
            case="fixed_rate",
            requests=round(rate * plan["fixed_s"]),
            bound_s=2 * plan["fixed_s"] + 2,
            connections=64,
            rate=rate,
            repeat=repeat,
            per_request=True,
        )
        if m is not None:
            _record_seconds(env, target, m, repeat, {"rate": rate, "connections": 64})


def _record_seconds(env, target, m, repeat: int, options: dict) -> None:
    """The run's seconds from oha's own per-request records: its spike ratio, and (first repeat) p50/p99 of
    each second for the report's figure."""
    try:
        seconds = per_second(read_oha_requests(Path(m.load.extra["requests_db"])))
    except ValueError as exc:
        env.note_problem(f"fixed_rate {target.key} (repeat {repeat}): {exc}")
        return
    common = {
        "implementation": target.name,
        "variant": target.variant,
        "driver": "oha",
        "repeat": repeat,
        "client_bound": m.client_bound,  # the rate not reached: the client's seconds, not the server's
    }
    params = {**env.params, **target.params, **options, "seconds": len(seconds)}
    ratio = spike_ratio(seconds)
    if ratio is None:
        env.note_problem(f"fixed_rate {target.key} (repeat {repeat}): {len(seconds)} whole seconds, no spike ratio")
    else:
        env.record("p99_spike_ratio", ratio, "ratio", case="fixed_rate", params=params, **common)
    for second in seconds if repeat == 0 else ():
        env.record.many(
            [
                ("history_rps", float(second.requests), "1/s", {}),
                ("history_p50_s", second.p50, "s", {}),
                ("history_p99_s", second.p99, "s", {}),
            ],
            case="fixed_rate_history",
            params={**params, "second": second.second},
            **common,
        )


def test_locust(env, runs, plan, targets):
    """The article's step ramp on the largest pool; per-second p99 (and its spikes) from the request logs."""
    if not plan["locust_steps"]:
        pytest.skip("the locust ramp runs in smoke and full; quick judges spikes from oha's fixed-rate runs")
    largest = [t for t in targets if t.params["pool_size"] == max(plan["pools"])]
    for repeat, target in env.interleave(plan["fixed_repeats"], largest):
        m, _check, seen = runs.locust(
            target, case="locust", steps=plan["locust_steps"], think=THINK_S, timeout=CLIENT_TIMEOUT_S, repeat=repeat
        )
        if m is None or seen is None:
            continue
        history = seen.history(m.load.started_at)
        busy = sorted(p99 for _s, n, _p50, p99 in history if n >= 10)
        common = {"implementation": target.name, "variant": target.variant, "driver": "locust", "repeat": repeat}
        if len(busy) >= 2:
            spike = busy[-1] / busy[len(busy) // 2]
            env.record("p99_spike_ratio", spike, "ratio", case="locust", params=dict(target.params), **common)
        users = {int(second): u for second, _rps, u in m.load.history}
        for second, count, p50, p99 in history if repeat == 0 else ():
            params = {"second": second, **target.params}
            env.record.many(
                [
                    ("history_rps", float(count), "1/s", {}),
                    ("history_p50_s", p50, "s", {}),
                    ("history_p99_s", p99, "s", {}),
                    ("history_users", float(users.get(second, 0)), "count", {}),
                ],
                case="locust_history",
                params=params,
                **common,
            )


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_restart(env, runs, plan, database, targets, run_dir, mode):
    """PostgreSQL restarted under a fixed-rate oha run plus a 50/s probe that keeps every id it is given."""
    if database.throwaway is None:
        add_note(run_dir, "devices_postgres restart cases: skipped, the database is the user's (--database-url)")
        pytest.skip("restarting PostgreSQL only on the throwaway cluster, never the user's server")
    env.stop_measuring("db")  # the postmaster changes mid-run: its CPU is not measured here
    restart = RestartPlan(**plan["restart"], db_timeout_s=DB_TIMEOUT_S)
    try:
        for _repeat, target in env.interleave(1, [t for t in targets if t.params["pool_size"] == plan["pools"][0]]):
            restart_under_load(runs, database, target, mode, restart, OHA_BODY)
    finally:
        runs.db.pid = database.throwaway.proc.pid
        runs.measure_database()


def test_pool_overflow(env, plan, database, load_options, run_dir):
    """Pools of 16 where the apps' role may open 5 connections (`max_connections` 8, 3 kept for superusers,
    the harness's checks among them): 5xx with a reason, no crash, no lost row."""
    if database.throwaway is None:
        pytest.skip("needs a throwaway cluster with a tiny max_connections")
    spec = plan["overflow"]
    with ThrowawayPostgres(log_part(run_dir / "logs", "servers"), max_connections=spec["max_connections"]) as tiny:
        pin_tree(tiny.proc.pid, load_options.server_cpus)
        app_dsn = tiny.app_dsn()  # a login role of its own, with its own password, owning only its tables
        params = {"pool_size": spec["pool"], "pg_max_connections": spec["max_connections"], "app_connections": 5}
        small = [
            Target(
                app,
                "/api/devices",
                args=("--pool-size", str(spec["pool"]), "--table", table_name(run_dir.name, app, 0)),
                params=params,
                instance="overflow",
            )
            for app in APPS
        ]
        with Fleet(
            small, log_dir=run_dir / "logs", server_cpus=load_options.server_cpus, database_url=app_dsn
        ) as fleet:
            assert not fleet.failed, fleet.failed
            local = LoadEnv(fleet, env.record, client_cpus=env.client_cpus, log_dir=env.log_dir)
            db = Database(tiny.dsn, tiny.proc.pid, list(load_options.server_cpus), True, tiny)
            runs = PostRuns(local, db, {t.key: _table(t) for t in small}, body=OHA_BODY)
            for _repeat, target in local.interleave(1):
                url = fleet.servers[target.key].url + target.path
                probe = PostProbe(url, interval=0.01, timeout=DB_TIMEOUT_S + 3, cpus=env.client_cpus, body=OHA_BODY)
                # The same runs.oha call shape as the ceilings fixture, with this case's own bounds and witness.
                m, _check = runs.oha(
                    target,
                    case="pool_overflow",
                    requests=spec["requests"],
                    bound_s=10,
                    connections=spec["connections"],
                    witness=probe,
                )
                if m is not None:
                    print(f"{target.key}: {dict(m.load.status_counts)}; first errors: {probe.error_bodies}")
                    local.problems += _unclear(target, m, probe.error_bodies)
            env.problems += local.take_problems()


def _unclear(target, m, error_bodies: list[str]) -> list[str]:
    """A clear error: an HTTP 5xx whose body is JSON naming the cause; never a dropped connection."""
    problems = [f"{target.key}: requests without an HTTP answer: {m.load.errors}"] if m.load.errors else []
    for text in error_bodies:
        status, _, body = text.partition(": ")
        try:
            reason = json.loads(body).get("error")
        except (ValueError, AttributeError):
            reason = None
        if not reason or not status.startswith("HTTP 5"):
            problems.append(f"{target.key}: unclear error answer {text!r}")
    return problems


def test_rows_total(env, runs):
    """Per app, over the whole run: every row inserted since the servers' verification (the mark taken before
    the first run) against every acknowledged POST of every run, calibration and restarts included."""
    for app, (check, before) in sorted(runs.whole_run().items()):
        env.record.many(
            [
                ("rows_acked", float(check.acked), "count", {}),
                ("rows_found", float(check.found), "count", {}),
                ("rows_ambiguous", float(check.ambiguous), "count", {}),
                ("rows_mismatch", float(check.mismatch), "count", {}),
                ("rows_before", float(before), "count", {}),  # the verification's: the table holds before + found
            ],
            case="rows_total",
            implementation=app,
            params={k: v for k, v in env.params.items() if k.startswith(("db", "database", "pg"))},
        )
        assert check.ok, f"{app}: {check.describe()}"


def test_counts(env, plan, targets):
    """Allocations and syscalls per acknowledged POST (insert included) of each app at the first pool size, over
    2,000 POSTs after 500, one at a time: an untimed second server of each app (its counting build, the Go
    runtime's counter) writing into a table of its own, so the rows checks above stay exact."""
    counting = CountPlan(method="POST", body=json.dumps(OHA_BODY).encode(), trace=False)
    for target in (t for t in targets if t.params["pool_size"] == plan["pools"][0]):
        args = list(target.args)
        args[args.index("--table") + 1] = _table(target)[:59] + "_cnt"
        counted = dataclasses.replace(target, args=tuple(args))
        assert env.count(counted, case="counts", plan=counting), env.problems
