"""The gate's calibration from banked real A/A pairs (`ab_bank`): replays `polyperf ab` sessions with ab's own
settings and sequence (`analyse.ab_replay`), prints the table and draws the power curve. It sits beside `ab`,
whose defaults it reads, so the replay always judges with what the gate ships.

    python -m polyperf.ab_calibrate tests/data/ab_bank --sessions 1000 --figure docs/figures/ab_calibration.png
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

from polyperf.ab import DEFAULT_BUDGET_S, ABOptions
from polyperf.analyse.ab_replay import Bank, GateRule, replay, summarise

__all__ = ["CONDITIONS", "calibrate", "gate_rule", "load_bank", "main"]

CONDITIONS = (1.0, 1.05, 1.10)  # A/A, and B slowed by 5% and by 10%
CURVE = (1.02, 1.03, 1.04, 1.05, 1.075, 1.10, 1.15)  # the power curve's effects
# 10 repeats: the lag-1 to lag-10 autocorrelation of the banked log-ratios is what a session's decision sees (it
# needs 10 pairs at least and most end within 10-40); blocks that long keep it, and a bank of hundreds of repeats
# still gives each session blocks from many different stretches of time
BLOCK = 10


def load_bank(folder: Path) -> dict[str, Bank]:
    """The bank's families: every `*.csv.gz` (or `*.csv`) file in `folder`, rows grouped by their family."""
    files = sorted([*folder.glob("*.csv.gz"), *folder.glob("*.csv")])
    if not files:
        raise FileNotFoundError(f"no bank files (*.csv.gz) in {folder}")
    frame = pd.concat([pd.read_csv(f) for f in files], ignore_index=True)
    return {family: Bank.from_frame(rows) for family, rows in frame.groupby("family", sort=True)}


def gate_rule(family: str) -> GateRule:
    """ab's defaults for a session of `family` ("micro" or "servers")."""
    defaults = {f.name: f.default for f in dataclasses.fields(ABOptions)}
    return GateRule(
        alpha=defaults["alpha"],
        threshold=defaults["threshold"],
        min_pairs=defaults["min_pairs"],
        max_pairs=defaults["max_pairs"],
        budget_s=DEFAULT_BUDGET_S[family],
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
                table.append({"family": family, "repeats_banked": bank.repeats, **summarise(runs)})
            curve += [
                {"family": family, "factor": factor, "pairs": s.pairs, "minutes": s.seconds / 60, "caught": s.caught}
                for s in runs
            ]
    return pd.DataFrame(table), pd.DataFrame(curve)


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def to_markdown(table: pd.DataFrame, block: int) -> str:
    lines = [
        "| family | condition | sessions | gate fails (exit 1) | injected series caught | undecided in budget "
        "| pairs to the end (median; 90%) | minutes to the end (median; 90%) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in table.itertuples():
        condition = "A/A" if r.factor == 1 else f"B × {r.factor:.2f}"
        alarms = f"{r.alarms} ({_pct(r.alarm_rate)}; 95% ≤ {_pct(r.alarm_high)})"
        caught = "—" if r.factor == 1 else f"{r.caught} ({_pct(r.caught_rate)}; 95% ≥ {_pct(r.caught_low)})"
        lines.append(
            f"| {r.family} | {condition} | {r.sessions} | {alarms} | {caught} | {r.undecided} "
            f"| {r.pairs_median:g}; {r.pairs_p90:g} | {r.minutes_median:.1f}; {r.minutes_p90:.1f} |"
        )
    lines.append(f"\nBlocks of {block} consecutive repeats; exact (Clopper–Pearson) two-sided 95% bounds.")
    return "\n".join(lines) + "\n"


def figure(curve: pd.DataFrame, path: Path, budgets: dict[str, float]) -> None:
    """Per family, the share of sessions that caught the injected change within m minutes, one line per effect."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    families = sorted(curve["family"].unique())
    fig, axes = plt.subplots(1, len(families), figsize=(5.2 * len(families), 3.8), squeeze=False)
    for ax, family in zip(axes[0], families, strict=True):
        rows = curve[curve["family"] == family]
        grid = np.linspace(0, budgets[family] / 60 * 1.05, 200)
        for factor, runs in rows[rows["factor"] > 1].groupby("factor"):
            minutes = runs["minutes"].to_numpy()
            caught = runs["caught"].to_numpy(bool)
            share = [(caught & (minutes <= m)).mean() for m in grid]
            ax.plot(grid, share, label=f"+{(factor - 1) * 100:g}%")
        ax.axvline(budgets[family] / 60, color="grey", ls="--", lw=0.8)
        ax.set_title(f"{family}: caught within m minutes")
        ax.set_xlabel("minutes of pairs (m); dashed: ab's default budget")
        ax.set_ylim(0, 1.01)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("share of replayed sessions")
    axes[0][-1].legend(title="B slowed by", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m polyperf.ab_calibrate", description=__doc__)
    parser.add_argument("bank", type=Path, help="folder of bank files (*.csv.gz)")
    parser.add_argument("--sessions", type=int, default=1000, help="sessions per condition (default 1000)")
    parser.add_argument("--curve-sessions", type=int, default=400, help="sessions per other effect (default 400)")
    parser.add_argument("--block", type=int, default=BLOCK, help=f"repeats per drawn block (default {BLOCK})")
    parser.add_argument("--seed", type=int, default=2021)
    parser.add_argument("--figure", type=Path, default=None, help="write the power curve here (PNG)")
    parser.add_argument("--json", type=Path, default=None, help="write the table here (JSON)")
    args = parser.parse_args(argv)
    if args.sessions < 1 or args.curve_sessions < 1 or args.block < 1:
        print("polyperf ab_calibrate: --sessions, --curve-sessions and --block must be >= 1", file=sys.stderr)
        return 2
    try:
        banks = load_bank(args.bank)
        table, curve = calibrate(
            banks, sessions=args.sessions, curve_sessions=args.curve_sessions, block=args.block, seed=args.seed
        )
    except (OSError, ValueError, KeyError) as exc:
        print(f"polyperf ab_calibrate: {exc}", file=sys.stderr)
        return 2
    print(to_markdown(table, args.block))
    if args.figure:
        figure(curve, args.figure, dict(DEFAULT_BUDGET_S))
    if args.json:
        records: list[dict[str, Any]] = table.to_dict(orient="records")
        args.json.write_text(json.dumps({"block": args.block, "seed": args.seed, "table": records}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
