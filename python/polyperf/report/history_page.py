"""`history.html`: a static page of the runs' history, like asv's published site — for each claim and each series,
its value over commits with the 95% interval, the change points marked, every point linked to its run's report,
and each claim's verdict over time.

Charts are inline SVG written here rather than matplotlib images: a point must be a link to its run's report, and
a page of hundreds of series stays one small file with nothing to fetch.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pandas as pd
from markupsafe import Markup, escape

from polyperf.analyse.changepoints import p_text
from polyperf.common.atomic import write_text_atomic
from polyperf.common.units import format_value
from polyperf.report.history import History, all_changes, group_changes, series_name
from polyperf.report.templating import render_template

__all__ = ["MAX_SERIES", "write_history_page"]

MAX_SERIES = 200  # series drawn: those with changes first, then the rest in key order
WIDTH, HEIGHT, PAD = 760, 170, 34
COLOURS = {"regression": "#cf222e", "improvement": "#1a7f37", "change": "#59636e"}


@dataclass(frozen=True)
class Chart:
    anchor: str
    title: str
    subtitle: str
    svg: Markup
    changes: list[tuple[str, str]]  # (CSS classes: label and state, text) per change
    verdicts: list[tuple[str, str, str | None]]  # (verdict, commit and run, link) per run, for claims
    creep: str = ""  # the drift over the newest commits, if any


@dataclass(frozen=True)
class Group:
    """Changes at one commit across series: one entry, each series linked to its chart."""

    title: str
    state: str
    series: list[tuple[str, str, str]]  # (anchor, name, label and size)


def _link(report: object, page_dir: Path) -> str | None:
    """A store row's report as a link: only a path inside the page's own tree, made relative and quoted, so a row
    cannot put a script (`javascript:`), another site or another folder behind a point. Else None: shown as text."""
    if not isinstance(report, str) or not report or "\x00" in report or not os.path.isabs(report):
        return None
    root = os.path.normpath(os.path.abspath(page_dir))
    target = os.path.normpath(report)
    if os.path.commonpath([root, target]) != root or target == root:
        return None
    return "./" + quote(Path(os.path.relpath(target, root)).as_posix())


def _scale(values: np.ndarray, lo: float, hi: float, a: float, b: float) -> np.ndarray:
    span = hi - lo if hi > lo else 1.0
    return a + (values - lo) / span * (b - a)


def _svg(
    points: pd.DataFrame, changes: pd.DataFrame, unit: str, page_dir: Path, creep: pd.Series | None = None
) -> Markup:
    values = points["value"].to_numpy(dtype=float)
    lows = points["low"].to_numpy(dtype=float) if "low" in points else np.full(values.size, np.nan)
    highs = points["high"].to_numpy(dtype=float) if "high" in points else np.full(values.size, np.nan)
    finite = np.concatenate([values, lows, highs])
    finite = finite[np.isfinite(finite)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    xs = _scale(np.arange(values.size, dtype=float), 0, max(values.size - 1, 1), PAD + 36, WIDTH - PAD)
    y = lambda v: _scale(np.asarray(v, dtype=float), lo, hi, HEIGHT - PAD, PAD / 2)  # noqa: E731
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img">',
        f'<text x="4" y="{PAD / 2 + 4:.0f}" class="axis">{escape(format_value(hi, unit))}</text>',
        f'<text x="4" y="{HEIGHT - PAD + 4:.0f}" class="axis">{escape(format_value(lo, unit))}</text>',
    ]
    if creep is not None and 0 <= int(creep["start"]) < values.size:
        x0, x1 = xs[int(creep["start"])], xs[min(int(creep["stop"]), values.size) - 1]
        parts.append(
            f'<rect class="creep" x="{x0:.1f}" y="{PAD / 4:.0f}" width="{max(x1 - x0, 1):.1f}" '
            f'height="{HEIGHT - PAD * 3 / 4:.0f}"><title>{escape(_creep_text(creep))}</title></rect>'
        )
    for _, change in changes.iterrows():
        x = (xs[int(change["index"]) - 1] + xs[int(change["index"])]) / 2
        colour = COLOURS.get(str(change["label"]), COLOURS["change"])
        state = str(change.get("state", "confirmed"))
        dash = "2 4" if state == "pending" else "4 3"
        parts.append(
            f'<line class="change {escape(change["label"])} {escape(state)}" x1="{x:.1f}" x2="{x:.1f}" '
            f'y1="{PAD / 4:.0f}" y2="{HEIGHT - PAD / 2:.0f}" stroke="{colour}" stroke-dasharray="{dash}"/>'
        )
    ys, ylo, yhi = y(values), y(lows), y(highs)
    path = " ".join(f"{'M' if i == 0 else 'L'}{xs[i]:.1f},{ys[i]:.1f}" for i in range(values.size))
    parts.append(f'<path d="{path}" fill="none" stroke="#8c959f" stroke-width="1"/>')
    for i, row in enumerate(points.itertuples(index=False)):
        if math.isfinite(ylo[i]) and math.isfinite(yhi[i]):
            parts.append(f'<line x1="{xs[i]:.1f}" x2="{xs[i]:.1f}" y1="{ylo[i]:.1f}" y2="{yhi[i]:.1f}" class="ci"/>')
        title = f"{str(row.git_commit)[:10]} · run {row.run_id} · {format_value(values[i], unit)}"
        dot = f'<circle class="point" cx="{xs[i]:.1f}" cy="{ys[i]:.1f}" r="3"><title>{escape(title)}</title></circle>'
        href = _link(getattr(row, "report", None), page_dir)
        parts.append(f'<a href="{escape(href)}">{dot}</a>' if href else dot)
    first, last = points["git_commit"].iloc[0], points["git_commit"].iloc[-1]
    parts.append(f'<text x="{xs[0]:.0f}" y="{HEIGHT - 6}" class="axis">{escape(str(first)[:10])}</text>')
    parts.append(
        f'<text x="{xs[-1]:.0f}" y="{HEIGHT - 6}" class="axis" text-anchor="end">{escape(str(last)[:10])}</text>'
    )
    parts.append("</svg>")
    return Markup("".join(parts))


def _creep_text(creep: pd.Series) -> str:
    return (
        f"creep: {creep['slope']:+.2%} per commit [{creep['slope_low']:+.2%}, {creep['slope_high']:+.2%}] (Sen), "
        f"{creep['drift']:+.1%} over the newest {int(creep['points'])} commits (Mann-Kendall p = "
        f"{creep['p_value']:.1g}), {creep['label']}"
    )


def _change_item(change: pd.Series, unit: str) -> tuple[str, str]:
    state = str(change.get("state", "confirmed"))
    text = _change_text(change, unit)
    if state == "pending":
        after = int(change["points_after"])
        text += f"; pending: {after} point{'' if after == 1 else 's'} after it, not yet confirmed"
    return f"{change['label']} {state}", text


def _change_text(change: pd.Series, unit: str) -> str:
    interval = (
        f" [{change['change_low']:+.1%}, {change['change_high']:+.1%}]" if math.isfinite(change["change_low"]) else ""
    )
    size = f"{change['change']:+.1%}" if math.isfinite(change["change"]) else "changed"
    how = "exact count" if change["exact"] else p_text(change["p_value"])
    moved = f"{format_value(change['before'], unit)} → {format_value(change['after'], unit)}"
    if change.get("kind") == "slope":
        return (
            f"{change['label']} (slope): {size}, {change['rate']:+.2%} per commit, {moved} ({how}), from "
            f"{str(change['commit_before'])[:10]} to {str(change['commit_stop'])[:10]}"
        )
    return (
        f"{change['label']}: {size}{interval}, {moved} ({how}), between {str(change['commit_before'])[:10]} and "
        f"{str(change['commit_after'])[:10]}"
    )


def _series_charts(history: History, page_dir: Path) -> tuple[list[Chart], int]:
    changed = set(history.changes["series_id"]) if not history.changes.empty else set()
    creeping = history.creep.set_index("series_id") if not history.creep.empty else pd.DataFrame()
    changed |= set(creeping.index)
    groups = list(history.points.groupby("series_id", sort=False))
    groups.sort(key=lambda g: (g[0] not in changed, tuple(str(v) for v in g[1].iloc[0][["suite", "case", "metric"]])))
    charts = []
    for series_id, points in groups[:MAX_SERIES]:
        first = points.iloc[0]
        changes = history.changes
        changes = changes[changes["series_id"] == series_id] if not changes.empty else pd.DataFrame()
        creep = creeping.loc[series_id] if series_id in creeping.index else None
        name = " · ".join(str(first[c]) for c in ("suite", "case", "implementation", "variant", "driver") if first[c])
        params = "" if first["params"] in ("{}", "") else f" {first['params']}"
        charts.append(
            Chart(
                f"series-{series_id}",
                f"{name}: {first['metric']}",
                f"{first['unit']}{params}; {len(points)} runs",
                _svg(points, changes, str(first["unit"]), page_dir, creep),
                [_change_item(c, str(first["unit"])) for _, c in changes.iterrows()],
                [],
                _creep_text(creep) if creep is not None else "",
            )
        )
    return charts, max(0, len(groups) - MAX_SERIES)


def _claim_charts(history: History, page_dir: Path) -> list[Chart]:
    charts = []
    for claim, rows in history.verdicts.groupby("claim", sort=True):
        unit = str(rows["unit"].iloc[0] or "")
        measured = rows.dropna(subset=["measured"]).rename(columns={"measured": "value", "ci_low": "low"})
        measured = measured.rename(columns={"ci_high": "high"})
        changes = history.claim_changes
        changes = changes[changes["claim"] == claim] if not changes.empty else pd.DataFrame()
        svg = _svg(measured, changes, unit, page_dir) if len(measured) else Markup("")
        verdicts = [
            (str(r.verdict), f"{str(r.git_commit)[:10]} · run {r.run_id}", _link(r.report, page_dir))
            for r in rows.itertuples(index=False)
        ]
        latest = rows.iloc[-1]
        charts.append(
            Chart(
                f"claim-{claim}",
                str(claim),
                f"{latest['suite']} · {latest['kind']} · newest verdict: {latest['verdict']}",
                svg,
                [_change_item(c, unit) for _, c in changes.iterrows()],
                verdicts,
            )
        )
    return charts


def _groups(history: History) -> list[Group]:
    """Commits that moved more than one series or claim, the most first."""
    changes = all_changes(history)
    out = []
    for group in group_changes(changes, series_name):
        if group["count"] < 2:
            continue
        series = []
        for entry in group["series"]:
            anchor = f"claim-{entry['claim']}" if entry.get("claim") else f"series-{entry.get('series_id')}"
            size = "changed" if entry["change"] is None else f"{entry['change']:+.1%}"
            series.append((anchor, entry["name"], f"{entry['label']} {size}"))
        title = (
            f"{group['count']} series between {str(group['commit_before'])[:10]} and "
            f"{str(group['commit_after'])[:10]}: {group['regressions']} regressed, {group['improvements']} improved"
        )
        out.append(Group(title, group["state"], series))
    return out


def write_history_page(history: History, path: Path) -> Path:
    """Writes the page (default place: `<out>/history.html`); returns its path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    series, hidden = _series_charts(history, path.parent)
    page = render_template(
        "history.html.j2",
        machine=history.machine,
        commits=len(history.commits),
        runs=history.points["run_id"].nunique() if len(history.points) else 0,
        claims=_claim_charts(history, path.parent),
        series=series,
        hidden=hidden,
        changes=len(history.changes) + len(history.claim_changes),
        pending=sum(
            int((f["state"] == "pending").sum()) for f in (history.changes, history.claim_changes) if "state" in f
        ),
        groups=_groups(history),
        creep=len(history.creep),
    )
    write_text_atomic(path, page)
    return path
