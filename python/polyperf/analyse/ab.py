"""Verdicts of `polyperf ab`: per gated series, the ratio B/A of paired repeats with its anytime-valid interval
(`sequential`), the family's level shared out by Bonferroni, and a Markdown table for a pull request. Pure."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from polyperf.analyse.sequential import INCONSISTENT, METHOD, SLOWER, UNDECIDED, SequenceState

__all__ = ["GATED_METRICS", "evaluate_pairs", "overall", "to_markdown"]

# What is gated, all CPU time (lower is better). Microbenchmarks: the least CPU time of the calling thread per call,
# one value per process (see gate/worker.py): on a shared machine wall time also counts other processes'
# slices (the bson suite measured a wall-time ratio interval of 0.8-3.4x where CPU time gave ±5%). Servers: the
# server's CPU per request over a window (gate/servers.py). Wall times and rates are kept, not gated.
GATED_METRICS = ("cpu_seconds", "cpu_s_per_request")
SERIES = ["suite", "case", "implementation", "metric"]
MICRO_IMPLEMENTATION = "polyperf._native"  # the microbenchmarks' rows: the case names the series


def _pairs(series: pd.DataFrame) -> pd.DataFrame:
    """A and B joined by repeat, in the order the repeats were measured; a repeat missing a side is dropped."""
    series = series.assign(value=pd.to_numeric(series["value"], errors="coerce"))
    wide = series.pivot_table(index="repeat", columns="variant", values="value", aggfunc="first")
    for side in ("A", "B"):
        if side not in wide:
            wide[side] = np.nan
    wide = wide.dropna(subset=["A", "B"]).sort_index()
    return wide[(wide["A"] > 0) & (wide["B"] > 0)]


def evaluate_pairs(rows: pd.DataFrame, *, alpha: float, threshold: float, n_opt: int = 30) -> pd.DataFrame:
    """One row per gated series (`GATED_METRICS` rows of `rows`, variants "A" and "B"): pairs, medians, the ratio
    B/A = exp(median paired log-ratio) with its confidence sequence at alpha / k (k gated series), and the verdict
    ("slower", "faster", "no change", "undecided", "inconsistent") and the pairs at which it was first decided
    (`decided_at`, 0 while undecided)."""
    gated = rows[rows["metric"].isin(GATED_METRICS)]
    groups = list(gated.groupby(SERIES, sort=True))
    level = alpha / max(len(groups), 1)
    out: list[dict[str, Any]] = []
    for key, series in groups:
        pairs = _pairs(series)
        state = SequenceState.of(np.log(pairs["B"] / pairs["A"]).tolist(), level, threshold, n_opt)
        out.append(
            {
                **dict(zip(SERIES, key, strict=True)),
                "unit": series["unit"].iloc[0],
                "pairs": len(pairs),
                "median_a": float(pairs["A"].median()) if len(pairs) else math.nan,
                "median_b": float(pairs["B"].median()) if len(pairs) else math.nan,
                "ratio": state.cs.ratio,
                "low": state.cs.low,
                "high": state.cs.high,
                "verdict": state.verdict,
                "decided_at": state.decided_at,
            }
        )
    frame = pd.DataFrame(out)
    frame.attrs.update(alpha=alpha, level_each=level, threshold=threshold, method=METHOD)
    return frame


def overall(table: pd.DataFrame) -> str:
    """ "slower" when any gated series is decided slower; else "inconsistent" when any series' pairs share no
    median (the session cannot pass any more: it stops); else "undecided" while any is undecided; else "decided"."""
    verdicts = set(table["verdict"]) if len(table) else {UNDECIDED}
    for worst in (SLOWER, INCONSISTENT, UNDECIDED):
        if worst in verdicts:
            return worst
    return "decided"


def _pct(ratio: float) -> str:
    return "" if math.isnan(ratio) else f"{(ratio - 1) * 100:+.1f}%"


def _time(value: float) -> str:
    if math.isnan(value):
        return ""
    for scale, unit in ((1, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if float(f"{value / scale:.3g}") >= 1:  # 0.9996 ms reads 1 ms, not 1e+03 µs
            return f"{value / scale:.3g} {unit}"
    return f"{value * 1e9:.3g} ns"


def _what_was_measured(table: pd.DataFrame, servers: dict[str, Any]) -> list[str]:
    metrics = set(table["metric"]) if len(table) else set()
    out = []
    if "cpu_seconds" in metrics:
        out.append("Microbenchmarks: the least CPU time of a call in a fresh worker process, one value per process.")
    if "cpu_s_per_request" in metrics:
        cpus = ",".join(map(str, servers.get("server_cpus", [])))
        clients = ",".join(map(str, servers.get("client_cpus", [])))
        out.append(
            f"Servers: the server's CPU per request ({servers.get('cpu_source', '?')} counter) over "
            f"{servers.get('window_s', math.nan):g} s at {servers.get('rate', '?')} requests/s, A and B loaded at the "
            f"same time (a duet), each a fresh server process per repeat after an unrecorded warm-up; servers pinned "
            f"to CPU {cpus}, load generators pinned apart to CPU {clients}."
        )
    return out


def to_markdown(table: pd.DataFrame, header: dict[str, Any]) -> str:
    """The PR comment: what was compared and how, then one line per gated series, slower first."""
    rank = {"slower": 0, "inconsistent": 1, "undecided": 2, "faster": 3, "no change": 4}
    shown = table.assign(_r=table["verdict"].map(rank)).sort_values(["_r", *SERIES]) if len(table) else table
    lines = [
        f"### polyperf ab: {header['head']} (B) against {header['base']} (A)",
        "",
        f"**{header['summary']}**",
        "",
        "| series | A | B | change (B/A − 1) | anytime interval | pairs | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in shown.itertuples():
        interval = "" if math.isnan(r.low) else f"[{_pct(r.low)}, {_pct(r.high)}]"
        verdict = f"**{r.verdict}**" if r.verdict in (SLOWER, INCONSISTENT) else r.verdict
        if r.verdict not in (UNDECIDED, INCONSISTENT) and 0 < r.decided_at < r.pairs:
            verdict += f" (at {r.decided_at})"
        name = r.case if r.implementation == MICRO_IMPLEMENTATION else f"{r.implementation} ({r.case})"
        change = "" if r.verdict == INCONSISTENT else _pct(r.ratio)  # no common median: no one change to print
        lines.append(
            f"| {r.suite} / {name} | {_time(r.median_a)} | {_time(r.median_b)} | {change} | {interval} "
            f"| {r.pairs} | {verdict} |"
        )
    attrs = table.attrs
    lines += ["", *_what_was_measured(table, header.get("servers") or {})]
    if header.get("retries"):
        lines.append(f"Retried: {header['retries']}.")
    earlier, restarted = header.get("earlier") or (0, False)
    if restarted:
        lines.append(
            "The stored sequence of these revisions on this machine was inconsistent: it was set aside, and this "
            "session started a new one."
        )
    elif earlier:
        lines.append(
            f"This session continued the stored sequence of these revisions on this machine: {earlier} pairs from "
            f"earlier sessions and {header['pairs']} from this one, judged together (a rerun adds evidence; it does "
            "not start the sequence again)."
        )
    lines += [
        "Every repeat measured A and B (microbenchmarks back to back, servers at once), in a seeded random order "
        f"(seed {header['seed']}), and pairs are joined by repeat. "
        f"Interval: {attrs.get('method', METHOD)}, valid however often it is looked at, each at "
        f"{attrs.get('level_each', math.nan):.4g} so that the {len(table)} series together hold "
        f"{1 - attrs.get('alpha', math.nan):.0%} (Bonferroni). A series is decided slower or faster when its whole "
        f"interval lies beyond ±{attrs.get('threshold', math.nan):.1%}, 'no change' when it lies inside, and keeps "
        "its decision (the pairs at which it was decided in brackets); 'inconsistent' when the running intersection "
        "emptied: the pairs do not share one median (drift, or a change during the session). The change shown is "
        "the median paired ratio, clamped into its interval. Pairs "
        f"were added until every series was decided or a regression was, or the budget ran out "
        f"({header['elapsed_s']:.0f} s, {header['pairs']} pairs; stopped: {header['stopped']}).",
    ]
    return "\n".join(lines) + "\n"
