"""The http_frameworks report's ramp figure: each app's peak and p90 at the peak, as medians over ramps, and the
client-bound peaks counted, from rows shaped as the suite records them."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from polyperf.report.suites.http_frameworks import _peak_text, _ramp, figures


def _row(case, app, metric, value, repeat, bound=False, **params):
    return {
        "suite": "http_frameworks",
        "case": case,
        "implementation": app,
        "variant": "",
        "driver": "oha",
        "metric": metric,
        "value": value,
        "unit": "1/s",
        "repeat": repeat,
        "client_bound": bound,
        "params": params,
    }


def _table() -> pd.DataFrame:
    rows = []
    for repeat, (gnet, axum) in enumerate([(1000.0, 800.0), (1200.0, 900.0), (1100.0, 700.0)]):
        rows += [
            _row("ramp", "gnet_devices", "peak_requests_per_s", gnet, repeat, bound=repeat == 0),
            _row("ramp", "gnet_devices", "p90_latency_s", 0.002, repeat),
            _row("ramp", "axum_devices", "peak_requests_per_s", axum, repeat),
        ]
        for c, share in ((4, 0.5), (16, 1.0)):
            rows.append(_row("ramp_step", "gnet_devices", "rps", gnet * share, repeat, connections=c))
            rows.append(_row("ramp_step", "gnet_devices", "latency_p90_s", 0.001 * share, repeat, connections=c))
    return pd.DataFrame(rows)


def test_peak_text_gives_medians_over_ramps_and_counts_client_bound_peaks():
    text = _peak_text(_table())
    gnet = "gnet_devices peaks at 1,100 req/s, p90 2.00 ms there (median of 3 ramps, 1 client-bound at the peak)"
    assert gnet in text
    assert "axum_devices peaks at 800 req/s (median of 3 ramps, 0 client-bound at the peak)" in text


def test_the_ramp_figure_comes_first_and_only_with_ramp_rows():
    table = _table()
    made = figures(table)
    assert made[0].name == "http_ramp"
    plt.close("all")
    assert _ramp(table[table["case"] != "ramp_step"]) is None
