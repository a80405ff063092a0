"""Base units in data, human units on the page: the one place that scales seconds to ms, bytes to MB and
rates to k/s (pure)."""

from __future__ import annotations

import math
from collections.abc import Iterable

__all__ = ["display_scale", "format_value"]

# (threshold on the largest magnitude, factor, label), tried in order
_SCALES: dict[str, list[tuple[float, float, str]]] = {
    "s": [(1.0, 1.0, "s"), (1e-3, 1e3, "ms"), (1e-6, 1e6, "µs"), (0.0, 1e9, "ns")],
    "bytes": [(1e9, 1e-9, "GB"), (1e6, 1e-6, "MB"), (1e3, 1e-3, "kB"), (0.0, 1.0, "bytes")],
    "bytes/s": [(1e9, 1e-9, "GB/s"), (1e6, 1e-6, "MB/s"), (1e3, 1e-3, "kB/s"), (0.0, 1.0, "bytes/s")],
    "1/s": [(1e6, 1e-6, "M/s"), (1e3, 1e-3, "k/s"), (0.0, 1.0, "/s")],
    "ratio": [(0.0, 1.0, "x")],
    "count": [(1e6, 1e-6, "million"), (0.0, 1.0, "")],
}


def display_scale(unit: str, values: Iterable[float]) -> tuple[float, str]:
    """(factor, label) that shows `values` of `unit` in a readable range (MB means 10^6 bytes)."""
    finite = [abs(v) for v in values if v is not None and math.isfinite(v)]
    largest = max(finite, default=0.0)
    for threshold, factor, label in _SCALES.get(unit, [(0.0, 1.0, unit)]):
        if largest >= threshold:
            return factor, label
    return 1.0, unit


def format_value(value: float, unit: str) -> str:
    """`0.00123, "s"` → `"1.23 ms"`; integers of `count` keep their digits (`2,009,109`)."""
    if value is None or not math.isfinite(value):
        return "–"
    if unit == "count" and float(value).is_integer():
        return f"{int(value):,}"
    factor, label = display_scale(unit, [value])
    return f"{_number(value * factor)} {label}".strip()


def _number(x: float) -> str:
    """Three significant digits without exponents: `0.00123`, `12.3`, `5,000` (never `5e+03`)."""
    if abs(float(f"{x:.3g}")) >= 1000:  # 999.6 rounds up to 1,000, which .3g would write as 1e+03
        return f"{x:,.0f}"
    if x and abs(x) < 1e-4:
        return f"{x:.6f}".rstrip("0")
    return f"{x:.3g}"
