"""Figures for the Rust-vs-Go frameworks test and the Tokio article's hyper hello world (suite http_frameworks):
each caption names the driver that produced the numbers, the CPU split, and flags client-bound results."""

from __future__ import annotations

import statistics

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.ticker import FuncFormatter

from polyperf.analyse.stats import summarize
from polyperf.report.figure import COLORS, Figure, bar_figure, new_axes, with_param
from polyperf.report.load_figures import (
    DRIVER_NOTES,
    LOCUST_NOTE,
    flagged,
    grouped_bars,
    locust_history,
    pinning,
    rows,
    values_by,
)

SUITE = "http_frameworks"
_HATCH = (
    "Hatched bars were client-bound (the load generator used ≥ 90% of its CPU or missed its rate): "
    "they are the client's limit, not the server's capacity."
)


# Each figure is one bar_figure call with its own data, caption and axes (as in devices_postgres.py): nothing shared.
def _ceiling(table: pd.DataFrame) -> Figure | None:
    data = values_by(table, "ceiling", "rps", "connections")
    if not data:
        return None
    return bar_figure(
        "http_ceiling_rps",
        "Requests/s ceiling per app",
        f"Driver: {DRIVER_NOTES['oha']}, closed model at each connection count; {pinning(table)}. " + _HATCH,
        data,
        flagged(table, "ceiling", "connections"),
        scale=1e-3,
        group_name="connections ",
        ylabel="thousand requests/s (median, 95% CI)",
        axes_title="Ceiling: GET /api/devices (devices apps), GET / (hyper_hello)",
    )


def _capacity(table: pd.DataFrame) -> Figure | None:
    data = values_by(table, "ceiling", "requests_per_cpu_second", "connections")
    if not data:
        return None
    quota = with_param(rows(table, "ceiling", "rps"), "cpu_quota").dropna()
    budget = f"under a budget of {quota.iloc[0]:g} CPU per server" if len(quota) else "without a CPU budget"
    return bar_figure(
        "http_capacity_per_core",
        "Capacity per server core",
        "Requests answered per CPU-second of the server's process tree, at each connection count: what one "
        "fully used server core answers. Judged where the server, not the client, is the limit: with "
        "--server-cpu-quota each server runs in a CPU cgroup so one client core outpaces it. " + _HATCH,
        data,
        flagged(table, "ceiling", "connections"),
        scale=1e-3,
        group_name="connections ",
        ylabel="thousand requests per server CPU-second",
        axes_title=f"Capacity per server core ({budget})",
    )


def _period(table: pd.DataFrame) -> Figure | None:
    data = values_by(table, "budget_period", "requests_per_cpu_second", "cpu_quota_period_s")
    if not data:
        return None
    return bar_figure(
        "http_budget_period",
        "How the budget's period moves capacity",
        "Each server under the same CPU quota with the CFS period set to 5, 10 and 100 ms, interleaved. A long "
        "period lets requests pile up during each stall, which flatters requests per CPU-second; a short one "
        "can leave quota unused. polyperf's default is 10 ms.",
        {(k[0], f"{k[1] * 1e3:g} ms"): v for k, v in data.items()},
        scale=1e-3,
        group_name="period ",
        ylabel="thousand requests per server CPU-second",
        axes_title="The CPU budget's period: same quota, 5 / 10 / 100 ms",
    )


def _latency(table: pd.DataFrame) -> Figure | None:
    data = {}
    for name in ("p50", "p90", "p99", "p999"):
        for (label, _g), values in values_by(table, "fixed_rate", f"latency_{name}_s").items():
            data[(label, name)] = values
    if not data:
        return None
    rate = rows(table, "fixed_rate", "rps")["params"].iloc[0].get("rate")
    return bar_figure(
        "http_latency_fixed_rate",
        "Latency percentiles at a fixed rate",
        f"Driver: {DRIVER_NOTES['oha']} with -q {rate} --latency-correction (latency counted from "
        f"each request's scheduled time, so no coordinated omission); {pinning(table)}. "
        "A run whose achieved rate fell below 95% of the offered rate is client-bound.",
        data,
        set(),
        scale=1e3,
        ylabel="latency, ms (median of repeats, 95% CI)",
        axes_title=f"Client-side latency percentiles at a fixed {rate:,} requests/s",
        log=True,
    )


def _cpu_per_request(table: pd.DataFrame) -> Figure | None:
    data = {}
    for case in ("ceiling", "fixed_rate"):
        for (label, conns), values in values_by(table, case, "cpu_s_per_request", "connections").items():
            if case == "fixed_rate" or conns == 64:
                data[(label, "ceiling, 64 connections" if case == "ceiling" else "fixed rate")] = values
    if not data:
        return None
    return bar_figure(
        "http_cpu_per_request",
        "Server CPU per request",
        "CPU seconds of the server's process tree over exactly the measured window (from /proc) "
        "divided by the requests completed in it. At a fixed low rate, wake-ups per request cost "
        f"more than at saturation. {pinning(table)}.",
        data,
        set(),
        scale=1e6,
        ylabel="server CPU µs per request (median, 95% CI)",
        axes_title="Server CPU time per request (user + system, whole process tree)",
    )


def _memory(table: pd.DataFrame) -> Figure | None:
    data = {}
    for metric, name in (("rss_peak_bytes", "peak"), ("rss_mean_bytes", "mean")):
        for (label, conns), values in values_by(table, "ceiling", metric, "connections").items():
            if conns == max(c for _l, c in values_by(table, "ceiling", metric, "connections")):
                data[(label, f"RSS {name}")] = values
    if not data:
        return None
    return bar_figure(
        "http_rss",
        "Server memory (RSS)",
        "RSS of the server's process tree sampled every 50 ms during the ceiling runs.",
        data,
        set(),
        scale=1e-6,
        ylabel="MB (10^6 bytes; median, 95% CI)",
        axes_title="Server resident memory under the highest connection count",
    )


def _history(table: pd.DataFrame) -> Figure | None:
    fig, ax = new_axes(8.5, 4.5)
    if not locust_history(ax, table):
        return None
    ax.set_title("locust step ramp: requests/s over time")
    return Figure(
        "http_locust_history",
        "locust: requests/s over time",
        f"Driver: {DRIVER_NOTES['locust']}; per-second counts from locust's own stats "
        f"(num_reqs_per_sec), first repeat. {LOCUST_NOTE}.",
        fig,
    )


def _by_driver(table: pd.DataFrame, metric: str) -> dict[tuple[str, object], list[float]]:
    """{(app + qualifier, driver): values}: oha's ceiling at 64 connections next to locust's ramp."""
    out: dict[tuple[str, object], list[float]] = {}
    for case in ("ceiling", "locust"):
        sel = rows(table, case, metric)
        if case == "ceiling":
            sel = sel[with_param(sel, "connections") == 64]
        for (impl, variant, driver), g in sel.groupby(["implementation", "variant", "driver"], sort=True):
            out[(f"{impl}\n{variant}".strip(), driver)] = g["value"].tolist()
    return out


def _drivers(table: pd.DataFrame) -> Figure | None:
    data = _by_driver(table, "rps")
    if not data:
        return None
    bound = table[table["metric"] == "rps"].assign(value=lambda t: t["client_bound"].astype(float), metric="bound")
    flags = {key for key, values in _by_driver(bound, "bound").items() if max(values) >= 0.5}
    fig, ax = new_axes(8.5, 4.5)
    grouped_bars(ax, data, flags, scale=1e-3)
    ax.set_yscale("log")
    ax.set_ylabel("thousand requests/s (median, 95% CI)")
    title = "Same apps, different drivers"
    pair = rows(table, "driver_ceiling", "rps")
    oha = pair[pair["driver"] == "oha"]["value"].tolist()
    wrk = pair[pair["driver"] == "wrk"]["value"].tolist()
    if oha and wrk:
        title += (
            f" (oha/wrk ceiling ratio on {pair['implementation'].iloc[0]}: "
            f"{summarize(oha).median / summarize(wrk).median:.2f})"
        )
    ax.set_title(title)
    return Figure(
        "http_drivers",
        "Which driver produced which number",
        f"oha: {DRIVER_NOTES['oha']} at 64 connections; locust: {DRIVER_NOTES['locust']}, the step "
        "ramp's average. The oha/wrk ratio is measured on the fastest app, interleaved, same "
        f"connections and duration. {_HATCH}",
        fig,
    )


def _ramp_steps(table: pd.DataFrame, metric: str) -> dict[str, dict[int, list[tuple[float, bool]]]]:
    """{app: {connections: [(value, client-bound) per ramp]}} of the ramp's steps."""
    out: dict[str, dict[int, list[tuple[float, bool]]]] = {}
    for _, r in rows(table, "ramp_step", metric).iterrows():
        steps = out.setdefault(r["implementation"], {})
        steps.setdefault(int(r["params"]["connections"]), []).append((float(r["value"]), bool(r["client_bound"])))
    return out


def _peak_text(table: pd.DataFrame) -> str:
    """Each app's peak requests/s and the p90 at that step, median over ramps, with the client-bound count."""
    parts = []
    for app, group in rows(table, "ramp", "peak_requests_per_s").groupby("implementation"):
        p90 = rows(table, "ramp", "p90_latency_s")
        p90 = p90[p90["implementation"] == app]["value"]
        bound = int(group["client_bound"].astype(bool).sum())
        text = f"{app} peaks at {group['value'].median():,.0f} req/s"
        text += f", p90 {p90.median() * 1e3:.2f} ms there" if len(p90) else ""
        parts.append(f"{text} (median of {len(group)} ramps, {bound} client-bound at the peak)")
    return "; ".join(parts)


def _ramp(table: pd.DataFrame) -> Figure | None:
    rps, p90 = _ramp_steps(table, "rps"), _ramp_steps(table, "latency_p90_s")
    if not rps:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
    for i, app in enumerate(sorted(rps)):
        for ax, data, scale in ((axes[0], rps, 1e-3), (axes[1], p90, 1e3)):
            steps = data.get(app, {})
            xs = sorted(steps)
            med = [statistics.median(v for v, _b in steps[x]) * scale for x in xs]
            ax.plot(xs, med, "-", color=COLORS[i % len(COLORS)], label=app)
            for x, m in zip(xs, med, strict=True):  # hollow: a client-bound step in some ramp
                hollow = any(b for _v, b in steps[x])
                ax.plot(x, m, "o", color=COLORS[i % len(COLORS)], mfc="white" if hollow else None)
    for ax, label in ((axes[0], "thousand requests/s (median over ramps)"), (axes[1], "p90 latency, ms (median)")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted({x for steps in rps.values() for x in steps}))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        ax.set_xlabel("oha connections (the ramp's step)")
        ax.set_ylabel(label)
        ax.legend(fontsize=8)
    axes[0].set_title("Ramp: throughput per step")
    axes[1].set_title("Ramp: p90 latency per step")
    return Figure(
        "http_ramp",
        "A ramp of clients until the app breaks (the article's test 1)",
        f"{_peak_text(table)}. Driver: {DRIVER_NOTES['oha']}, closed model; connections stepped up until requests "
        "failed or throughput fell below 90% of the best step; each ramp in a fresh server process. Hollow markers: "
        f"the step was client-bound in some ramp (the client, not the app, was the limit). {pinning(table)}.",
        fig,
    )


def figures(table: pd.DataFrame) -> list[Figure]:
    table = table[table["suite"] == SUITE]
    makers = (_ramp, _ceiling, _capacity, _period, _latency, _cpu_per_request, _memory, _history, _drivers)
    return [fig for make in makers if (fig := make(table)) is not None]
