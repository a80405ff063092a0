"""Figures for the Rust-vs-Go PostgreSQL test (suite devices_postgres): inserts per second and latency by pool
size, what one insert costs the app and PostgreSQL, p99 over the locust ramp, the restarts, and the rows
check. Captions name the driver, the CPU split and where PostgreSQL ran."""

from __future__ import annotations

import pandas as pd

from polyperf.report.figure import COLORS, Figure, new_axes, with_param
from polyperf.report.load_figures import DRIVER_NOTES, flagged, grouped_bars, pinning, rows, values_by

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
    fig, ax = new_axes(8.5, 4.5)
    grouped_bars(ax, data, flagged(table, "ceiling", "pool_size"), scale=1e-3, group_name="pool ")
    ax.set_ylabel("thousand inserts/s (median, 95% CI)")
    ax.set_title("Ceiling: POST /api/devices (INSERT … RETURNING id) by pool size")
    conns = with_param(rows(table, "ceiling", "rps"), "connections").iloc[0]
    return Figure(
        "pg_ceiling_rps",
        "Inserts per second by pool size",
        f"Driver: {DRIVER_NOTES['oha']}, {conns} connections, every POST the same device, each run ended "
        f"after a planned request count so none was cut off; {pinning(table)}; {_db_placement(table)}. "
        "The article's axum peaked near 39k req/s on its own hardware: compare the order and shape, not the "
        f"number. {_HATCH}",
        fig,
    )


def _latency(table: pd.DataFrame) -> Figure | None:
    data = {}
    for name in ("p90", "p99"):
        for (label, pool), values in values_by(table, "fixed_rate", f"latency_{name}_s", "pool_size").items():
            data[(label, f"{name}, pool {pool:>4}")] = values
    if not data:
        return None
    rate = with_param(rows(table, "fixed_rate", "rps"), "rate").iloc[0]
    fig, ax = new_axes(8.5, 4.5)
    grouped_bars(ax, data, set(), scale=1e3)
    ax.set_yscale("log")
    ax.set_ylabel("latency, ms (median, 95% CI)")
    ax.set_title(f"p90 and p99 at a fixed {rate:,} inserts/s, by pool size")
    return Figure(
        "pg_latency_by_pool",
        "p90 / p99 by pool size",
        f"Driver: {DRIVER_NOTES['oha']} with -q {rate} --latency-correction (no coordinated omission), "
        f"64 connections; {pinning(table)}.",
        fig,
    )


def _cpu(table: pd.DataFrame) -> Figure | None:
    data = {}
    for metric, part in (("cpu_s_per_request", "app"), ("db_cpu_s_per_request", "PostgreSQL")):
        for (label, pool), values in values_by(table, "ceiling", metric, "pool_size").items():
            data[(label, f"{part}, pool {pool:>4}")] = values
    if not data:
        return None
    share = rows(table, "ceiling", "db_cpu_share")["value"]
    bound = rows(table, "ceiling", "db_bound")["value"]
    fig, ax = new_axes(8.5, 4.5)
    grouped_bars(ax, data, set(), scale=1e6)
    ax.set_ylabel("CPU µs per insert (median, 95% CI)")
    ax.set_title("What one insert costs: the app's process tree and PostgreSQL's")
    return Figure(
        "pg_cpu_per_insert",
        "App and PostgreSQL CPU per insert",
        "CPU seconds (user + system) over exactly the measured window, from /proc, divided by the requests: the "
        "app's process tree and PostgreSQL's whole tree (postmaster and every backend). PostgreSQL used at most "
        f"{share.max():.0%} of its cores in a ceiling run; it was the bottleneck (≥ 90% of its cores, or most "
        f"of a saturated shared core) in {int(bound.sum())} of {len(bound)} runs. {_db_placement(table)}.",
        fig,
    )


def _p99_history(table: pd.DataFrame) -> Figure | None:
    hist = table[table["case"] == "locust_history"]
    if hist.empty:
        return None
    fig, ax = new_axes(8.5, 4.5)
    users_ax = ax.twinx()
    for i, (impl, g) in enumerate(hist.groupby("implementation", sort=True)):
        g = g.assign(second=g["params"].map(lambda p: p.get("second")))
        p99 = g[g["metric"] == "history_p99_s"].sort_values("second")
        users = g[g["metric"] == "history_users"].sort_values("second")
        color = COLORS[i % len(COLORS)]
        ax.plot(p99["second"], p99["value"] * 1e3, "o-", color=color, label=impl)
        users_ax.plot(users["second"], users["value"], ":", color=color, alpha=0.6)
    ax.set_yscale("log")
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("p99 latency, ms (solid)")
    users_ax.set_ylabel("users (dotted)")
    ax.legend(fontsize=7)
    ax.set_title("locust step ramp: p99 per second (the article saw Go's latency spike)")
    return Figure(
        "pg_p99_history",
        "p99 over the ramp",
        "The article's client shape: users added stage by stage, 0.2 s between a user's requests, 1 s timeout, "
        "a random device per POST. Per-second p99 of the requests that ended in that second (timed in the "
        f"locust processes), first repeat. Driver: {DRIVER_NOTES['locust']}.",
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
    fig, ax = new_axes(8.5, 4.5)
    grouped_bars(ax, data, set(), scale=1e3)
    ax.set_ylabel("ms")
    ax.set_title("PostgreSQL restarted mid-run (pg_ctl -m fast / immediate)")
    errors = {
        impl: int(g["value"].sum()) for impl, g in table[table["metric"] == "errors_total"].groupby("implementation")
    }
    return Figure(
        "pg_restarts",
        "Restarts: outage, errors, recovery",
        "oha at a fixed rate plus a probe POSTing every 20 ms; PostgreSQL stopped (fast: SIGINT, checkpoint; "
        "immediate: SIGQUIT, crash recovery) and started again on the same port. Recovery: from PostgreSQL "
        "accepting connections to the first success of a request sent after it (20 ms resolution). Failed "
        f"requests per app (both modes): {errors}. No acknowledged row may be lost (see the rows check).",
        fig,
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
    fig, ax = new_axes(7.5, 4.2)
    grouped_bars(ax, data, set(), scale=1.0)
    ax.set_ylabel("rows over the whole run")
    ax.set_title("Nothing lost, nothing phantom: rows found vs acknowledged POSTs")
    return Figure(
        "pg_rows_check",
        "Rows check",
        "After every run the app's table is read back: rows inserted during the run against the 2xx POSTs the "
        "client counted (ids and contents one by one where the client kept them: locust, the probe; counts and "
        f"the body for oha). Rows lost, phantom or altered per app: {mismatch} (must all be 0).",
        fig,
    )


def figures(table: pd.DataFrame) -> list[Figure]:
    table = table[table["suite"] == SUITE]
    makers = (_rps, _latency, _cpu, _p99_history, _restarts, _rows_check)
    return [fig for make in makers if (fig := make(table)) is not None]
