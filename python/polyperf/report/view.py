"""What the report's templates show, formatted for people: verdict rows, the environment in one line, and
compact tables of at most `MAX_TABLE_ROWS` rows (the full tables live in results.csv / results.parquet)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from polyperf.analyse.claims import EXACT, VERDICTS, Verdict
from polyperf.analyse.verdict_records import finite, records_of
from polyperf.common.units import format_value
from polyperf.record.schema import BASE_UNITS

__all__ = [
    "HEADLINE_METRICS",
    "MAX_TABLE_ROWS",
    "Table",
    "VerdictRow",
    "claim_interval",
    "claim_value",
    "compact",
    "env_line",
    "verdict_counts",
    "verdict_rows",
]

MAX_TABLE_ROWS = 50
# Metrics a reader looks at first when a suite has more series than a table shows.
HEADLINE_METRICS = ("rps", "seconds", "latency_p50_s", "latency_p99_s", "cpu_s_per_request", "rss_peak_bytes")


@dataclass(frozen=True)
class VerdictRow:
    id: str
    suite: str
    statement: str
    headline: str  # the statement's first clause, for the table row
    published: str
    measured: str
    interval: str
    n: int
    verdict: str
    badge: str  # CSS class of the verdict badge
    rule: str
    source: str
    note: str
    kind: str = "claim"  # "claim" (an article said it) or "check" (polyperf's own expectation)
    reason: str = ""  # why this verdict: the interval and method, too few samples, within the noise, not measured
    noise: str = ""  # the smallest difference this run could resolve, "±4.2%"; "exact" for counts
    direction: str = ""  # reproduced / opposite / inconclusive; empty where no direction is claimed
    size: str = ""  # as published / larger / smaller / inconclusive; empty without a published figure
    size_ratio: str = ""  # "3.7× (2.1 – 5.2×) of published"
    verdict_text: str = ""  # the headline: "reproduced, 3.7x larger than published (42.8x vs 11.43x)"
    # where the family's control held a part back: the interval at the family's level, which touches the bound
    family_interval: str = ""
    # the article's conditions beside this run's: "published on canada.json; measured on a generated …, <CPU>"
    conditions: str = ""


@dataclass(frozen=True)
class Table:
    """Rows of strings ready for a template; `total` says how many rows the full table has."""

    columns: list[str]
    rows: list[list[str]]
    total: int
    numeric: set[str] = field(default_factory=set)  # columns aligned right

    @property
    def truncated(self) -> bool:
        return self.total > len(self.rows)


def _claim_parts(value: float, unit: str, digits: int) -> tuple[str, str]:
    """(number, unit suffix) of a claim's value: `("11.4", "×")`, `("2,009,119", " syscalls")`."""
    if unit == "x":
        return f"{value:.{digits}g}", "×"
    number = f"{round(value):,}" if abs(value) >= 100 or float(value).is_integer() else f"{value:.{digits}g}"
    return number, f" {unit}"


def claim_value(value: float | None, unit: str, digits: int = 3) -> str:
    """A claim's number in its own unit: `11.4×`, `2,009,119 syscalls`, or a base unit scaled by `format_value`;
    `digits` significant digits for ratios (published figures keep theirs: 11.96, not 12)."""
    if value is None or not math.isfinite(value):
        return "–"
    if unit in BASE_UNITS:
        return format_value(value, unit)
    return "".join(_claim_parts(value, unit, digits))


def claim_interval(low: float, high: float, n: int, unit: str) -> str:
    """`10.9 – 11.3×`; `all 5 equal` when the values did not vary; empty for a single value."""
    if n <= 1 or not (math.isfinite(low) and math.isfinite(high)):
        return ""
    if low == high:
        return f"all {n} equal"
    if unit in BASE_UNITS:
        return f"{format_value(low, unit)} – {format_value(high, unit)}"
    (lo, suffix), (hi, _) = _claim_parts(low, unit, 3), _claim_parts(high, unit, 3)
    return f"{lo} – {hi}{suffix}"


def _headline(statement: str, limit: int = 150) -> str:
    for stop in ("; ", ". ", " ("):
        head = statement.split(stop, 1)[0]
        if len(head) <= limit:
            return head
    return statement[: limit - 1].rstrip() + "…"


_EXPONENT = re.compile(r"\b\d+(?:\.\d+)?e[+-]?\d+\b")


def _plain_numbers(text: str) -> str:
    """`2.00911e+06` → `2,009,110` in a rule's words (numbers for people)."""

    def plain(match: re.Match[str]) -> str:
        x = float(match.group())
        return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.6f}".rstrip("0").rstrip(".")

    return _EXPONENT.sub(plain, text)


def _published(r: Mapping[str, Any]) -> str:
    unit, kind = str(r.get("unit", "")), r.get("kind")
    if r.get("published") is not None:
        return claim_value(r["published"], unit, digits=6)
    if r.get("center") is not None:  # a rule centred on a value nobody published: polyperf's reading of the claim
        prefix = "expected " if kind == "check" else "≈ "
        return prefix + claim_value(r["center"], unit, digits=6)
    if r.get("rule_kind") in ("less_than", "greater_than") and r.get("threshold") is not None:
        side = "<" if r["rule_kind"] == "less_than" else ">"
        bound = f"{side} {claim_value(float(r['threshold']), unit, digits=6)}"
        return f"direction only: {bound}" if kind == "claim" else f"expected {bound}"
    return "–"


def _noise(r: Mapping[str, Any]) -> str:
    if r.get("method") == EXACT:
        return "exact"
    return "" if r.get("noise_floor") is None else f"±{r['noise_floor']:.1%}"


def _size_ratio(r: Mapping[str, Any]) -> str:
    """measured ÷ published with its interval: `3.7× (2.1 – 5.2×) of published`."""
    ratio, low, high = finite(r.get("size_ratio")), finite(r.get("size_ci_low")), finite(r.get("size_ci_high"))
    if ratio is None:
        return ""
    interval = f" ({low:.3g} – {high:.3g}×)" if low is not None and high is not None and low != high else ""
    return f"{ratio:.3g}×{interval} of published"


def _interval(r: Mapping[str, Any], low: str, high: str) -> str:
    lo, hi = finite(r.get(low)), finite(r.get(high))
    return "" if lo is None or hi is None else claim_interval(lo, hi, int(r.get("n") or 0), str(r.get("unit", "")))


def _family_interval(r: Mapping[str, Any]) -> str:
    """Where the family's control held a part back: the interval at the family's level, which touches the bound."""
    if not r.get("held_back") or r.get("family_level") is None:
        return ""
    wide = _interval(r, "family_ci_low", "family_ci_high") or "no bounded interval"
    return f"{wide} at the family's {r['family_level']:.2%}"


_KIND_ORDER = {"claim": 0, "derived": 1, "check": 2}


def conditions_text(conditions: Mapping[str, str], env: Mapping[str, Any] | None) -> str:
    """ "published on canada.json, a 2019 laptop; measured on a generated canada-like document, <CPU> × 2": the
    article's input, machine and versions beside what this run measured on. Empty when the entry names none."""
    if not conditions:
        return ""
    published = [conditions[k] for k in ("input", "machine", "versions") if conditions.get(k)]
    here = [conditions["measured_on"]] if conditions.get("measured_on") else []
    if env and (env.get("cpu_model") or env.get("cpu_count")):
        here.append(f"{env.get('cpu_model') or 'CPU'} × {env.get('cpu_count', '?')}")
    if env and conditions.get("versions") and env.get("python"):
        here.append(f"Python {str(env['python']).split(' ')[0]}")
    text = f"published on {', '.join(published)}" if published else ""
    return "; ".join(part for part in (text, f"measured on {', '.join(here)}" if here else "") if part)


def _still_open(record: Mapping[str, Any]) -> str:
    """Why the run's added repeats left an entry open (the data, or the budget), when the run said."""
    return f"; still open: {record['still_open']}" if record.get("still_open") else ""


def verdict_rows(
    verdicts: Iterable[Verdict | Mapping[str, Any]], env: Mapping[str, Any] | None = None
) -> list[VerdictRow]:
    """Claims first, then polyperf's restatements (derived), then checks, each in registry order. From the records
    a run wrote (verdicts.json), or verdicts judged here; `env` (the run's env.json) names the machine beside an
    entry's conditions."""
    rows = []
    for r in sorted(records_of(verdicts), key=lambda r: _KIND_ORDER.get(r.get("kind", ""), 3)):
        unit = str(r.get("unit", ""))
        interval = _interval(r, "ci_low", "ci_high")
        if r.get("method") == EXACT:
            interval = interval or "exact count"
        statement = str(r.get("statement", ""))
        rows.append(
            VerdictRow(
                id=r["claim"],
                suite=r["suite"],
                statement=statement,
                headline=_headline(statement),
                published=_published(r),
                measured=claim_value(finite(r.get("measured")), unit),
                interval=interval,
                n=int(r.get("n") or 0),
                verdict=r["verdict"],
                badge=r["verdict"].replace(" ", "-"),
                rule=_plain_numbers(str(r.get("rule", ""))),
                source=str(r.get("source", "")),
                note=str(r.get("note") or ""),
                kind=r.get("kind", "claim"),
                reason=_plain_numbers(str(r.get("reason", "")) + _still_open(r)),
                noise=_noise(r),
                direction=r.get("direction") or "",
                size=r.get("size") or "",
                size_ratio=_size_ratio(r),
                family_interval=_family_interval(r),
                verdict_text=r.get("headline") or r["verdict"],
                conditions=conditions_text(r.get("conditions") or {}, env),
            )
        )
    return rows


def verdict_counts(verdicts: Iterable[Verdict | Mapping[str, Any]]) -> dict[str, int]:
    """{verdict: count} over every verdict name, zeros included, in the order of `VERDICTS` (a name it lacks,
    from a newer file, after them)."""
    counts = dict.fromkeys(VERDICTS, 0)
    for r in records_of(verdicts):
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    return counts


def env_line(env: Mapping[str, Any]) -> str:
    """The machine, toolchains, commit and profile in one line."""
    parts = []
    cpu = env.get("cpu_model")
    if cpu or env.get("cpu_count"):
        parts.append(f"{cpu or 'CPU'} × {env.get('cpu_count', '?')}")
    if env.get("memory_bytes"):
        parts.append(f"{env['memory_bytes'] / 2**30:.0f} GiB")
    if env.get("kernel"):
        parts.append(f"Linux {env['kernel']}" if "linux" in str(env.get("os", "")).lower() else str(env["kernel"]))
    for key, prefix in (("rustc", "rustc "), ("go", "go version "), ("python", "")):
        value = str(env.get(key) or "")
        if value:
            version = value.removeprefix(prefix).split(" (")[0].split(" ")[0]
            parts.append(f"{key} {version.removeprefix('go')}")
    if env.get("git_commit"):
        parts.append(
            f"commit {str(env['git_commit'])[:10]}" + (" (uncommitted changes)" if env.get("git_dirty") else "")
        )
    if env.get("profile"):
        parts.append(f"profile {env['profile']}")
    return " · ".join(parts) or "environment not recorded (no env.json)"


def _relevance(metric: str, claimed: set[str]) -> int:
    if metric in claimed:
        return 0
    return 1 if metric in HEADLINE_METRICS else 2


def compact(
    frame: pd.DataFrame,
    *,
    numeric: Sequence[str] = (),
    claimed_metrics: Iterable[str] = (),
    limit: int = MAX_TABLE_ROWS,
) -> Table:
    """`frame` as strings, without columns that are empty throughout, cut to `limit` rows: the metrics claims
    use first, then the headline metrics, then the rest (shown in the frame's own order)."""
    total = len(frame)
    if frame.empty:
        return Table(list(frame.columns), [], 0)
    if total > limit and "metric" in frame:
        claimed = set(claimed_metrics)
        rank = frame["metric"].map(lambda m: _relevance(str(m), claimed))
        frame = frame.loc[rank.sort_values(kind="stable").index[:limit]].sort_index()
    keep = [c for c in frame.columns if frame[c].astype(str).str.len().gt(0).any()]
    shown = frame[keep].astype(str)
    return Table(keep, shown.values.tolist(), total, {c for c in numeric if c in keep})
