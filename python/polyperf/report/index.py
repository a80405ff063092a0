"""`<out>/index.html`: every run under `<out>/runs/`, newest first — date, commit, profile, machine, suites,
headline verdicts and a link to its report. Runs without a report, rows or env.json are listed as such."""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polyperf.analyse.claims import VERDICTS
from polyperf.common.atomic import write_text_atomic
from polyperf.record import load_env, load_run
from polyperf.report.answers import run_answers
from polyperf.report.templating import render_template
from polyperf.report.view import verdict_counts

__all__ = ["RunEntry", "run_entries", "write_index"]


@dataclass(frozen=True)
class RunEntry:
    run_id: str
    date: str
    commit: str
    profile: str
    machine: str
    suites: list[str]
    counts: dict[str, int]  # verdict → number of claims (all zero when nothing was judged)
    rows: int
    report: str | None  # link relative to the index, None without a report
    status: str  # "", "interrupted by SIGINT", "no rows", "unreadable: ..."


def _date(run_dir: Path) -> str:
    try:
        return dt.datetime.strptime(run_dir.name[:15], "%Y%m%d-%H%M%S").strftime("%Y-%m-%d %H:%M")
    except ValueError:  # a run directory named by hand: its modification time
        return dt.datetime.fromtimestamp(run_dir.stat().st_mtime).strftime("%Y-%m-%d %H:%M")


def _machine(env: dict[str, Any]) -> str:
    if not env.get("cpu_model") and not env.get("cpu_count"):
        return ""
    memory = f", {env['memory_bytes'] / 2**30:.0f} GiB" if env.get("memory_bytes") else ""
    return f"{env.get('cpu_model') or 'CPU'} × {env.get('cpu_count', '?')}{memory}"


def _entry(run_dir: Path, out_dir: Path) -> RunEntry:
    """The run's entry; a run that cannot be read (a folder from anyone, of any content) is listed as unreadable,
    with why in one line, and never hides the others."""
    try:
        return _read_entry(run_dir, out_dir)
    except Exception as exc:  # whatever a run folder holds, the index of the others is written
        why = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        return RunEntry(
            run_dir.name, _date(run_dir), "", "", "", [], dict.fromkeys(VERDICTS, 0), 0, None, f"unreadable: {why}"
        )


def _read_entry(run_dir: Path, out_dir: Path) -> RunEntry:
    status = ""
    try:
        env = load_env(run_dir)
        table = load_run(run_dir)
    except (OSError, ValueError) as exc:
        env, table = {}, None
        status = f"unreadable: {(str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]}"
    suites = sorted(table["suite"].dropna().unique()) if table is not None and len(table) else []
    counts = dict.fromkeys(VERDICTS, 0)
    if suites:
        counts = verdict_counts(run_answers(run_dir, table).records)  # as the run wrote them, or judged now
    if env.get("interrupted"):
        status = f"interrupted by {env['interrupted']}"
    elif table is not None and not len(table):
        status = "no rows" + (f" ({env['command']})" if env.get("command") else "")
    report = run_dir / "report.html"
    commit = str(env.get("git_commit") or "")[:10]
    return RunEntry(
        run_id=run_dir.name,
        date=_date(run_dir),
        commit=commit + ("*" if commit and env.get("git_dirty") else ""),
        profile=str(env.get("profile") or env.get("command") or ""),
        machine=_machine(env),
        suites=[str(s) for s in env.get("suites") or suites],
        counts=counts,
        rows=0 if table is None else len(table),
        report=report.relative_to(out_dir).as_posix() if report.exists() else None,
        status=status,
    )


def run_entries(out_dir: str | os.PathLike[str]) -> list[RunEntry]:
    """One entry per directory of `<out_dir>/runs/`, newest first."""
    out = Path(out_dir)
    runs = sorted((p for p in (out / "runs").glob("*") if p.is_dir()), key=lambda p: p.name, reverse=True)
    return [_entry(run_dir, out) for run_dir in runs]


def write_index(out_dir: str | os.PathLike[str]) -> Path:
    """Writes `<out_dir>/index.html` over every run in `<out_dir>/runs/`; returns its path."""
    out = Path(out_dir)
    latest = out / "latest"
    page = render_template(
        "index.html.j2",
        runs=run_entries(out),
        verdicts=VERDICTS,
        latest=latest.resolve().name if latest.exists() else None,
        history=(out / "history.html").exists(),  # `polyperf history` wrote the runs' history page here
    )
    path = out / "index.html"
    write_text_atomic(path, page)
    return path
