"""Compiler and allocator settings (the actix-web matrix multiplication article), one setting at a time:
actix_matrix built as the ladder dev ('D'); Cargo's default release; release + fat LTO; + codegen-units=1;
+ panic=abort (each alone); the article's profile 'R' (`release-lto`: all three plus strip); + target-cpu=native
('ROpt'); + mimalloc ('ROptMimAlloc'). Each variant is proven from its binary, not its name, and measured for
what it costs (clean build time in a target directory of its own, binary size), what its code generation buys
(the multiply alone, timed inside the served binary: `actix_matrix bench`) and what it buys served (oha
ceiling, server CPU per request), one server at a time in a seeded random order per repeat.

`POST /matrix-multiplication {"n": N}`. The article does not publish N, and the dev/release ratio depends on it
(how much of a request is the optimisable loop), so N is swept: the ladder at N = 120 (about a millisecond of
release CPU per request; N = 128 is avoided, a power-of-two stride costs ~3x in cache misses) and dev, release
and 'R' at every size of the sweep.
"""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pytest

from polyperf.build import APPS, build
from polyperf.build.registry import MATRIX_LADDER
from polyperf.build.variant_proof import cpu_has_avx2_bmi2, ladder_failures, variant_facts
from polyperf.common import procs
from polyperf.common.logs import log_tail
from polyperf.common.paths import log_part
from polyperf.common.repeats import repeat_numbers
from polyperf.errors import PolyperfError
from polyperf.load.drill_driver import ensure_drill, run_drill, to_load_result
from polyperf.measure.sampler import measure
from polyperf.orchestrate.count_runs import CountPlan
from polyperf.record.env import add_note
from polyperf.record.rows import build_rows, measurement_rows
from polyperf.serve.fleet import Fleet, Target

APP = APPS["actix_matrix"]
VARIANTS = MATRIX_LADDER
SWEEP_VARIANTS = ("dev", "release", "release-lto")  # dev/release as a function of N, Cargo's and the article's
# the variants the registry's build entries compare (analyse/claims.toml: release vs dev, native vs the article's
# profile, mimalloc vs native): they get the verdicts' repeats; the ladder's other steps are context for the report
CLAIMED_VARIANTS = ("dev", "release-lto", "native", "native-mimalloc")
HEADLINE_N = 4  # the size build.release_vs_dev is judged at
MAIN_N = 120
PATH = "/matrix-multiplication"


def body(n: int) -> str:
    return json.dumps({"n": n})


def request(n: int) -> dict[str, str]:
    return {"method": "POST", "body": body(n)}


TARGETS = [Target(f"actix_matrix:{v}", PATH, v, params={"n": MAIN_N}, request=request(MAIN_N)) for v in VARIANTS]
SWEEP_TARGETS = [t for t in TARGETS if t.variant in SWEEP_VARIANTS]


@pytest.fixture(scope="module")
def plan(profile):
    return {
        # independent repeats of every series a verdict uses: 6 give a 95% interval of a median or a paired ratio;
        # the ladder gets more, as its single settings differ by a few percent on a noisy shared machine
        "repeats": profile.pick(smoke=2, quick=8, full=12),
        # the sweep holds the headline (release over dev at N = 4): eight, so that a run or two flagged client-bound
        # (a server that neighbours kept from filling its budget) still leaves six pairs
        "sweep_repeats": profile.pick(smoke=2, quick=8, full=10),
        # series no entry judges (the ladder's other steps, the sweep's other sizes): a median for the report's
        # figures; the time goes to the verdicts' repeats and their top-ups
        "context_repeats": profile.pick(smoke=2, quick=3, full=10),
        # server processes per series: a process keeps one speed for its life (release vs 'R' read 1.05x in one
        # run and 1.32x in the next), so the repeats are spread over three or more (a restart and warm-up each)
        "processes": profile.pick(smoke=2, quick=3, full=6),
        "ceiling_s": profile.pick(smoke=0.4, quick=0.6, full=3.0),
        # one actix worker per server CPU: a few requests in flight keep it busy; more only queue (and drain)
        "connections": 8,
        "sizes": profile.pick(smoke=(8, MAIN_N), quick=(4, 24, MAIN_N), full=(1, 4, 16, 48, MAIN_N, 256)),
        # one process per round: its speed varies from process to process here (VM placement), not within one
        "bench_round_ms": profile.pick(smoke=5, quick=10, full=50),
        "bench_rounds": profile.pick(smoke=2, quick=12, full=20),
        # the article: 500 concurrent clients, 50,000 and 100,000 requests; bounded in time for the dev build
        "shape": profile.pick(smoke=[], quick=[], full=[(500, 50_000), (500, 100_000)]),
        "shape_s": 150.0,
        "drill": profile.pick(smoke=False, quick=False, full=True),
    }


@pytest.fixture(scope="module")
def builds(run_dir, record):
    """Every variant built (clean, in its own target directory, unless cached); its cost recorded."""
    results = {}
    for target in TARGETS:
        result = build(target.app, log_dir=log_part(run_dir / "logs", "builds"))
        results[target.variant] = result
        spec = APP.variants[target.variant]
        settings = {"profile": spec.cargo_profile, "rustflags": spec.rustflags or "", "features": list(spec.features)}
        rows = build_rows(result)
        if result.cpu_seconds is not None:
            rows.append(("build_cpu_seconds", result.cpu_seconds, "s", {"cached": result.cached}))
        record.many(rows, case="build", implementation="actix_matrix", variant=target.variant, params=settings)
    return results


@pytest.fixture(scope="module")
def load_options(load_options):
    """The claims compare servers, so the server must be the limit: on 2 cores one oha core outpaces one actix
    core at small N (every N = 4 release run was client-bound). A CPU budget by default, as in http_frameworks
    (`--server-cpu-quota none` measures without one). Under `auto` it is calibrated per matrix size, on the
    request of that size (`_sized_budget`), not once for all: at N = 120 oha is never the limit."""
    options = load_options.budget_by_default()
    return dataclasses.replace(options, auto_quota=False) if options.auto_quota else options


@pytest.fixture(scope="module")
def sized_budget(load_options, pytestconfig) -> bool:
    """Whether budgets are calibrated per size: budgets exist and no fixed fraction was given."""
    return load_options.cpu_quota is not None and pytestconfig.getoption("--server-cpu-quota") in (None, "auto")


@pytest.fixture(scope="module")
def fleet(builds, load_options, run_dir):
    with Fleet(TARGETS, log_dir=run_dir / "logs", **load_options.fleet) as fleet:
        yield fleet


def test_variants_really_differ(builds, record):
    """From the binaries: dev is a debug build; fat LTO leaves no ThinLTO-promoted symbols; one codegen unit
    fewer; panic=abort drops the landing pads; 'R' is stripped; native uses AVX/BMI2 that the generic build does
    not; only native-mimalloc links mimalloc (`ladder_failures` states each rule)."""
    facts = {v: variant_facts(r.binary, instructions=v in ("release-lto", "native")) for v, r in builds.items()}
    for variant, f in facts.items():
        common = {"case": "binary", "implementation": "actix_matrix", "variant": variant}
        record("links_mimalloc", float(f.mimalloc), "count", **common)
        record("debug_info", float(f.debug_info), "count", **common)
        record("except_table_bytes", float(f.except_table_bytes), "bytes", **common)
        record("llvm_promoted_symbols", float(f.promoted_symbols), "count", **common)
        if f.instructions is not None:
            record("vex_instruction_share", f.instructions.vex_share, "ratio", **common)
    assert ladder_failures(facts, native_cpu=cpu_has_avx2_bmi2()) == []


def _bench(binary: Path, sizes, *, round_ms: int, rounds: int, cpus, log: Path) -> list[dict]:
    """`actix_matrix bench`: the multiply alone in the served binary, pinned where the servers run."""
    log.unlink(missing_ok=True)
    cmd = [str(binary), "bench", "--n", ",".join(map(str, sizes)), "--rounds", str(rounds), "--round-ms", str(round_ms)]
    proc = procs.spawn(cmd, log_path=log, cpus=cpus)
    try:
        code = proc.wait(timeout=120)
    finally:
        procs.stop(proc, grace=5.0)
    if code != 0:
        raise PolyperfError(f"{' '.join(cmd)} exited {code}: {log_tail(log, 3)} (log {log})")
    return [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]


def test_multiply_alone(builds, plan, record, load_options, run_dir):
    """Code generation apart from serving: the multiply's time per call in each variant's own binary, before any
    server runs. One round per variant per repeat, variants in a seeded random order per repeat (rounds are the
    independent samples, paired by repeat)."""
    order = random.Random(f"{load_options.seed}:build_profiles:multiply")  # the run's seed (env.json has it)
    for repeat in repeat_numbers(plan["bench_rounds"]):  # a top-up measures new repeats only
        for slot, variant in enumerate(order.sample(VARIANTS, len(VARIANTS))):
            rounds = _bench(
                builds[variant].binary,
                plan["sizes"],
                round_ms=plan["bench_round_ms"],
                rounds=1,
                cpus=load_options.server_cpus,
                log=run_dir / "logs" / f"bench-actix_matrix-{variant}.log",
            )
            for r in rounds:
                params = {"n": r["n"], "iterations": r["iterations"], "slot": slot}
                common = {"case": "multiply", "implementation": "actix_matrix", "variant": variant, "repeat": repeat}
                record("seconds_per_multiply", r["seconds"] / r["iterations"], "s", params=params, **common)
                if r.get("cpu_seconds") is not None:  # the thread's time on a CPU: no preemption in it
                    record("cpu_s_per_multiply", r["cpu_seconds"] / r["iterations"], "s", params=params, **common)
            assert {r["n"] for r in rounds} == set(plan["sizes"]), rounds


def _ceilings(env, plan, targets, n: int, repeats: int) -> None:
    processes = min(repeats, plan["processes"])

    def warm_up(target: Target) -> None:
        env.oha(target, case="warmup", duration=0.2, connections=plan["connections"], keep=False, **request(n))

    for repeat, target in env.interleave(repeats, targets, processes=processes, warm_up=warm_up):
        m = env.oha(
            target,
            case="ceiling",
            repeat=repeat,
            duration=plan["ceiling_s"],
            connections=plan["connections"],
            method="POST",
            body=body(n),
            params={"n": n},
        )
        if m is not None:
            assert m.load.successes > 0 and m.load.failures == 0, m.load


def test_ceiling_ladder(env, plan):
    """Every variant at N = 120: throughput and server CPU per request (the claimed variants interleaved first, with
    the verdicts' repeats, then the other steps of the ladder)."""
    claimed = [t for t in TARGETS if t.variant in CLAIMED_VARIANTS]
    _ceilings(env, plan, claimed, MAIN_N, plan["repeats"])
    _ceilings(env, plan, [t for t in TARGETS if t not in claimed], MAIN_N, plan["context_repeats"])


# The calibration confirms a budget with short runs at the bound (quota use >= 90%); measured runs at that budget
# then used 86-97% of it, and those under 90% are flagged client-bound. A fifth below keeps them served.
SIZED_MARGIN = 0.8


def _sized_budget(env, n: int) -> None:
    """The budget for requests of size `n`: a fifth below the largest at which the sweep's servers, not oha, are
    the limit on that request (a request at N = 4 costs the server ~1/60 of one at N = 120, the client the same)."""
    found = env.calibrate_cpu_quota(targets=SWEEP_TARGETS, request=request(n))
    fraction = max(0.1, round(found * SIZED_MARGIN, 3))
    env.fleet.set_cpu_quota(fraction)
    env.record("cpu_quota", fraction, "ratio", case="budget", implementation="actix_matrix", params={"n": n})


def test_ceiling_sweep(env, plan, sized_budget):
    """dev, release and 'R' at the other matrix sizes: the dev/release ratio as a function of N."""
    ladder_quota = env.fleet.cpu_quota
    try:
        for n in plan["sizes"]:
            if n != MAIN_N:
                if sized_budget and env.fleet.budgets:
                    _sized_budget(env, n)
                repeats = plan["sweep_repeats"] if n == HEADLINE_N else plan["context_repeats"]
                _ceilings(env, plan, SWEEP_TARGETS, n, repeats)
    finally:
        if ladder_quota is not None:
            env.fleet.set_cpu_quota(ladder_quota)


def test_article_shape(env, plan):
    """Many concurrent clients, a fixed request count (bounded in time too: the dev build is slow)."""
    if not plan["shape"]:
        pytest.skip("the article's client shape runs in the full profile")
    for concurrency, requests in plan["shape"]:
        for repeat, target in env.interleave(plan["repeats"] // 3 or 1):
            env.oha(
                target,
                case="article_shape",
                repeat=repeat,
                duration=plan["shape_s"],
                connections=concurrency,
                max_requests=requests,
                method="POST",
                body=body(MAIN_N),
                params={"requests": requests, "n": MAIN_N},
            )


def test_article_shape_drill(env, plan, fleet, run_dir):
    """The article's own client, drill, where it is installed (it takes minutes to build from crates.io)."""
    if not plan["drill"]:
        pytest.skip("drill runs in the full profile")
    try:
        drill = ensure_drill(install=False)
    except PolyperfError as exc:
        add_note(run_dir, f"build_profiles: drill runs skipped ({exc}); `cargo install drill@0.9.1 --locked`")
        pytest.skip(str(exc))
    concurrency, requests = plan["shape"][-1]
    for repeat, target in env.interleave(1):
        server = fleet.servers[target.key]
        drill_requests = requests if target.variant != "dev" else min(requests, 500)

        def run(on_spawn, server=server, n=drill_requests):
            return to_load_result(
                run_drill(
                    server.url,
                    PATH,
                    {"n": MAIN_N},
                    concurrency=min(concurrency, n),
                    requests=n,
                    client_cpus=env.client_cpus,
                    log_dir=log_part(run_dir / "logs", "load", "drill"),
                    timeout=plan["shape_s"] * 4,
                    drill=drill,
                )
            )

        m = measure(server.pid, run, client_cpus=env.client_cpus, alive=server.check_alive)
        env.record.many(
            measurement_rows(m),
            case="article_shape",
            implementation=target.name,
            variant=target.variant,
            driver="drill",
            repeat=repeat,
            client_bound=m.client_bound,
            params={**env.params, **target.params, "connections": concurrency, "requests": drill_requests},
        )


def test_counts(env):
    """Allocations per request with the system allocator and with mimalloc, each under the counting allocator
    (`counting`, `counting-native-mimalloc`; never timed): mimalloc makes allocations cheaper, not fewer.
    300 requests after 50 (each multiplies N = 120 matrices, ~ms): the counts do not depend on how many."""
    plan = CountPlan(requests=300, warmup=50, method="POST", body=body(MAIN_N).encode(), trace=False)
    for target in (t for t in TARGETS if t.variant in ("native", "native-mimalloc")):
        if target.key in env.fleet.servers:
            assert env.count(target, case="counts", plan=plan), env.problems
