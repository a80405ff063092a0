"""`Recorder`: appends rows of one suite to the run's table at once, so a later crash keeps them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from polyperf.record.run_dir import RowWriter
from polyperf.record.schema import Row

__all__ = ["Metric", "Recorder"]

# One measured value before it becomes a row: (metric, value, unit, extra params). Stages hand lists of them to
# `Recorder.many`; the metric's meaning is declared in `catalogue.py`.
Metric = tuple[str, float, str, dict[str, Any]]


class Recorder:
    """`record(metric, value, unit, case=..., implementation=..., variant=..., params=..., repeat=0,
    driver="", client_bound=False)`; the unit must be a base unit (`schema.BASE_UNITS`)."""

    def __init__(self, writer: RowWriter, suite: str) -> None:
        self.writer = writer
        self.suite = suite

    def __call__(
        self,
        metric: str,
        value: float,
        unit: str,
        *,
        case: str,
        implementation: str,
        variant: str = "",
        params: Mapping[str, Any] | None = None,
        repeat: int = 0,
        driver: str = "",
        client_bound: bool = False,
    ) -> None:
        self.writer.write(
            [
                Row(
                    self.suite,
                    case,
                    implementation,
                    variant,
                    metric,
                    value,
                    unit,
                    repeat,
                    dict(params or {}),
                    driver,
                    client_bound,
                )
            ]
        )

    def narrows(self) -> None:
        """Says that the running test's repeats loop over targets a top-up may narrow (`producers.json`)."""
        self.writer.narrows()

    def many(self, metrics: Iterable[Metric], **common: Any) -> None:
        """Several (metric, value, unit, extra params) with the same case/implementation/...; extra params
        are merged over `common["params"]`."""
        base = dict(common.pop("params", None) or {})
        for metric, value, unit, extra in metrics:
            self(metric, value, unit, params={**base, **extra}, **common)
