"""The devices_postgres report section: app and PostgreSQL CPU per insert side by side, PostgreSQL's memory,
and p99 second by second from oha's records with every repeat's spike ratio in the caption."""

from __future__ import annotations

import pandas as pd

from polyperf.report.suites import devices_postgres

BASE = {"server_cpus": "0", "client_cpus": "1", "database": "throwaway", "pg_version": "18.4", "db_cpus": "0"}


def _row(case: str, impl: str, metric: str, value: float, repeat: int = 0, **params: object) -> dict:
    return {
        "run_id": "r",
        "suite": "devices_postgres",
        "case": case,
        "implementation": impl,
        "variant": "",
        "driver": "oha",
        "metric": metric,
        "value": value,
        "unit": "",
        "repeat": repeat,
        "client_bound": False,
        "params": {**BASE, **params},
    }


def _table() -> pd.DataFrame:
    rows = []
    for impl, app, db in (("axum_devices", 50e-6, 55e-6), ("gnet_devices", 80e-6, 65e-6)):
        for repeat in range(2):
            ceiling = {"pool_size": 8, "connections": 256}
            rows += [
                _row("ceiling", impl, "rps", 5000.0, repeat, **ceiling),
                _row("ceiling", impl, "app_cpu_s_per_insert", app, repeat, **ceiling),
                _row("ceiling", impl, "db_cpu_s_per_insert", db, repeat, **ceiling),
                _row("ceiling", impl, "db_cpu_fraction_of_total", db / (app + db), repeat, **ceiling),
                _row("ceiling", impl, "db_cpu_share", 0.3, repeat, **ceiling),
                _row("ceiling", impl, "db_bound", 0.0, repeat, **ceiling),
                _row("ceiling", impl, "db_rss_peak_bytes", 4e9, repeat, **ceiling),
                _row("fixed_rate", impl, "p99_spike_ratio", 1.5 + repeat, repeat, pool_size=8, rate=1000.0),
            ]
        rows.append(_row("ceiling", impl, "db_pss_bytes", 3e8, 0, pool_size=8))
        for second in range(3):
            rows.append(_row("fixed_rate_history", impl, "history_p99_s", 0.004, 0, rate=1000.0, second=second))
    return pd.DataFrame(rows)


def test_cpu_memory_and_spikes_are_shown() -> None:
    figures = {fig.name: fig for fig in devices_postgres.figures(_table())}
    assert {"pg_cpu_per_insert", "pg_memory", "pg_p99_history"} <= set(figures)
    cpu = figures["pg_cpu_per_insert"].caption
    assert "axum_devices 52%" in cpu and "gnet_devices 45%" in cpu  # PostgreSQL's share of app + PostgreSQL
    assert "db_cpu_source" in cpu
    spikes = figures["pg_p99_history"].caption
    assert "axum_devices 2.00x (n = 2, 1.50–2.50)" in spikes and "--db-url" in spikes
    assert "PSS" in figures["pg_memory"].caption
