"""The load suites' figures and claims, fed with synthetic rows shaped like the suites' own (no load
generated here), written as schema v1 and upgraded on the way in: every figure renders, client-bound bars are told
apart, and the claims select the right rows and leave client-bound repeats out."""

from __future__ import annotations

import json

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from polyperf.analyse.claims import evaluate, load_claims
from polyperf.record.schema import as_frame, upgrade
from polyperf.report.load_figures import flagged
from polyperf.report.suites import bson_server, http_frameworks

SPLIT = {"server_cpus": "0", "client_cpus": "1", "server_workers": 1}


V1_UNITS = {"rps": "req/s", "history_rps": "req/s", "client_bound": "flag", "cpu_us_per_request": "us"}


def _v1_unit(metric):
    return "ms" if metric.endswith("_ms") else "bytes" if metric.endswith("_bytes") else V1_UNITS.get(metric, "count")


def _row(suite, case, impl, variant, metric, value, repeat, **params):
    return {
        "run_id": "r",
        "suite": suite,
        "case": case,
        "implementation": impl,
        "variant": variant,
        "metric": metric,
        "value": float(value),
        "unit": _v1_unit(metric),
        "repeat": repeat,
        "params": json.dumps({**SPLIT, **params}, sort_keys=True),
        "schema_version": 1,
    }


def _http_rows(gnet_bound=False):
    rows = []
    apps = {
        "gnet_devices": ("oha", 100e3),
        "axum_devices": ("oha", 80e3),
        "nethttp_devices": ("oha", 60e3),
        "hyper_hello/multi": ("oha/multi", 110e3),
        "hyper_hello/current": ("oha/current", 120e3),
    }
    for repeat in range(12):  # twelve, as quick gives: a sign test the run's family control can pass
        for key, (variant, rps) in apps.items():
            impl = key.split("/")[0]
            bound = gnet_bound and impl == "gnet_devices"
            for c in (16, 64):
                common = {"connections": c, "driver": "oha", "client_bound": bound}
                rows += [
                    _row("http_frameworks", "ceiling", impl, variant, "rps", rps + repeat * 100, repeat, **common),
                    _row("http_frameworks", "ceiling", impl, variant, "client_bound", float(bound), repeat, **common),
                    _row(
                        "http_frameworks", "ceiling", impl, variant, "cpu_us_per_request", 9 + repeat, repeat, **common
                    ),
                    _row(
                        "http_frameworks",
                        "ceiling",
                        impl,
                        variant,
                        "rss_peak_bytes",
                        12e6 if impl == "gnet_devices" else 6e6,
                        repeat,
                        **common,
                    ),
                    _row("http_frameworks", "ceiling", impl, variant, "rss_mean_bytes", 5e6, repeat, **common),
                    _row(
                        "http_frameworks",
                        "ceiling",
                        impl,
                        variant,
                        "requests_per_cpu_second",
                        rps * 1.1 + repeat * 100,
                        repeat,
                        **common,
                    ),
                ]
            fixed = {"connections": 64, "rate": 5000, "driver": "oha", "client_bound": False}
            for metric, value in (
                ("latency_p50_ms", 0.2),
                ("latency_p90_ms", 0.5),
                ("latency_p99_ms", 2),
                ("latency_p999_ms", 5),
                ("cpu_us_per_request", 40),
                ("rps", 5000),
            ):
                rows.append(_row("http_frameworks", "fixed_rate", impl, variant, metric, value, repeat, **fixed))
            lvariant = variant.replace("oha", "locust")
            locust = {"users": 512, "driver": "locust", "client_bound": True}
            for metric, value in (("rps", 8000), ("client_bound", 1.0)):
                rows.append(_row("http_frameworks", "locust", impl, lvariant, metric, value, repeat, **locust))
            for second in range(3):
                for metric, value in (("history_rps", 7000 + second), ("history_users", 8 * 4**second)):
                    rows.append(
                        _row("http_frameworks", "locust_history", impl, lvariant, metric, value, 0, second=second)
                    )
        for driver, rps in (("oha", 120e3), ("wrk", 125e3)):
            rows.append(
                _row(
                    "http_frameworks",
                    "driver_ceiling",
                    "hyper_hello",
                    f"{driver}/current",
                    "rps",
                    rps,
                    repeat,
                    connections=64,
                    driver=driver,
                    client_bound=False,
                )
            )
    return as_frame(upgrade(rows))


def _bson_rows():
    rows = []
    for repeat in range(12):
        for path, rps, cpu in (("clone", 5000, 150), ("document", 7000, 110), ("raw", 10500, 60)):
            common = {"connections": 64, "documents": 100, "driver": "oha", "client_bound": False}
            rows += [
                _row("bson_server", "ceiling", "bson_server", f"oha/{path}", "rps", rps + repeat, repeat, **common),
                _row(
                    "bson_server", "ceiling", "bson_server", f"oha/{path}", "cpu_us_per_request", cpu, repeat, **common
                ),
                _row("bson_server", "ceiling", "bson_server", f"oha/{path}", "client_bound", 0, repeat, **common),
                _row(
                    "bson_server",
                    "fixed_rate",
                    "bson_server",
                    f"oha/{path}",
                    "latency_p99_ms",
                    3,
                    repeat,
                    **{**common, "rate": 2500},
                ),
                _row(
                    "bson_server",
                    "locust",
                    "bson_server",
                    f"locust/{path}",
                    "rps",
                    4000,
                    repeat,
                    documents=100,
                    users=32,
                    driver="locust",
                    client_bound=True,
                ),
                _row(
                    "bson_server",
                    "locust",
                    "bson_server",
                    f"locust/{path}",
                    "client_bound",
                    1,
                    repeat,
                    documents=100,
                    users=32,
                    driver="locust",
                    client_bound=True,
                ),
            ]
    return as_frame(upgrade(rows))


def test_every_load_figure_renders():
    made = http_frameworks.figures(_http_rows()) + bson_server.figures(_bson_rows())
    names = {f.name for f in made}
    for f in made:
        plt.close(f.figure)
    assert names == {
        "http_ceiling_rps",
        "http_capacity_per_core",
        "http_latency_fixed_rate",
        "http_cpu_per_request",
        "http_rss",
        "http_locust_history",
        "http_drivers",
        "bson_ceiling_rps",
        "bson_cpu_per_request",
        "bson_latency_p99",
        "bson_locust_rps",
    }
    captions = " ".join(f.caption for f in made)
    assert "oha" in captions and "locust" in captions and "whole milliseconds" in captions
    assert "server pinned to CPU 0, load generator to CPU 1" in captions


def test_client_bound_bars_are_flagged():
    table = _http_rows(gnet_bound=True)
    marks = flagged(table, "ceiling", "connections")
    assert ("gnet_devices", 64) in marks and ("axum_devices", 64) not in marks


def _verdicts(table):
    return {v.claim.id: v for v in evaluate(table, load_claims())}


def test_load_claims_judge_the_suites_rows():
    verdicts = _verdicts(pd.concat([_http_rows(), _bson_rows()]))
    assert verdicts["http.gnet_ahead_of_axum_capacity"].verdict == "reproduced"
    assert verdicts["http.go_less_memory"].verdict == "not reproduced"  # gnet 12 MB vs axum 6 MB here
    assert verdicts["http.hyper_multi_vs_current_capacity"].verdict == "reproduced"
    assert verdicts["http.gnet_ahead_of_axum_capacity"].measured.n == 12
    assert verdicts["http.oha_matches_wrk_ceiling"].measured.median == pytest.approx(120 / 125)
    assert verdicts["bson.raw_vs_clone_rps"].measured.median == pytest.approx(10501 / 5001, rel=1e-3)
    assert verdicts["bson.clone_vs_raw_cpu_per_request"].measured.median == pytest.approx(2.5)


def test_client_bound_repeats_are_left_out_of_claims():
    verdicts = _verdicts(_http_rows(gnet_bound=True))
    assert verdicts["http.gnet_ahead_of_axum_capacity"].verdict == "not measured"
    assert "client-bound" in verdicts["http.gnet_ahead_of_axum_capacity"].reason
