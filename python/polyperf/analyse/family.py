"""Many tests in one run, controlled together: Holm's step-down adjustment (family-wise error) and Benjamini-Hochberg
(false discovery rate, through `scipy.stats.false_discovery_control`). Pure: p-values in, adjusted p-values out.

A run judges dozens of entries at 95% each; uncontrolled, about one run in two would hold at least one wrong decided
verdict. Verdicts use Benjamini-Hochberg by default: with 6 to 10 repeats the smallest two-sided sign-test p-value is
0.031 to 0.002, so Holm over 40 tests (which needs 0.05 / 40 = 0.00125 for the first) could decide nothing at all,
while BH keeps the expected share of wrong decided outcomes at or below 5%. BH holds for independent tests and for
positively dependent ones (entries that share rows of one run are positively dependent); Holm holds under any
dependence, for those who need the stronger promise (`polyperf verdicts --family holm`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import false_discovery_control

__all__ = ["METHODS", "Family", "adjust", "bh", "holm"]

METHODS = {
    "bh": ("Benjamini-Hochberg", "false discovery rate"),
    "holm": ("Holm", "family-wise error rate"),
}


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's adjusted p-values, in the input's order: reject where adjusted <= alpha keeps the chance of any wrong
    rejection at or below alpha, under any dependence. NaN entries are not tests: they stay NaN and do not count."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, math.nan)
    tested = np.flatnonzero(~np.isnan(p))
    m = tested.size
    if m == 0:
        return out.tolist()
    order = tested[np.argsort(p[tested], kind="stable")]
    # the i-th smallest p (0-based) is multiplied by m - i; a running maximum keeps the step-down monotone
    stepped = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * p[order]))
    out[order] = stepped
    return out.tolist()


def bh(pvalues: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (scipy), in the input's order; NaN entries stay NaN and do not count."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, math.nan)
    tested = ~np.isnan(p)
    if tested.any():
        out[tested] = false_discovery_control(np.clip(p[tested], 0.0, 1.0), method="bh")
    return out.tolist()


def adjust(pvalues: Sequence[float], method: str = "bh") -> list[float]:
    if method not in METHODS:
        raise ValueError(f"family method must be one of {', '.join(METHODS)}, not {method!r}")
    return holm(pvalues) if method == "holm" else bh(pvalues)


@dataclass(frozen=True)
class Family:
    """What a run's decided outcomes were controlled for: `tests` hypotheses, `method`, at error `rate`."""

    tests: int
    method: str = "bh"
    rate: float = 0.05

    @property
    def name(self) -> str:
        return METHODS[self.method][0]

    @property
    def error(self) -> str:
        return METHODS[self.method][1]

    def describe(self) -> str:
        if self.tests == 0:
            return "no statistical test in this run (exact counts are judged on every repeat, not tested)"
        return (
            f"{self.tests} tests controlled together by {self.name} at a {self.error} of {self.rate:.0%} "
            "(exact counts are judged on every repeat and are not among them)"
        )

    def as_record(self) -> dict[str, object]:
        return {"tests": self.tests, "method": self.name, "error": self.error, "rate": self.rate}
