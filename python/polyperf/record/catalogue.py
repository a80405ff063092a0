"""What each recorded metric means, declared once beside the code that records it: its base unit, which way is
better, whether a run reproduces it exactly, and whether a CI gate may fail on it.

compare, the claims, the report and the history read this table; a metric it does not know is reported as
unknown, never guessed from its name (benchstat's units carry `better=` and `assume=exact` the same way).
`tests/test_catalogue.py` fails when a suite or the harness records a metric missing here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from polyperf.record.schema import BASE_UNITS, upgrade

__all__ = ["CATALOGUE", "FAMILIES", "MetricInfo", "current_metric", "declare", "declared", "metric", "metric_info"]

Better = Literal["higher", "lower", "none"]


@dataclass(frozen=True)
class MetricInfo:
    """One metric. `exact`: a count a run reproduces (syscalls, allocations, rows), not a sampled value;
    `gated`: a primary metric a CI gate may fail on (diagnostics such as the client's CPU share, RSS or the CPU
    a server waited for are shown, never gated)."""

    name: str
    unit: str  # base unit: s, bytes, count, 1/s, bytes/s, ratio
    better: Better
    exact: bool
    gated: bool
    description: str

    def __post_init__(self) -> None:
        if self.unit not in BASE_UNITS:
            raise ValueError(f"metric {self.name}: unit {self.unit!r} is not a base unit")


def _m(
    name: str, unit: str, better: Better, description: str, *, exact: bool = False, gated: bool = True
) -> MetricInfo:
    return MetricInfo(name, unit, better, exact, gated, description)


def _family(template: str, parts: Iterable[str], unit: str, better: Better, description: str) -> list[MetricInfo]:
    """Names with one variable part, spelled out: `latency_{}_s` over p50, p90, … (never a glob)."""
    return [_m(template.format(part), unit, better, description.format(part)) for part in parts]


# Names with a variable part: (template, the parts a run may record). Expanded into CATALOGUE below.
PERCENTILES = ("p50", "p90", "p99", "p999")
FAMILIES: Mapping[str, tuple[str, ...]] = MappingProxyType({"latency_{}_s": PERCENTILES})

_LOAD = [
    # record/rows.py measurement_rows: one timed load run (and cli/remote.py, client side only)
    _m("rps", "1/s", "higher", "requests completed per second over the driver's window"),
    _m("requests", "count", "none", "requests completed in the window (bounded by the run's settings)", gated=False),
    _m("errors", "count", "lower", "failed requests (connection errors, timeouts)"),
    _m("errors_by_kind", "count", "lower", "failed requests of one kind (params.kind)", gated=False),
    _m("non_2xx", "count", "lower", "responses with a status outside 2xx"),
    _m("duration_s", "s", "none", "the driver's measured window (set by the profile)", gated=False),
    _m("cpu_s_per_request", "s", "lower", "server CPU seconds over the window per request"),
    _m("requests_per_cpu_second", "1/s", "higher", "requests a fully used server core answers"),
    _m("server_cpu_share", "ratio", "none", "server CPU seconds per wall second of the window", gated=False),
    _m("server_cpu_s", "s", "none", "server CPU seconds over the window (ab's duets)", gated=False),
    _m("rss_peak_bytes", "bytes", "lower", "peak resident memory of the server's tree (sampled)", gated=False),
    _m("rss_mean_bytes", "bytes", "lower", "mean resident memory of the server's tree (sampled)", gated=False),
    _m("server_threads", "count", "none", "most threads the server had (sampled)", gated=False),
    _m("client_cpu_share", "ratio", "none", "the load generator's CPU per client core", gated=False),
    _m("client_demand_share", "ratio", "none", "the load generator's CPU used plus waited for", gated=False),
    _m("server_cpu_wait_share", "ratio", "none", "CPU the server waited for in the run queue", gated=False),
    _m("achieved_rate_ratio", "ratio", "higher", "achieved over offered rate of a fixed-rate run", gated=False),
    *_family("latency_{}_s", PERCENTILES, "s", "lower", "the {} latency of the window's requests"),
    _m("client_cpu_s_per_request", "s", "lower", "the load generator's CPU per request", gated=False),
    _m("worker_rps", "1/s", "higher", "one remote worker's requests per second", gated=False),
    _m("worker_requests", "count", "none", "one remote worker's completed requests", gated=False),
    # orchestrate/load_suite.py: the CPU budget of a server run under a quota (settings and what the kernel did)
    _m("cpu_quota", "ratio", "none", "the server's CPU budget, in CPUs (a setting)", gated=False),
    _m("cpu_quota_period_s", "s", "none", "the budget's period (a setting)", gated=False),
    _m("nr_periods", "count", "none", "quota periods the server ran in", gated=False),
    _m("nr_throttled", "count", "none", "quota periods in which the server was throttled", gated=False),
    _m("throttled_s", "s", "lower", "time the server was throttled", gated=False),
    _m("quota_use", "ratio", "none", "share of the budget the server used", gated=False),
    _m("history_rps", "1/s", "higher", "requests per second in one second of a run", gated=False),
    _m("history_users", "count", "none", "locust users in one second of a step ramp (a setting)", gated=False),
    # suites/test_http_frameworks.py case `ramp`: one ramp of connections until the app broke (Anton Putra's test 1)
    _m("peak_requests_per_s", "1/s", "higher", "the ramp's highest requests per second over its steps"),
    _m("p90_latency_s", "s", "lower", "the p90 latency at the ramp's step of peak throughput"),
    _m("peak_connections", "count", "none", "connections at the ramp's step of peak throughput", gated=False),
    _m("ramp_steps", "count", "none", "steps the ramp ran before the app broke or the steps ran out", gated=False),
]

# Each metric is one spelled-out _m(...) row on purpose: the catalogue is a table people read and grep, not code.
_COUNTS = [
    # orchestrate/count_runs.py: untimed counts over a fixed number of requests, and the timed window's syscalls
    _m("allocations_per_request", "count", "lower", "heap allocations per request (counting build)", exact=True),
    _m("syscalls_per_request", "count", "lower", "read+write-family syscalls per request (/proc io)", exact=True),
    _m("read_syscalls_per_request", "count", "lower", "read-family syscalls per request", exact=True),
    _m("write_syscalls_per_request", "count", "lower", "write-family syscalls per request", exact=True),
    # wake-ups (futex, epoll_wait) follow timing, not the code: shown, never given a direction
    _m("syscalls_per_request_by_name", "count", "none", "one syscall per request, traced", exact=True, gated=False),
    _m("syscall_trace_overhead", "ratio", "none", "the tracer's slowdown of the same batch", gated=False),
    # suites/test_io_buffering.py, test_bson.py: exact per call
    _m("read_syscalls", "count", "lower", "read syscalls of one call", exact=True),
    _m("write_syscalls", "count", "lower", "write syscalls of one call", exact=True),
    _m("allocations", "count", "lower", "heap allocations of one call (counting allocator)", exact=True),
    _m("allocated_bytes", "bytes", "lower", "bytes allocated by one call (counting allocator)", exact=True),
]

_TIMES = [
    # pytest-benchmark rounds (record/pytest_plugin.py) and the suites' own timings
    _m("seconds", "s", "lower", "wall time of one call or round"),
    _m("bytes_per_s", "bytes/s", "higher", "input bytes processed per second"),
    _m("bytes", "bytes", "none", "size of the input a row was timed on", gated=False),
    _m("cpu_seconds", "s", "lower", "process CPU time of one call"),
    _m("criterion_estimate_s", "s", "lower", "criterion's own estimate of a round", gated=False),
    _m("foreign_cpu_share", "ratio", "none", "share of the machine's CPU other processes used meanwhile", gated=False),
    _m("bytes_per_op", "bytes", "lower", "Go benchmark bytes allocated per operation"),
    _m("allocs_per_op", "count", "lower", "Go benchmark allocations per operation (a mean over b.N)", exact=False),
    _m("seconds_per_multiply", "s", "lower", "wall time of one matrix multiply"),
    _m("cpu_s_per_multiply", "s", "lower", "server CPU of one matrix multiply"),
]

_BUILDS = [
    # record/rows.py build_rows and suites/test_build_profiles.py: a build's cost and what its binary proves
    _m("build_seconds", "s", "lower", "wall time of the build that made the binary", gated=False),
    _m("build_cpu_seconds", "s", "lower", "CPU time of a clean build", gated=False),
    _m("binary_bytes", "bytes", "lower", "size of the built binary", gated=False),
    _m("links_mimalloc", "count", "none", "1 when the binary links mimalloc", gated=False),
    _m("debug_info", "count", "none", "1 when the binary holds debug info", gated=False),
    _m("except_table_bytes", "bytes", "none", "size of the unwinding tables (0 with panic=abort)", gated=False),
    _m("llvm_promoted_symbols", "count", "none", "LTO-promoted symbols in the binary", gated=False),
    _m("vex_instruction_share", "ratio", "none", "share of VEX-encoded instructions (target-cpu=native)", gated=False),
]

_DATABASE = [
    # orchestrate/db_runs.py and suites/test_devices_postgres.py: POST inserts into PostgreSQL
    _m("app_cpu_s_per_insert", "s", "lower", "the app's CPU per inserted row"),
    _m("db_cpu_s_per_insert", "s", "lower", "PostgreSQL's CPU per inserted row"),
    _m("db_cpu_s_per_request", "s", "lower", "PostgreSQL's CPU per request"),
    _m("total_cpu_s_per_request", "s", "lower", "app and PostgreSQL CPU per request"),
    _m("db_cpu_share", "ratio", "none", "PostgreSQL's CPU per wall second", gated=False),
    _m("db_cpu_fraction_of_total", "ratio", "none", "PostgreSQL's share of app + database CPU", gated=False),
    _m("db_bound", "ratio", "none", "1 when PostgreSQL, not the app, limited the run", gated=False),
    _m("db_connections_mean", "count", "none", "mean open database connections (sampled)", gated=False),
    _m("db_connections_peak", "count", "none", "most database connections (sampled)", gated=False),
    _m("db_connections_open_peak", "count", "none", "most connections opened by the pool", gated=False),
    _m("db_rss_peak_bytes", "bytes", "lower", "PostgreSQL's peak resident memory (sampled)", gated=False),
    _m("db_pss_bytes", "bytes", "lower", "PostgreSQL's proportional memory after the run", gated=False),
    # exact inside a run (checked against each other), but how many rows a window carries depends on the load: not
    # gated from run to run (rows_mismatch is)
    _m("rows_acked", "count", "none", "POSTs the client saw acknowledged", exact=True, gated=False),
    _m("rows_found", "count", "none", "rows found in the table afterwards", exact=True, gated=False),
    _m("rows_ambiguous", "count", "none", "POSTs whose outcome the client cannot know", exact=True, gated=False),
    _m("rows_before", "count", "none", "rows in the table before the run", exact=True, gated=False),
    _m("rows_mismatch", "count", "lower", "rows lost, phantom or with other values", exact=True),
    _m("p99_spike_ratio", "ratio", "none", "the worst second's p99 over the median second's p99", gated=False),
    _m("history_p50_s", "s", "lower", "p50 latency in one second of a run", gated=False),
    _m("history_p99_s", "s", "lower", "p99 latency in one second of a run", gated=False),
    _m("outage_s", "s", "lower", "time PostgreSQL was stopped during a restart test", gated=False),
    _m("error_window_s", "s", "lower", "time between the first and the last failed request", gated=False),
    _m("error_latency_max_s", "s", "lower", "the slowest failed request", gated=False),
    _m("errors_total", "count", "lower", "failed requests over a restart test"),
    _m("recovery_s", "s", "lower", "time from PostgreSQL's return to the first success", gated=False),
]


def _index(entries: Iterable[MetricInfo]) -> Mapping[str, MetricInfo]:
    out: dict[str, MetricInfo] = {}
    for info in entries:
        if info.name in out:
            raise ValueError(f"metric {info.name} is declared twice in the catalogue")
        out[info.name] = info
    return MappingProxyType(out)


CATALOGUE: Mapping[str, MetricInfo] = _index([*_LOAD, *_COUNTS, *_TIMES, *_BUILDS, *_DATABASE])


# Metrics a suite of the user's own declares (`POLYPERF_METRICS = [metric(...), ...]` in its module), kept in its
# run folder (`record.suite_files`) and declared again whenever that run is loaded: no package file to edit.
_DECLARED: dict[str, MetricInfo] = {}


def metric(
    name: str, unit: str, better: Better, description: str, *, exact: bool = False, gated: bool = True
) -> MetricInfo:
    """A metric of a suite's own, declared as polyperf declares its own: base unit, which way is better, whether a
    run reproduces it exactly, whether a gate may fail on it."""
    if better not in ("higher", "lower", "none"):
        raise ValueError(f"metric {name}: better must be higher, lower or none, not {better!r}")
    return MetricInfo(name, unit, better, exact, gated, description)


def declare(infos: Iterable[MetricInfo], where: str = "a suite") -> None:
    """Adds metrics to the catalogue of this process. Declaring one again the same way is no change; a name polyperf
    or another suite already declares otherwise is a ValueError of one line naming `where`."""
    for info in infos:
        if not isinstance(info, MetricInfo):
            raise ValueError(f"{where}: POLYPERF_METRICS holds {info!r}, not a metric(...)")
        known = CATALOGUE.get(info.name) or _DECLARED.get(info.name)
        if known is not None and known != info:
            owner = "polyperf's catalogue" if info.name in CATALOGUE else "another suite"
            said = f"{known.unit}, {known.better} is better{', exact' if known.exact else ''}: {known.description}"
            raise ValueError(f"{where}: metric {info.name} is declared otherwise by {owner} ({said})")
        _DECLARED[info.name] = info


def declared() -> list[MetricInfo]:
    """The metrics suites declared in this process (beyond polyperf's own)."""
    return [info for name, info in _DECLARED.items() if name not in CATALOGUE]


def metric_info(name: str) -> MetricInfo | None:
    """The metric's declaration (polyperf's, or a suite's own); None for a name nobody declares (report it as
    unknown)."""
    return CATALOGUE.get(name) or _DECLARED.get(name)


def current_metric(metric: str, unit: str) -> tuple[str, str]:
    """The (metric, unit) a row of any version has today: a v1 pair (`latency_p99_ms`, `ms`) → its v2 name and base
    unit (`latency_p99_s`, `s`), as loading the run upgrades it; a current pair unchanged."""
    if unit in BASE_UNITS:
        return metric, unit
    upgraded = upgrade([{"metric": metric, "unit": unit, "value": 0.0, "schema_version": 1}])
    return (str(upgraded[0]["metric"]), str(upgraded[0]["unit"])) if upgraded else (metric, unit)
