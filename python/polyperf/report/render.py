"""Writes a run's report: `report/*.png`, `summary.md` and `report.html` inside the run directory, and the index
of every run beside `runs/` (`index.html`), through the Jinja2 templates in `templates/`.

Every suite gets a section. Its figures are those of `polyperf.report.suites.<suite>` when such a module
exists (a function `figures(table) -> list[Figure]`), else the default ones; its table is the default one,
cut to the rows a reader needs (the full table is results.csv / results.parquet).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from polyperf.analyse.verdict_records import judged_now
from polyperf.common.atomic import atomic_path, safe_dir, write_text_atomic
from polyperf.record.lines import valid_rows
from polyperf.record.run_dir import load_env, load_run, resolve_run
from polyperf.record.verdicts_file import VerdictsFileError
from polyperf.report.answers import run_answers
from polyperf.report.count_figures import count_figures
from polyperf.report.default import default_figures, median_table
from polyperf.report.figure import Figure
from polyperf.report.flags import NOISE_SHARE, Flag, find_flags
from polyperf.report.forest import forest_figure
from polyperf.report.index import write_index
from polyperf.report.templating import render_template
from polyperf.report.view import (
    MAX_TABLE_ROWS,
    Table,
    compact,
    env_line,
    verdict_counts,
    verdict_rows,
)

__all__ = ["suite_figures", "write_report"]

NOTES = [
    "Values are medians of independent repeats with distribution-free 95% intervals (none below 6 repeats); "
    "compare ratios measured in one run, not absolute times across machines.",
    "Syscall counts are exact per call (deltas of /proc/thread-self/io inside the Rust function).",
]


@dataclass(frozen=True)
class Section:
    name: str
    figures: list[Figure]
    medians: Table


def suite_figures(suite: str) -> Callable[[pd.DataFrame], list[Figure]] | None:
    """The suite's own figure maker, found by name: `polyperf.report.suites.<suite>.figures`."""
    if not (isinstance(suite, str) and suite.isidentifier()):  # a row's name never picks a module: `a.b`, `..`
        return None
    name = f"polyperf.report.suites.{suite}"
    if importlib.util.find_spec(name) is None:
        return None
    return getattr(importlib.import_module(name), "figures", None)


def _figures(table: pd.DataFrame, suite: str) -> list[Figure]:
    make = suite_figures(suite)
    # counts per request (allocations, syscalls) sit beside a suite's own figures; default ones show them anyway
    return [*make(table), *count_figures(table, suite)] if make else default_figures(table, suite)


def _equal_intervals(frame: pd.DataFrame) -> pd.DataFrame:
    """`247 – 247` says less than `all equal` (exact counts, or one value)."""
    if frame.empty:
        return frame
    ends = frame["95% interval"].str.split(" – ", n=1, regex=False)
    same = ends.map(lambda e: len(e) == 2 and e[0] == e[1])
    label = frame["n"].map(lambda n: "single value" if n == 1 else "all equal")
    return frame.assign(**{"95% interval": frame["95% interval"].where(~same, label)})


def _sections(
    table: pd.DataFrame, suites: list[str], fig_dir: Path, claimed: dict[str, set[str]], flags: list[Flag]
) -> list[Section]:
    """Each suite's section; a suite whose figures cannot be drawn gets a flag, and the report goes on."""
    sections = []
    for suite in suites:
        try:
            figures = _figures(table, suite)
        except (ValueError, TypeError, KeyError, IndexError, ZeroDivisionError) as exc:
            flags.append(Flag("failed", f"figures of {suite}", f"not drawn: {type(exc).__name__}: {exc}", suite))
            figures = []
        for fig in figures:
            with atomic_path(fig_dir / f"{fig.name}.png") as tmp:  # never through a link planted in the folder
                fig.figure.savefig(tmp, dpi=110, format="png")
            plt.close(fig.figure)
        medians = compact(
            _equal_intervals(median_table(table, suite)),
            numeric=("median", "95% interval", "n"),
            claimed_metrics=claimed.get(suite, ()),
        )
        sections.append(Section(suite, figures, medians))
    return sections


def _flags_table(flags: list[Flag]) -> Table:
    rows = [[f.kind, f.suite, f.subject, f.detail] for f in flags[:MAX_TABLE_ROWS]]
    return Table(["flag", "suite", "what", "why"], rows, len(flags))


def _index_of(run_dir: Path) -> Path | None:
    """`<out>/index.html` when the run lives in `<out>/runs/`, else None."""
    return run_dir.parent.parent / "index.html" if run_dir.parent.name == "runs" else None


def _forest(records: list[dict], fig_dir: Path, flags: list[Flag]) -> Figure | None:
    """The forest plot of every answer, saved beside the suites' figures; a flag instead when it cannot be drawn."""
    try:
        figure = forest_figure(records)
    except (ValueError, TypeError, KeyError) as exc:
        flags.append(Flag("failed", "forest plot of the answers", f"not drawn: {type(exc).__name__}: {exc}", ""))
        return None
    if figure is not None:
        with atomic_path(fig_dir / f"{figure.name}.png") as tmp:
            figure.figure.savefig(tmp, dpi=110, format="png")
        plt.close(figure.figure)
    return figure


def write_report(run: str | os.PathLike[str]) -> Path:
    """Renders the report of a run directory (and refreshes the index of runs beside it); returns the path of
    `report.html`."""
    run_dir = resolve_run(run)
    table = load_run(run_dir)
    env = load_env(run_dir)
    fig_dir = safe_dir(run_dir / "report")
    suites = sorted(table["suite"].dropna().unique())
    try:
        answers = run_answers(run_dir, table)  # the verdicts the run wrote (an older run's: judged now, and said)
    except VerdictsFileError as exc:  # the report still shows the run; the store refuses it until it is re-judged
        judged = judged_now(table, run_dir)
        answers = replace(judged, note=f"{exc}: judged now against {judged.claims_files[0].path}")
    verdicts = list(answers.records)
    claimed: dict[str, set[str]] = {}
    for v in verdicts:
        if v.get("metric"):
            claimed.setdefault(v["suite"], set()).add(v["metric"])
    flags = find_flags(table, env, run_dir)
    # figures and medians show the values that can stand; verdicts and flags saw every row
    sections = _sections(valid_rows(table), suites, fig_dir, claimed, flags)
    forest = _forest(verdicts, fig_dir, flags)
    flames_dir = run_dir / "flamegraphs"
    index = _index_of(run_dir)
    context = {
        "run_id": run_dir.name,
        "env_line": env_line(env),
        "interrupted": env.get("interrupted"),
        "notes": NOTES,
        "verdicts": verdict_rows(verdicts, env),
        "counts": verdict_counts(verdicts),
        "family": answers.family,
        "answers_note": answers.note,
        "claims_files": answers.claims_files,
        "forest": forest,
        # what needs reading first; noisy series (many in a smoke run of few repeats) fold away under it
        "flags": _flags_table([f for f in flags if f.kind != "noisy"]),
        "noisy": _flags_table([f for f in flags if f.kind == "noisy"]),
        "flag_kinds": {kind: sum(f.kind == kind for f in flags) for kind in dict.fromkeys(f.kind for f in flags)},
        "noise_share": NOISE_SHARE,
        "sections": sections,
        "flames": sorted(p.name for p in flames_dir.glob("*.svg")) if flames_dir.is_dir() else [],
        "n_rows": len(table),
        "index_href": "../../index.html" if index else None,
    }
    write_text_atomic(run_dir / "summary.md", render_template("summary.md.j2", **context))
    out = run_dir / "report.html"
    write_text_atomic(out, render_template("report.html.j2", **context))
    if index is not None:
        write_index(index.parent)
    return out
