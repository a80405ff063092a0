"""Scale of the history store and of change detection (a benchmark that prints figures, not a test):

    python tests/history_scale.py [--runs 1000] [--series 1000] [--repeats 6] [--commits 500] [--store URL]

1. adds RUNS synthetic runs of SERIES series (REPEATS repeats each) to a fresh DuckDB file (or --store);
2. reads one series' history back (median of 20 queries);
3. finds change points over SERIES series x COMMITS commits (Otava, one process).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from polyperf.analyse.changepoints import series_changes
from polyperf.store import open_store
from polyperf.store.records import SERIES_KEY, RunRecord, points_of, series_id

MACHINE = "bench0000000"


def _series(count: int) -> pd.DataFrame:
    keys = pd.DataFrame(
        {
            "suite": "scale",
            "case": [f"case{i // 10}" for i in range(count)],
            "implementation": "impl",
            "variant": [f"v{i % 10}" for i in range(count)],
            "driver": "",
            "metric": "seconds",
            "unit": "s",
            "params": "{}",
        }
    )
    keys["series_id"] = [series_id(tuple(k)) for k in keys[SERIES_KEY].itertuples(index=False)]
    return keys


def _record(number: int, series: pd.DataFrame, repeats: int, rng: np.random.Generator, step_at: int) -> RunRecord:
    """Run `number`: every series at its level with 3% noise, 10% higher from run `step_at` on."""
    run_id = f"run{number:06d}"
    ids = np.repeat(series["series_id"].to_numpy(), repeats)
    level = np.repeat(np.linspace(1e-3, 1e-1, len(series)), repeats) * (1.1 if number >= step_at else 1.0)
    samples = pd.DataFrame(
        {
            "run_id": run_id,
            "series_id": ids,
            "repeat": np.tile(np.arange(repeats), len(series)),
            "value": level * rng.lognormal(0, 0.03, ids.size),
            "client_bound": False,
        }
    )
    points = points_of(samples)
    points.insert(0, "run_id", run_id)
    meta = {"run_id": run_id, "git_commit": f"{number:040x}", "commit_time": 1_700_000_000 + number * 60}
    meta.update(machine=MACHINE, cpu_model="bench", cores=2, kernel="k", cpu_budget="none", profile="smoke")
    return RunRecord(meta, series, samples, points)


def _load() -> str:
    """The machine's 1-minute load average: figures from a busy 2-core machine say so."""
    return f"{os.getloadavg()[0]:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--series", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--commits", type=int, default=500)
    parser.add_argument("--store", default=None, help="a postgresql:// URL (default: a fresh DuckDB file)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="polyperf-scale-"))
    store = open_store(args.store or folder / "history.duckdb")
    rng = np.random.default_rng(1)
    series = _series(args.series)

    started, cpu = time.perf_counter(), time.process_time()
    with store.batch():  # as `polyperf store add RUN…` does: the file opened once, one transaction per run
        _add_all(store, args, series, rng, folder)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    print(f"  whole add (records made, stored, points re-sorted): {wall:.1f} s wall, {cpu:.1f} CPU-s; load {_load()}")
    if not args.store:
        wal = folder / "history.duckdb.wal"
        size = (folder / "history.duckdb").stat().st_size + (wal.stat().st_size if wal.exists() else 0)
        print(f"  DuckDB file: {size / 1e6:.0f} MB")
    _read_and_detect(store, args, series)


def _add_all(
    store: object, args: argparse.Namespace, series: pd.DataFrame, rng: np.random.Generator, folder: Path
) -> None:
    made = added = made_cpu = added_cpu = 0.0
    for number in range(args.runs):
        started, cpu = time.perf_counter(), time.process_time()
        record = _record(number, series, args.repeats, rng, args.runs - args.commits // 2)
        made += time.perf_counter() - started
        made_cpu += time.process_time() - cpu
        started, cpu = time.perf_counter(), time.process_time()
        store.add_run(record)
        added += time.perf_counter() - started
        added_cpu += time.process_time() - cpu
        if (number + 1) % max(1, args.runs // 10) == 0:
            size = "" if args.store else f", file {(folder / 'history.duckdb').stat().st_size / 1e6:.0f} MB"
            print(f"  {number + 1} runs: adding {added:.1f} s so far{size}", flush=True)
    rows = args.runs * args.series
    print(f"add: {args.runs} runs x {args.series} series ({rows:,} points, {rows * args.repeats:,} repeat values)")
    print(
        f"  add_run: {added:.1f} s wall, {added_cpu:.1f} CPU-s ({added / args.runs * 1000:.0f} ms a run); making the "
        f"records (points and intervals, as read_run does): {made:.1f} s wall, {made_cpu:.1f} CPU-s"
    )


def _read_and_detect(store: object, args: argparse.Namespace, series: pd.DataFrame) -> None:
    one = int(series["series_id"].iloc[len(series) // 2])
    for how in ("cold: the store opened for the query", "warm: the store held open (store.batch)"):
        times = []
        with store.batch(write=False) if how.startswith("warm") else contextlib.nullcontext():
            for _ in range(20):
                started = time.perf_counter()
                history = store.points(series_id=one, machine=MACHINE)
                times.append(time.perf_counter() - started)
        print(
            f"one series' history ({len(history)} points), {how}: median {np.median(times) * 1000:.0f} ms of 20, "
            f"load {_load()}"
        )

    started = time.perf_counter()
    since = pd.Timestamp(1_700_000_000 + (args.runs - args.commits) * 60, unit="s").isoformat()
    points = store.points(machine=MACHINE, since=since)
    read = time.perf_counter() - started
    started, cpu = time.perf_counter(), time.process_time()
    changes = series_changes(points)
    found, cpu = time.perf_counter() - started, time.process_time() - cpu
    at_step = changes[changes["run_after"] == f"run{args.runs - args.commits // 2:06d}"] if len(changes) else changes
    print(
        f"change detection: {points['series_id'].nunique()} series x {points['run_id'].nunique()} commits: "
        f"{found:.1f} s, {cpu:.1f} CPU-s, load {_load()} ({read:.1f} s reading {len(points):,} points); "
        f"{len(changes)} changes found ({int((changes['state'] == 'pending').sum()) if len(changes) else 0} "
        f"pending), {len(at_step)} of them exactly at the 10% step"
    )


if __name__ == "__main__":
    main()
