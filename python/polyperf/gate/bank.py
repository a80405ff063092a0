"""Records A/A pairs exactly as `polyperf ab` measures them, for the gate's replayed calibration
(`gate.calibrate`, `analyse.ab_replay`). It sits in the gate beside the session, whose measuring functions it
calls: one revision on both sides, `gate.micro.run_worker` for the microbenchmarks' fresh worker processes,
`ServerSides.measure` for the servers' duet, ab's seeded AB/BA blocks.

One CSV line per gated series and repeat, written and flushed as each repeat ends (a stopped recording keeps every
whole repeat): the family, the series, the repeat in time order, the order of the sides, A and B, and the wall time
the repeat took (one pair of every series of the family; the unit a gate session spends its budget in).

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
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from polyperf.analyse.ab import GATED_METRICS
from polyperf.build.revisions import Revision, RevisionError, prepare
from polyperf.gate.micro import orders, run_worker
from polyperf.gate.servers import ServerSides, apps_of
from polyperf.record.env import collect_cpu, collect_os
from polyperf.store.records import fingerprint

__all__ = ["COLUMNS", "FAMILIES", "machine", "record"]

FAMILIES = {"micro": ("io_buffering", "bson"), "servers": ("http_frameworks",)}
FAILURES_ALLOWED = 40  # failed repeats (a load generator that hung, a window with no requests) before it stops
COLUMNS = ["family", "suite", "series", "repeat", "order", "a", "b", "repeat_wall_s", "started_unix"]


def machine() -> dict[str, Any]:
    """The testbed as the history store keys it (`store.records.fingerprint`), with its parts."""
    env = {**collect_cpu(), **collect_os()}
    return {**env, "fingerprint": fingerprint(env)}


def _micro(rev: Revision, work: Path) -> Iterator[tuple[str, list[tuple[str, str, float, float]], float]]:
    """Yields (order, [(suite, series, A, B)], wall seconds) per repeat, as `ab.run_ab` measures microbenchmarks."""
    suites = list(FAMILIES["micro"])
    log = work / "logs" / "workers.log"
    spec: dict[str, Any] = {"suites": suites, "inputs": str(work / "inputs"), "target_s": 0.1}
    run_worker(rev, {**spec, "make_inputs": True}, {}, log)
    chosen = run_worker(rev, spec, {}, log)  # untimed: fixes each case's number of calls, as ab does
    spec["calls"] = {f"{s}/{c}": v["calls"] for s, cases in chosen.items() for c, v in cases.items()}
    sides_order = orders(int(time.time()))
    while True:
        order, started, values = next(sides_order), time.monotonic(), {}
        for side in order:
            values[side] = run_worker(rev, spec, {}, log)
        wall = time.monotonic() - started
        pairs = [
            (suite, case, values["A"][suite][case]["cpu_seconds"], values["B"][suite][case]["cpu_seconds"])
            for suite in suites
            for case in values["A"][suite]
        ]
        yield "".join(order), pairs, wall


def _servers(rev: Revision, work: Path) -> Iterator[tuple[str, list[tuple[str, str, float, float]], float]]:
    """Yields (order, [(suite, server, A, B)], wall seconds) per repeat, as `ab.run_ab` measures server suites:
    both sides started from the same binary."""
    revs = {"A": rev, "B": replace(rev)}
    sides_order = orders(int(time.time()))
    with ServerSides(list(FAMILIES["servers"]), revs, log_dir=work / "logs") as servers:
        for repeat in itertools.count():  # the caller stops
            order, started = next(sides_order), time.monotonic()
            try:
                rows = servers.measure(repeat, order)
            except RevisionError as exc:  # ab's session would stop here; the bank notes it and goes on
                print(f"repeat {repeat} failed after {time.monotonic() - started:.1f} s: {exc}", flush=True)
                yield "".join(order), [], time.monotonic() - started
                continue
            wall = time.monotonic() - started
            gated = {(r.suite, r.implementation, r.variant): r.value for r in rows if r.metric in GATED_METRICS}
            keys = dict.fromkeys((s, i) for s, i, _v in gated)
            yield "".join(order), [(s, i, gated[s, i, "A"], gated[s, i, "B"]) for s, i in keys], wall


def record(family: str, out: Path, *, minutes: float, rev: Revision, work: Path, max_repeats: int | None = None) -> int:
    """Writes repeats of `family` to a new file `out` (CSV, `COLUMNS`) until `minutes` have passed; returns how many."""
    measure = _micro if family == "micro" else _servers
    out.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + minutes * 60
    repeats = failed = 0
    with out.open("x", newline="", encoding="utf-8") as handle:  # a fresh file: repeats count from 0
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        gen = measure(rev, work)
        with contextlib.closing(gen):
            for order, pairs, wall in gen:
                now = time.time()
                if not pairs:  # a failed repeat: no pair, and the next repeat keeps the time order
                    failed += 1
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
    parser.add_argument("--work", type=Path, default=None, help="inputs and logs (default: a new temporary folder)")
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
    work = args.work or Path(tempfile.mkdtemp(prefix="polyperf-ab-bank-"))
    # the load average says how busy the machine was: the bank's noise is that state's noise
    meta = {"family": args.family, "revision": rev.commit, "machine": machine(), "started_unix": time.time()}
    meta["load_average_1min_at_start"] = os.getloadavg()[0]
    meta_path = args.out.with_suffix(".meta.json")
    meta_path.write_text(json.dumps(meta, indent=1), encoding="utf-8")
    count = record(args.family, args.out, minutes=args.minutes, rev=rev, work=work, max_repeats=args.max_repeats)
    meta |= {"ended_unix": time.time(), "load_average_1min_at_end": os.getloadavg()[0], "repeats": count}
    meta_path.write_text(json.dumps(meta, indent=1), encoding="utf-8")
    print(f"{count} repeats of {args.family} written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
