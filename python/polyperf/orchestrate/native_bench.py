"""Go and Rust benchmarks as they are, measured as the built-in suites measure: a Go package with `Benchmark…`
functions or a Cargo crate with criterion benches is built once with go or cargo, then every repeat runs in fresh
processes, the sides in an order drawn anew each repeat from the run's seed, so they pair by repeat. The tools' own
machine-readable output is read (`measure.microbench`: Go's benchmark format, which benchstat reads; criterion's
estimates and samples), never their printed summaries. `suites/test_scheduler.py` records through the same functions.

How a benchmark's name becomes a row: Go's `BenchmarkParse/stdlib/small` and criterion's group `Parse`, function
`stdlib`, value `small` are case `Parse`, implementation `stdlib`, variant `small`; a name of one part
(`BenchmarkStdlib`, a bench_function "stdlib") is case = the suite, implementation = that part.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polyperf.common import procs, steps
from polyperf.common.logs import log_tail
from polyperf.common.paths import log_part
from polyperf.common.repeats import repeat_numbers
from polyperf.common.tools import require_tool
from polyperf.errors import PolyperfError
from polyperf.measure.microbench import CriterionEstimate, GoBenchLine, parse_go_bench, read_criterion
from polyperf.record.recorder import Recorder

__all__ = [
    "NativePlan",
    "NativeSuiteFailed",
    "cargo_bench",
    "go_test",
    "label_of",
    "native_kind",
    "record_criterion",
    "record_go_lines",
    "run_native_suite",
]

BUILD_TIMEOUT = 1800  # a cold criterion build takes minutes on 2 busy cores
RUN_TIMEOUT = 600
Label = Callable[[str, str, str | None], Mapping[str, str]]  # (suite, name parts...) -> case, implementation, variant


class NativeSuiteFailed(PolyperfError):
    """A build or a benchmark process of a Go or Cargo suite failed (the command, the log and its tail named)."""


def native_kind(folder: Path) -> str | None:
    """ "go" for a folder with go.mod and a `_test.go` file, "cargo" for one with Cargo.toml and a benches/ folder,
    else None (not a suite of this kind)."""
    folder = Path(folder)
    if (folder / "go.mod").is_file() and any(folder.glob("*_test.go")):
        return "go"
    if (folder / "Cargo.toml").is_file() and (folder / "benches").is_dir():
        return "cargo"
    return None


@dataclass(frozen=True)
class NativePlan:
    repeats: int
    seed: int
    go_benchtime: str = "100ms"
    criterion_args: tuple[str, ...] = ("--warm-up-time", "0.2", "--measurement-time", "0.5", "--sample-size", "10")


def _run(cmd: Sequence[str], *, cwd: Path, log: Path, env: Mapping[str, str] | None = None, timeout: float) -> None:
    code = procs.run(list(cmd), log_path=log, cwd=cwd, env={**os.environ, **(env or {})}, timeout=timeout)
    if code != 0:
        raise NativeSuiteFailed(f"`{' '.join(cmd)}` exited with {code} (log {log}): {log_tail(log, 6)}")


def go_test(cmd: Sequence[str], *, cwd: Path, log: Path) -> None:
    """A `go test ...` command to completion, its output in `log`; NativeSuiteFailed with the log's tail if it fails."""
    require_tool("go")
    _run(cmd, cwd=cwd, log=log, timeout=RUN_TIMEOUT)


def label_of(suite: str, name: str) -> dict[str, str]:
    """A benchmark's name split on "/" into case, implementation and variant (see the module doc)."""
    parts = [p for p in name.split("/") if p]
    if len(parts) == 1:
        return {"case": suite, "implementation": parts[0], "variant": ""}
    return {"case": parts[0], "implementation": parts[1], "variant": "/".join(parts[2:])}


def record_go_lines(
    record: Recorder,
    lines: Sequence[GoBenchLine],
    *,
    label: Callable[[GoBenchLine], Mapping[str, str]],
    repeat: int,
    params: Mapping[str, Any],
) -> None:
    """Each result line as `seconds` per op, and `bytes_per_op` / `allocs_per_op` where -benchmem gave them."""
    for line in lines:
        common = {**label(line), "repeat": repeat, "params": {**params, "iterations": line.iterations}}
        record("seconds", line.seconds_per_op, "s", **common)
        record("bytes_per_op", line.bytes_per_op or 0.0, "bytes", **common)
        record("allocs_per_op", line.allocs_per_op or 0.0, "count", **common)


def record_criterion(
    record: Recorder,
    folder: Path,
    *,
    label: Callable[[CriterionEstimate], Mapping[str, str]],
    repeat: int,
    params: Mapping[str, Any],
) -> list[CriterionEstimate]:
    """Every estimate under `folder` (a CRITERION_HOME): each sample's time per iteration a `seconds` row of this
    repeat (samples of one process are not independent: the verdicts take their median per repeat), and criterion's
    own estimate beside them."""
    found = read_criterion(folder)
    if not found:
        raise NativeSuiteFailed(f"criterion wrote no estimates under {folder}")
    for estimate in found:
        common = {**label(estimate), "repeat": repeat, "params": params}
        for i, seconds in enumerate(estimate.sample_s):
            record("seconds", seconds, "s", **{**common, "params": {**params, "sample": i, "round": repeat}})
        record("criterion_estimate_s", estimate.typical_s, "s", **common)
    return found


def cargo_bench(
    crate: Path,
    home: Path,
    args: Sequence[str],
    log: Path,
    *,
    bench: str | None = None,
    env: Mapping[str, str] | None = None,
    no_run: bool = False,
) -> None:
    """`cargo bench [--bench B]` in `crate`, criterion's files under `home`; `no_run` builds only (announced: a cold
    build of a criterion crate takes minutes)."""
    require_tool("cargo")
    locked = ["--locked"] if (Path(crate) / "Cargo.lock").is_file() else []
    target = ["--bench", bench] if bench else []
    cmd = ["cargo", "bench", *locked, *target, *(["--no-run"] if no_run else ["--", *args])]
    full_env = {"CRITERION_HOME": str(home), "CARGO_TERM_COLOR": "never", **(env or {})}
    if not no_run:
        _run(cmd, cwd=crate, log=log, env=full_env, timeout=RUN_TIMEOUT)
        return
    what = f"building the {bench or Path(crate).name} criterion benchmarks (cargo bench --no-run)"
    with steps.step(what, f"cargo bench {bench or Path(crate).name}", "about 4 min on 2 cores the first time"):
        _run(cmd, cwd=crate, log=log, env=full_env, timeout=BUILD_TIMEOUT)


def _go_suite(folder: Path, suite: str, record: Recorder, plan: NativePlan, logs: Path) -> None:
    require_tool("go")
    binary = logs / f"{suite}.test"
    _run(["go", "test", "-c", "-o", str(binary), "."], cwd=folder, log=logs / "build.log", timeout=BUILD_TIMEOUT)
    listing = logs / "list.log"
    _run([str(binary), "-test.list", "^Benchmark"], cwd=folder, log=listing, timeout=RUN_TIMEOUT)
    names = [n.strip() for n in listing.read_text().splitlines() if n.strip().startswith("Benchmark")]
    if not names:
        raise NativeSuiteFailed(f"{folder}: no Benchmark functions (go test -list ^Benchmark printed none)")
    rng = random.Random(f"{plan.seed}:{suite}")
    for repeat in repeat_numbers(plan.repeats):  # a top-up measures new repeats only
        order = rng.sample(names, len(names))
        for slot, name in enumerate(order):  # each side a fresh process, in this repeat's order
            out = logs / f"repeat-{repeat}-{name}.txt"
            cmd = [str(binary), "-test.run", "^$", "-test.bench", f"^{name}$", "-test.benchmem"]
            cmd += ["-test.benchtime", plan.go_benchtime, "-test.count", "1"]
            _run(cmd, cwd=folder, log=out, timeout=RUN_TIMEOUT)
            lines = parse_go_bench(out.read_text())
            if not lines:
                raise NativeSuiteFailed(f"`{' '.join(cmd)}` printed no benchmark result (log {out})")
            params = {"slot": slot, "benchtime": plan.go_benchtime}
            record_go_lines(record, lines, label=lambda line: label_of(suite, line.name), repeat=repeat, params=params)


def _cargo_suite(folder: Path, suite: str, record: Recorder, plan: NativePlan, logs: Path, home: Path) -> None:
    cargo_bench(folder, home / "build", [], logs / "build.log", no_run=True)
    for repeat in repeat_numbers(plan.repeats):  # one process per repeat, every bench of the crate in it
        where = home / f"repeat-{repeat}"
        cargo_bench(folder, where, plan.criterion_args, logs / f"repeat-{repeat}.log")

        def label(e: CriterionEstimate) -> dict[str, str]:
            return label_of(suite, "/".join(p for p in (e.group, e.function, e.value) if p))

        record_criterion(record, where, label=label, repeat=repeat, params={})


def run_native_suite(folder: Path, suite: str, record: Recorder, plan: NativePlan, run_dir: Path) -> str:
    """Builds and measures the Go package or Cargo crate in `folder` as suite `suite`; returns its kind."""
    kind = native_kind(folder)
    logs = log_part(run_dir / "logs", "benches", suite)
    if kind == "go":
        _go_suite(Path(folder).resolve(), suite, record, plan, logs)
    elif kind == "cargo":
        _cargo_suite(Path(folder).resolve(), suite, record, plan, logs, run_dir / "criterion" / suite)
    else:
        raise NativeSuiteFailed(f"{folder}: neither a Go package with tests (go.mod) nor a crate with benches/")
    return kind
