"""The Tokio scheduler microbenchmarks of "Making the Tokio scheduler 10x faster" (2019), old vs new, with Go
beside them: spawn_many, yield_many, ping_pong and chained_spawn, as Tokio defines them today.

- new: Tokio's multi-thread runtime (workers = the CPUs this run may use) and its current-thread runtime
  (`rust_apps/sched_bench`, criterion);
- old: the pre-2019 work-stealing pool itself, tokio-threadpool 0.1.18 under tokio 0.1.22
  (`rust_apps/sched_bench_old`, its own lock file, criterion);
- Go: the same shapes with goroutines and channels (`go test -bench`) at GOMAXPROCS = those CPUs and 1.

No load generator runs beside a microbenchmark, so it may use every CPU of the run (recorded in params).
The three are interleaved round by round (new, old, Go, new, old, Go …), so drift of a shared machine
hits all of them alike. Each criterion sample (time per iteration) is a row, with the round as its repeat; so
is each Go result line. Verdicts and reports count rounds, not samples: samples of one round are not
independent.
"""

from __future__ import annotations

import os

import pytest

from polyperf.common.cpus import cpu_label
from polyperf.common.paths import GO_APPS, RUST_APPS
from polyperf.common.repeats import repeat_numbers
from polyperf.common.tools import require_tool
from polyperf.measure.microbench import parse_go_bench
from polyperf.orchestrate.native_bench import (
    NativeSuiteFailed,
    cargo_bench,
    go_test,
    record_criterion,
    record_go_lines,
)
from polyperf.record.env import add_note

OLD_CRATE = RUST_APPS / "sched_bench_old"
SHAPES = {
    "SpawnMany": "spawn_many",
    "YieldMany": "yield_many",
    "PingPong": "ping_pong",
    "ChainedSpawn": "chained_spawn",
}


@pytest.fixture(scope="module")
def plan(profile):
    return {
        # The rounds are the independent repeats (criterion's samples inside one round share its machine state
        # and are summarised to one value per round). Old and new run in the same round, so old/new is a ratio of
        # pairs joined by round, whose 95% interval needs 6 rounds and whose sign test needs 12 for a p-value
        # (0.0005) well below the family's cut-off: quick spends its time on rounds rather than on longer criterion
        # windows (half those of 6 rounds, the same time in all).
        "rounds": profile.pick(smoke=1, quick=12, full=12),
        "criterion": profile.pick(
            smoke=["--warm-up-time", "0.2", "--measurement-time", "0.5", "--sample-size", "10"],
            quick=["--warm-up-time", "0.05", "--measurement-time", "0.15", "--sample-size", "10"],
            full=["--warm-up-time", "3", "--measurement-time", "10", "--sample-size", "50"],
        ),
        "go_benchtime": profile.pick(smoke="100ms", quick="150ms", full="2s"),
    }


@pytest.fixture(scope="module")
def cpus():
    return sorted(os.sched_getaffinity(0))


def _cargo_bench(cwd, bench, criterion_home, args, log, workers, *, no_run=False):
    env = {"POLYPERF_WORKERS": str(workers)}
    cargo_bench(cwd, criterion_home, args, log, bench=bench, env=env, no_run=no_run)


@pytest.fixture(scope="module")
def old_build(run_dir, cpus):
    """None when the 2019 thread pool builds here, else why not (the report and claims say so)."""
    require_tool("cargo")
    try:
        _cargo_bench(
            OLD_CRATE,
            "old_scheduler",
            run_dir / "criterion",
            [],
            run_dir / "logs" / "sched-old-build.log",
            len(cpus),
            no_run=True,
        )
    except NativeSuiteFailed as exc:
        return str(exc)
    return None


def _record_criterion(record, folder, *, implementation, repeat, params):
    def label(estimate):
        return {"case": estimate.function, "implementation": implementation, "variant": estimate.group}

    return record_criterion(record, folder, label=label, repeat=repeat, params=params)


def test_scheduler_rounds(record, run_dir, plan, cpus, old_build):
    """Round by round: new Tokio (both runtimes), the old thread pool, Go at two GOMAXPROCS values."""
    require_tool("go")
    workers = len(cpus)
    params = {"cpus": cpu_label(cpus), "workers": workers}
    logs = run_dir / "logs"
    _cargo_bench(RUST_APPS, "scheduler", run_dir / "criterion", [], logs / "sched-new-build.log", workers, no_run=True)
    for rnd in repeat_numbers(plan["rounds"]):  # a top-up measures new repeats only
        home = run_dir / "criterion" / f"round-{rnd}"
        _cargo_bench(RUST_APPS, "scheduler", home / "new", plan["criterion"], logs / f"sched-new-{rnd}.log", workers)
        new = _record_criterion(record, home / "new", implementation="tokio", repeat=rnd, params=params)
        assert {e.group for e in new} == {"multi_thread", "current_thread"}
        if old_build is None:
            _cargo_bench(
                OLD_CRATE,
                "old_scheduler",
                home / "old",
                [*plan["criterion"], "old_threadpool/"],
                logs / f"sched-old-{rnd}.log",
                workers,
            )
            _record_criterion(record, home / "old", implementation="tokio 0.1", repeat=rnd, params=params)
        go_log = logs / f"sched-go-{rnd}.log"
        gomaxprocs = sorted({workers, 1}, reverse=True)
        go_test(
            [
                "go",
                "test",
                "-run",
                "^$",
                "-bench",
                ".",
                "-benchmem",
                "-benchtime",
                plan["go_benchtime"],
                "-count",
                "1",
                "-cpu",
                ",".join(map(str, gomaxprocs)),
                "./internal/schedbench",
            ],
            cwd=GO_APPS,
            log=go_log,
        )
        lines = [line for line in parse_go_bench(go_log.read_text()) if line.name in SHAPES]
        assert len(lines) == len(SHAPES) * len(gomaxprocs), go_log.read_text()[-2000:]
        record_go_lines(
            record,
            lines,
            label=lambda line: {
                "case": SHAPES[line.name],
                "implementation": "go",
                "variant": f"gomaxprocs={line.procs}",
            },
            repeat=rnd,
            params=params,
        )
    if old_build is not None:
        add_note(run_dir, f"scheduler: the old tokio 0.1 thread pool did not build here: {old_build}")
        pytest.xfail(f"tokio 0.1's thread pool did not build here, so old vs new is not measured: {old_build}")
