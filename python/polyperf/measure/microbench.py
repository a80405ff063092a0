"""Readers for microbenchmark outputs: criterion's `estimates.json` tree and `go test -bench` text.

Pure: no clocks, no processes; the only I/O is reading the paths given. Values come out in base units
(seconds, bytes, counts); criterion stores nanoseconds, Go prints ns/op, B/op and allocs/op.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["CriterionEstimate", "GoBenchLine", "parse_go_bench", "read_criterion"]

_NS = 1e-9


@dataclass(frozen=True)
class CriterionEstimate:
    """One criterion benchmark's latest (`new/`) estimates of the time per iteration, in seconds."""

    group: str
    function: str
    value: str | None  # the parameter of a parametrised bench (criterion's value_str), else None
    full_id: str
    mean_s: float
    mean_lower_s: float
    mean_upper_s: float
    median_s: float
    median_lower_s: float
    median_upper_s: float
    std_dev_s: float
    confidence_level: float
    samples: int | None  # number of samples criterion took (sample.json), None when absent
    iterations: int | None  # iterations over all samples, None when absent
    # The slope of time over iterations: criterion's printed headline under linear sampling; None if flat.
    slope_s: float | None = None
    slope_lower_s: float | None = None
    slope_upper_s: float | None = None
    # Each sample's time per iteration (sample.json: times / iters), for intervals of our own.
    sample_s: tuple[float, ...] = ()

    @property
    def typical_s(self) -> float:
        """The figure criterion itself reports: the slope when it has one, else the mean."""
        return self.mean_s if self.slope_s is None else self.slope_s


@dataclass(frozen=True)
class GoBenchLine:
    """One result line of `go test -bench`: per-operation figures in base units."""

    name: str  # without the "Benchmark" prefix and the -GOMAXPROCS suffix, e.g. "SpawnMany", "Parse/small"
    procs: int  # GOMAXPROCS; Go prints no suffix when it is 1
    iterations: int
    seconds_per_op: float
    bytes_per_op: float | None  # present with -benchmem
    allocs_per_op: float | None
    pkg: str | None = None  # from the preceding "pkg:" header line
    extra: dict[str, float] = field(default_factory=dict)  # other "value unit" pairs, e.g. {"MB/s": 12.5}


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"cannot read criterion file {path}: {err}") from err


def _interval(estimates: dict[str, Any], stat: str, path: Path) -> tuple[float, float, float, float]:
    """(point, lower, upper, confidence level) of one statistic, converted from ns to s."""
    try:
        entry = estimates[stat]
        interval = entry["confidence_interval"]
        return (
            entry["point_estimate"] * _NS,
            interval["lower_bound"] * _NS,
            interval["upper_bound"] * _NS,
            float(interval["confidence_level"]),
        )
    except (KeyError, TypeError) as err:
        raise ValueError(f"{path}: no usable {stat!r} estimate ({err!r})") from err


def _ids(new_dir: Path, root: Path) -> tuple[str, str, str | None, str]:
    """(group, function, value, full id) from new/benchmark.json, else from the directory names."""
    meta_path = new_dir / "benchmark.json"
    if meta_path.is_file():
        meta = _load_json(meta_path)
        return meta["group_id"], meta.get("function_id") or "", meta.get("value_str"), meta["full_id"]
    parts = new_dir.parent.relative_to(root).parts
    return parts[0], parts[1] if len(parts) > 1 else "", "/".join(parts[2:]) or None, "/".join(parts)


def _samples(new_dir: Path) -> tuple[int | None, int | None, tuple[float, ...]]:
    """(sample count, iterations over all samples, seconds per iteration of each sample)."""
    sample_path = new_dir / "sample.json"
    if not sample_path.is_file():
        return None, None, ()
    data = _load_json(sample_path)
    iters, times = data.get("iters") or [], data.get("times") or []
    per_iteration = tuple(t / n * _NS for t, n in zip(times, iters, strict=False) if n)
    return len(iters), int(sum(iters)), per_iteration


def read_criterion(criterion_dir: Path) -> list[CriterionEstimate]:
    """Every benchmark under `criterion_dir` (e.g. target/criterion) with a `new/estimates.json`, sorted by id."""
    root = Path(criterion_dir)
    found = []
    for estimates_path in sorted(root.rglob("new/estimates.json")):
        new_dir = estimates_path.parent
        estimates = _load_json(estimates_path)
        group, function, value, full_id = _ids(new_dir, root)
        mean, mean_lo, mean_hi, level = _interval(estimates, "mean", estimates_path)
        median, median_lo, median_hi, _ = _interval(estimates, "median", estimates_path)
        std_dev = _interval(estimates, "std_dev", estimates_path)[0]
        samples, iterations, sample_s = _samples(new_dir)
        slope = _interval(estimates, "slope", estimates_path)[:3] if estimates.get("slope") else (None,) * 3
        found.append(
            CriterionEstimate(
                group,
                function,
                value,
                full_id,
                mean,
                mean_lo,
                mean_hi,
                median,
                median_lo,
                median_hi,
                std_dev,
                level,
                samples,
                iterations,
                *slope,
                sample_s,
            )
        )
    return sorted(found, key=lambda e: e.full_id)


# "BenchmarkName-2   123   4567 ns/op   89 B/op   1 allocs/op" (fields separated by tabs or spaces).
_LINE = re.compile(r"^Benchmark(?P<name>\S+)\s+(?P<iters>\d+)\s+(?P<rest>.+)$")
_PROCS = re.compile(r"^(?P<base>.+)-(?P<procs>\d+)$")
_PAIR = re.compile(r"(?P<value>[-+0-9.eE]+)\s+(?P<unit>\S+)")


def _split_procs(raw_name: str) -> tuple[str, int]:
    match = _PROCS.match(raw_name)
    if match is None:
        return raw_name, 1
    return match["base"], int(match["procs"])


def _parse_line(match: re.Match[str], pkg: str | None) -> GoBenchLine | None:
    metrics = {pair["unit"]: float(pair["value"]) for pair in _PAIR.finditer(match["rest"])}
    if "ns/op" not in metrics:
        return None  # not a result line (e.g. a benchmark's own log output)
    name, procs = _split_procs(match["name"])
    seconds = metrics.pop("ns/op") * _NS
    bytes_per_op = metrics.pop("B/op", None)
    allocs = metrics.pop("allocs/op", None)
    return GoBenchLine(name, procs, int(match["iters"]), seconds, bytes_per_op, allocs, pkg, metrics)


def parse_go_bench(text: str) -> list[GoBenchLine]:
    """The result lines of `go test -bench` output, in order (one per -count repetition and -cpu value)."""
    lines: list[GoBenchLine] = []
    pkg: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("pkg:"):
            pkg = line.removeprefix("pkg:").strip()
            continue
        match = _LINE.match(line)
        if match is not None and (parsed := _parse_line(match, pkg)) is not None:
            lines.append(parsed)
    return lines
