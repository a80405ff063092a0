"""The forest plot at the top of a report: each record lands on the right panel and scale, in its outcome's colour,
with the family's interval only where it differs; the report and summary.md show it before the verdict tables."""

from __future__ import annotations

import math

import matplotlib.colors as mcolors
import matplotlib.pyplot as plt
import pytest
from test_store import make_run

from polyperf.report import write_report
from polyperf.report.forest import OTHER_COLOR, OUTCOME_COLORS, forest_figure, forest_rows


def _record(claim: str, **fields) -> dict:
    base = {"claim": claim, "suite": "s", "kind": "claim", "verdict": "reproduced", "unit": "x", "direction": None}
    base |= {"measured": 2.0, "ci_low": 1.8, "ci_high": 2.2, "family_ci_low": 1.8, "family_ci_high": 2.2}
    return base | {"published": 2.27, "center": 2.27, "threshold": 1.0} | fields


RECORDS = [
    _record("ratio.decided"),
    _record("ratio.held", verdict="inconclusive", family_ci_low=0.9, family_ci_high=3.5),
    _record("ratio.opposite", verdict="not reproduced", direction="opposite", measured=0.6, ci_low=0.5, ci_high=0.7)
    | {"family_ci_low": 0.5, "family_ci_high": 0.7},
    _record("ratio.gone", verdict="not measured", measured=None, ci_low=None, ci_high=None, family_ci_low=None),
    _record("ratio.new", kind="check", verdict="odd", outcome="undecided: budget", published=None, center=None),
    _record("count.reads", unit="syscalls", measured=247, ci_low=247, ci_high=247, published=257, center=247)
    | {"family_ci_low": None, "family_ci_high": None},  # exact counts are not tests: no family interval
    _record(
        "count.rows",
        kind="check",
        unit="rows",
        measured=0,
        ci_low=0,
        ci_high=0,
        published=None,
        center=0.0,
        threshold=None,
    ),
    _record("count.share", kind="check", unit="ratio", measured=0.0, published=None, center=None, rule_kind="less_than")
    | {"threshold": 0.5, "ci_low": 0.0, "ci_high": 0.0, "verdict": "inconclusive"},
]


def test_each_record_lands_on_its_panel_and_scale():
    ratios, others = forest_rows(RECORDS)
    by_id = {r.id: r for r in ratios + others}
    assert [r.id for r in ratios] == ["ratio.decided", "ratio.held", "ratio.opposite", "ratio.gone", "ratio.new"]
    assert [r.id for r in others] == ["count.reads", "count.rows", "count.share"]
    reads = by_id["count.reads"]  # a count is drawn as measured ÷ published, its figures beside it
    assert reads.point == pytest.approx(247 / 257) and reads.published == pytest.approx(1.0)
    assert reads.expected == pytest.approx(247 / 257) and reads.numbers == "247 vs 257 syscalls"
    rows = by_id["count.rows"]  # no ratio to 0: said in words
    assert rows.point is None and rows.words == "reproduced: measured 0 rows, expected 0"
    share = by_id["count.share"]  # 0 has no place on a log axis either
    assert share.point is None and share.words == "inconclusive: measured 0 ratio, expected below 0.5"
    assert by_id["ratio.gone"].words == "not measured" and by_id["ratio.gone"].published == 2.27
    assert by_id["ratio.opposite"].outcome == "opposite" and by_id["ratio.new"].outcome == "undecided: budget"
    assert by_id["ratio.held"].family_differs and not by_id["ratio.decided"].family_differs
    assert by_id["ratio.new"].expected == 1.0 and by_id["ratio.new"].numbers == "2×"
    # n = 6 bounds no interval at the family's level: the whole line, unlike an entry that was not tested
    small = _record("ratio.small", family_level=0.999, family_ci_low=None, family_ci_high=None)
    [[unbounded], _] = forest_rows([small])
    assert (unbounded.family_low, unbounded.family_high) == (0.0, math.inf) and unbounded.family_differs
    [[untested], _] = forest_rows([small | {"family_level": None}])
    assert untested.family_low is None and not untested.family_differs


def _face_colors(ax) -> set[str]:
    return {mcolors.to_hex(line.get_markerfacecolor()) for line in ax.lines if line.get_marker() == "o"}


def test_the_figure_colours_rows_by_outcome_and_draws_the_family_interval_where_it_differs():
    figure = forest_figure(RECORDS)
    ratio_ax, count_ax = figure.figure.axes[0], figure.figure.axes[1]
    wanted = [OUTCOME_COLORS[o] for o in ("reproduced", "inconclusive", "opposite")] + [OTHER_COLOR]
    assert _face_colors(ratio_ax) == {mcolors.to_hex(c) for c in wanted}  # not measured: no point
    thin = [line for line in ratio_ax.lines if line.get_linewidth() == pytest.approx(1.2)]
    assert len(thin) == 1 and thin[0].get_xdata()[0] == 0.9  # ratio.held's only ...
    assert thin[0].get_xdata()[1] == ratio_ax.get_xlim()[1] < 3.5  # ... cut at the axis, with an arrow
    assert any(line.get_marker() == ">" for line in ratio_ax.lines)
    assert ratio_ax.get_xscale() == "log" and count_ax.get_xscale() == "log"
    labels = [t.get_text() for t in ratio_ax.get_yticklabels()]
    assert labels[:2] == ["Claims of the articles", "ratio.decided"] and "polyperf's checks" in labels
    plt.close(figure.figure)
    assert forest_figure([]) is None


def test_the_report_and_summary_open_with_the_forest_plot(tmp_path):
    run = make_run(tmp_path, "20260101-000000-aaaa", "c1")
    page = write_report(run).read_text()
    summary = (run / "summary.md").read_text()
    assert (run / "report" / "forest.png").stat().st_size > 10_000
    assert page.index('src="report/forest.png"') < page.index('id="verdict-table"')
    assert summary.index("](report/forest.png)") < summary.index("| claim |")
