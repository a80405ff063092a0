"""Many tests in one run, controlled together: e-BH (Wang & Ramdas, JRSS-B 2022: the false discovery rate of
e-values under any dependence) by default, or Holm's step-down (family-wise error) or Benjamini-Yekutieli. Pure: the
parts' 1/e in, adjusted p-values out.

A run judges dozens of entries at 95% each; uncontrolled, about one run in two would hold at least one wrong decided
verdict. Why e-BH: the main job adds repeats to the entries that are still undecided, so every entry's evidence is an
e-process (`analyse.anytime`), valid at the data-dependent number of repeats it stopped at. e-BH declares the R
entries with the largest e-values where each e >= m / (rate R); it is Benjamini-Hochberg applied to 1/e, and for
e-values it holds under any dependence (the family mixes direction tests and equivalence tests on rows shared between
entries, which are not positively dependent) without Benjamini-Yekutieli's c(m) = 1 + 1/2 + ... + 1/m (4.3 for 40
tests). Fixed-n p-values from a sign test cannot stop early; the price of the e-process is width at small n (its 95%
interval needs 7 repeats, a sign test's 6). Holm (`--family holm`) bounds the chance of any wrong declared outcome,
and Benjamini-Yekutieli (`--family by`) the false discovery rate, both on 1/e (a valid p-value at any stopping time).

The family is fixed by the design, before the data: every part that has a test at this n (exact counts are judged on
every repeat and are not tests). Only parts their own interval decides can be declared, so a part that another rule
holds back (the noise floor: an estimate within the run's noise of a bound is never decided) enters with p = 1: its
small p-value would otherwise count as a discovery and lower the bar for every other part (simulated: 3 such parts
among 7 true nulls raised Benjamini-Hochberg's chance of a false declared outcome from 5.0% to 13.3%). Any rejected
part then has e >= m / (rate |rejected|), which is what bounds the false discovery rate under any dependence (Wang
and Ramdas 2022, self-consistency of e-BH).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import false_discovery_control

__all__ = ["DEFAULT", "METHODS", "Family", "adjust", "by", "control", "decision_threshold", "ebh", "holm"]

METHODS = {
    "ebh": ("e-BH", "false discovery rate"),
    "by": ("Benjamini-Yekutieli", "false discovery rate"),
    "holm": ("Holm", "family-wise error rate"),
}
DEFAULT = "ebh"


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


def _step_up(pvalues: Sequence[float], method: str) -> list[float]:
    """scipy's step-up adjustment ("bh" or "by") in the input's order; NaN entries stay NaN and do not count."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, math.nan)
    tested = ~np.isnan(p)
    if tested.any():
        out[tested] = false_discovery_control(np.clip(p[tested], 0.0, 1.0), method=method)
    return out.tolist()


def by(pvalues: Sequence[float]) -> list[float]:
    """Benjamini-Yekutieli adjusted p-values (scipy), in the input's order; NaN entries stay NaN and do not count."""
    return _step_up(pvalues, "by")


def ebh(inverse_evalues: Sequence[float]) -> list[float]:
    """e-BH's adjusted values from each part's 1/e, in the input's order: a part is declared at `rate` exactly when
    its adjusted value is <= rate (Benjamini-Hochberg's step-up on 1/e); NaN entries stay NaN and do not count."""
    return _step_up(inverse_evalues, "bh")


def adjust(pvalues: Sequence[float], method: str = DEFAULT) -> list[float]:
    if method not in METHODS:
        raise ValueError(f"family method must be one of {', '.join(METHODS)}, not {method!r}")
    return {"holm": holm, "by": by, "ebh": ebh}[method](pvalues)


def control(pvalues: Sequence[float], declarable: Sequence[bool], method: str = DEFAULT) -> list[float]:
    """Adjusted p-values of a family in which every tested part counts (NaN: not a test) and only the `declarable`
    ones bring their p-value: the others enter with p = 1 (see the module's comment)."""
    entered = [p if ok or math.isnan(p) else 1.0 for p, ok in zip(pvalues, declarable, strict=True)]
    return adjust(entered, method)


def decision_threshold(entered: Sequence[float], method: str = DEFAULT, rate: float = 0.05) -> float:
    """The largest unadjusted p-value the family declares at: a part is declared exactly when its p-value is at or
    below it, so an interval at level 1 - threshold (the test's dual) excludes a bound exactly when the family
    declares. With R of the m tests declared: Benjamini-Yekutieli's step-up declares every p <= R q / (m c(m)),
    c(m) = 1 + 1/2 + ... + 1/m; Holm's step-down every p <= q / (m - R + 1). With none declared, the first step's
    cut-off (q / (m c(m)), q / m), which every p-value exceeds.
    e-BH declares every 1/e <= R q / m. NaN without a test. `entered` as `control` makes it."""
    p = np.asarray(entered, dtype=float)
    tested = p[~np.isnan(p)]
    m = tested.size
    if m == 0:
        return math.nan
    declared = int(np.sum(np.asarray(adjust(tested.tolist(), method)) <= rate))
    if method == "holm":
        return rate / (m - declared + 1) if declared else rate / m
    if method == "ebh":
        return max(declared, 1) * rate / m
    return max(declared, 1) * rate / (m * float(np.sum(1.0 / np.arange(1, m + 1))))


@dataclass(frozen=True)
class Family:
    """What a run's decided outcomes were controlled for: `tests` hypotheses, `method`, at error `rate`."""

    tests: int
    method: str = DEFAULT
    rate: float = 0.05
    declarable: int | None = None  # parts their own interval decided, which bring their p-value

    @property
    def name(self) -> str:
        return METHODS[self.method][0]

    @property
    def error(self) -> str:
        return METHODS[self.method][1]

    def describe(self) -> str:
        if self.tests == 0:
            return "no statistical test in this run (exact counts are judged on every repeat, not tested)"
        text = f"{self.tests} tests controlled together by {self.name} at a {self.error} of {self.rate:.0%}"
        text += ", valid under any dependence"
        if self.declarable is not None:
            text += f"; {self.declarable} decided by their own interval bring their p-value, the rest enter with p = 1"
        return text + " (exact counts are judged on every repeat and are not tests)"

    def as_record(self) -> dict[str, object]:
        record: dict[str, object] = {"tests": self.tests, "method": self.name, "error": self.error, "rate": self.rate}
        if self.declarable is not None:
            record["declarable"] = self.declarable
        return record
