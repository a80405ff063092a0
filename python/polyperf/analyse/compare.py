"""`polyperf compare RUN_A RUN_B`: each series' change from run A to run B, judged as benchstat does.

Pure: two tidy tables in, one comparison table out (no I/O, no clocks). A Mann-Whitney U test (two-sided) decides
whether a change is real, its p-values Holm-adjusted over the run's timed series as one family (`gate`); samples
too few to ever reach `alpha` say so; the change and its interval come from one estimator, the Hodges-Lehmann ratio
with its Moses interval (`stats`); deterministic counts (syscalls, allocations, rows) are compared exactly, counts
per request within a stated tolerance; `verdict_changes` lists the claims whose verdict moved. `to_markdown` (and
`report.compare_figure`) present the table; `gate.gate` decides `--fail-on-regression` (exact counts unless timings are
asked for).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import mannwhitneyu

from polyperf.analyse.claims import per_repeat
from polyperf.analyse.gate import FAILED_IN_B, NOT_PRODUCED, check_settings, holm
from polyperf.analyse.stats import ratio
from polyperf.common.units import format_value
from polyperf.record.catalogue import MetricInfo, current_metric, metric_info
from polyperf.record.schema import PER_RUN_PARAMS

__all__ = [
    "KEY",
    "LABELS",
    "compare",
    "direction",
    "is_deterministic_name",
    "to_markdown",
    "too_few_samples",
    "verdict_changes",
    "worst_regression",
]

KEY = ["suite", "case", "implementation", "variant", "driver", "metric", "unit", "params"]
HIGHER, LOWER, UNKNOWN = 1, -1, 0
# Counts per request (allocations or syscalls over a fixed number of requests) are near-exact: background work
# spreads a fraction of a count over the requests. A change is real when it exceeds 2% or half a count, whichever
# is larger, so one allocation more per request shows wherever a request makes fewer than 50.
PER_REQUEST_TOLERANCE = (0.02, 0.5)
# Presentation order: what needs a reader's eye first.
LABELS = (
    "regressed",
    FAILED_IN_B,
    "differs",
    "improved",
    "changed",
    "too few samples",
    "only in A",
    "only in B",
    NOT_PRODUCED,
    "no change",
    "equal",
)
COLUMNS = [
    *KEY,
    "n_a",
    "n_b",
    "median_a",
    "median_b",
    "change",
    "change_low",
    "change_high",
    "p_value",
    "p_adjusted",
    "label",
    "better",
    "client_bound",
    "client_bound_a",
    "client_bound_b",
    "timed",
    "gated",
    "gateable",
]


# --- what a metric means: read from the metric catalogue (record/catalogue.py), never guessed from its name ---


def _catalogued(metric: str, unit: str) -> MetricInfo | None:
    """The catalogue's entry for a series (a v1 name and unit read as their v2 upgrade); None when unknown or
    recorded in another unit than the catalogue's (another quantity under the same name)."""
    name, base = current_metric(metric, unit)
    info = metric_info(name)
    return info if info is not None and info.unit == base else None


def direction(metric: str, unit: str) -> int:
    """+1 when higher is better, -1 when lower is, 0 when the catalogue says neither or does not know the metric."""
    info = _catalogued(metric, unit)
    return {"higher": HIGHER, "lower": LOWER}.get(info.better, UNKNOWN) if info is not None else UNKNOWN


def is_deterministic_name(metric: str) -> bool:
    """A count a run reproduces exactly (syscalls, allocations, rows), as the catalogue declares it."""
    info = metric_info(metric)
    return info is not None and info.exact


def too_few_samples(n_a: int, n_b: int, alpha: float = 0.05) -> bool:
    """benchstat's rule: the smallest two-sided U-test p-value with these sizes (one sample wholly below the
    other, no ties) is 2 / C(n_a + n_b, n_a); if even that is not below `alpha`, no verdict is possible."""
    return n_a < 1 or n_b < 1 or 2 / math.comb(n_a + n_b, n_a) >= alpha


def _canonical_params(params: Any) -> str:
    """The params that name a series (a repeat's slot in the random order is not one), as canonical JSON."""
    if isinstance(params, str):
        params = json.loads(params) if params.strip() else {}
    if not isinstance(params, Mapping):
        params = {}  # NaN / None: a row with no params
    kept = {k: v for k, v in params.items() if k not in PER_RUN_PARAMS}
    return json.dumps(kept, sort_keys=True, separators=(",", ":"), default=str)


def _tidy(frame: pd.DataFrame) -> pd.DataFrame:
    """The columns the comparison keys on; v1 tables (no `driver`, no `client_bound`) get neutral values."""
    out = frame.copy()
    for column, default in (("driver", ""), ("client_bound", False), ("variant", ""), ("implementation", "")):
        if column not in out:
            out[column] = default
    out["params"] = out["params"].map(_canonical_params) if "params" in out else "{}"
    out[["driver", "variant", "implementation"]] = out[["driver", "variant", "implementation"]].fillna("")
    out["client_bound"] = out["client_bound"].fillna(False).astype(bool)
    return out


def _change(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """B/A - 1 by the Hodges-Lehmann ratio (the median of all B/A ratios), with its own 95% Moses interval, so the
    point always lies inside its interval. Where a side has values <= 0 no ratio estimator applies: the ratio of the
    medians, without an interval."""
    med_a, med_b = float(np.median(a)), float(np.median(b))
    if med_a == 0:
        return (0.0 if med_b == 0 else math.nan), math.nan, math.nan
    if np.any(a <= 0) or np.any(b <= 0):
        return med_b / med_a - 1, math.nan, math.nan
    summary = ratio(b, a)
    return summary.median - 1, summary.low - 1, summary.high - 1


def _count_label(a: np.ndarray, b: np.ndarray, metric: str, unit: str, better: int) -> str:
    """Exact counts: equal or not; counts per request: equal within `PER_REQUEST_TOLERANCE`. A change with a known
    better direction is improved or regressed (and so gated), else it differs."""
    med_a, med_b = float(np.median(a)), float(np.median(b))
    if is_per_request_count(metric, unit):
        relative, absolute = PER_REQUEST_TOLERANCE
        if abs(med_b - med_a) <= max(relative * abs(med_a), absolute):
            return "equal"
    elif set(a.tolist()) == set(b.tolist()):
        return "equal"
    shift = np.sign(med_b - med_a)
    if better == UNKNOWN or shift == 0:
        return "differs"
    return "improved" if shift == better else "regressed"


def is_per_request_count(metric: str, unit: str) -> bool:
    return unit == "count" and "per_request" in metric


def _label(
    a: np.ndarray,
    b: np.ndarray,
    metric: str,
    unit: str,
    better: int,
    alpha: float,
    fixed_count: bool = True,
    change: float = math.nan,
) -> tuple[str, float]:
    """(label, p-value) of one series present in both runs. `fixed_count`: the rows do not come from a timed window (a
    `duration_s` param without a `requests` count); a count per request read over a timed window is sampled instead: how
    many requests share a wake-up depends on the load, and a window with a database restart in it moved by 27%
    between two runs of one commit here."""
    per_request = is_per_request_count(metric, unit)
    # exact only where the catalogue says so: whole numbers (integer milliseconds, RSS bytes) carry noise too
    exact = is_deterministic_name(metric) and not (per_request and not fixed_count)
    if exact or (per_request and fixed_count):
        return _count_label(a, b, metric, unit, better), math.nan
    if too_few_samples(a.size, b.size, alpha):
        return "too few samples", math.nan
    if np.all(a == a[0]) and np.array_equal(np.unique(a), np.unique(b)):
        return "no change", 1.0  # one constant on both sides: the U statistic has no variance
    p_value = float(mannwhitneyu(b, a, alternative="two-sided").pvalue)
    if math.isnan(p_value) or p_value >= alpha:
        return "no change", p_value
    return _direction_label(change if math.isfinite(change) else _change(a, b)[0], better), p_value


def _direction_label(change: float, better: int) -> str:
    """The direction of a significant change, read from the change printed beside it (the Hodges-Lehmann ratio,
    which lies inside its own interval). The sign of median(B) - median(A) can disagree with it: on two-peaked
    data (A: 9 repeats near 1.00 and 11 near 1.30; B: 11 near 1.28 and 9 near 1.60) the medians say faster while
    the change is +24% [+22%, +28%]."""
    shift = np.sign(change) if math.isfinite(change) else 0
    if better == UNKNOWN or shift == 0:
        return "changed"
    return "improved" if shift == better else "regressed"


def _row(key: tuple, a: np.ndarray, b: np.ndarray, bound: tuple[bool, bool], alpha: float) -> dict[str, Any]:
    metric, unit = key[KEY.index("metric")], key[KEY.index("unit")]
    better = direction(metric, unit)
    row: dict[str, Any] = dict(zip(KEY, key, strict=True))
    row.update(
        n_a=a.size,
        n_b=b.size,
        median_a=math.nan,
        median_b=math.nan,
        change=math.nan,
        change_low=math.nan,
        change_high=math.nan,
        p_value=math.nan,
        p_adjusted=math.nan,
        better={HIGHER: "higher", LOWER: "lower"}.get(better, ""),
        client_bound=bound[0] or bound[1],
        client_bound_a=bound[0],
        client_bound_b=bound[1],
        timed=False,
        gated=False,
        gateable=_gateable(metric, unit),
    )
    if a.size == 0 or b.size == 0:
        row["label"] = "only in B" if a.size == 0 else "only in A"
        row["median_a" if a.size else "median_b"] = float(np.median(a if a.size else b))
        return row
    row.update(median_a=float(np.median(a)), median_b=float(np.median(b)))
    row["change"], row["change_low"], row["change_high"] = _change(a, b)
    params = json.loads(key[KEY.index("params")] or "{}")
    fixed_count = "requests" in params or "duration_s" not in params  # a timed window has a duration, no count
    row["label"], row["p_value"] = _label(a, b, metric, unit, better, alpha, fixed_count, row["change"])
    counted = math.isnan(row["p_value"]) and row["label"] != "too few samples"
    if counted:
        row["change_low"] = row["change_high"] = math.nan  # exact counts: no sampling error to bound
    row["timed"], row["gated"] = not counted, counted and row["gateable"]
    return row


def _gateable(metric: str, unit: str) -> bool:
    """The catalogue's word on whether a gate may fail on this metric (diagnostics never); unknown metrics not."""
    info = _catalogued(metric, unit)
    return info is not None and info.gated


def _family(out: pd.DataFrame, alpha: float) -> None:
    """Holm-adjusts the timed series' p-values as one family and labels each by its adjusted p-value."""
    out["p_adjusted"] = holm(out["p_value"].where(out["timed"].astype(bool)).tolist())
    family = int(out["p_adjusted"].notna().sum())
    for i in out.index[out["p_adjusted"].notna()]:
        row = out.loc[i]
        if row["p_adjusted"] >= alpha:
            # even one sample wholly beyond the other could not reach alpha in a family this large
            few = too_few_samples(int(row["n_a"]), int(row["n_b"]), alpha / family)
            out.loc[i, "label"] = "too few samples" if few else "no change"
        else:
            out.loc[i, "label"] = _direction_label(row["change"], direction(row["metric"], row["unit"]))


def _repeat_values(series: pd.DataFrame) -> np.ndarray:
    if "repeat" not in series:
        return series["value"].to_numpy(dtype=float)
    return per_repeat(series).to_numpy(dtype=float)


def compare(a: pd.DataFrame, b: pd.DataFrame, *, alpha: float = 0.05) -> pd.DataFrame:
    """One row per series (`KEY`) of either run: medians, change = the Hodges-Lehmann ratio B/A - 1 with its 95%
    interval, the U test's p-value and its Holm-adjusted value over the timed series, and a label from `LABELS`
    (by the adjusted value). `client_bound_a` / `_b` say whether a row of the series was limited by the load
    generator in that run, and `client_bound` whether in either: such a series says little about the server, and is
    never gated. `timed`: judged by the test; `gated`: an exact count the gate fails on by default; `gateable`: a
    metric the catalogue lets a gate fail on."""
    check_settings(alpha, None)
    tidy_a, tidy_b = _tidy(a), _tidy(b)
    # one value per independent repeat: samples inside a repeat (criterion's, say) share its machine state
    values_a = {k: _repeat_values(g) for k, g in tidy_a.groupby(KEY, sort=False, dropna=False)}
    values_b = {k: _repeat_values(g) for k, g in tidy_b.groupby(KEY, sort=False, dropna=False)}
    bound_a = {k: bool(g["client_bound"].any()) for k, g in tidy_a.groupby(KEY, sort=False, dropna=False)}
    bound_b = {k: bool(g["client_bound"].any()) for k, g in tidy_b.groupby(KEY, sort=False, dropna=False)}
    empty = np.empty(0)
    keys = sorted({*values_a, *values_b}, key=lambda k: tuple(map(str, k)))
    sides = [(values_a.get(key, empty), values_b.get(key, empty)) for key in keys]
    rows = [
        _row(key, a_values, b_values, (bound_a.get(key, False), bound_b.get(key, False)), alpha)
        for key, (a_values, b_values) in zip(keys, sides, strict=True)
    ]
    out = pd.DataFrame(rows, columns=COLUMNS)
    _family(out, alpha)
    out.attrs.update(run_a=_run_id(a), run_b=_run_id(b), alpha=alpha, family="holm")
    return out


def _run_id(frame: pd.DataFrame) -> str:
    return ",".join(sorted(map(str, frame["run_id"].dropna().unique()))) if "run_id" in frame else ""


def worst_regression(df: pd.DataFrame) -> float:
    """The largest change in the worse direction among rows labelled "regressed" and not client-bound in either run,
    as a fraction (0.25 = 25% worse; a throughput that fell from 100 to 75 counts 0.25); 0.0 when nothing regressed.
    A count that rose from zero counts as infinitely worse."""
    regressed = df[(df["label"] == "regressed") & ~df["client_bound"].astype(bool)]
    if regressed.empty:
        return 0.0
    sign = regressed["better"].map({"lower": 1.0, "higher": -1.0})
    return float(max(0.0, (regressed["change"].fillna(math.inf) * sign).max()))


def _fmt(value: float, unit: str) -> str:
    return "" if math.isnan(value) else format_value(value, unit)


def _pct(value: float) -> str:
    return "" if math.isnan(value) else f"{value * 100:+.1f}%"


def _ordered(df: pd.DataFrame) -> pd.DataFrame:
    rank = {label: i for i, label in enumerate(LABELS)}
    return df.assign(_rank=df["label"].map(rank)).sort_values(["_rank", *KEY], kind="stable").drop(columns="_rank")


_SHOUT = ("regressed", "differs", FAILED_IN_B)  # in bold: what a reader must look at


def to_markdown(df: pd.DataFrame, *, only_changes: bool = False) -> str:
    """A GitHub-flavoured table for a CI comment, regressions first; `only_changes` drops "no change"/"equal"."""
    shown = _ordered(df[~df["label"].isin(["no change", "equal"])] if only_changes else df)
    if shown.empty:
        return "_no series changed_" if only_changes else "_no series to compare_"
    table = pd.DataFrame(
        {
            "series": [
                " / ".join(str(p) for p in parts if p)
                for parts in zip(
                    shown["suite"],
                    shown["case"],
                    shown["implementation"],
                    shown["variant"],
                    shown["driver"],
                    strict=True,
                )
            ],
            "metric": shown["metric"],
            "params": shown["params"].replace("{}", ""),
            "A": [_fmt(v, u) for v, u in zip(shown["median_a"], shown["unit"], strict=True)],
            "B": [_fmt(v, u) for v, u in zip(shown["median_b"], shown["unit"], strict=True)],
            "change": shown["change"].map(_pct),
            "95% CI": [
                f"[{_pct(lo)}, {_pct(hi)}]" if not math.isnan(lo) else ""
                for lo, hi in zip(shown["change_low"], shown["change_high"], strict=True)
            ],
            "p (Holm)": shown["p_adjusted"].map(lambda p: "" if math.isnan(p) else f"{p:.3g}"),
            "result": [f"**{label}**" if label in _SHOUT else label for label in shown["label"]],
        }
    )
    if "missing_why" in shown:  # why B lacks a series (`gate.attribute_missing`)
        table["result"] += [f" ({why})" if why else "" for why in shown["missing_why"].fillna("")]
    table["result"] += [
        " (client-bound in " + " and ".join(side for side, bound in (("A", a), ("B", b)) if bound) + "; not gated)"
        if a or b
        else ""
        for a, b in zip(shown["client_bound_a"], shown["client_bound_b"], strict=True)
    ]
    if (table["params"] == "").all():
        table = table.drop(columns="params")
    return table.to_markdown(index=False)


def verdict_changes(a: Iterable[Mapping[str, Any]], b: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """The entries whose verdict differs between runs A and B, from the verdict records each run wrote (its
    verdicts.json, `analyse.verdict_records`): an entry one run lacks was not measured there."""
    by_a = {r["claim"]: r for r in a}
    by_b = {r["claim"]: r for r in b}
    absent = {"verdict": "not measured", "measured": None, "reason": "not judged in this run"}
    rows = []
    for claim in dict.fromkeys([*by_a, *by_b]):
        ra, rb = by_a.get(claim, absent), by_b.get(claim, absent)
        if ra["verdict"] != rb["verdict"]:
            rows.append(
                {
                    "claim": claim,
                    "kind": ra.get("kind") or rb.get("kind"),
                    "verdict_a": ra["verdict"],
                    "verdict_b": rb["verdict"],
                    "measured_a": math.nan if ra.get("measured") is None else float(ra["measured"]),
                    "measured_b": math.nan if rb.get("measured") is None else float(rb["measured"]),
                    "reason_b": rb.get("reason", ""),
                }
            )
    columns = ["claim", "kind", "verdict_a", "verdict_b", "measured_a", "measured_b", "reason_b"]
    return pd.DataFrame(rows, columns=columns)
