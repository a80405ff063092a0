"""The forest plot at the top of a report: every entry of the run in one picture, its measured point and interval on a
log axis, the published figure beside it, coloured by outcome, and the family's interval where it differs from the
entry's own. Drawn from the verdict records alone (verdicts.json), never from the statistics behind them.

Two panels. Ratios (unit "x", most entries) share one axis in their own unit, 1 = no difference. Entries in another
unit (exact counts of syscalls or rows, a CPU share) cannot share it: 2,009,119 syscalls beside 1.4x would crush
every ratio into one pixel, and a count's story is how far it is from the article's figure. So they are drawn as
measured ÷ the published figure (else the rule's centre, else its threshold), 1 = as the article said; an entry
whose reference is 0 (rows that must differ by none) has no ratio and says its numbers in words on its row.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter
from matplotlib.transforms import blended_transform_factory

from polyperf.analyse.verdict_records import OUTCOMES, finite, outcome_of
from polyperf.report.figure import Figure

__all__ = ["OUTCOME_COLORS", "ForestRow", "forest_figure", "forest_rows"]

OUTCOME_COLORS = {
    "reproduced": "#55A868",
    "not reproduced": "#DD8452",
    "opposite": "#C44E52",
    "inconclusive": "#8C8C8C",
    "not measured": "#C8C8C8",
}
OTHER_COLOR = "#8172B3"  # an outcome this plot does not know (a newer verdicts file)
_GROUPS = (("claim", "Claims of the articles"), ("derived", "polyperf's restatements"), ("check", "polyperf's checks"))
ROW_INCHES = 0.27


@dataclass(frozen=True)
class ForestRow:
    """One entry as drawn: every number already on the panel's scale (÷ `scale`); None where there is none."""

    id: str
    kind: str
    outcome: str
    point: float | None
    low: float | None
    high: float | None
    family_low: float | None  # 0 and infinity: the family's level bounds no interval at this n (the whole line)
    family_high: float | None
    published: float | None  # the article's figure, on the panel's scale
    expected: float | None  # the rule's centre where it is not the published figure, or its threshold without one
    scale: float  # what the record's numbers were divided by (1 for ratios)
    ratio: bool  # drawn on the ratio panel
    words: str = ""  # said on the row instead of drawn: not measured, or no ratio to a reference of 0
    numbers: str = ""  # the measured and reference figures in the entry's unit, beside a row of another unit

    @property
    def family_differs(self) -> bool:
        own, wide = (self.low, self.high), (self.family_low, self.family_high)
        if None in wide:
            return False
        return None in own or any(not math.isclose(a, b, rel_tol=1e-9) for a, b in zip(own, wide, strict=True))


def _positive(value: float | None) -> float | None:
    return value if value is not None and value > 0 else None


def _reference(record: Mapping[str, Any]) -> float | None:
    """What an entry in its own unit is divided by: the published figure, else its rule's centre or threshold."""
    for key in ("published", "center", "threshold"):
        if (value := _positive(finite(record.get(key)))) is not None:
            return value
    return None


def _row(record: Mapping[str, Any]) -> ForestRow:
    ratio = record.get("unit") == "x"
    scale = 1.0 if ratio else _reference(record)
    outcome = outcome_of(record)
    expected_raw = finite(record.get("center"))
    if expected_raw is None:
        expected_raw = finite(record.get("threshold"))
    measured = finite(record.get("measured"))
    words = "not measured" if outcome == "not measured" or measured is None else ""
    if scale is None:  # a reference of 0: no ratio exists, the numbers go in words
        words = words or _in_words(record, outcome, measured)
        return ForestRow(record["claim"], record.get("kind", "claim"), outcome, *[None] * 7, 1.0, ratio, words)

    def on_scale(key: str) -> float | None:
        value = finite(record.get(key))
        return _positive(value / scale) if value is not None else None

    published = on_scale("published")
    center, published_raw = finite(record.get("center")), finite(record.get("published"))
    if published_raw is not None:  # polyperf's own expectation differs from the article's (it counts one call alone)
        differs = center is not None and not math.isclose(center, published_raw)
        expected = _positive(center / scale) if differs else None
    else:
        expected = None if expected_raw is None else _positive(expected_raw / scale)
    family_low, family_high = on_scale("family_ci_low"), on_scale("family_ci_high")
    unbounded = finite(record.get("family_level")) is not None and None in (family_low, family_high)
    if unbounded and on_scale("ci_low") is not None:  # n too small for any interval at the family's level: the line
        family_low, family_high = 0.0, math.inf
    numbers = _numbers(measured, finite(record.get("published")), expected_raw, scale, ratio, record.get("unit", ""))
    return ForestRow(
        record["claim"],
        record.get("kind", "claim"),
        outcome,
        on_scale("measured"),
        on_scale("ci_low"),
        on_scale("ci_high"),
        family_low,
        family_high,
        published,
        expected,
        scale,
        ratio,
        words if words or on_scale("measured") is not None else _in_words(record, outcome, measured),
        numbers,
    )


def _in_words(record: Mapping[str, Any], outcome: str, measured: float | None) -> str:
    """A row a log axis cannot place (a value of 0, or a reference of 0): its outcome and numbers, said."""
    unit = record.get("unit", "")
    shown = "–" if measured is None else _number(measured)
    kind, threshold, center = record.get("rule_kind"), finite(record.get("threshold")), finite(record.get("center"))
    if kind in ("less_than", "greater_than") and threshold is not None:
        expected = f"{'below' if kind == 'less_than' else 'above'} {_number(threshold)}"
    else:
        expected = "–" if center is None else _number(center)
    return f"{outcome}: measured {shown} {unit}, expected {expected}"


def _number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 or float(value).is_integer() else f"{value:.3g}"


def _numbers(
    measured: float | None, published: float | None, expected: float | None, scale: float, ratio: bool, unit: str
) -> str:
    """The row's figures in its own unit, at its right: `52.7× vs 11.4×`, `247 vs 257 syscalls`."""
    if measured is None:
        return ""
    if ratio:
        return f"{measured:.3g}×" + (f" vs {published:.4g}×" if published is not None else "")
    reference = published if published is not None else expected if expected is not None else scale
    return f"{_number(measured)} vs {_number(reference)} {unit}"


def forest_rows(records: Iterable[Mapping[str, Any]]) -> tuple[list[ForestRow], list[ForestRow]]:
    """(ratio rows, rows in another unit), claims first, then derived, then checks, each in the records' order."""
    order = {kind: i for i, (kind, _) in enumerate(_GROUPS)}
    ordered = sorted(records, key=lambda r: order.get(r.get("kind", ""), len(order)))
    rows = [_row(r) for r in ordered]
    return [r for r in rows if r.ratio], [r for r in rows if not r.ratio]


def _limits(rows: list[ForestRow]) -> tuple[float, float]:
    """The axis from every point, own interval and published or expected figure, padded; family intervals that
    reach beyond it are cut with an arrow (a family interval of n = 6 at 99.9% can span decades)."""
    values = [v for r in rows for v in (r.point, r.low, r.high, r.published, r.expected) if v is not None]
    values.append(1.0)
    low, high = min(values), max(values)
    pad = max(math.log10(high / low) * 0.1, 0.06)
    return low / 10**pad, high * 10**pad


def _draw_row(ax: Axes, y: float, row: ForestRow, xlim: tuple[float, float]) -> None:
    color = OUTCOME_COLORS.get(row.outcome, OTHER_COLOR)
    if row.family_differs:
        lo, hi = max(row.family_low, xlim[0]), min(row.family_high, xlim[1])
        ax.plot([lo, hi], [y, y], color=color, lw=1.2, alpha=0.75, solid_capstyle="butt", zorder=2)
        for end, cut, marker in ((lo, row.family_low < xlim[0], "<"), (hi, row.family_high > xlim[1], ">")):
            ax.plot([end], [y], marker=marker if cut else "|", color=color, ms=6 if cut else 7, zorder=2)
    if row.low is not None and row.high is not None:
        ax.plot([row.low, row.high], [y, y], color=color, lw=4.5, solid_capstyle="butt", zorder=3)
    if row.point is not None:
        ax.plot([row.point], [y], "o", ms=6, mfc=color, mec="black", mew=0.7, zorder=4)
    if row.published is not None:  # behind the point and larger: both show where they coincide (an exact count)
        ax.plot([row.published], [y], "D", ms=9, mfc="white", mec="black", mew=1.1, zorder=3.5)
    if row.expected is not None:
        ax.plot([row.expected], [y], "|", ms=11, mew=1.6, color="#444444", zorder=5)
    if row.words:
        where = blended_transform_factory(ax.transAxes, ax.transData)
        shade = "#555555" if row.outcome == "not measured" else color  # a verdict said in words keeps its colour
        ax.text(
            0.5,
            y,
            row.words,
            transform=where,
            ha="center",
            va="center",
            fontsize=7.5,
            color=shade,
            bbox={"fc": "white", "ec": "none", "pad": 1.0},
            zorder=6,
        )


def _ticks(ax: Axes, xlim: tuple[float, float]) -> None:
    """Plain numbers (0.5, 1, 2, 5, 10), not powers of ten; within a factor of 3 (counts near their published
    figure) evenly spaced ones, since a log axis has no decade to mark there."""
    if xlim[1] / xlim[0] < 3:
        ax.xaxis.set_major_locator(MaxNLocator(6))
    else:
        ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _panel(ax: Axes, rows: list[ForestRow], title: str, xlabel: str) -> None:
    """One panel: a row per entry, a bold header before each kind, top to bottom."""
    labels: list[tuple[str, bool]] = []
    drawn = [r for r in rows if not r.words or r.point is not None]
    xlim = _limits(drawn or rows)
    ax.set_xscale("log")
    ax.set_xlim(*xlim)
    y = 0
    for kind, header in _GROUPS:
        chosen = [r for r in rows if r.kind == kind]
        if not chosen:
            continue
        labels.append((header, True))
        y += 1
        for row in chosen:
            _draw_row(ax, -y, row, xlim)
            labels.append((row.id, False))
            y += 1
    others = [r for r in rows if r.kind not in {k for k, _ in _GROUPS}]
    for row in others:
        _draw_row(ax, -y, row, xlim)
        labels.append((row.id, False))
        y += 1
    ax.axvline(1.0, color="black", lw=0.8, ls="--", zorder=1)
    _ticks(ax, xlim)
    ax.set_yticks([-i for i in range(len(labels))], [text for text, _ in labels], fontsize=8)
    for tick, (_, bold) in zip(ax.get_yticklabels(), labels, strict=True):
        if bold:
            tick.set_fontweight("bold")
    ax.set_ylim(-len(labels) + 0.4, 0.6)
    if any(
        r.numbers and not r.words for r in rows
    ):  # the figures themselves (a count's are hidden by its ratio to the article's)
        right = ax.twinx()
        right.set_ylim(ax.get_ylim())
        said = {r.id: "" if r.words else r.numbers for r in rows}
        entries = ["" if bold else said.get(text, "") for text, bold in labels]
        right.set_yticks([-i for i in range(len(labels))], entries, fontsize=7.5, color="#444444")
        right.tick_params(axis="y", length=0)
    ax.grid(True, axis="x", which="both", alpha=0.3)
    ax.grid(True, axis="y", alpha=0.12)
    ax.set_title(title, fontsize=10, loc="left")
    ax.set_xlabel(xlabel, fontsize=9)


def _legend_handles(outcomes: list[str]) -> list[Line2D]:
    handles = [
        Line2D([], [], color=OUTCOME_COLORS.get(o, OTHER_COLOR), lw=4.5, marker="o", mfc=OUTCOME_COLORS.get(o), mec="k")
        for o in outcomes
    ]
    for handle, outcome in zip(handles, outcomes, strict=True):
        handle.set_label(outcome)
    handles += [
        Line2D([], [], color="#666666", lw=1.2, marker="|", ms=7, label="interval at the family's level"),
        Line2D([], [], ls="", marker="D", ms=8, mfc="white", mec="black", label="published figure"),
        Line2D([], [], ls="", marker="|", ms=11, mew=1.6, color="#444444", label="expected by polyperf's rule"),
    ]
    return handles


def forest_figure(records: Iterable[Mapping[str, Any]]) -> Figure | None:
    """The forest plot of a run's verdict records; None when there are none."""
    ratios, others = forest_rows(list(records))
    if not ratios and not others:
        return None
    panels = [
        (rows, *text)
        for rows, *text in (
            (ratios, "Ratios", "measured ratio (×), log scale; 1 = no difference"),
            (
                others,
                "Counts and other units",
                "measured ÷ published (else expected), log scale; 1 = the article's figure",
            ),
        )
        if rows
    ]
    heights = [
        len(rows) + sum(1 for kind, _ in _GROUPS if any(r.kind == kind for r in rows)) + 3 for rows, *_ in panels
    ]
    fig, axes = plt.subplots(
        len(panels),
        1,
        figsize=(9.5, ROW_INCHES * sum(heights) + 1.2),
        layout="constrained",
        gridspec_kw={"height_ratios": heights},
        squeeze=False,
    )
    for ax, (rows, title, xlabel) in zip(axes[:, 0], panels, strict=True):
        _panel(ax, rows, title, xlabel)
    seen = {r.outcome for rows, *_ in panels for r in rows}
    outcomes = [o for o in OUTCOMES if o in seen] + sorted(seen - set(OUTCOMES))
    fig.legend(handles=_legend_handles(outcomes), loc="outside lower center", ncols=4, fontsize=8, frameon=False)
    return Figure(
        "forest",
        "Every answer at a glance",
        "One row per entry: the point is the measured estimate, the thick bar its 95% interval, the thin bar the "
        "interval at the family's level where it differs (the one the decision after the family's control agrees "
        "with; an arrow where it runs off the axis, the whole line where n is too small for any interval at that "
        "level), the open diamond the article's figure. Colour: the verdict, with the direction measured the other "
        "way (opposite) apart from the rest of not reproduced.",
        fig,
    )
