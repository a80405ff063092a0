"""The microbenchmarks' side of `polyperf ab`, in the session's process: one fresh worker process (`gate.worker`)
per side and repeat, loading that revision's extension; the seeded AB/BA order of the sides; the rows of a result.
The bank (`gate.bank`) records with the same functions."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from polyperf.build.revisions import Revision, RevisionError
from polyperf.common import procs
from polyperf.orchestrate.retry import RepeatFailed
from polyperf.record.schema import Row

__all__ = ["WORKER_TIMEOUT_S", "micro_rows", "orders", "run_worker"]

WORKER_TIMEOUT_S = 120.0  # one side of one repeat; a hung worker stops the session instead of stalling it


def run_worker(rev: Revision, spec: dict[str, Any], env_extra: Mapping[str, str], log: Path) -> dict[str, Any]:
    """Runs one worker process (its own process group, stopped with this one) and returns its result."""
    env = {**os.environ, **env_extra, "PYTHONHASHSEED": "0"}
    result = log.with_name("worker-result.json")
    result.unlink(missing_ok=True)
    payload = json.dumps({**spec, "extension": str(rev.extension), "result": str(result)})
    proc = procs.spawn([sys.executable, "-m", "polyperf.gate.worker", payload], log_path=log, env=env)
    try:
        code = proc.wait(timeout=WORKER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        procs.stop(proc, grace=2.0)
        # a machine too busy for one process is a failure of the moment: the session tries the repeat again
        raise RepeatFailed(
            f"the worker of {rev.name} ({rev.commit[:12]}) had not finished after {WORKER_TIMEOUT_S:.0f} s (see {log})",
            kind="worker did not finish",
            where=f"worker of {rev.name}",
        ) from None
    finally:
        procs.stop(proc, grace=2.0)  # forgets it (already stopped in the usual case)
    if code != 0 or not result.exists():
        last = (log.read_text(encoding="utf-8", errors="replace").strip().splitlines() or ["no output"])[-1]
        # e.g. an old revision whose extension lacks a measured function: this pair of revisions cannot be judged
        raise RevisionError(f"the worker of {rev.name} ({rev.commit[:12]}) failed: {last} (see {log})")
    return json.loads(result.read_text(encoding="utf-8"))


def orders(seed: int) -> Iterator[tuple[str, str]]:
    """Balanced blocks: each block of two repeats holds AB and BA, in a random order."""
    rng = random.Random(seed)
    while True:
        block = [("A", "B"), ("B", "A")]
        rng.shuffle(block)
        yield from block


def micro_rows(result: dict[str, Any], side: str, repeat: int, slot: int) -> list[Row]:
    return [
        Row(suite, case, "polyperf._native", side, metric, float(values[metric]), "s", repeat, {"slot": slot})
        for suite, cases in result.items()
        for case, values in cases.items()
        for metric in ("cpu_seconds", "seconds")
    ]
