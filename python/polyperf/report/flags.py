"""Results a reader must not take at face value, found in a run: failed tests (failed verification, dead
servers), notes and interruptions from env.json, unreadable lines of results.jsonl, rows-check mismatches,
client-bound and noisy series, metrics the catalogue does not know."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from polyperf.analyse.claims import per_repeat
from polyperf.analyse.stats import summarize
from polyperf.common.paths import suite_of
from polyperf.common.units import format_value
from polyperf.record.catalogue import current_metric, metric_info
from polyperf.record.run_dir import JSONL, skipped_note, unreadable_lines, unreadable_note
from polyperf.record.schema import series_params_key

__all__ = ["FLAGGERS", "NOISE_SHARE", "Flag", "find_flags", "series_name"]

# A series is noisy when its 95% interval is wider than this share of its median.
NOISE_SHARE = 0.20
SERIES = ["suite", "case", "implementation", "variant", "driver"]
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_SUMMARY_LINE = re.compile(r"^(FAILED|ERROR) (\S+?)(?: - (.*))?$")


@dataclass(frozen=True)
class Flag:
    # "failed", "interrupted", "unreadable", "no valid values", "note", "rows mismatch", "client-bound", "noisy",
    # "unknown metric"
    kind: str
    subject: str  # what is flagged (a test, a series, the run)
    detail: str  # why, in words and human units
    suite: str = ""


def series_name(key: Mapping[str, Any]) -> str:
    """`case / implementation / variant / driver`, empty parts left out."""
    return " / ".join(str(key[c]) for c in ("case", "implementation", "variant", "driver") if key.get(c))


def _params_text(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(params.items()))


def failed_tests(run_dir: Path) -> list[Flag]:
    """pytest's short summary (`FAILED`/`ERROR` lines of logs/pytest.log): a server that failed verification or
    died under load fails its test with the reason."""
    log = run_dir / "logs" / "pytest.log"
    if not log.exists():
        return []
    flags = []
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        match = _SUMMARY_LINE.match(_ANSI.sub("", line).strip())
        if match:
            what, test, reason = match.groups()
            suite = suite_of(test)
            detail = reason or ("test failed" if what == "FAILED" else "error outside the test (fixture or setup)")
            flags.append(Flag("failed", test, detail, suite))
    return flags


def env_flags(env: Mapping[str, Any]) -> list[Flag]:
    flags = []
    if env.get("interrupted"):
        flags.append(Flag("interrupted", "run", f"stopped by {env['interrupted']}: only the rows measured until then"))
    flags += [Flag("note", "not measured", str(note)) for note in env.get("notes") or []]
    return flags


def unreadable(table: pd.DataFrame, run_dir: Path) -> list[Flag]:
    """Lines of results.jsonl that held no readable row (a write cut short, a garbled line): rows lost, counted."""
    if "unreadable_lines" in table.attrs:  # with the values left out, and the first reason
        flags = [Flag("unreadable", JSONL, note)] if (note := skipped_note(table)) else []
        return flags + ([Flag("unreadable", "results.parquet", table.attrs["kept"])] if table.attrs.get("kept") else [])
    lines = unreadable_lines(run_dir)
    return [Flag("unreadable", JSONL, unreadable_note(len(lines)))] if lines else []


def rows_mismatches(table: pd.DataFrame) -> list[Flag]:
    """Runs whose `rows_acked` (POSTs the client saw acknowledged) differs from `rows_found` (rows the check read
    back from the database); the check's own `rows_ambiguous` / `rows_mismatch` counts are quoted beside."""
    checks = table[table["metric"].isin(["rows_acked", "rows_found", "rows_ambiguous", "rows_mismatch"])]
    if checks.empty:
        return []
    checks = checks.assign(_params=checks["params"].map(series_params_key))
    flags = []
    for key, g in checks.groupby([*SERIES, "repeat", "_params"], sort=True):
        values = dict(zip(g["metric"], g["value"], strict=False))
        acked, found = values.get("rows_acked"), values.get("rows_found")
        if acked is None or found is None or acked == found:
            continue
        where = dict(zip([*SERIES, "repeat", "_params"], key, strict=True))
        detail = f"{format_value(acked, 'count')} rows acknowledged, {format_value(found, 'count')} found"
        extra = [
            f"{format_value(values[m], 'count')} {m.removeprefix('rows_')}"
            for m in ("rows_ambiguous", "rows_mismatch")
            if m in values
        ]
        flags.append(
            Flag(
                "rows mismatch",
                f"{series_name(where)} (repeat {where['repeat']})",
                detail + (f" ({', '.join(extra)})" if extra else ""),
                where["suite"],
            )
        )
    return flags


def client_bound(table: pd.DataFrame) -> list[Flag]:
    """Series limited by the load generator: they measure the client, not the server."""
    bound = table[table["client_bound"].astype(bool)]
    flags = []
    for key, g in bound.groupby(SERIES, sort=True):
        where = dict(zip(SERIES, key, strict=True))
        whole = table
        for column, value in where.items():
            whole = whole[whole[column] == value]
        runs, total = g["repeat"].nunique(), whole["repeat"].nunique()
        flags.append(
            Flag(
                "client-bound",
                series_name(where),
                f"{runs} of {total} repeats limited by the load generator: they measure the client",
                where["suite"],
            )
        )
    return flags


def noisy(table: pd.DataFrame, share: float = NOISE_SHARE) -> list[Flag]:
    """Series (params included) whose 95% interval is wider than `share` of the median, widest first."""
    frame = table.assign(_params=table["params"].map(series_params_key))
    found = []
    for key, g in frame.groupby([*SERIES, "metric", "unit", "_params"], sort=True):
        values = per_repeat(g).dropna()
        if values.empty:
            continue  # no valid value: flagged by `no_valid_values`
        s = summarize(values.to_numpy())
        if not s.has_interval or not s.median or (width := (s.high - s.low) / abs(s.median)) <= share:
            continue
        where = dict(zip([*SERIES, "metric", "unit", "_params"], key, strict=True))
        params = _params_text(g["params"].iloc[0])
        subject = f"{series_name(where)}: {where['metric']}" + (f" ({params})" if params else "")
        unit = where["unit"]
        detail = (
            f"median {format_value(s.median, unit)}, 95% interval {format_value(s.low, unit)} – "
            f"{format_value(s.high, unit)} ({width:.0%} of the median, n={s.n})"
        )
        found.append((width, Flag("noisy", subject, detail, where["suite"])))
    return [flag for _w, flag in sorted(found, key=lambda f: -f[0])]


def no_valid_values(table: pd.DataFrame) -> list[Flag]:
    """Series whose every value was left out when loaded (not finite, out of range, a negative time) or measured
    as NaN: no figure or median shows them."""
    frame = table.assign(_params=table["params"].map(series_params_key), _ok=pd.to_numeric(table["value"]).notna())
    flags = []
    for key, g in frame.groupby([*SERIES, "metric", "unit", "_params"], sort=True):
        if g["_ok"].any():
            continue
        where = dict(zip([*SERIES, "metric", "unit", "_params"], key, strict=True))
        params = _params_text(g["params"].iloc[0])
        subject = f"{series_name(where)}: {where['metric']}" + (f" ({params})" if params else "")
        why = f"no valid values: all {len(g)} left out (line numbers and why in logs/polyperf.log)"
        flags.append(Flag("no valid values", subject, why, where["suite"]))
    return flags


def unknown_metrics(table: pd.DataFrame) -> list[Flag]:
    """Metrics the metric catalogue does not know: shown as measured, with no direction, exactness or gate guessed."""
    flags = []
    for (suite, metric, unit), _g in table.groupby(["suite", "metric", "unit"], sort=True):
        if metric_info(current_metric(str(metric), str(unit))[0]) is None:
            why = "not in the metric catalogue: which way is better, and whether it is exact, are unknown"
            flags.append(Flag("unknown metric", f"{metric} ({unit})", why, str(suite)))
    return flags


# Every source of flags, in the order the report lists them: (table, env, run directory) -> flags.
FLAGGERS: list[Callable[[pd.DataFrame, Mapping[str, Any], Path], list[Flag]]] = [
    lambda _t, _e, run_dir: failed_tests(run_dir),
    lambda _t, env, _r: env_flags(env),
    lambda table, _e, run_dir: unreadable(table, run_dir),
    lambda table, _e, _r: no_valid_values(table),
    lambda table, _e, _r: rows_mismatches(table),
    lambda table, _e, _r: client_bound(table),
    lambda table, _e, _r: noisy(table),
    lambda table, _e, _r: unknown_metrics(table),
]


def find_flags(table: pd.DataFrame, env: Mapping[str, Any], run_dir: Path) -> list[Flag]:
    """Every flag of the run, most serious first."""
    return [flag for flagger in FLAGGERS for flag in flagger(table, env, run_dir)]
