"""Writes a run's report: `report/*.png`, `summary.md` and `report.html` inside the run directory.

Every suite gets a section. Its figures are those of `polyperf.report.suites.<suite>` when such a module
exists (a function `figures(table) -> list[Figure]`), else the default ones; its table is the default one.
"""

from __future__ import annotations

import html
import importlib
import importlib.util
import os
from collections.abc import Callable
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from polyperf.analyse.claims import evaluate, verdict_table
from polyperf.record.run_dir import load_env, load_run, resolve_run
from polyperf.report.default import default_figures, median_table
from polyperf.report.figure import Figure

__all__ = ["suite_figures", "write_report"]

NOTES = [
    "Values are medians with 95% bootstrap confidence intervals; compare ratios measured in one run, "
    "not absolute times across machines.",
    "Syscall counts are exact per call (deltas of /proc/thread-self/io inside the Rust function).",
]


def suite_figures(suite: str) -> Callable[[pd.DataFrame], list[Figure]] | None:
    """The suite's own figure maker, found by name: `polyperf.report.suites.<suite>.figures`."""
    name = f"polyperf.report.suites.{suite}"
    if importlib.util.find_spec(name) is None:
        return None
    return getattr(importlib.import_module(name), "figures", None)


def _figures(table: pd.DataFrame, suite: str) -> list[Figure]:
    make = suite_figures(suite)
    return make(table) if make else default_figures(table, suite)


def _markdown_table(frame: pd.DataFrame) -> str:
    if frame.empty:
        return "_no rows_\n"
    return frame.to_markdown(index=False, floatfmt=".4g") + "\n"


def _html_table(frame: pd.DataFrame) -> str:
    return frame.to_html(index=False, na_rep="", float_format=lambda v: f"{v:.4g}", border=0)


def write_report(run: str | os.PathLike[str]) -> Path:
    """Renders the report of a run directory; returns the path of `report.html`."""
    run_dir = resolve_run(run)
    table = load_run(run_dir)
    env = load_env(run_dir)
    fig_dir = run_dir / "report"
    fig_dir.mkdir(exist_ok=True)
    suites = sorted(table["suite"].dropna().unique())
    sections = []
    for suite in suites:
        figures = _figures(table, suite)
        for fig in figures:
            fig.figure.savefig(fig_dir / f"{fig.name}.png", dpi=110)
            plt.close(fig.figure)
        sections.append((suite, figures, median_table(table, suite)))
    verdicts = verdict_table([v for v in evaluate(table) if v.claim.suite in suites])

    env_line = ", ".join(
        f"{k}={env.get(k)}"
        for k in ("profile", "cpu_model", "cpu_count", "kernel", "rustc", "go", "python", "git_commit")
    )
    banner = []
    if env.get("interrupted"):
        banner.append(f"This run was interrupted ({env['interrupted']}): it holds the rows measured until then.")
    banner += [f"Not measured: {note}" for note in env.get("notes", [])]
    md = [
        f"# polyperf run {run_dir.name}\n",
        *[f"**{b}**\n" for b in banner],
        f"Environment: {env_line}\n",
        *[f"- {n}" for n in NOTES],
        "",
        "## Claims\n",
        _markdown_table(verdicts),
    ]
    body = [
        f"<h1>polyperf run {html.escape(run_dir.name)}</h1>",
        *[f"<p class='banner'><strong>{html.escape(b)}</strong></p>" for b in banner],
        f"<p>{html.escape(env_line)}</p>",
        "<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in NOTES) + "</ul>",
        "<h2>Claims</h2>",
        _html_table(verdicts),
    ]
    for suite, figures, medians in sections:
        md += [f"## {suite}\n"]
        md += [f"### {f.title}\n\n![{f.title}](report/{f.name}.png)\n\n{f.caption}\n" for f in figures]
        md += [f"#### Medians ({suite})\n", _markdown_table(medians)]
        body += [f"<h2 id='{html.escape(suite)}'>{html.escape(suite)}</h2>"]
        body += [
            f"<h3>{html.escape(f.title)}</h3><img src='report/{f.name}.png' alt='{html.escape(f.title)}'>"
            f"<p>{html.escape(f.caption)}</p>"
            for f in figures
        ]
        body += [f"<h4>Medians ({html.escape(suite)})</h4>", _html_table(medians)]
    flames = sorted((run_dir / "flamegraphs").glob("*.svg")) if (run_dir / "flamegraphs").is_dir() else []
    if flames:
        md += ["## Flamegraphs\n", *[f"- [{f.stem}](flamegraphs/{f.name})" for f in flames], ""]
        links = "".join(f"<li><a href='flamegraphs/{f.name}'>{html.escape(f.stem)}</a></li>" for f in flames)
        body += ["<h2>Flamegraphs</h2>", f"<ul>{links}</ul>"]
    md += ["Every row of the run: `results.csv` / `results.parquet` in this directory.\n"]
    (run_dir / "summary.md").write_text("\n".join(md), encoding="utf-8")
    style = (
        "body{font-family:sans-serif;max-width:1100px;margin:auto}table{border-collapse:collapse;"
        "font-size:12px}td,th{padding:2px 6px;border-bottom:1px solid #ddd}img{max-width:100%}"
        ".banner{background:#fde2e1;padding:6px}"
    )
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>polyperf {run_dir.name}</title>"
        f"<style>{style}</style></head><body>{''.join(body)}</body></html>"
    )
    out = run_dir / "report.html"
    out.write_text(page, encoding="utf-8")
    return out
