"""Figures for the actix-web build-settings article (suite build_profiles): the dev/release ratio as a function
of the matrix size N beside the article's 2.64x; what each rung of the ladder buys, served and in the multiply
alone; the release vs 'R' (release-lto) difference attributed to the settings that make it, from the measured
single-setting ratios; what each setting costs (clean build time, binary size)."""

from __future__ import annotations

import itertools
import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure as MplFigure
from matplotlib.ticker import FuncFormatter

from polyperf.analyse.stats import Summary, ratio
from polyperf.report.figure import COLORS, Figure, grouped_bars, new_axes
from polyperf.report.load_figures import flagged, pinning, values_by

SUITE = "build_profiles"
VARIANTS = (
    "dev",
    "release",
    "release-fat-lto",
    "release-cgu1",
    "release-abort",
    "release-lto",
    "native",
    "native-mimalloc",
)
BASELINE = "release"  # Cargo's default release: what each single setting is added to
ARTICLE = "release-lto"  # the article's 'R': fat LTO, codegen-units=1, panic=abort, strip
SETTINGS = {"release-fat-lto": "fat LTO", "release-cgu1": "codegen-units=1", "release-abort": "panic=abort"}
MAIN_N = 120  # the size at which the whole ladder is measured
# The article's Drill runs, 500 concurrent, 50,000 requests: D 701.45 req/s, R 1,849.95 req/s
ARTICLE_R_OVER_D = 1849.95 / 701.45
ARTICLE_TABLE = (
    "Article (Drill, 500 concurrent, 50k requests): D 71.3 s / 701.45 req/s; R 27.0 s / 1,849.95; "
    "ROpt 25.8 s / 1,937.80; ROptMimAlloc 26.7 s / 1,873.65 (100k: R 1,918.27, ROpt 1,934.59, "
    "ROptMimAlloc 1,955.07); its N is not published."
)
# Measured here: `actix_matrix bench` of one binary at N = 120 ran at ~610 or ~830 µs per call depending on the process
# (with and without ASLR; VM placement or physical memory layout), so repeats on one long-lived server share its mode.
PROCESS_NOTE = (
    "The multiply's speed varies from process to process on some machines (here ~610 or ~830 µs per call at "
    "N = 120, process by process), so each variant's served repeats are spread over three or more server processes "
    "(a restart and a warm-up each; the rows' `server_process`): with only three, served differences of a few tens "
    "of percent between optimised builds can still be that and need another run to confirm; the multiply alone, a "
    "new process every round, compares their code generation."
)
# (case, metric): served throughput (higher is better) and the multiply alone (its thread's CPU time per call, lower
# is better; the wall time is recorded too, but a shared machine's preemptions land in it)
SERVED = ("ceiling", "rps")
ALONE = ("multiply", "cpu_s_per_multiply")
# served capacity: server CPU per request (counted even in client-bound runs, where req/s measures the client)
CAPACITY = ("ceiling", "cpu_s_per_request")


def _by_repeat(table: pd.DataFrame, case: str, metric: str, variant: str, n: int) -> dict[int, float]:
    """{repeat: value} of one series; for req/s, client-bound runs left out (they measure the client, not the
    build); the server's CPU per request is its own in any run."""
    sel = table[
        (table["case"] == case)
        & (table["metric"] == metric)
        & (table["variant"] == variant)
        & (table["params"].map(lambda p: p.get("n")) == n)
    ]
    if metric == "rps":
        sel = sel[~sel["client_bound"].astype(bool)]
    return dict(zip(sel["repeat"].astype(int), sel["value"].astype(float), strict=True))


def speedup(table: pd.DataFrame, series: tuple[str, str], variant: str, base: str, n: int) -> Summary | None:
    """How many times faster `variant` is than `base` at size `n` (pure): a ratio of rates, or the inverse ratio of
    times; pairs are the repeats both measured (one seeded random order per repeat). None without a pair."""
    case, metric = series
    num, den = _by_repeat(table, case, metric, variant, n), _by_repeat(table, case, metric, base, n)
    common = sorted(set(num) & set(den))
    if not common:
        return None
    faster, slower = ([num[r] for r in common], [den[r] for r in common])
    if metric != "rps":  # times: the base's time over the variant's
        faster, slower = slower, faster
    return ratio(faster, slower, paired=True)


def sizes(table: pd.DataFrame, series: tuple[str, str]) -> list[int]:
    sel = table[(table["case"] == series[0]) & (table["metric"] == series[1])]
    return sorted({int(n) for n in sel["params"].map(lambda p: p.get("n")).dropna()})


def _fmt(s: Summary | None) -> str:
    if s is None:
        return "not measured"
    return f"{s.median:.2f}x [{s.low:.2f}, {s.high:.2f}]" if s.has_interval else f"{s.median:.2f}x (n={s.n})"


def article_range(points: dict[int, Summary]) -> str:
    """Where the article's R/D ratio is reproduced over the sizes measured (pure): the sizes whose interval
    holds 2.64x, and between which sizes the medians cross it."""
    inside = [n for n, s in points.items() if s.has_interval and s.low <= ARTICLE_R_OVER_D <= s.high]
    ns = sorted(points)
    crossings = [
        (a, b)
        for a, b in itertools.pairwise(ns)
        if (points[a].median - ARTICLE_R_OVER_D) * (points[b].median - ARTICLE_R_OVER_D) < 0
    ]
    parts = []
    if inside:
        at = ", ".join(map(str, inside))
        parts.append(f"R/D holds the article's {ARTICLE_R_OVER_D:.2f}x within its 95% interval at N = {at}")
    if crossings:
        parts.append("its median crosses it between " + ", ".join(f"N = {a} and {b}" for a, b in crossings))
    if not parts:
        nearest = min(points, key=lambda n: abs(math.log(points[n].median / ARTICLE_R_OVER_D)))
        side = "above" if points[nearest].median > ARTICLE_R_OVER_D else "below"
        parts.append(
            f"R/D is {side} the article's {ARTICLE_R_OVER_D:.2f}x at every N measured "
            f"(nearest: {_fmt(points[nearest])} at N = {nearest})"
        )
    return "; ".join(parts) + "."


def _ratio_vs_n(table: pd.DataFrame) -> Figure | None:
    fig, ax = new_axes(8.5, 4.5)
    drawn, article_points = 0, {}
    lines = [
        (CAPACITY, ARTICLE, "served capacity (server CPU per request): R / dev", "-"),
        (SERVED, ARTICLE, "served req/s (server-bound runs): R / dev", "--"),
        (SERVED, BASELINE, "served req/s (server-bound runs): release / dev", "-."),
        (ALONE, ARTICLE, "multiply alone (CPU per call): R / dev", ":"),
    ]
    for i, (series, variant, label, style) in enumerate(lines):
        points = {n: s for n in sizes(table, series) if (s := speedup(table, series, variant, "dev", n)) is not None}
        if not points:
            continue
        if series == CAPACITY and variant == ARTICLE:
            article_points = points
        ns = sorted(points)
        med = np.array([points[n].median for n in ns])
        low = np.array([points[n].low for n in ns])
        high = np.array([points[n].high for n in ns])
        err = np.nan_to_num(np.vstack([med - low, high - med]))
        ax.errorbar(ns, med, yerr=err, fmt="o" + style, color=COLORS[i], capsize=3, label=label)
        drawn += 1
    if not drawn:
        plt.close(fig)
        return None
    ax.axhline(ARTICLE_R_OVER_D, color="black", lw=1.0, label=f"article: R / D = {ARTICLE_R_OVER_D:.2f}x (Drill)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        axis.set_minor_formatter(FuncFormatter(lambda _v, _pos: ""))
    ax.set_xticks(sorted({n for series, *_ in lines for n in sizes(table, series)}))
    ax.set_xlabel('matrix size N (POST {"n": N})')
    ax.set_ylabel("times faster than dev (median, 95% CI)")
    ax.set_title("How much the release build buys depends on N")
    ax.legend(fontsize=8)
    verdict = article_range(article_points) if article_points else "R/D was not served at any N."
    verdict = f"Served capacity: {verdict}"
    return Figure(
        "build_ratio_vs_n",
        "Release over dev as a function of the matrix size",
        f"{verdict} Served: oha ceilings, one server at a time, pairs of the same repeat; where the client has no "
        "more cores than the server, the sizes below the ladder's are served under a CPU budget calibrated for "
        "each N on that N's request (one oha core outpaces one actix core at small N: without it release is "
        "client-bound there; the rows' `cpu_quota`); capacity from the server's "
        "CPU per request (its cgroup's count) in every run; req/s only from runs the client did not limit, and "
        "below the capacity ratio wherever the faster server was not kept fully busy (by a one-core client, or "
        "by neighbours on a shared machine). Multiply alone: `actix_matrix bench` in the same binaries (no "
        f"HTTP), so the gap between the curves is what serving costs in each build. {ARTICLE_TABLE} "
        f"{pinning(table)}.",
        fig,
    )


def _ladder(table: pd.DataFrame) -> Figure | None:
    rungs = [v for v in VARIANTS if v not in (BASELINE, "dev")]  # dev, ~50x off, is in the ratio-vs-N figure
    both = {
        label: {v: speedup(table, series, v, BASELINE, MAIN_N) for v in rungs}
        for label, series in (("served (server CPU per request)", CAPACITY), ("multiply alone", ALONE))
    }
    if not any(s is not None for per in both.values() for s in per.values()):
        return None
    fig, ax = new_axes(9.0, 4.5)
    x = np.arange(len(rungs))
    for i, (label, per) in enumerate(both.items()):
        for j, variant in enumerate(rungs):
            s = per[variant]
            if s is None:
                continue
            err = np.nan_to_num([[s.median - s.low], [s.high - s.median]])
            ax.bar(
                x[j] + (i - 0.5) * 0.4,
                s.median,
                0.4,
                yerr=err,
                capsize=3,
                color=COLORS[i],
                label=label if not j else None,
            )
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xticks(x, rungs, fontsize=8, rotation=20)
    ax.set_ylabel(f"times faster than {BASELINE} (median, 95% CI)")
    ax.set_title(f"What each rung of the ladder buys (N = {MAIN_N}), relative to Cargo's default release")
    ax.legend(fontsize=8)
    return Figure(
        "build_ladder",
        "Each build setting, served and in its code alone",
        f"Ratio to Cargo's default release at N = {MAIN_N}, pairs of the same repeat: served capacity (the server's "
        "CPU per request under an oha ceiling, counted by its cgroup) and the multiply's CPU time per call in the "
        "same binary. Capacity, not req/s: on a shared machine req/s also measures how much CPU the neighbours "
        f"left the server (req/s per variant is in the next figures). {PROCESS_NOTE} "
        f"{ARTICLE_TABLE}",
        fig,
    )


def attribution(table: pd.DataFrame, series: tuple[str, str], n: int = MAIN_N) -> str | None:
    """The release vs 'R' difference in words, from the single-setting ratios measured beside it (pure)."""
    whole = speedup(table, series, ARTICLE, BASELINE, n)
    parts = {name: speedup(table, series, v, BASELINE, n) for v, name in SETTINGS.items()}
    if whole is None or any(s is None for s in parts.values()):
        return None
    measured = {name: s for name, s in parts.items() if s is not None}
    product = math.prod(s.median for s in measured.values())
    biggest = max(measured, key=lambda name: abs(math.log(measured[name].median)))
    settled = [name for name, s in measured.items() if _excludes_one(s)]
    singles = "; ".join(f"{name} alone {_fmt(s)}" for name, s in measured.items())
    if settled:
        verdict = f"the settings shown to matter (interval excluding 1): {', '.join(settled)}."
    else:
        verdict = f"no single setting is shown to matter at this precision (largest point estimate: {biggest})."
    if not _excludes_one(whole):
        verdict = f"R and Cargo's release do not differ measurably in this run, and {verdict}"
    return (
        f"R / release {_fmt(whole)}. {singles}. Their product, {product:.2f}x, leaves {whole.median / product:.2f}x "
        f"to strip and to how the settings interact. {verdict[0].upper()}{verdict[1:]}"
    )


def _excludes_one(s: Summary) -> bool:
    return s.has_interval and not s.low <= 1.0 <= s.high


def _attribution(table: pd.DataFrame) -> Figure | None:
    pairs = (("Served (server CPU per request)", CAPACITY), ("Multiply alone (CPU per call)", ALONE))
    texts = {label: attribution(table, series) for label, series in pairs}
    if not any(texts.values()):
        return None
    names = [*SETTINGS.values(), "product", "R (all + strip)"]
    fig, ax = new_axes(8.5, 4.2)
    for i, series in enumerate((CAPACITY, ALONE)):
        singles = [speedup(table, series, v, BASELINE, MAIN_N) for v in SETTINGS]
        whole = speedup(table, series, ARTICLE, BASELINE, MAIN_N)
        if whole is None or any(s is None for s in singles):
            continue
        product = math.prod(s.median for s in singles if s is not None)
        for j, s in enumerate([*singles, None, whole]):
            at = j + (i - 0.5) * 0.4
            if s is None:
                ax.bar(at, product, 0.4, color=COLORS[i], alpha=0.5)
                continue
            err = np.nan_to_num([[s.median - s.low], [s.high - s.median]])
            ax.bar(
                at,
                s.median,
                0.4,
                yerr=err,
                capsize=3,
                color=COLORS[i],
                label=("served", "multiply alone")[i] if not j else None,
            )
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xticks(range(len(names)), names, fontsize=8)
    ax.set_ylabel(f"times faster than {BASELINE}")
    ax.set_title(f"Release vs the article's profile 'R', setting by setting (N = {MAIN_N})")
    ax.legend(fontsize=8)
    caption = " ".join(f"{label}: {text}" for label, text in texts.items() if text) + f" {PROCESS_NOTE}"
    return Figure("build_attribution", "Where the release vs 'R' difference comes from", caption, fig)


def _per_variant(table: pd.DataFrame, metric: str, scale: float, ylabel: str) -> tuple[MplFigure, Axes] | None:
    data = values_by(table, "ceiling", metric, "n")
    if not data:
        return None
    fig, ax = new_axes(9.0, 4.5)
    grouped_bars(ax, data, flagged(table, "ceiling", "n"), scale=scale, group_name="N = ")
    ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.tick_params(axis="x", labelrotation=20)
    return fig, ax


def _throughput(table: pd.DataFrame) -> list[Figure]:
    out = []
    for metric, scale, ylabel, name, title in (
        ("rps", 1.0, "requests/s (median, 95% CI; log scale)", "build_rps", "Requests/s per build variant"),
        ("cpu_s_per_request", 1e3, "server CPU per request, ms", "build_cpu", "Server CPU per request"),
    ):
        drawn = _per_variant(table, metric, scale, ylabel)
        if drawn is None:
            continue
        fig, ax = drawn
        ax.set_title(f"POST /matrix-multiplication: {title.lower()} by matrix size N")
        out.append(
            Figure(
                name,
                title,
                "oha, closed model, a timed ceiling; one server at a time, in a seeded random order per repeat. "
                f"Hatched bars were client-bound in some repeat. {pinning(table)}.",
                fig,
            )
        )
    return out


def _cost(table: pd.DataFrame) -> Figure | None:
    builds = table[table["case"] == "build"]
    if builds.empty:
        return None
    fig, axes = plt.subplots(1, 3, figsize=(12, 4.0), layout="constrained")
    for ax, metric, scale, label in (
        (axes[0], "build_seconds", 1.0, "clean build, wall s"),
        (axes[1], "build_cpu_seconds", 1.0, "clean build, CPU s"),
        (axes[2], "binary_bytes", 1e-6, "binary, MB"),
    ):
        rows = builds[builds["metric"] == metric]
        grouped_bars(
            ax,
            {(v, None): rows[rows["variant"] == v]["value"].tolist() for v in VARIANTS if (rows["variant"] == v).any()},
            scale=scale,
        )
        ax.set_ylabel(label)
        ax.tick_params(axis="x", labelrotation=35, labelsize=7)
    cached = builds["params"].map(lambda p: bool(p.get("cached"))).any()
    fig.suptitle("What each build setting costs")
    return Figure(
        "build_cost",
        "Build time and binary size per variant",
        "Each variant is built in a cargo target directory of its own, emptied first, so its time is a clean "
        "build with those settings on this machine (dependencies included); CPU time is every compiler process's "
        "user + system time, which a busy machine inflates much less than the wall time. "
        + ("Some times are from the cache: the build that made the binary, in an earlier run." if cached else ""),
        fig,
    )


def figures(table: pd.DataFrame) -> list[Figure]:
    table = table[table["suite"] == SUITE]
    single = [_ratio_vs_n(table), _ladder(table), _attribution(table)]
    return [f for f in (*single, *_throughput(table), _cost(table)) if f is not None]
