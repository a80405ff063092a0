"""What earlier stages produce, as tidy rows in base units: a build's cost and a measured load run."""

from __future__ import annotations

from polyperf.build import BuildResult, get_app
from polyperf.measure.sampler import Measurement
from polyperf.record.recorder import Metric

__all__ = ["build_rows", "measurement_rows"]


def build_rows(result: BuildResult, *, suite: str = "build", case: str = "build") -> list[Metric]:
    """A build's wall time and binary size (`cached`: the time is that of the build that made the binary)."""
    params = {"cached": result.cached, "language": get_app(result.app)[0].language}
    return [
        ("build_seconds", result.seconds, "s", params),
        ("binary_bytes", float(result.binary_bytes), "bytes", params),
    ]


def measurement_rows(m: Measurement) -> list[Metric]:
    """One measured load run: client-side rates and latencies, server and client cost over the same window;
    errors by kind as `errors_by_kind` rows with the kind in params."""
    load = m.load
    rows: list[tuple[str, float, str]] = [
        ("rps", load.rps, "1/s"),
        ("requests", load.requests, "count"),
        ("errors", load.failures, "count"),
        ("non_2xx", load.non_2xx, "count"),
        ("duration_s", load.duration, "s"),
        ("cpu_s_per_request", m.cpu_s_per_request, "s"),
        # capacity per server CPU-second: comparable between servers even when the client saturates first
        ("requests_per_cpu_second", m.requests_per_cpu_second, "1/s"),
        ("server_cpu_share", m.server_cpu_fraction, "ratio"),
        ("rss_peak_bytes", m.server.rss_peak, "bytes"),
        ("rss_mean_bytes", m.server.rss_mean, "bytes"),
        ("server_threads", m.server.threads_max, "count"),
        ("client_cpu_share", m.client_cpu_fraction, "ratio"),
        # CPU used + CPU waited for: what the flag uses; waiting shows a machine shared with other work
        ("client_demand_share", m.client_demand_fraction, "ratio"),
        ("server_cpu_wait_share", m.server.wait_seconds / load.duration, "ratio"),
    ]
    for p, name in ((0.5, "p50"), (0.9, "p90"), (0.99, "p99"), (0.999, "p999")):
        if p in load.latency:
            rows.append((f"latency_{name}_s", load.latency[p], "s"))
    if load.achieved_rate_ratio is not None:
        rows.append(("achieved_rate_ratio", load.achieved_rate_ratio, "ratio"))
    out: list[Metric] = [(metric, float(value), unit, {}) for metric, value, unit in rows]
    out += [("errors_by_kind", float(n), "count", {"kind": kind}) for kind, n in sorted(load.errors.items())]
    return out
