"""Microbenchmark repeats in fresh worker processes, as pyperf does: each repeat is a new Python process, so an
interval carries the spread from one process to the next (code layout, allocator, CPU frequency), not only the
spread inside one. The sides of a comparison run in the same worker, with the same warm-up, in an order drawn
anew each round from a seed, so they pair by process.

The first worker calibrates: its warm-up calls choose each side's loop count (`iterations`, so that a round lasts
at least `min_round_s`), and every later worker uses the same counts. Rounds inside one worker are samples of its
repeat. Each round is timed with pytest-benchmark's own timer (`pytest_benchmark.timers.default_timer`, i.e.
`time.perf_counter`) and this thread's CPU time, and divided by its loop count, as pytest-benchmark does.

`python -m polyperf.orchestrate.workers JOB RESULT` is the worker: it reads a pickled `Job`, writes pickled
samples. Callables are pickled by reference, so they must live in importable modules (the worker gets the
parent's `sys.path`, so a suite's own module-level functions qualify).
"""

from __future__ import annotations

import gc
import math
import os
import pickle
import random
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polyperf.common import procs
from polyperf.common.logs import log_tail
from polyperf.common.repeats import repeat_numbers
from polyperf.errors import PolyperfError

__all__ = ["Job", "Plan", "Sample", "Side", "run_job", "run_workers"]

MAX_ITERATIONS = 10_000


@dataclass(frozen=True)
class Side:
    """One thing to time: `call(*args)`, named `name` (unique within a comparison)."""

    name: str
    call: Callable[..., Any]
    args: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Plan:
    """How many worker processes (the repeats), timed rounds and warm-up calls per side in each, the least
    duration of a round (loop counts are calibrated to it), and the seed of the orders."""

    processes: int
    rounds: int = 1
    warmup: int = 1
    min_round_s: float = 0.0
    seed: int = 0
    timeout_s: float = 600.0  # per worker process

    def __post_init__(self) -> None:
        if self.processes < 1 or self.rounds < 1 or self.warmup < 0:
            raise ValueError(f"a worker plan needs processes >= 1, rounds >= 1, warmup >= 0: {self}")


@dataclass(frozen=True)
class Sample:
    """One timed round of one side in one worker process (per iteration: the round divided by its loops)."""

    side: str
    process: int  # the repeat: one fresh process each
    round: int
    slot: int  # the side's place in this round's random order
    iterations: int
    seconds: float  # wall time per iteration (pytest-benchmark's default timer)
    cpu_seconds: float  # this thread's CPU time per iteration


@dataclass(frozen=True)
class Job:
    """What one worker process does (pickled to it)."""

    sides: tuple[Side, ...]
    process: int
    plan: Plan
    iterations: dict[str, int] | None = None  # None: calibrate from the warm-up (the first worker)


def _order(sides: Sequence[Side], seed: int, process: int, label: str) -> list[Side]:
    order = list(sides)
    random.Random(f"{seed}:{process}:{label}").shuffle(order)
    return order


def _timed(side: Side, loops: int) -> tuple[float, float]:
    """(wall, thread CPU) seconds of `loops` calls, after an untimed collection (every round starts from empty
    GC generations, so each pays exactly the collections its own allocations trigger)."""
    from pytest_benchmark.timers import default_timer

    gc.collect()
    cpu_start, start = time.thread_time_ns(), default_timer()
    for _ in range(loops):
        side.call(*side.args)
    return default_timer() - start, (time.thread_time_ns() - cpu_start) / 1e9


def _calibrated(warm: dict[str, float], plan: Plan) -> dict[str, int]:
    """Loops per round so that one round lasts at least `min_round_s` (from the slowest warm-up call)."""
    out = {}
    for name, seconds in warm.items():
        need = math.ceil(plan.min_round_s / seconds) if seconds > 0 else MAX_ITERATIONS
        out[name] = max(1, min(MAX_ITERATIONS, need))
    return out


def run_job(job: Job) -> tuple[dict[str, int], list[Sample]]:
    """The worker's body (also callable in-process, for tests): warm-up, calibration if asked, timed rounds."""
    gc.collect()
    gc.freeze()  # the start-up heap (imports, the job's data) is out of the collector's sight
    plan, warm = job.plan, {side.name: 0.0 for side in job.sides}
    for step in range(plan.warmup):
        for side in _order(job.sides, plan.seed, job.process, f"warmup{step}"):
            warm[side.name] = max(warm[side.name], _timed(side, 1)[0])
    iterations = job.iterations or (_calibrated(warm, plan) if plan.warmup else dict.fromkeys(warm, 1))
    samples = []
    for rnd in range(plan.rounds):
        for slot, side in enumerate(_order(job.sides, plan.seed, job.process, f"round{rnd}")):
            loops = iterations[side.name]
            wall, cpu = _timed(side, loops)
            samples.append(Sample(side.name, job.process, rnd, slot, loops, wall / loops, cpu / loops))
    return iterations, samples


def _spawn_one(job: Job, folder: Path, log_path: Path) -> tuple[dict[str, int], list[Sample]]:
    job_path, result_path = folder / f"job-{job.process}.pickle", folder / f"result-{job.process}.pickle"
    job_path.write_bytes(pickle.dumps(job))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    cmd = [sys.executable, "-m", "polyperf.orchestrate.workers", str(job_path), str(result_path)]
    proc = procs.spawn(cmd, log_path=log_path, env=env)
    try:
        code = proc.wait(timeout=job.plan.timeout_s)
    except BaseException:
        procs.stop(proc, grace=2.0)
        raise
    procs.stop(proc, grace=2.0)
    if code != 0 or not result_path.exists():
        raise PolyperfError(f"benchmark worker {job.process} exited {code}: {log_tail(log_path, 4)} (log {log_path})")
    return pickle.loads(result_path.read_bytes())


def run_workers(sides: Sequence[Side], plan: Plan, *, log_path: Path) -> list[Sample]:
    """Every side timed in `plan.processes` fresh worker processes, one after another (see the module doc);
    the first calibrates the loop counts for all. Raises PolyperfError naming the worker and its log."""
    names = [side.name for side in sides]
    if len(set(names)) != len(names):
        raise ValueError(f"side names must be unique: {names}")
    samples: list[Sample] = []
    iterations: dict[str, int] | None = None
    with tempfile.TemporaryDirectory(prefix="polyperf-workers-") as tmp:
        for process in repeat_numbers(plan.processes):  # a top-up's own repeat numbers (`common.repeats`)
            job = Job(tuple(sides), process, plan, iterations)
            iterations, got = _spawn_one(job, Path(tmp), log_path)
            samples.extend(got)
    return samples


def main(argv: Sequence[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m polyperf.orchestrate.workers JOB RESULT", file=sys.stderr)
        return 2
    # run as __main__: the samples must be this module's classes under its importable name
    from polyperf.orchestrate import workers

    job = pickle.loads(Path(argv[0]).read_bytes())
    Path(argv[1]).write_bytes(pickle.dumps(workers.run_job(job)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
