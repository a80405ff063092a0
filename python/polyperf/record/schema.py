"""The tidy result schema, version 2: one row per measured value, in base units, with the driver and the
client-bound flag as columns and `params` as a map. `upgrade` brings older tables to it (see FORMAT.md
beside this file for the history); golden files under tests/testdata/ freeze every version."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

__all__ = [
    "BASE_UNITS",
    "COLUMNS",
    "PER_RUN_PARAMS",
    "SCHEMA_VERSION",
    "Row",
    "as_frame",
    "params_key",
    "series_params_key",
    "upgrade",
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
# Data carries base units only; ms, k req/s and MB exist at render time (report/units.py).
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
