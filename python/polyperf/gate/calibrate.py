"""The gate's calibration from banked real A/A pairs (`gate.bank`): replays `polyperf ab` sessions with ab's own
settings and sequence (`analyse.ab_replay`), prints the table and draws the power curve. It sits in the gate beside
the session, whose defaults it reads, so the replay always judges with what the gate ships.

    python -m polyperf.gate.calibrate tests/data/ab_bank --sessions 1000 --figure docs/figures/ab_calibration.png
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from polyperf.analyse.ab_replay import Bank, GateRule, replay, summarise
from polyperf.analyse.sequential import SLOWER
from polyperf.gate.options import DEFAULT_BUDGET_S, ABOptions
from polyperf.orchestrate.retry import GATE_LIMIT

__all__ = ["CONDITIONS", "calibrate", "gate_rule", "load_bank", "main"]

CONDITIONS = (1.0, 1.05, 1.10)  # A/A, and B slowed by 5% and by 10%
CURVE = (1.02, 1.03, 1.04, 1.05, 1.075, 1.10, 1.15)  # the power curve's effects
NEEDED = ("family", "suite", "series", "repeat", "a", "b", "repeat_wall_s")  # of a bank file (gate.bank.COLUMNS)
# what the test knob (POLYPERF_TEST_SLOWDOWN_PCT) slows in a live run: every case that parses, net/http's handler
KNOB_SERIES = {
    "micro": ("io_buffering/parse_buffered", "io_buffering/parse_read_all", "io_buffering/parse_unbuffered"),
    "servers": ("http_frameworks/nethttp_devices",),
}
# 10 repeats: the lag-1 to lag-10 autocorrelation of the banked log-ratios is what a session's decision sees (it
# needs 10 pairs at least and most end within 10-40); blocks that long keep it, and a bank of hundreds of repeats
# still gives each session blocks from many different stretches of time
BLOCK = 10


def meta_path(bank_file: Path) -> Path:
    """`NAME.meta.json` beside the bank file `NAME.csv.gz` (or `NAME.csv`): how, where and when it was recorded,
    and its failed attempts."""
    name = bank_file.name.removesuffix(".gz").removesuffix(".csv")
    return bank_file.with_name(f"{name}.meta.json")


def _failures(path: Path) -> pd.DataFrame:
    """The failed attempts of one recording (before_repeat, seconds), from its meta file; none without one."""
    meta = meta_path(path)
    found = json.loads(meta.read_text(encoding="utf-8")).get("failures", []) if meta.exists() else []
    frame = pd.DataFrame(found, columns=["before_repeat", "seconds"]) if found else pd.DataFrame()
    return frame.reindex(columns=["before_repeat", "seconds"])


def load_bank(*places: Path) -> dict[str, Bank]:
    """The bank's families: the given bank files, and every `*.csv.gz` (or `*.csv`) file in the given folders, rows
    grouped by their family (so one recording, or the recordings of one machine state, can be replayed alone), with
    the failed attempts each recording's meta file places between its repeats."""
    files: list[Path] = []
    for place in places:
        found = sorted([*place.glob("*.csv.gz"), *place.glob("*.csv")]) if place.is_dir() else [place]
        if not found:
            raise FileNotFoundError(f"no bank files (*.csv.gz) in {place}")
        files += found
    frames, failures, offset = [], [], 0
    for path in files:  # each file is one recording, its repeats numbered from 0: they follow one another
        rows = pd.read_csv(path)
        if missing := [c for c in NEEDED if c not in rows.columns]:
            raise ValueError(f"{path} is not a bank file: it lacks the columns {', '.join(missing)}")
        frames.append(rows.assign(repeat=rows["repeat"] + offset))
        family = rows["family"].iloc[0] if len(rows) else ""
        failed = _failures(path)
        failures.append(failed.assign(family=family, before_repeat=failed["before_repeat"] + offset))
        offset += int(rows["repeat"].max()) + 1 if len(rows) else 0
    frame, failed = pd.concat(frames, ignore_index=True), pd.concat(failures, ignore_index=True)
    return {
        family: Bank.from_frame(rows, failed[failed["family"] == family])
        for family, rows in frame.groupby("family", sort=True)
    }


def gate_rule(family: str) -> GateRule:
    """ab's defaults for a session of `family` ("micro" or "servers")."""
    defaults = {f.name: f.default for f in dataclasses.fields(ABOptions)}
    return GateRule(
        alpha=defaults["alpha"],
        threshold=defaults["threshold"],
        min_pairs=defaults["min_pairs"],
        max_pairs=defaults["max_pairs"],
        budget_s=DEFAULT_BUDGET_S[family],
        retry_limit=defaults["retry_limit"],
    )


def calibrate(
    banks: dict[str, Bank], *, sessions: int, curve_sessions: int, block: int, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the table: one row per family and condition; the curve: one row per family and session, with its effect,
    pairs, minutes and whether the injected series was caught)."""
    rng = np.random.default_rng(seed)
    table, curve = [], []
    for family, bank in banks.items():
        rule = gate_rule(family)
        for factor in sorted({*CONDITIONS, *CURVE}):
            n = sessions if factor in CONDITIONS else curve_sessions
            runs = replay(bank, rule, factor=factor, sessions=n, block=block, rng=rng)
            if factor in CONDITIONS:
                table.append({"family": family, "injected": "one series", **summarise(runs)})
            curve += [  # at 1.0 (A/A), a session "catches" when the gate fails on any series: a false alarm
                {
                    "family": family,
                    "series": bank.series[s.injected[0]],
                    "factor": factor,
                    "pairs": s.pairs,
                    "minutes": s.seconds / 60,
                    "caught": s.caught if factor != 1 else s.verdict == SLOWER,
                }
                for s in runs
            ]
        knob = [bank.series.index(name) for name in KNOB_SERIES.get(family, ()) if name in bank.series]
        for factor in CONDITIONS[1:] if knob else ():
            runs = replay(bank, rule, factor=factor, sessions=sessions, block=block, rng=rng, targets=knob)
            table.append({"family": family, "injected": "the knob's series", **summarise(runs)})
    return pd.DataFrame(table).assign(
        repeats_banked=lambda t: t["family"].map(lambda f: banks[f].repeats)
    ), pd.DataFrame(curve)


def by_series(curve: pd.DataFrame, factor: float) -> pd.DataFrame:
    """The share of sessions that caught `factor` when it slowed each series, per family and series."""
    rows = curve[np.isclose(curve["factor"], factor)]
    return rows.groupby(["family", "series"])["caught"].agg(["sum", "count", "mean"]).reset_index()


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def to_markdown(table: pd.DataFrame, block: int) -> str:
    lines = [
        "| family | condition | sessions | regression decided (exit 1) | injected series caught "
        "| undecided in budget; inconsistent (exit 3) | pairs to the end (median; 90%) "
        "| minutes to the end (median; 90%) | a failure repeated: no verdict; sessions that retried |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table.itertuples():
        condition = "A/A" if r.factor == 1 else f"B × {r.factor:.2f}, {r.injected}"
        alarms = f"{r.alarms} ({_pct(r.alarm_rate)}; 95% ≤ {_pct(r.alarm_high)})"
        caught = "—" if r.factor == 1 else f"{r.caught} ({_pct(r.caught_rate)}; 95% ≥ {_pct(r.caught_low)})"
        lines.append(
            f"| {r.family} | {condition} | {r.sessions} | {alarms} | {caught} | {r.undecided}; {r.inconsistent} "
            f"| {r.pairs_median:g}; {r.pairs_p90:g} | {r.minutes_median:.1f}; {r.minutes_p90:.1f} "
            f"| {r.failed}; {r.retried} |"
        )
    lines.append(
        f"\nBlocks of {block} consecutive repeats; exact (Clopper–Pearson) two-sided 95% bounds. Failed attempts stay "
        f"where the bank recorded them and are retried under ab's rule (the same failure {GATE_LIMIT} times in a row "
        "stops)."
    )
    return "\n".join(lines) + "\n"


def figure(curve: pd.DataFrame, path: Path) -> None:
    """The power curve, per family (columns): above, the share of sessions that fail the gate on the injected series
    within ab's budget, with exact 95% bounds (at 0%, A/A: any series); below, the minutes a catch took."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from scipy.stats import binomtest

    families = sorted(curve["family"].unique())
    fig, axes = plt.subplots(2, len(families), figsize=(5.0 * len(families), 6.4), squeeze=False, sharex=True)
    for col, family in enumerate(families):
        rows = curve[curve["family"] == family]
        effect, share, low, high, med, q10, q90 = [], [], [], [], [], [], []
        for factor, runs in rows.groupby("factor"):
            hits = int(runs["caught"].sum())
            ci = binomtest(hits, len(runs)).proportion_ci(method="exact")
            effect.append((factor - 1) * 100)
            share.append(hits / len(runs))
            low.append(ci.low)
            high.append(ci.high)
            minutes = runs.loc[runs["caught"], "minutes"]
            med.append(minutes.median() if len(minutes) else np.nan)
            q10.append(minutes.quantile(0.1) if len(minutes) else np.nan)
            q90.append(minutes.quantile(0.9) if len(minutes) else np.nan)
        top, bottom = axes[0][col], axes[1][col]
        top.errorbar(effect, share, yerr=[np.subtract(share, low), np.subtract(high, share)], marker="o", capsize=3)
        counts = rows.groupby("factor").size()
        top.set_title(f"{family}: {counts.max():,} or {counts.min():,} replayed sessions per point", fontsize=9)
        top.set_ylim(-0.02, 1.02)
        bottom.plot(effect, med, marker="o", label="median")
        bottom.fill_between(effect, q10, q90, alpha=0.25, label="10%-90%")
        bottom.set_xlabel("B slowed by (%) in one series; 0: A/A")
        for ax in (top, bottom):
            ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("gate fails on it, within the budget")
    axes[1][0].set_ylabel("minutes of pairs to the catch")
    axes[1][-1].legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m polyperf.gate.calibrate", description=__doc__)
    parser.add_argument("bank", type=Path, nargs="+", help="bank files (*.csv.gz), or folders of them")
    parser.add_argument("--sessions", type=int, default=1000, help="sessions per condition (default 1000)")
    parser.add_argument("--curve-sessions", type=int, default=400, help="sessions per other effect (default 400)")
    parser.add_argument("--block", type=int, default=BLOCK, help=f"repeats per drawn block (default {BLOCK})")
    parser.add_argument("--seed", type=int, default=2021)
    parser.add_argument("--figure", type=Path, default=None, help="write the power curve here (PNG)")
    parser.add_argument("--json", type=Path, default=None, help="write the table here (JSON)")
    args = parser.parse_args(argv)
    if args.sessions < 1 or args.curve_sessions < 1 or args.block < 1:
        print("polyperf gate.calibrate: --sessions, --curve-sessions and --block must be >= 1", file=sys.stderr)
        return 2
    try:
        banks = load_bank(*args.bank)
        table, curve = calibrate(
            banks, sessions=args.sessions, curve_sessions=args.curve_sessions, block=args.block, seed=args.seed
        )
    except (OSError, ValueError, KeyError) as exc:
        print(f"polyperf gate.calibrate: {exc}", file=sys.stderr)
        return 2
    print(to_markdown(table, args.block))
    for factor in CONDITIONS[1:]:
        caught = by_series(curve, factor)
        print(
            f"caught at B × {factor:.2f}, by the series slowed: "
            + "; ".join(f"{r.series} {r.sum}/{r.count}" for r in caught.itertuples())
        )
    if args.figure:
        figure(curve, args.figure)
    if args.json:
        records: list[dict[str, Any]] = table.to_dict(orient="records")
        per_series = {f"{f:.2f}": by_series(curve, f).to_dict(orient="records") for f in CONDITIONS[1:]}
        payload = {"block": args.block, "seed": args.seed, "table": records, "by_series": per_series}
        args.json.write_text(json.dumps(payload, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
