"""Writes a run's report: `report/*.png`, `summary.md` and `report.html` inside the run directory."""

from __future__ import annotations

import html
import json
import os
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from polyperf.claims import evaluate, verdict_table
from polyperf.report.registry import SUITE_FIGURES
from polyperf.report.tables import summary_table
from polyperf.results import load_run, resolve_run

__all__ = ["write_report"]

NOTES = [
    "Times are medians with 95% bootstrap confidence intervals; compare ratios measured in one run, "
    "not absolute times across machines.",
    "Syscall counts are exact per call (deltas of /proc/thread-self/io inside the Rust function).",
]


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
    env = json.loads((run_dir / "env.json").read_text()) if (run_dir / "env.json").exists() else {}
    fig_dir = run_dir / "report"
    fig_dir.mkdir(exist_ok=True)
    suites = sorted(table["suite"].dropna().unique())
    figures = []
    for suite in suites:
        make = SUITE_FIGURES.get(suite)
        for fig in make(table) if make else []:
            fig.figure.savefig(fig_dir / f"{fig.name}.png", dpi=110)
            plt.close(fig.figure)
            figures.append(fig)
    verdicts = verdict_table([v for v in evaluate(table) if v.claim.suite in suites])
    summary = summary_table(table)

    env_line = ", ".join(f"{k}={env.get(k)}" for k in ("profile", "cpu_model", "cpu_count", "kernel",
                                                        "rustc", "go", "python", "git_commit"))
    md = [f"# polyperf run {run_dir.name}\n", f"Environment: {env_line}\n", *[f"- {n}" for n in NOTES], ""]
    md += ["## Claims\n", _markdown_table(verdicts), "## Figures\n"]
    md += [f"### {f.title}\n\n![{f.title}](report/{f.name}.png)\n\n{f.caption}\n" for f in figures]
    flames = sorted((run_dir / "flamegraphs").glob("*.svg")) if (run_dir / "flamegraphs").is_dir() else []
    if flames:
        md += ["## Flamegraphs\n", *[f"- [{f.stem}](flamegraphs/{f.name})" for f in flames], ""]
    md += ["## All measured series\n", _markdown_table(summary)]
    (run_dir / "summary.md").write_text("\n".join(md), encoding="utf-8")

    body = [f"<h1>polyperf run {html.escape(run_dir.name)}</h1>", f"<p>{html.escape(env_line)}</p>",
            "<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in NOTES) + "</ul>",
            "<h2>Claims</h2>", _html_table(verdicts), "<h2>Figures</h2>"]
    body += [f"<h3>{html.escape(f.title)}</h3><img src='report/{f.name}.png' alt='{html.escape(f.title)}'>"
             f"<p>{html.escape(f.caption)}</p>" for f in figures]
    if flames:
        links = "".join(f"<li><a href='flamegraphs/{f.name}'>{html.escape(f.stem)}</a></li>" for f in flames)
        body += ["<h2>Flamegraphs</h2>", f"<ul>{links}</ul>"]
    body += ["<h2>All measured series</h2>", _html_table(summary)]
    style = ("body{font-family:sans-serif;max-width:1100px;margin:auto}table{border-collapse:collapse;"
             "font-size:12px}td,th{padding:2px 6px;border-bottom:1px solid #ddd}img{max-width:100%}")
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>polyperf {run_dir.name}</title>"
            f"<style>{style}</style></head><body>{''.join(body)}</body></html>")
    out = run_dir / "report.html"
    out.write_text(page, encoding="utf-8")
    return out
