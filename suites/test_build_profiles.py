"""Compiler and allocator settings under load (the actix-web matrix multiplication article): actix_matrix in
five variants — dev ('D'), plain release, release-lto ('R': lto, codegen-units=1, panic=abort, strip),
native ('ROpt': + target-cpu=native) and native-mimalloc ('ROptMimAlloc') — measured for what each setting
costs (clean build time in a target directory of its own, binary size) and what it buys under load
(throughput, latency, server CPU per request).

`POST /matrix-multiplication {"n": 120}`: N chosen so that one request costs about a millisecond of server CPU
in release on a current x86 core (N = 128 is avoided: a power-of-two stride costs ~3x more in cache misses).
Loads, variants interleaved repeat by repeat: oha closed at 64 connections for a time (`ceiling`), and the
article's client shape — many concurrent clients and a fixed request count (`article_shape`, drill in the
article; oha here, drill too when installed: `cargo install drill@0.9.1 --locked`). Each variant is proven
different from the binary (debug info, instruction set, allocator symbols), not from its name.
"""

from __future__ import annotations

import json

import pytest

from polyperf.build import build, get_app
from polyperf.build.variant_proof import variant_facts
from polyperf.errors import PolyperfError
from polyperf.load.drill_driver import ensure_drill, run_drill, to_load_result
from polyperf.measure.sampler import measure
from polyperf.record.count_runs import CountPlan
from polyperf.record.env import add_note
from polyperf.record.rows import build_rows, measurement_rows
from polyperf.serve.fleet import Fleet, Target

VARIANTS = ("dev", "release", "release-lto", "native", "native-mimalloc")
N = 120
BODY = json.dumps({"n": N})
PATH = "/matrix-multiplication"
TARGETS = [Target(f"actix_matrix:{v}", PATH, v, params={"n": N}) for v in VARIANTS]


@pytest.fixture(scope="module")
def plan(profile):
    return {
        "repeats": profile.pick(smoke=1, quick=3, full=5),
        "ceiling_s": profile.pick(smoke=1.0, quick=1.5, full=5.0),
        "shape_repeats": profile.pick(smoke=1, quick=2, full=3),
        # the article: 500 concurrent clients, 50,000 and 100,000 requests; bounded in time for the dev build
        "shape": profile.pick(smoke=[(50, 300)], quick=[(500, 2_000)], full=[(500, 50_000), (500, 100_000)]),
        "shape_s": profile.pick(smoke=5.0, quick=10.0, full=150.0),
        "drill": profile.pick(smoke=False, quick=True, full=True),
    }


@pytest.fixture(scope="module")
def builds(run_dir, record):
    """Every variant built (clean, in its own target directory, unless cached); its cost recorded."""
    results = {}
    for target in TARGETS:
        result = build(target.app, log_dir=run_dir / "logs")
        results[target.variant] = result
        record.many(build_rows(result), case="build", implementation="actix_matrix", variant=target.variant)
    return results


@pytest.fixture(scope="module")
def fleet(builds, load_options, run_dir):
    with Fleet(TARGETS, log_dir=run_dir / "logs", **load_options.fleet) as fleet:
        yield fleet


def test_variants_really_differ(builds, record):
    """From the binaries: dev is a debug build; R strips its symbols; native uses AVX/BMI2 that the
    generic build does not; only native-mimalloc links mimalloc."""
    facts = {v: variant_facts(get_app(f"actix_matrix:{v}")[0].binary(v)) for v in VARIANTS}
    for variant, f in facts.items():
        common = {"case": "binary", "implementation": "actix_matrix", "variant": variant}
        record("vex_instruction_share", f.instructions.vex_share, "ratio", **common)
        record("links_mimalloc", float(f.mimalloc), "count", **common)
        record("debug_info", float(f.debug_info), "count", **common)
    assert facts["dev"].debug_build and not facts["release"].debug_build
    assert not facts["release"].stripped and facts["release-lto"].stripped  # strip = true is one of R's settings
    generic, native = facts["release-lto"].instructions, facts["native"].instructions
    assert native.vex_share >= 3 * max(generic.vex_share, 1e-6), (native, generic)
    assert [v for v, f in facts.items() if f.mimalloc] == ["native-mimalloc"]


def test_ceiling(env, plan):
    for repeat, target in env.interleave(plan["repeats"]):
        m = env.oha(
            target, case="ceiling", repeat=repeat, duration=plan["ceiling_s"], connections=64, method="POST", body=BODY
        )
        if m is not None:
            assert m.load.successes > 0 and m.load.failures == 0, m.load


def test_article_shape(env, plan):
    """Many concurrent clients, a fixed request count (bounded in time too: the dev build is slow)."""
    for concurrency, requests in plan["shape"]:
        for repeat, target in env.interleave(plan["shape_repeats"]):
            env.oha(
                target,
                case="article_shape",
                repeat=repeat,
                duration=plan["shape_s"],
                connections=concurrency,
                max_requests=requests,
                method="POST",
                body=BODY,
                params={"requests": requests},
            )


def test_article_shape_drill(env, plan, fleet, run_dir):
    """The article's own client, drill, where it is installed (it takes minutes to build from crates.io)."""
    if not plan["drill"]:
        pytest.skip("drill runs in the quick and full profiles")
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
                    {"n": N},
                    concurrency=min(concurrency, n),
                    requests=n,
                    client_cpus=env.client_cpus,
                    log_dir=run_dir / "logs",
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
