"""Records A/A pairs exactly as `polyperf ab` measures them, for the gate's replayed calibration
(`gate.calibrate`, `analyse.ab_replay`). It sits in the gate beside the session, whose measuring functions it
calls: one revision on both sides, `gate.micro.run_worker` for the microbenchmarks' fresh worker processes,
`ServerSides.measure` for the servers' duet, ab's seeded AB/BA blocks.

One CSV line per gated series and repeat, written and flushed as each repeat ends (a stopped recording keeps every
whole repeat): the family, the series, the repeat in time order, the order of the sides, A and B, and the wall time
the repeat took (one pair of every series of the family; the unit a gate session spends its budget in). A repeat
that fails is not retried here: its failure goes into the recording's meta file where it happened (before which
repeat, its seconds, its kind and text), so that the replay meets it in place and retries it as `ab` would. The
recording's logs and inputs are a run folder of its own (`Run`, under `--runs`).

    python -m polyperf.gate.bank micro OUT.csv --minutes 20 [--revision HEAD] [--extension FOLDER]
    python -m polyperf.gate.bank servers OUT.csv --minutes 75
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import itertools
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from polyperf.analyse.ab import GATED_METRICS
from polyperf.build.revisions import Revision, RevisionError, prepare
from polyperf.common.atomic import write_text_atomic
from polyperf.gate.calibrate import meta_path
from polyperf.gate.micro import orders, run_worker
from polyperf.gate.servers import ServerSides, apps_of
from polyperf.orchestrate.retry import RepeatFailed
from polyperf.record.env import collect_cpu, collect_os
from polyperf.record.run import Run
from polyperf.store.records import fingerprint

__all__ = ["COLUMNS", "FAMILIES", "machine", "record"]

FAMILIES = {"micro": ("io_buffering", "bson"), "servers": ("http_frameworks",)}
FAILURES_ALLOWED = 40  # failed repeats (a load generator that hung, a window with no requests) before it stops
COLUMNS = ["family", "suite", "series", "repeat", "order", "a", "b", "repeat_wall_s", "started_unix"]


def machine() -> dict[str, Any]:
    """The testbed as the history store keys it (`store.records.fingerprint`), with its parts."""
    env = {**collect_cpu(), **collect_os()}
    return {**env, "fingerprint": fingerprint(env)}


Repeat = tuple[str, list[tuple[str, str, float, float]], float, RepeatFailed | None]


def _micro(rev: Revision, work: Path) -> Iterator[Repeat]:
    """Yields (order, [(suite, series, A, B)], wall seconds, None) per repeat, as the session measures
    microbenchmarks; a repeat whose worker did not finish yields (order, [], seconds, the failure)."""
    suites = list(FAMILIES["micro"])
    log = work / "logs" / "workers.log"
    spec: dict[str, Any] = {"suites": suites, "inputs": str(work / "inputs"), "target_s": 0.1}
    run_worker(rev, {**spec, "make_inputs": True}, {}, log)
    chosen = run_worker(rev, spec, {}, log)  # untimed: fixes each case's number of calls, as ab does
    spec["calls"] = {f"{s}/{c}": v["calls"] for s, cases in chosen.items() for c, v in cases.items()}
    sides_order = orders(int(time.time()))
    while True:
        order, started, values = next(sides_order), time.monotonic(), {}
        try:
            for side in order:
                values[side] = run_worker(rev, spec, {}, log)
        except RepeatFailed as exc:
            yield "".join(order), [], time.monotonic() - started, exc
            continue
        wall = time.monotonic() - started
        pairs = [
            (suite, case, values["A"][suite][case]["cpu_seconds"], values["B"][suite][case]["cpu_seconds"])
            for suite in suites
            for case in values["A"][suite]
        ]
        yield "".join(order), pairs, wall, None


def _servers(rev: Revision, work: Path) -> Iterator[Repeat]:
    """Yields (order, [(suite, server, A, B)], wall seconds, None) per repeat, as the session measures server
    suites, both sides started from the same binary; a failed repeat yields (order, [], seconds, the failure)."""
    revs = {"A": rev, "B": replace(rev)}
    sides_order = orders(int(time.time()))
    with ServerSides(list(FAMILIES["servers"]), revs, log_dir=work / "logs") as servers:
        for repeat in itertools.count():  # the caller stops
            order, started = next(sides_order), time.monotonic()
            try:
                rows = servers.measure(repeat, order)
            except RepeatFailed as exc:  # the session would retry it; the bank records it in place and goes on
                yield "".join(order), [], time.monotonic() - started, exc
                continue
            wall = time.monotonic() - started
            gated = {(r.suite, r.implementation, r.variant): r.value for r in rows if r.metric in GATED_METRICS}
            keys = dict.fromkeys((s, i) for s, i, _v in gated)
            yield "".join(order), [(s, i, gated[s, i, "A"], gated[s, i, "B"]) for s, i in keys], wall, None


def _add_failure(meta: Path, before_repeat: int, seconds: float, exc: RepeatFailed) -> None:
    """One failed attempt into the recording's meta file, before the repeat that will follow it."""
    print(f"repeat {before_repeat} failed after {seconds:.1f} s: {exc}", flush=True)
    found = json.loads(meta.read_text(encoding="utf-8")) if meta.exists() else {}
    entry = {"before_repeat": before_repeat, "seconds": round(seconds, 3), "kind": exc.kind, "text": str(exc)}
    found["failures"] = [*found.get("failures", []), entry]
    write_text_atomic(meta, json.dumps(found, indent=1))


def record(family: str, out: Path, *, minutes: float, rev: Revision, work: Path, max_repeats: int | None = None) -> int:
    """Writes repeats of `family` to a new file `out` (CSV, `COLUMNS`) until `minutes` have passed, and its failed
    attempts to its meta file; returns how many repeats."""
    measure = _micro if family == "micro" else _servers
    out.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + minutes * 60
    repeats = failed = 0
    with out.open("x", newline="", encoding="utf-8") as handle:  # a fresh file: repeats count from 0
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        gen = measure(rev, work)
        with contextlib.closing(gen):
            for order, pairs, wall, failure in gen:
                now = time.time()
                if failure is not None:  # a failed attempt: no pair, and the next repeat keeps the time order
                    failed += 1
                    _add_failure(meta_path(out), repeats, wall, failure)
                    if failed > FAILURES_ALLOWED:
                        raise RevisionError(f"{failed} repeats failed; the last is in the log above")
                    continue
                for suite, series, a, b in pairs:
                    writer.writerow(
                        [family, suite, series, repeats, order, repr(a), repr(b), f"{wall:.3f}", f"{now:.1f}"]
                    )
                handle.flush()
                repeats += 1
                if time.monotonic() > deadline or (max_repeats is not None and repeats >= max_repeats):
                    break
    return repeats


def _refusal(args: argparse.Namespace) -> str | None:
    if not args.minutes > 0:
        return f"--minutes must be > 0, got {args.minutes}"
    if args.max_repeats is not None and args.max_repeats < 1:
        return f"--max-repeats must be >= 1, got {args.max_repeats}"
    if args.out.exists():
        return f"{args.out} exists: a recording starts a new file (its repeats count from 0)"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m polyperf.gate.bank", description=__doc__)
    parser.add_argument("family", choices=sorted(FAMILIES))
    parser.add_argument("out", type=Path, help="the new CSV file")
    parser.add_argument("--minutes", type=float, required=True, help="record until this many minutes have passed")
    parser.add_argument("--max-repeats", type=int, default=None, help="or until this many repeats")
    parser.add_argument("--revision", default="HEAD", help="the one revision on both sides (default HEAD)")
    parser.add_argument("--runs", type=Path, default=Path("reports"), help="where its run folder goes (logs, inputs)")
    args = parser.parse_args(argv)
    if (why := _refusal(args)) is not None:
        print(f"polyperf gate.bank: {why}", file=sys.stderr)
        return 2
    micro = args.family == "micro"
    try:
        rev = prepare(args.revision, extension=micro, apps=[] if micro else apps_of(FAMILIES["servers"]))
    except RevisionError as exc:
        print(f"polyperf gate.bank: {exc}", file=sys.stderr)
        return 2
    # the load average says how busy the machine was: the bank's noise is that state's noise
    meta = {"family": args.family, "revision": rev.commit, "machine": machine(), "started_unix": time.time()}
    meta["load_average_1min_at_start"] = os.getloadavg()[0]
    meta_file = meta_path(args.out)
    write_text_atomic(meta_file, json.dumps(meta, indent=1))
    bank = {"family": args.family, "file": str(args.out.resolve()), "revision": rev.commit}
    with Run.create(args.runs.resolve(), profile="ab-bank", suites=list(FAMILIES[args.family]), bank=bank) as run:
        count = record(
            args.family, args.out, minutes=args.minutes, rev=rev, work=run.run_dir, max_repeats=args.max_repeats
        )
        meta = {**json.loads(meta_file.read_text(encoding="utf-8")), "ended_unix": time.time(), "repeats": count}
        meta["load_average_1min_at_end"] = os.getloadavg()[0]
        write_text_atomic(meta_file, json.dumps(meta, indent=1))
        run.update_env(bank={**bank, "repeats": count, "failed": len(meta.get("failures", []))})
        run.finish()
    print(f"{count} repeats of {args.family} written to {args.out} (logs in {run.run_dir})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
