"""`polyperf history` over a stored history with known steps: the changes it prints, the gate on the newest commits,
the tidy frame `polyperf.load_history` returns, and the history page — checked as HTML here and, where Chromium is
installed, in a headless browser as the run report is."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pytest
import test_report_browser

import polyperf
from polyperf.cli import main
from polyperf.record import Row
from polyperf.record.run_dir import RowWriter, finalize_run, new_run_dir
from polyperf.report import write_report
from polyperf.report.answers import judge_run
from polyperf.report.history import build_history
from polyperf.report.history_page import write_history_page
from polyperf.store import add_runs, open_store

COMMITS = 24
STEP_AT, COUNT_STEP_AT = 12, 20  # the unbuffered parse slows by 30% here; buffered read syscalls rise by one here
IO = {"bytes": 2009108, "capacity": 8192}
ENV = {"cpu_model": "Synthetic CPU", "cpu_count": 2, "kernel": "6.1.0", "profile": "smoke", "schema_version": 2}


def _rows(commit: int, rng: np.random.Generator) -> list[Row]:
    rows = []
    slow = 1.3 if commit >= STEP_AT else 1.0
    for repeat in range(6):
        for variant, seconds, reads in (("unbuffered", 0.120 * slow, 2009108), ("buffered", 0.011, 247)):
            common = {"suite": "io_buffering", "implementation": "serde_json", "variant": variant, "repeat": repeat}
            noisy = seconds * float(rng.lognormal(0, 0.02))
            rows.append(Row(case="parse", metric="seconds", value=noisy, unit="s", params={"bytes": 2009108}, **common))
            reads += variant == "buffered" and commit >= COUNT_STEP_AT
            rows.append(
                Row(case="parse_syscalls", metric="read_syscalls", value=reads, unit="count", params=IO, **common)
            )
    return rows


@pytest.fixture(scope="module")
def history_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("reports")
    rng = np.random.default_rng(5)
    runs = []
    for commit in range(COMMITS):
        run_dir = new_run_dir(out, run_id=f"202601{commit + 1:02d}-000000-aaaa")
        RowWriter(run_dir).write(_rows(commit, rng))
        (run_dir / "env.json").write_text(json.dumps({**ENV, "git_commit": f"{commit:02d}" * 20}))
        judge_run(run_dir, finalize_run(run_dir))  # as `polyperf run` does: judged once, into verdicts.json
        if commit % 12 == 0:
            write_report(run_dir)
        runs.append(run_dir)
    assert {o for _, o in add_runs(open_store(out / "history.duckdb"), runs)} == {"added"}
    return out


def test_history_finds_the_steps_between_the_right_commits(history_out: Path, capsys) -> None:
    store = str(history_out / "history.duckdb")
    assert main(["history", "--store", store, "--out", str(history_out), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    changes = printed["changes"]
    assert all(c["state"] == "confirmed" for c in changes)
    # one commit that moved the parse time and the claims built on it: one group listing them all
    [group] = [g for g in printed["groups"] if g["commit_after"] == f"{STEP_AT:02d}" * 20]
    names = {s["name"] for s in group["series"]}
    assert group["count"] == len(names) >= 2 and "claim io.unbuffered_parse_slowdown" in names
    assert any(n.startswith("io_buffering/parse/serde_json/unbuffered") for n in names)
    assert {isinstance(s.get("series_id"), int) or s["name"].startswith("claim ") for s in group["series"]} == {True}
    seconds = [c for c in changes if c.get("metric") == "seconds" and c.get("variant") == "unbuffered"]
    assert len(seconds) == 1 and seconds[0]["commit_after"] == f"{STEP_AT:02d}" * 20
    assert seconds[0]["change_low"] < 0.3 < seconds[0]["change_high"] and seconds[0]["p_value"] < 0.001
    counts = [c for c in changes if c.get("metric") == "read_syscalls"]
    assert len(counts) == 1 and counts[0]["exact"] and counts[0]["commit_after"] == f"{COUNT_STEP_AT:02d}" * 20
    claims = {c["claim"] for c in changes if c.get("claim")}
    assert "io.unbuffered_parse_slowdown" in claims and "io.buffered_read_syscalls" in claims
    assert not [c for c in changes if c.get("variant") == "buffered" and c.get("metric") == "seconds"]


def test_fail_on_regression_gates_on_the_newest_commits_only(history_out: Path, monkeypatch, capsys) -> None:
    from polyperf.analyse import changepoints

    class Info:
        better, exact = "lower", True

    monkeypatch.setattr("polyperf.report.history.metric_catalogue", lambda: {"read_syscalls": Info()}.get)
    store = ["--store", str(history_out / "history.duckdb"), "--no-html"]
    # the syscall count rose 4 commits before the newest: inside the newest 5, outside the newest 3
    assert main(["history", *store, "--fail-on-regression", "--newest", "5"]) == 1
    assert "1 regression at the newest 5 commits" in capsys.readouterr().err
    assert main(["history", *store, "--fail-on-regression", "--newest", "3"]) == 0
    assert changepoints.label(0.1, "lower") == "regression"


def test_the_gate_fails_on_confirmed_regressions_and_counts_pending_ones(
    history_out: Path, monkeypatch, capsys
) -> None:
    import pandas as pd

    from polyperf.report import history as history_mod

    real = history_mod.build_history

    def with_a_pending_regression(*args, **kwargs):
        built = real(*args, **kwargs)
        newest = built.changes.iloc[[0]].assign(
            commit_before=built.commits[-3], commit_after=built.commits[-2], label="regression", state="pending"
        )
        return dataclasses.replace(built, changes=pd.concat([built.changes, newest], ignore_index=True))

    monkeypatch.setattr(history_mod, "build_history", with_a_pending_regression)
    store = ["--store", str(history_out / "history.duckdb"), "--no-html", "--fail-on-regression", "--newest", "3"]
    assert main(["history", *store]) == 0
    assert "1 pending (not yet confirmed, not gated: --include-pending gates them)" in capsys.readouterr().err
    assert main(["history", *store, "--include-pending"]) == 1
    assert "1 regression at the newest 3 commits" in capsys.readouterr().err


def test_history_refuses_a_newest_below_one(history_out: Path, capsys) -> None:
    store = ["--store", str(history_out / "history.duckdb"), "--no-html"]
    assert main(["history", *store, "--fail-on-regression", "--newest", "0"]) == 2
    assert capsys.readouterr().err.strip() == "polyperf: --newest must be at least 1 (got 0)"


def test_load_history_is_a_tidy_frame(history_out: Path) -> None:
    frame = polyperf.load_history(history_out / "history.duckdb", suite="io_buffering")
    assert frame["run_id"].nunique() == COMMITS and frame["series_id"].nunique() == 4
    assert {"git_commit", "machine", "metric", "value", "low", "high", "n"} <= set(frame.columns)
    assert (frame["n"] == 6).all()
    assert frame.empty is False and polyperf.load_history(history_out / "history.duckdb", suite="nope").empty


def test_the_page_marks_changes_and_links_points_to_reports(history_out: Path) -> None:
    history = build_history(open_store(history_out / "history.duckdb"))
    page = write_history_page(history, history_out / "history.html").read_text()
    assert page.count('class="point"') == 4 * COMMITS + sum(history.verdicts.groupby("claim")["measured"].count())
    links = re.findall(r'<a href="([^"]+)"><circle', page)
    assert links and all((history_out / link).exists() for link in links)
    assert len(set(links)) == COMMITS // 12  # the runs that have a report
    assert page.count('class="change') >= 2 and "between " in page
    assert 'class="verdict reproduced"' in page
    anchors = re.findall(r'<li><a href="#([^"]+)">', page)  # changes by commit link to charts on the page
    assert anchors and all(f'id="{a}"' in page for a in anchors)
    from polyperf.report.index import write_index

    assert 'href="history.html"' in write_index(history_out).read_text()  # the run list links to it


browser = test_report_browser.browser  # the report's headless Chromium fixture: one recipe for both pages


@pytest.mark.slow
def test_the_page_opens_cleanly_in_chromium(browser, history_out: Path) -> None:
    from test_report_browser import open_page

    history = build_history(open_store(history_out / "history.duckdb"))
    page, problems = open_page(browser, write_history_page(history, history_out / "history.html"))
    try:
        assert page.locator("section.claim").count() == history.verdicts["claim"].nunique()
        assert page.locator("section.series svg.chart").count() == 4
        assert page.locator("line.change").count() >= 2
        box = page.locator("svg.chart").first.bounding_box()
        assert box is not None and box["width"] > 300 and box["height"] > 100
        page.locator("section.series a").first.click()
        page.wait_for_load_state("load")
        assert page.url.endswith("/report.html") and page.locator("#verdict-table").count() == 1
    finally:
        page.close()
    assert not problems, problems


def _states_history(commits: int = 40):
    """A history with each state a page shows: two series that moved at one commit (a group), a step three commits
    before the newest (pending), and a creeping series; found by the real detectors, not written in."""
    import pandas as pd

    from polyperf.analyse.changepoints import series_changes
    from polyperf.analyse.creep import series_creep
    from polyperf.record.catalogue import metric_info
    from polyperf.report.history import History

    rng = np.random.default_rng(33)
    order = np.arange(commits)
    shapes = {
        "grouped_a": np.where(order >= 20, 1.3, 1.0),
        "grouped_b": np.where(order >= 20, 1.2, 1.0),
        "pending": np.where(order >= commits - 3, 1.5, 1.0),
        "creeping": 1.004 ** np.clip(order - 10, 0, None),
    }
    rows = []
    for variant, shape in shapes.items():
        noise = 0.02
        for i, value in enumerate(shape * rng.lognormal(0, noise, commits)):
            rows.append(
                {"series_id": variant, "suite": "states", "case": "parse", "implementation": "x"}
                | {"variant": variant, "driver": "", "metric": "seconds", "unit": "s", "params": "{}"}
                | {"value": value, "low": np.nan, "high": np.nan, "git_commit": f"{i:02d}" * 20, "run_id": f"r{i}"}
            )
    points = pd.DataFrame(rows)
    changes = series_changes(points, metric_info=metric_info)
    for column in ("suite", "case", "implementation", "variant", "driver", "unit", "params"):
        changes[column] = changes["series_id"].map(points.drop_duplicates("series_id").set_index("series_id")[column])
    creep = series_creep(points, changes, metric_info=metric_info)
    verdicts = pd.DataFrame(columns=["claim", "unit", "measured", "ci_low", "ci_high", "verdict", "git_commit"])
    commit_ids = [f"{i:02d}" * 20 for i in range(commits)]
    return History("m", points, verdicts, changes, pd.DataFrame(), commit_ids, creep)


def test_the_page_shows_pending_confirmed_creeping_and_grouped_changes(tmp_path: Path) -> None:
    history = _states_history()
    states = history.changes.groupby("series_id")["state"].agg(set).to_dict()
    assert states["grouped_a"] == states["grouped_b"] == {"confirmed"} and states["pending"] == {"pending"}
    # a creep strong enough to be carved into a staircase of confirmed steps is reported as creep too
    assert list(history.creep["series_id"]) == ["creeping"] and states.get("creeping", {"confirmed"}) == {"confirmed"}
    page = write_history_page(history, tmp_path / "history.html").read_text()
    assert page.count('class="change regression pending"') == 1
    assert page.count('class="change regression confirmed"') == len(history.changes) - 1
    assert page.count('<rect class="creep"') == 1 and 'class="creep-note">creep: +0.' in page
    assert '<section class="item group confirmed">' in page and "2 series between 1919191919" in page
    assert 'href="#series-grouped_a"' in page and 'href="#series-grouped_b"' in page


@pytest.mark.slow
def test_the_states_read_in_chromium(browser, tmp_path: Path) -> None:
    from test_report_browser import open_page

    page, problems = open_page(browser, write_history_page(_states_history(), tmp_path / "history.html"))
    try:
        assert page.locator("section.group").count() == 1
        assert page.locator("line.change.pending").count() == 1 and page.locator("li.pending").count() == 1
        assert page.locator("rect.creep").count() == 1 and page.locator("p.creep-note").is_visible()
        assert "1 of them pending" in page.locator("span.summary").inner_text()
        page.locator("section.group a").first.click()
        assert page.url.endswith("#series-grouped_a") and page.locator("#series-grouped_a").is_visible()
    finally:
        page.close()
    assert not problems, problems
