"""pytest-benchmark's results as polyperf rows: a benchmark's label (`describe_benchmark`), the rows of its rounds
(`benchmark_rows`), and rounds timed in worker processes handed to a benchmark fixture (`benchmark_from_workers`).
Kept apart from the pytest plugin's hooks (`record.pytest_plugin`), which call these when a benchmark's test ends."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from polyperf.common.paths import suite_of
from polyperf.record.schema import Row

__all__ = ["benchmark_from_workers", "benchmark_rows", "describe_benchmark"]

_EXTRA_KEY = "polyperf"


def describe_benchmark(
    benchmark: Any,
    *,
    case: str,
    implementation: str,
    variant: str = "",
    params: Mapping[str, Any] | None = None,
    bytes_per_round: int | None = None,
) -> None:
    """Labels a pytest-benchmark measurement for the tidy table: each round becomes a `seconds` row (and a
    `bytes_per_s` row when `bytes_per_round` is given). Without it, a benchmark is labelled from its test:
    case = the test's name, implementation = its parameter id, params = its parameters."""
    benchmark.extra_info[_EXTRA_KEY] = {
        "case": case,
        "implementation": implementation,
        "variant": variant,
        "params": dict(params or {}),
        "bytes_per_round": bytes_per_round,
    }


def _plain(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool) or value is None else str(value)


def _default_label(bench: Any) -> dict[str, Any]:
    test = str(bench.name).split("[", 1)[0].removeprefix("test_")
    params = {k: _plain(v) for k, v in (bench.params or {}).items()}
    return {
        "case": test,
        "implementation": str(bench.param or test),
        "variant": "",
        "params": params,
        "bytes_per_round": None,
    }


def benchmark_rows(bench: Any) -> list[Row]:
    """The rounds of one pytest-benchmark result (already per iteration) as rows."""
    stats = getattr(bench, "stats", None)
    if stats is None or not getattr(stats, "data", None):
        return []
    label = bench.extra_info.get(_EXTRA_KEY) or _default_label(bench)
    iterations = max(int(getattr(bench, "iterations", 1) or 1), 1)
    params = {**label["params"], "iterations": iterations}
    common = (suite_of(bench.fullname), label["case"], label["implementation"], label["variant"])
    # rounds from worker processes (`benchmark_from_workers`): the repeat is the process, the round a sample of it
    places = label.get("worker_rounds") or [(index, None) for index in range(len(stats.data))]
    rows = []
    for (repeat, rnd), seconds in zip(places, stats.data, strict=True):
        row_params = params if rnd is None else {**params, "round": rnd}
        rows.append(Row(*common, "seconds", seconds, "s", repeat, row_params))
        if label.get("bytes_per_round") and seconds > 0:
            rate = label["bytes_per_round"] / seconds
            rows.append(Row(*common, "bytes_per_s", rate, "bytes/s", repeat, row_params))
    return rows


def benchmark_from_workers(benchmark: Any, samples: Sequence[Any], **label: Any) -> None:
    """Rounds timed in worker processes (`polyperf.orchestrate.workers`, one side's samples, all with the same
    calibrated loop count) given to a pytest-benchmark fixture as if it had timed them: its JSON and statistics
    hold them, and each becomes a row whose repeat is its process and whose `round` param its place in it. The
    label is `describe_benchmark`'s. Uses pytest-benchmark's `_make_stats` (5.x), the one way to give it times."""
    if not samples:
        raise ValueError("no worker samples to record")
    describe_benchmark(benchmark, **label)
    benchmark.extra_info[_EXTRA_KEY]["worker_rounds"] = [(s.process, s.round) for s in samples]
    benchmark._mode = "polyperf worker processes"  # pytest-benchmark's own guard: one measurement per fixture
    stats = benchmark._make_stats(samples[0].iterations)
    for sample in samples:
        stats.update(sample.seconds * sample.iterations)  # pytest-benchmark divides a round by its loops
