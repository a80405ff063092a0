"""The tidy result schema, version 2: one row per measured value, in base units, with the driver and the
client-bound flag as columns and `params` as a map. `upgrade` brings older tables to it (see FORMAT.md
beside this file for the history); golden files under tests/testdata/ freeze every version."""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "BASE_UNITS",
    "COLUMNS",
    "MAX_ABS_VALUE",
    "MIN_ABS_VALUE",
    "PER_RUN_PARAMS",
    "SCHEMA_VERSION",
    "BadRecord",
    "Row",
    "as_frame",
    "check_record",
    "params_key",
    "series_params_key",
    "upgrade",
    "value_problem",
]

SCHEMA_VERSION = 2
COLUMNS = [
    "run_id",
    "suite",
    "case",
    "implementation",
    "variant",
    "driver",
    "metric",
    "value",
    "unit",
    "repeat",
    "client_bound",
    "params",
]
# Data carries base units only; ms, k req/s and MB exist at render time (common/units.py).
BASE_UNITS = frozenset({"s", "bytes", "count", "1/s", "bytes/s", "ratio"})


@dataclass(frozen=True)
class Row:
    """One measured value. `params` holds what else identifies it (sizes, capacities, CPUs...); `driver` is
    the load generator that made it ("" for rows no driver made); `client_bound` marks a load result limited
    by the client rather than the server."""

    suite: str
    case: str
    implementation: str
    variant: str
    metric: str
    value: float
    unit: str
    repeat: int = 0
    params: Mapping[str, Any] = field(default_factory=dict)
    driver: str = ""
    client_bound: bool = False

    def __post_init__(self) -> None:
        if self.unit not in BASE_UNITS:
            raise ValueError(
                f"{self.suite}/{self.metric}: unit {self.unit!r} is not a base unit "
                f"({', '.join(sorted(BASE_UNITS))}); convert before recording"
            )
        if isinstance(self.value, bool) or not isinstance(self.value, int | float):
            raise TypeError(f"{self.suite}/{self.metric}: value must be a number, got {self.value!r}")


# Params that describe one run or sample of a series rather than the series (its slot in the random order, how its
# drain went, the iterations a benchmark tool chose, a criterion sample's index and round): grouping rows into
# series leaves them out, else each repeat would be a series of its own.
PER_RUN_PARAMS = (
    "slot",
    "drain_timed_out",
    "drain_open_connections",
    "drain_busy",
    "iterations",
    "round",
    "sample",
    "server_process",
    "foreign_cpu_share",  # how busy the rest of the machine was while a benchmark process ran
    # calibrated settings: the same rule (the auto CPU budget, a fixed rate set as a share of the measured ceiling)
    # gives another number in every run, so the number cannot name the series
    "rate",
    "cpu_quota",
    "cpu_quota_auto",
)


def params_key(params: Mapping[str, Any] | None) -> str:
    """A canonical text form of a params map, for grouping and joining (dicts are not hashable)."""
    return json.dumps(dict(params or {}), sort_keys=True, default=str)


def series_params_key(params: Mapping[str, Any] | None) -> str:
    """`params_key` without the per-run params: the key of the series a row belongs to."""
    return params_key({k: v for k, v in (params or {}).items() if k not in PER_RUN_PARAMS})


# --- upgrades --------------------------------------------------------------------------------------------
# v1 (polyperf 0.1): units as measured (`%`, `MB/s`, `ms`, `us`, `req/s`, `flag`), the driver as the prefix
# of `variant` ("oha/multi") and in params, `client_bound` both as a metric row and a param, params as JSON
# text.

# v1 metric → (v2 metric, factor to base unit, v2 unit)
_V1_METRICS: dict[str, tuple[str, float, str]] = {
    "cpu_us_per_request": ("cpu_s_per_request", 1e-6, "s"),
    "server_cpu_percent": ("server_cpu_share", 0.01, "ratio"),
    "client_cpu_percent": ("client_cpu_share", 0.01, "ratio"),
    "client_demand_percent": ("client_demand_share", 0.01, "ratio"),
    "server_cpu_wait_percent": ("server_cpu_wait_share", 0.01, "ratio"),
    "mb_per_s": ("bytes_per_s", 1e6, "bytes/s"),
}
_V1_UNITS: dict[str, tuple[float, str]] = {
    "ms": (1e-3, "s"),
    "us": (1e-6, "s"),
    "%": (0.01, "ratio"),
    "MB/s": (1e6, "bytes/s"),
    "req/s": (1.0, "1/s"),
    "flag": (1.0, "count"),
}


def _v1_metric(metric: str, unit: str) -> tuple[str, float, str]:
    if metric in _V1_METRICS:
        return _V1_METRICS[metric]
    factor, base = _V1_UNITS.get(unit, (1.0, unit))
    if metric.endswith("_ms") and unit == "ms":
        metric = metric.removesuffix("_ms") + "_s"
    return metric, factor, base


def _upgrade_v1_record(rec: dict[str, Any]) -> dict[str, Any] | None:
    params = rec.get("params") or {}
    params = dict(json.loads(params) if isinstance(params, str) else params)
    if rec.get("metric") == "client_bound":
        return None  # v2 keeps the flag once, as a column (it was also in params)
    client_bound = bool(params.pop("client_bound", False))
    driver = str(params.pop("driver", "") or "")
    variant = str(rec.get("variant") or "")
    if driver and (variant == driver or variant.startswith(driver + "/")):
        variant = variant[len(driver) + 1 :]
    metric, factor, unit = _v1_metric(str(rec.get("metric")), str(rec.get("unit")))
    value = rec.get("value")
    return {
        **rec,
        "variant": variant,
        "driver": driver,
        "metric": metric,
        "unit": unit,
        "value": None if value is None else float(value) * factor,
        "client_bound": client_bound,
        "params": params,
        "schema_version": 2,
    }


UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any] | None]] = {1: _upgrade_v1_record}


def upgrade(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Brings records of any known version to SCHEMA_VERSION, step by step (v1 → v2 → ...)."""
    out = []
    for rec in records:
        version = int(rec.get("schema_version") or 1)
        current: dict[str, Any] | None = rec
        while current is not None and version < SCHEMA_VERSION:
            current = UPGRADES[version](current)
            version += 1
        if current is not None:
            if version > SCHEMA_VERSION:
                raise ValueError(f"result written by a newer polyperf (schema {version} > {SCHEMA_VERSION})")
            out.append(current)
    return out


def as_frame(records: list[dict[str, Any]]) -> pd.DataFrame:
    """Records of the current version → the typed table (`params` a dict per row)."""
    frame = pd.DataFrame.from_records(records, columns=[*COLUMNS, "schema_version"])
    frame["value"] = pd.to_numeric(frame["value"], errors="coerce")
    frame["repeat"] = pd.to_numeric(frame["repeat"], errors="coerce").fillna(0).astype("int64")
    frame["client_bound"] = frame["client_bound"].astype(object).fillna(False).astype(bool)
    for column in ("driver", "variant"):
        frame[column] = frame[column].astype(object).fillna("").astype(str)
    frame["params"] = frame["params"].map(lambda p: dict(p) if isinstance(p, Mapping) else {})
    frame["schema_version"] = SCHEMA_VERSION
    return frame


# --- checking one record ---------------------------------------------------------------------------------
# A counter that wrapped below zero reads near 1.8e19 (u64), and values near the float maximum overflow the medians,
# ratios and error bars made of them: no clock, counter or rate polyperf reads comes near 1e18 in a base unit
# (30 billion years, an exabyte, 1e18 events).
MAX_ABS_VALUE = 1e18
# ... and none resolves a nonzero value below 1e-18 (an attosecond, a billionth of a billionth of a byte or a count);
# such a value turns the ratios made of it into overflows (1e-300 against 0.01 is 1e298).
MIN_ABS_VALUE = 1e-18
# Units whose values cannot be negative (a time, a size, a count, a rate); a ratio may be.
_NON_NEGATIVE_UNITS = frozenset(BASE_UNITS - {"ratio"})
_TEXT_COLUMNS = ("suite", "metric")  # must be text, not empty
_OPTIONAL_TEXT = ("run_id", "case", "implementation", "variant", "driver")  # text, or absent (empty)


class BadRecord(ValueError):
    """A record that cannot become a row. `kind` is a short fixed phrase to count by ("not a JSON object",
    "wrong type", "unit", "schema_version"); `str()` says what was found."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind


# The plain types come first: the abstract checks (numbers.Real, Mapping) cost most of the time of a check.
def _number(value: Any) -> bool:
    if type(value) in (float, int):
        return True
    return isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_)


def _whole(value: Any) -> bool:
    if type(value) is int:
        return True
    if isinstance(value, numbers.Integral):
        return _number(value)
    return _number(value) and math.isfinite(value) and float(value).is_integer()


def _version(rec: Mapping[str, Any]) -> int:
    version = rec.get("schema_version")
    if version is None:
        return 1  # polyperf 0.1 wrote none
    if type(version) is int and 1 <= version <= SCHEMA_VERSION:
        return version
    if not isinstance(version, numbers.Integral) or isinstance(version, bool | np.bool_):
        raise BadRecord("schema_version", f"{version!r} is not a whole number")
    if not 1 <= int(version) <= SCHEMA_VERSION:
        raise BadRecord("schema_version", f"{version} is not 1..{SCHEMA_VERSION} (a newer polyperf wrote it?)")
    return int(version)


def _upgraded(rec: dict[str, Any]) -> dict[str, Any] | None:
    version, current = _version(rec), rec
    while current is not None and version < SCHEMA_VERSION:
        try:
            current = UPGRADES[version](current)
        except (ValueError, TypeError, AttributeError, OverflowError) as exc:
            raise BadRecord("wrong type", f"cannot upgrade from schema {version}: {exc}") from None
        version += 1
    return current


def value_problem(value: Any, unit: str) -> str:
    """Why `value` cannot stand as a measurement in `unit` ("" when it can): missing, not finite, out of range,
    or negative where the unit cannot be."""
    if value is None:
        return "no value"
    try:
        number = float(value)
    except OverflowError:
        return f"value out of range: {str(value)[:20]}..."
    if not math.isfinite(number):
        return f"value not finite: {number}"
    if abs(number) > MAX_ABS_VALUE:
        return f"value out of range: {number:g} (beyond ±{MAX_ABS_VALUE:g})"
    if 0 < abs(number) < MIN_ABS_VALUE:
        return f"value out of range: {number:g} (nonzero below {MIN_ABS_VALUE:g})"
    if number < 0 and unit in _NON_NEGATIVE_UNITS:
        return f"value negative: {number:g} {unit}"
    return ""


def check_record(rec: Any) -> tuple[dict[str, Any] | None, str]:
    """(the record brought to SCHEMA_VERSION with its types checked, "" or why its value is left out).

    Raises `BadRecord` when the record cannot be a row (not an object, a field of the wrong type, an unknown or
    missing unit, an unknown schema_version). A row whose value is missing, not finite, out of range or negative
    where the unit cannot be keeps its place with the value NaN, so that its series reads "no valid values"
    rather than vanishing. Returns (None, "") for a v1 record the upgrade drops on purpose."""
    if type(rec) is not dict and not isinstance(rec, Mapping):
        raise BadRecord("not a JSON object", type(rec).__name__)
    current = _upgraded(dict(rec))
    if current is None:
        return None, ""
    for column in _TEXT_COLUMNS:
        value = current.get(column)
        if not isinstance(value, str) or not value:
            raise BadRecord("wrong type", f"{column} must be text, found {value!r:.40}")
    for column in _OPTIONAL_TEXT:
        value = current.get(column)
        if value is None:
            current[column] = ""
        elif not isinstance(value, str):
            raise BadRecord("wrong type", f"{column} must be text, found {value!r:.40}")
    unit = current.get("unit")
    if not isinstance(unit, str) or unit not in BASE_UNITS:  # a list or object is not hashable, nor a unit
        found = "no unit" if unit is None else f"{unit!r:.20} is not a base unit"
        raise BadRecord("unit", f"{found} ({', '.join(sorted(BASE_UNITS))})")
    repeat = current.get("repeat", 0)
    if repeat is not None and not (_whole(repeat) and 0 <= repeat < 2**63):
        raise BadRecord("wrong type", f"repeat must be a whole number >= 0, found {repeat!r:.40}")
    bound = current.get("client_bound", False)
    if bound is not None and type(bound) is not bool and not isinstance(bound, np.bool_):
        raise BadRecord("wrong type", f"client_bound must be true or false, found {bound!r:.40}")
    params = current.get("params")
    if params is not None and type(params) is not dict and not isinstance(params, Mapping):
        raise BadRecord("wrong type", f"params must be an object, found {current['params']!r:.40}")
    value = current.get("value")
    if value is not None and not _number(value):
        raise BadRecord("wrong type", f"value must be a number, found {value!r:.40}")
    problem = value_problem(value, unit)
    if problem:
        current = {**current, "value": math.nan}
    return current, problem
