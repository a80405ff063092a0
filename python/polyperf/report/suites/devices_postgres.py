"""Figures for the Rust-vs-Go PostgreSQL test (suite devices_postgres): inserts per second and latency by pool
size, what one insert costs the app and PostgreSQL side by side, PostgreSQL's memory, p99 second by second
(oha's fixed-rate runs; locust's ramp in the full profile) with the spike ratio of every repeat, the
restarts, and the rows check. Captions name the driver, the CPU split and where PostgreSQL ran."""

from __future__ import annotations

import statistics

import pandas as pd

from polyperf.report.figure import COLORS, Figure, bar_figure, new_axes, with_param
from polyperf.report.load_figures import DRIVER_NOTES, flagged, pinning, rows, values_by

SUITE = "devices_postgres"
_HATCH = "Hatched bars were client-bound: the load generator's limit, not the server's."


def _db_placement(table: pd.DataFrame) -> str:
    for params in table["params"]:
        if "database" in params:
            if params["database"] == "user":
                return f"PostgreSQL: the user's server ({params.get('db_server')}, CPUs {params.get('db_cpus')})"
            return (
                f"PostgreSQL {params.get('pg_version')} ({params.get('pg_binaries')} binaries, max_connections "
                f"{params.get('pg_max_connections')}) pinned to CPU {params.get('db_cpus')}, sharing the server's"
            )
    return "PostgreSQL placement not recorded"


def _rps(table: pd.DataFrame) -> Figure | None:
    data = values_by(table, "ceiling", "rps", "pool_size")
    if not data:
        return None
    conns = with_param(rows(table, "ceiling", "rps"), "connections").iloc[0]
    return bar_figure(
        "pg_ceiling_rps",
        "Inserts per second by pool size",
        f"Driver: {DRIVER_NOTES['oha']}, {conns} connections, every POST the same device, each run ended "
        f"after a planned request count so none was cut off; {pinning(table)}; {_db_placement(table)}. "
        "The article's axum peaked near 39k req/s on its own hardware: compare the order and shape, not the "
        f"number. {_HATCH}",
        data,
        flagged(table, "ceiling", "pool_size"),
        scale=1e-3,
        group_name="pool ",
        ylabel="thousand inserts/s (median, 95% CI)",
        axes_title="Ceiling: POST /api/devices (INSERT … RETURNING id) by pool size",
    )


# The same shape as _rps: each figure owns its data selection, caption and axes.
def _latency(table: pd.DataFrame) -> Figure | None:
    data = {}
    for name in ("p90", "p99"):
        for (label, pool), values in values_by(table, "fixed_rate", f"latency_{name}_s", "pool_size").items():
            data[(label, f"{name}, pool {pool:>4}")] = values
    if not data:
        return None
    rate = with_param(rows(table, "fixed_rate", "rps"), "rate").iloc[0]
    return bar_figure(
        "pg_latency_by_pool",
        "p90 / p99 by pool size",
        f"Driver: {DRIVER_NOTES['oha']} with -q {rate} --latency-correction (no coordinated omission), "
        f"64 connections; {pinning(table)}.",
        data,
        set(),
        scale=1e3,
        ylabel="latency, ms (median, 95% CI)",
        axes_title=f"p90 and p99 at a fixed {rate:,.0f} inserts/s, by pool size",
        log=True,
    )


def _cpu(table: pd.DataFrame) -> Figure | None:
    data = {}
    per_insert = not rows(table, "ceiling", "app_cpu_s_per_insert").empty
    metrics = (
        (("app_cpu_s_per_insert", "app"), ("db_cpu_s_per_insert", "PostgreSQL"))
        if per_insert  # older runs: per request (the same, less the requests that inserted nothing)
        else (("cpu_s_per_request", "app"), ("db_cpu_s_per_request", "PostgreSQL"))
    )
    for metric, part in metrics:
        for (label, pool), values in values_by(table, "ceiling", metric, "pool_size").items():
            data[(label, f"{part}, pool {pool:>4}")] = values
    if not data:
        return None
    share = rows(table, "ceiling", "db_cpu_share")["value"]
    bound = rows(table, "ceiling", "db_bound")["value"]
    fraction = rows(table, "ceiling", "db_cpu_fraction_of_total")
    split = ", ".join(
        f"{impl} {statistics.median(g['value']):.0%}" for impl, g in fraction.groupby("implementation", sort=True)
    )
    return bar_figure(
        "pg_cpu_per_insert",
        "App and PostgreSQL CPU per insert",
        "CPU seconds (user + system) over the measured window divided by the rows the run inserted and the "
        "client saw acknowledged: the app's (its cgroup's exact counter where rows say cpu_source = cgroup, "
        "else /proc) and PostgreSQL's whole tree (postmaster and every backend; its own cgroup's counter where "
        "rows say db_cpu_source = cgroup, else /proc samples), both read at the load generator's edges. "
        f"PostgreSQL's share of the two (median per app): {split or 'not recorded'}. It used at most "
        f"{share.max():.0%} of its cores in a ceiling run; it was the bottleneck (≥ 90% of its cores, or most "
        f"of a saturated shared core) in {int(bound.sum())} of {len(bound)} runs. {_db_placement(table)}.",
        data,
        set(),
        scale=1e6,
        ylabel=f"CPU µs per {'acknowledged insert' if per_insert else 'request'} (median, 95% CI)",
        axes_title="What one insert costs: the app and PostgreSQL, side by side",
    )


def _memory(table: pd.DataFrame) -> Figure | None:
    data = {}
    for metric, what in (("db_pss_bytes", "PSS after"), ("db_rss_peak_bytes", "RSS peak")):
        for (label, pool), values in values_by(table, "ceiling", metric, "pool_size").items():
            data[(label, f"{what}, pool {pool:>4}")] = values
    if not data:
        return None
    return bar_figure(
        "pg_memory",
        "PostgreSQL memory",
        "PostgreSQL's whole tree (postmaster, every backend of every app's pool). PSS after the run: each shared "
        "page split among the processes that map it, so the shared buffers count once (the tree's footprint). "
        "RSS peak: the largest sum of RSS sampled during the run, which counts the shared buffers once per "
        f"backend (what `ps` adds up), so it grows with the pools. {_db_placement(table)}.",
        data,
        set(),
        scale=1e-6,
        ylabel="PostgreSQL, MB (median, 95% CI)",
        axes_title="PostgreSQL's memory during the ceiling runs",
    )


def _spikes_text(table: pd.DataFrame, case: str) -> str:
    spikes = rows(table, case, "p99_spike_ratio")
    parts = [
        f"{impl} {statistics.median(g['value']):.2f}x (n = {len(g)}, {g['value'].min():.2f}–{g['value'].max():.2f})"
        for impl, g in spikes.groupby("implementation", sort=True)
    ]
    return "; ".join(parts) or "none recorded"


def _p99_history(table: pd.DataFrame) -> Figure | None:
    oha = table[table["case"] == "fixed_rate_history"]
    hist = oha if not oha.empty else table[table["case"] == "locust_history"]
    if hist.empty:
        return None
    fig, ax = new_axes(8.5, 4.5)
    users_ax = ax.twinx() if oha.empty else None
    for i, (impl, g) in enumerate(hist.groupby("implementation", sort=True)):
        g = g.assign(second=g["params"].map(lambda p: p.get("second")))
        p99 = g[g["metric"] == "history_p99_s"].sort_values("second")
        color = COLORS[i % len(COLORS)]
        ax.plot(p99["second"], p99["value"] * 1e3, "o-", color=color, label=impl)
        if users_ax is not None:
            users = g[g["metric"] == "history_users"].sort_values("second")
            users_ax.plot(users["second"], users["value"], ":", color=color, alpha=0.6)
    ax.set_yscale("log")
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("p99 latency, ms" + (" (solid)" if users_ax is not None else ""))
    if users_ax is not None:
        users_ax.set_ylabel("users (dotted)")
    ax.legend(fontsize=7)
    if oha.empty:
        ax.set_title("locust step ramp: p99 per second (the article saw Go's latency spike)")
        how = (
            "The article's client shape: users added stage by stage, 0.2 s between a user's requests, 1 s timeout, "
            "a random device per POST. Per-second p99 of the requests that ended in that second (timed in the "
            f"locust processes), first repeat. Driver: {DRIVER_NOTES['locust']}."
        )
        return Figure(
            "pg_p99_history", "p99 over the ramp", f"{how} Spike ratio: {_spikes_text(table, 'locust')}.", fig
        )
    rate = with_param(oha, "rate").iloc[0]
    ax.set_title(f"p99 second by second at a fixed {rate:,.0f} inserts/s, first pool (the article saw Go's spike)")
    return Figure(
        "pg_p99_history",
        "p99 second by second",
        f"Driver: {DRIVER_NOTES['oha']} with -q {rate} --latency-correction; every request kept by oha itself "
        "(--db-url: due time, end, status; never rounded), binned by the second it was due; nearest-rank p99 "
        "per second, first repeat shown. Spike ratio (worst second's p99 over the median second's, one per "
        f"repeat; median, range): {_spikes_text(table, 'fixed_rate')}. {pinning(table)}.",
        fig,
    )


def _restarts(table: pd.DataFrame) -> Figure | None:
    data = {}
    for case in ("restart_fast", "restart_immediate"):
        for metric, what in (
            ("outage_s", "PostgreSQL down"),
            ("error_window_s", "errors seen"),
            ("recovery_s", "recovery"),
        ):
            for (label, _g), values in values_by(table, case, metric).items():
                data[(label, f"{case.removeprefix('restart_')}: {what}")] = values
    if not data:
        return None
    errors = {
        impl: int(g["value"].sum()) for impl, g in table[table["metric"] == "errors_total"].groupby("implementation")
    }
    return bar_figure(
        "pg_restarts",
        "Restarts: outage, errors, recovery",
        "oha at a fixed rate plus a probe POSTing every 20 ms; PostgreSQL stopped (fast: SIGINT, checkpoint; "
        "immediate: SIGQUIT, crash recovery) and started again on the same port. Recovery: from PostgreSQL "
        "accepting connections to the first success of a request sent after it (20 ms resolution). Failed "
        f"requests per app (both modes): {errors}. No acknowledged row may be lost (see the rows check).",
        data,
        set(),
        scale=1e3,
        ylabel="ms",
        axes_title="PostgreSQL restarted mid-run (pg_ctl -m fast / immediate)",
    )


def _rows_check(table: pd.DataFrame) -> Figure | None:
    totals = table[table["case"] == "rows_total"]
    if totals.empty:
        return None
    data = {}
    for metric, what in (("rows_acked", "acknowledged POSTs"), ("rows_found", "rows found")):
        for (label, _g), values in values_by(totals, "rows_total", metric).items():
            data[(label, what)] = values
    wrong = rows(totals, "rows_total", "rows_mismatch")
    mismatch = {r["implementation"]: int(r["value"]) for _, r in wrong.iterrows()}
    return bar_figure(
        "pg_rows_check",
        "Rows check",
        "After every run the app's table is read back: rows inserted during the run against the 2xx POSTs the "
        "client counted (ids and contents one by one where the client kept them: locust, the probe; counts and "
        f"the body for oha). Rows lost, phantom or altered per app: {mismatch} (must all be 0).",
        data,
        set(),
        scale=1.0,
        ylabel="rows over the whole run",
        axes_title="Nothing lost, nothing phantom: rows found vs acknowledged POSTs",
        size=(7.5, 4.2),
    )


def figures(table: pd.DataFrame) -> list[Figure]:
    table = table[table["suite"] == SUITE]
    makers = (_rps, _latency, _cpu, _memory, _p99_history, _restarts, _rows_check)
    return [fig for make in makers if (fig := make(table)) is not None]
