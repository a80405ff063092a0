"""A run's tidy table in the formats other tools read: Bencher Metric Format JSON, github-action-benchmark's
custom JSON and the Go benchmark text format that benchstat reads. Pure: a table in, text out.

Every format carries what polyperf's own report does: one value per independent repeat (the median of the
samples inside a repeat, as the claims and compare count them), the median over repeats with its 95%
order-statistic interval (the range over repeats for exact counts), values in base units, and which way is
better as the metric catalogue declares it (`record/catalogue.py`), never guessed from a name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from polyperf.analyse.claims import per_repeat
from polyperf.analyse.stats import Summary, exact_range, summarize
from polyperf.record.catalogue import metric_info
from polyperf.record.schema import PER_RUN_PARAMS

__all__ = [
    "FORMATS",
    "GAB_TOOLS",
    "Series",
    "export_text",
    "series_of",
    "to_bmf",
    "to_github_action_benchmark",
    "to_gobench",
]

FORMATS = ("bmf", "github-action-benchmark", "gobench")
# github-action-benchmark judges a whole file one way: its workflow's `tool:` names which
GAB_TOOLS = {"customSmallerIsBetter": "lower", "customBiggerIsBetter": "higher"}
_KEY = ["suite", "case", "implementation", "variant", "driver", "metric", "unit", "params"]
# Benchmark names travel as one whitespace-free field, `/` between parts: those characters (and `%`, so the
# encoding can be undone) are percent-encoded inside a part.
_UNSAFE = re.compile(r"[\s/%\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Series:
    """One series of a run: `benchmark` names it (suite/case/implementation[/variant][/driver=…][/param=…]),
    `values` hold one value per independent repeat, in repeat order."""

    benchmark: str
    metric: str
    unit: str
    values: tuple[float, ...]
    better: str  # "higher", "lower" or "none" (unknown metrics too)
    exact: bool
    client_bound: bool

    def summary(self) -> Summary:
        """The median and its 95% interval (NaN bounds below n = 6); for exact counts, the range over repeats."""
        return exact_range(self.values) if self.exact else summarize(self.values)


def _part(text: str) -> str:
    return _UNSAFE.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode()), text) or "_"


def _param_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"))


def benchmark_name(
    suite: str, case: str, implementation: str, variant: str, driver: str, params: Mapping[str, Any]
) -> str:
    """`suite/case/implementation[/variant][/driver=D][/key=value…]` (params sorted, each part encoded)."""
    parts = [_part(suite), _part(case), _part(implementation)]
    parts += [_part(variant)] if variant else []
    parts += [f"driver={_part(driver)}"] if driver else []
    parts += [f"{_part(str(k))}={_part(_param_text(v))}" for k, v in sorted(params.items())]
    return "/".join(parts)


def _params(value: Any) -> dict[str, Any]:
    """The params that name a series (a repeat's slot in the random order is not one), as compare keys them."""
    if isinstance(value, str):
        value = json.loads(value) if value.strip() else {}
    return {k: v for k, v in value.items() if k not in PER_RUN_PARAMS} if isinstance(value, Mapping) else {}


def series_of(table: pd.DataFrame) -> list[Series]:
    """The run's series, sorted by name and metric. Values that are not finite are left out (the report counts
    them); a series left with none is dropped."""
    frame = table.copy()
    for column, default in (("driver", ""), ("variant", ""), ("implementation", ""), ("client_bound", False)):
        frame[column] = frame[column].fillna(default) if column in frame else default
    frame["params"] = frame["params"].map(lambda p: json.dumps(_params(p), sort_keys=True, default=str))
    frame = frame[np.isfinite(frame["value"].to_numpy(dtype=float))]
    out = []
    for key, rows in frame.groupby(_KEY, sort=False):
        fields = dict(zip(_KEY, key, strict=True))
        info = metric_info(fields["metric"])
        known = info is not None and info.unit == fields["unit"]
        params = json.loads(fields["params"])
        name = benchmark_name(*(str(fields[k]) for k in _KEY[:5]), params)
        values = per_repeat(rows) if "repeat" in rows else rows["value"]
        out.append(
            Series(
                benchmark=name,
                metric=str(fields["metric"]),
                unit=str(fields["unit"]),
                values=tuple(float(v) for v in values),
                better=info.better if known else "none",
                exact=bool(known and info.exact),
                client_bound=bool(rows["client_bound"].astype(bool).any()),
            )
        )
    return sorted(out, key=lambda s: (s.benchmark, s.metric, s.unit))


def to_bmf(series: list[Series]) -> dict[str, dict[str, dict[str, float]]]:
    """Bencher Metric Format: {benchmark: {measure (the metric): {value, lower_value, upper_value}}}; the bounds
    are the 95% interval of the median (the range over repeats for exact counts), left out below n = 6."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for s in series:
        summary = s.summary()
        metric: dict[str, float] = {"value": summary.median}
        if summary.has_interval:
            metric.update(lower_value=summary.low, upper_value=summary.high)
        measure = s.metric if s.unit == _only_unit(series, s.metric) else f"{s.metric} ({s.unit})"
        out.setdefault(s.benchmark, {})[measure] = metric
    return out


def _only_unit(series: list[Series], metric: str) -> str | None:
    units = {s.unit for s in series if s.metric == metric}
    return units.pop() if len(units) == 1 else None


def to_github_action_benchmark(series: list[Series], tool: str) -> tuple[list[dict[str, Any]], int]:
    """github-action-benchmark's custom JSON for `tool` (customSmallerIsBetter or customBiggerIsBetter): the series
    whose metric is better that way, and how many others were left out (the other way, or no direction)."""
    if tool not in GAB_TOOLS:
        raise ValueError(f"github-action-benchmark tool {tool!r}: expected one of {', '.join(GAB_TOOLS)}")
    chosen = [s for s in series if s.better == GAB_TOOLS[tool]]
    entries = []
    for s in chosen:
        summary = s.summary()
        entry: dict[str, Any] = {"name": f"{s.benchmark} {s.metric}", "unit": s.unit, "value": summary.median}
        if summary.has_interval:
            what = "range over repeats" if s.exact else "95% CI of the median"
            entry["range"] = f"{what} {summary.low:.6g} to {summary.high:.6g}"
        bound = "; client-bound in some repeats (says little about the server)" if s.client_bound else ""
        entry["extra"] = f"median of {summary.n} independent repeats{bound}"
        entries.append(entry)
    return entries, len(series) - len(chosen)


def _go_unit(s: Series, series: list[Series]) -> str:
    """The Go unit of a series: its metric, so that benchstat keeps metrics apart and `Unit` lines can say which
    way each is better (a metric found in two units gets the unit appended)."""
    metric = _part(s.metric)  # a row's metric is text from a file: one field, on one line, like the names
    return metric if _only_unit(series, s.metric) == s.unit else f"{metric}[{_part(s.unit)}]"


def to_gobench(series: list[Series], *, run_id: str = "") -> str:
    """The Go benchmark text format: `Unit` lines (better=, assume=exact) from the catalogue, then one line per
    independent repeat, `Benchmark<Suite>/<case>/<implementation>… 1 <value> <metric>`, values in base units."""
    lines = [
        f"# polyperf export{' of run ' + run_id if run_id else ''}: one line per independent repeat (the median of "
        "its samples), values in base units (s, bytes, count, 1/s, bytes/s, ratio); read with benchstat"
    ]
    units: dict[str, str] = {}
    for s in series:
        meta = [f"better={s.better}"] if s.better in ("higher", "lower") else []
        meta += ["assume=exact"] if s.exact else []
        if meta:
            units[_go_unit(s, series)] = " ".join(meta)
    lines += [f"Unit {unit} {meta}" for unit, meta in sorted(units.items())]
    for s in series:
        # Go's testing package requires an upper-case letter after "Benchmark"; benchfmt shows the rest as the name
        name = "Benchmark" + s.benchmark[:1].upper() + s.benchmark[1:]
        lines += [f"{name} 1 {value!r} {_go_unit(s, series)}" for value in s.values]
    return "\n".join(lines) + "\n"


def export_text(table: pd.DataFrame, fmt: str, *, gab_tool: str = "customSmallerIsBetter") -> tuple[str, str]:
    """(the export in format `fmt`, a note for the user: what was left out, "" when nothing)."""
    series = series_of(table)
    run_ids = sorted(map(str, table["run_id"].dropna().unique())) if "run_id" in table else []
    if fmt == "bmf":
        return json.dumps(to_bmf(series), indent=2, sort_keys=True, allow_nan=False) + "\n", ""
    if fmt == "github-action-benchmark":
        entries, left_out = to_github_action_benchmark(series, gab_tool)
        better = "lower" if GAB_TOOLS[gab_tool] == "higher" else "higher"
        note = (
            f"{left_out} series left out: their metric is better {better} or has no direction "
            f"(export again with the other --gab-tool for the former)"
            if left_out
            else ""
        )
        return json.dumps(entries, indent=2, allow_nan=False) + "\n", note
    if fmt == "gobench":
        return to_gobench(series, run_id=",".join(run_ids)), ""
    raise ValueError(f"export format {fmt!r}: expected one of {', '.join(FORMATS)}")
