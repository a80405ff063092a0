"""The gate of `polyperf compare` across two separate runs: what it may fail on, the family correction of its
tests, and the checks that make it fail closed. Pure: tables in, decisions and one-line reasons out.

Two runs taken at different times are not a paired sample: a shift that hits a whole run (a busier machine, another
CPU frequency) is invisible to any test inside the runs. Simulated with 40 timed series, n = 6 a side, a 2% shift
between runs made a 5% gate fail 84% of unchanged builds; on this project's own A/A runs 35% of timed series were
labelled changed. So by default the gate fails only on exact counts (syscalls, allocations, rows: the catalogue's
`exact` metrics and counts per request), which a run reproduces. Timings are gated only when asked, with that said,
and `polyperf ab` (both revisions interleaved in one session) is the gate for timings.

Timed series are one family: their U-test p-values are adjusted by Holm's step-down method, which keeps the chance
of any false "changed" among them at or below alpha (family-wise), without assuming independence between series.

A series of A that B lacks is one of three things (`attribute_missing`), and only the first and the last fail the gate:
- "failed in B": a test of its suite failed or errored in B (pytest's summary), and the test names its case or B has
  no row of the case at all: the case was cut short;
- "not produced in B": B measured the same case and metric on other series (a target picked by a calibration, a load
  generator installed on one machine only): which series such a case yields depends on the run, not the code;
- "only in A": B did not measure the case at all and no test failed (another suite or another profile): fails closed.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = [
    "DRIFT_NOTE",
    "FAILED_IN_B",
    "FAMILY_NOTE",
    "NOT_PRODUCED",
    "GateResult",
    "check_settings",
    "gate",
    "holm",
]

FAMILY_NOTE = "timed series tested as one family: Holm-adjusted Mann-Whitney p-values, family-wise error <= alpha"
DRIFT_NOTE = (
    "timings are gated across two separate runs: drift between runs (machine load, CPU frequency) is not "
    "controlled, and a shift of 2% between runs fails a 5% gate on most unchanged builds; for timings use "
    "`polyperf ab BASE HEAD`, which measures both revisions interleaved in one session"
)


FAILED_IN_B, NOT_PRODUCED = "failed in B", "not produced in B"


def attribute_missing(
    table: pd.DataFrame, failed: Sequence[tuple[str, str]] = (), invalid: Collection[tuple[str, ...]] = ()
) -> pd.DataFrame:
    """`table` (from `compare`) with each "only in A" series relabelled "failed in B" or "not produced in B" (see the
    module's comment) and a `missing_why` column saying why in words. `failed`: B's failed tests as (suite, test id);
    `invalid`: (suite, case, implementation, metric) of series B has rows of, none of them valid (NaN, out of range):
    B measured them and lost every value, which fails closed."""
    out = table.copy()
    out["missing_why"] = ""
    in_b = table[table["n_b"] > 0]
    cases_b = set(zip(in_b["suite"], in_b["case"], strict=True))
    metrics_b = set(zip(in_b["suite"], in_b["case"], in_b["metric"], strict=True))
    for i in out.index[out["label"] == "only in A"]:
        suite, case, metric = out.at[i, "suite"], out.at[i, "case"], out.at[i, "metric"]
        if (suite, case, out.at[i, "implementation"], metric) in invalid:
            out.at[i, "missing_why"] = "B has rows of it, none with a valid value"
            continue
        tests = [test for s, test in failed if s == suite]
        naming = [test for test in tests if case and case in test]
        if naming or (tests and (suite, case) not in cases_b):
            out.at[i, "label"] = FAILED_IN_B
            out.at[i, "missing_why"] = f"{', '.join((naming or tests)[:2])} failed in B"
        elif (suite, case, metric) in metrics_b:
            out.at[i, "label"] = NOT_PRODUCED
            out.at[i, "missing_why"] = f"B measured {case} {metric} on other series (chosen by the run), not this one"
    return out


def check_settings(alpha: float, threshold_pct: float | None) -> None:
    """Refuses settings that would switch the gate off or turn it around (ValueError, one line)."""
    if not (isinstance(alpha, (int, float)) and 0 < alpha < 1):
        raise ValueError(f"--alpha must lie in (0, 1), got {alpha}")
    if threshold_pct is not None and not (math.isfinite(threshold_pct) and threshold_pct >= 0):
        raise ValueError(f"--fail-on-regression must be a finite percentage >= 0, got {threshold_pct}")


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values (NaN stays NaN and is not counted in the family)."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, math.nan)
    tested = np.flatnonzero(~np.isnan(p))
    m = tested.size
    order = tested[np.argsort(p[tested], kind="stable")]
    running = 0.0
    for i, index in enumerate(order):
        running = max(running, min(1.0, (m - i) * p[index]))  # monotone: never below an earlier step
        out[index] = running
    return out


@dataclass(frozen=True)
class GateResult:
    """`failed`: the exit should be non-zero; `reason`: one line saying why (or what passed)."""

    failed: bool
    reason: str
    exit_code: int = 0


def _worst(gated: pd.DataFrame) -> tuple[float, str]:
    """The largest regression the gated rows show beyond doubt, as a fraction, and where: for a timed series the
    end of its 95% interval nearest to no change (a slowdown of +12% [+6%, +19%] counts 6%), so that "regressed
    beyond T" means the whole interval lies beyond T, a one-sided test of "at most T"; for an exact count, which
    has no sampling error, the change itself."""
    regressed = gated[gated["label"] == "regressed"]
    if regressed.empty:
        return 0.0, ""
    sign = regressed["better"].map({"lower": 1.0, "higher": -1.0})
    near = regressed["change_low"].where(sign > 0, regressed["change_high"])
    worse = near.fillna(regressed["change"]).fillna(math.inf) * sign
    at = worse.idxmax()
    row = regressed.loc[at]
    where = f"{row['suite']}/{row['case']} {row['metric']}"
    if math.isfinite(row["change_low"]):
        where += f" (change {row['change']:+.1%}, interval [{row['change_low']:+.1%}, {row['change_high']:+.1%}])"
    return float(max(0.0, worse.max())), where


def gate(table: pd.DataFrame, threshold_pct: float, *, gate_timings: bool = False) -> GateResult:
    """Fails closed: a run B with no series, or lacking any series that A has (another suite, a crashed case), fails
    (exit 2 for no data at all, else 1). Otherwise fails when a gated series regressed by more than the threshold."""
    if table.empty or not (table["n_b"] > 0).any():
        return GateResult(True, "B holds no series to compare: the gate fails closed", 2)
    if not (table["n_a"] > 0).any():
        return GateResult(True, "A holds no series to compare against: the gate fails closed", 2)
    # A series only in A has no label of its own: it counts when the gate would judge its metric (a diagnostic, or a
    # syscall seen by name in one run only, is reported, never gated)
    gateable = table["gateable"].astype(bool)
    for label, what in ((FAILED_IN_B, "{} series of failed cases"), ("only in A", "{} of A's series")):
        missing = table[(table["label"] == label) & gateable]
        if not missing.empty:
            first = missing.iloc[0]
            example = f"{first['suite']}/{first['case']} {first['metric']}"
            why = f": {first['missing_why']}" if first.get("missing_why") else ""
            lacks = what.format(len(missing))
            return GateResult(True, f"B lacks {lacks} (e.g. {example}{why}): the gate fails closed", 1)
    eligible = table["gated"].astype(bool)
    if gate_timings:
        eligible |= table["timed"].astype(bool) & table["gateable"].astype(bool)
    worst, where = _worst(table[eligible & ~table["client_bound"].astype(bool)])
    if worst * 100 > threshold_pct:
        return GateResult(True, f"regressed beyond {threshold_pct:g}%: at least {worst:.1%} in {where}", 1)
    what = "exact counts and timings" if gate_timings else "exact counts"
    chance = int(((table["label"] == NOT_PRODUCED) & gateable).sum())
    also = f"; {chance} series of A not produced in B by this run's choices, not gated" if chance else ""
    return GateResult(False, f"no regression beyond {threshold_pct:g}% in the gated series ({what}){also}")
