"""`polyperf ab BASE HEAD SUITE --suites-dir DIR`, where SUITE is a Go package of the user's own (`native_bench`):
two revisions of the user's repository measured interleaved, repeat by repeat, until the gate decides, as `ab` does
for polyperf's microbenchmarks.

Each revision's package is taken with `git archive` from the repository the folder is in and built once with
`go test -c`. Every benchmark runs a fixed number of iterations (`-test.benchtime Nx`, N chosen on B so a run lasts
about `target_s`), each side of a pair in a fresh process, A and B back to back in a seeded balanced order (AB BA).
Each Benchmark function is one series (its sub-benchmarks run in the same process, the last one's result counts).
The gated value is the process's CPU time per iteration (`cpu_seconds`, the metric ab gates for microbenchmarks:
other processes only ever add to wall time); Go's own ns/op is recorded beside it, not gated. The verdicts are
`analyse.ab.evaluate_pairs`' confidence sequences.
"""

from __future__ import annotations

import io
import random
import resource
import subprocess
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from polyperf.analyse.ab import GATED_METRICS, evaluate_pairs, overall, to_markdown
from polyperf.common import procs
from polyperf.common.atomic import write_text_atomic
from polyperf.common.tools import require_tool
from polyperf.gate.micro import orders as _orders
from polyperf.gate.options import ABOptions, ABOutcome
from polyperf.gate.session import _summary
from polyperf.measure.microbench import parse_go_bench
from polyperf.orchestrate.native_bench import NativeSuiteFailed, label_of, native_kind
from polyperf.record.run import Run
from polyperf.record.schema import Row

__all__ = ["run_ab_native"]


def _git(repo: Path, *args: str) -> bytes:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, timeout=120, check=False)
    if done.returncode != 0:
        raise ValueError(f"git {' '.join(args)} in {repo}: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def _build(repo: Path, rev: str, package: Path, into: Path) -> tuple[Path, str]:
    """`rev`'s tree of the repository, its package built as a test binary: (binary, commit)."""
    commit = _git(repo, "rev-parse", "--verify", f"{rev}^{{commit}}").decode().strip()
    tree = into / commit[:12]
    if not tree.exists():
        with tarfile.open(fileobj=io.BytesIO(_git(repo, "archive", "--format=tar", commit))) as archive:
            archive.extractall(tree, filter="data")
    binary = tree / "polyperf-ab.test"
    log = into / f"build-{commit[:12]}.log"
    code = procs.run(["go", "test", "-c", "-o", str(binary), "."], log_path=log, cwd=tree / package, timeout=1800)
    if code != 0:
        raise NativeSuiteFailed(f"`go test -c` of {rev} ({commit[:12]}) failed (log {log})")
    return binary, commit


def _bench(binary: Path, name: str, benchtime: str, log: Path) -> tuple[float, int, float]:
    """(CPU seconds of the process, iterations, Go's seconds per op) of one benchmark in a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    cmd = [str(binary), "-test.run", "^$", "-test.bench", f"^{name}$", "-test.benchtime", benchtime, "-test.count", "1"]
    log.unlink(missing_ok=True)
    code = procs.run(cmd, log_path=log, cwd=binary.parent, timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    lines = parse_go_bench(log.read_text(encoding="utf-8", errors="replace"))
    if code != 0 or not lines:
        raise NativeSuiteFailed(f"`{' '.join(cmd)}` gave no benchmark result (log {log})")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, lines[-1].iterations, lines[-1].seconds_per_op


# what ab's table says of its own microbenchmarks, and what was measured here instead
_MICRO_WORDS = "Microbenchmarks: the least CPU time of a call in a fresh worker process, one value per process."
_GO_WORDS = (
    "Go benchmarks: the CPU time of a fresh `go test` process running each Benchmark function a fixed number of "
    "iterations ({counts}), per iteration, one value per process (process start included, alike on both sides)."
)
_STOPS = {"slower": "regression decided", "inconsistent": "a series inconsistent"}


@dataclass(frozen=True)
class _Measure:
    suite: str
    names: list[str]
    counts: dict[str, int]
    binaries: dict[str, Path]
    logs: Path

    def pair(self, repeat: int, order: tuple[str, str]) -> list[Row]:
        """One repeat: each side's every benchmark in a fresh process, the sides in `order`."""
        rows = []
        for slot, side in enumerate(order):
            for name in self.names:
                cpu, n, per_op = _bench(self.binaries[side], name, f"{self.counts[name]}x", self.logs / f"{side}.log")
                label = label_of(self.suite, name.removeprefix("Benchmark"))
                where = (self.suite, label["case"], label["implementation"], side)
                params = {"slot": slot, "iterations": n}
                rows.append(Row(*where, "cpu_seconds", cpu / n, "s", repeat, params))
                rows.append(Row(*where, "seconds", per_op, "s", repeat, params))
        return rows


def _check(options: ABOptions) -> None:
    if not 0 < options.alpha < 1:
        raise ValueError(f"--alpha must lie in (0, 1), got {options.alpha}")
    if not (options.threshold >= 0 and options.threshold < float("inf")):
        raise ValueError(f"the threshold must be finite and >= 0, got {options.threshold}")
    if not (options.budget > 0 and options.max_pairs >= 1):
        raise ValueError("the budget and the pair limit must be positive")


def run_ab_native(options: ABOptions, folder: Path) -> ABOutcome:
    """Builds both revisions of the Go package in `folder`, measures them pair by pair into a new run folder, and
    judges (see the module doc); `options.suites` names the one suite, the folder's name."""
    _check(options)
    require_tool("go")
    folder = Path(folder).resolve()
    if native_kind(folder) != "go":
        raise ValueError(f"{folder}: ab measures a suite of your own when it is a Go package (go.mod, *_test.go)")
    repo = Path(_git(folder, "rev-parse", "--show-toplevel").decode().strip())
    suite = folder.name
    seed = options.seed if options.seed is not None else random.SystemRandom().randrange(2**31)
    with Run.create(Path(options.out).resolve(), latest=True, profile="ab", suites=[suite]) as run:
        return _session(options, run, folder, repo, suite, seed)


def _session(options: ABOptions, run: Run, folder: Path, repo: Path, suite: str, seed: int) -> ABOutcome:
    run_dir = run.run_dir
    builds = run_dir / "logs" / "benches" / suite
    builds.mkdir(parents=True, exist_ok=True)
    package = folder.relative_to(repo)
    (a, commit_a), (b, commit_b) = (_build(repo, rev, package, builds) for rev in (options.base, options.head))
    listing = builds / "list.log"
    procs.run([str(b), "-test.list", "^Benchmark"], log_path=listing, cwd=b.parent, timeout=120)
    names = [n.strip() for n in listing.read_text().splitlines() if n.strip().startswith("Benchmark")]
    if not names:
        raise NativeSuiteFailed(f"{folder}: no Benchmark functions at {options.head}")
    # iterations per process, chosen once on B: every later process of either side runs exactly as many
    counts = {n: max(1, _bench(b, n, f"{options.target_s}s", builds / "calibrate.log")[1]) for n in names}
    sides = {"A": {"name": options.base, "commit": commit_a}, "B": {"name": options.head, "commit": commit_b}}
    run.update_env(ab={"sides": sides, "seed": seed, "iterations": counts})
    measure = _Measure(suite, names, counts, {"A": a, "B": b}, builds)
    table, frames, stop, started = pd.DataFrame(), [], "pair limit", time.monotonic()
    writer, orders = run.writer, _orders(seed)
    try:
        for repeat in range(options.max_pairs):
            pair = measure.pair(repeat, next(orders))
            writer.write(pair)  # whole pairs only
            frames.append(pd.DataFrame([r.__dict__ for r in pair if r.metric in GATED_METRICS]))
            rows = pd.concat(frames, ignore_index=True)
            table = evaluate_pairs(rows, alpha=options.alpha, threshold=options.threshold)
            verdict = overall(table)
            if len(frames) >= options.min_pairs and verdict != "undecided":
                stop = _STOPS.get(verdict, "every series decided")
                break
            if time.monotonic() - started > options.budget:
                stop = "budget"
                break
    except KeyboardInterrupt:
        stop = "interrupted"  # the pairs measured so far are judged and kept
    elapsed = time.monotonic() - started
    verdict = overall(table) if len(table) else "undecided"
    header = {
        "base": f"`{options.base}` {commit_a[:12]}",
        "head": f"`{options.head}` {commit_b[:12]}",
        "seed": seed,
        "pairs": len(frames),
        "elapsed_s": elapsed,
        "stopped": stop,
        # no stored sequence here (the gate's stored sequences key polyperf's own revisions): a rerun starts afresh
        "summary": _summary(verdict, table, options.threshold).replace(" (a rerun continues this sequence)", ""),
    }
    markdown = to_markdown(table, header).replace(_MICRO_WORDS, _GO_WORDS.format(counts=counts))
    write_text_atomic(run_dir / "ab.md", markdown)
    write_text_atomic(run_dir / "ab.json", table.to_json(orient="records", indent=1))
    return ABOutcome(run_dir, table, verdict, markdown, len(frames), elapsed, stop == "interrupted")
