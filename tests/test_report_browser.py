"""The report as a reader meets it: a synthetic run (rows shaped like io_buffering's, so the real claims judge
them, plus a load-like suite with client-bound, noisy and rows-check problems) rendered and opened in headless
Chromium driven by Playwright. Every image loads, nothing logs an error, the verdict table is there, no table
is longer than 50 rows, and a screenshot lands in the run directory."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from polyperf.record import Row
from polyperf.record.run_dir import RowWriter, finalize_run, new_run_dir, point_latest
from polyperf.report import write_report

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
INSTALL = "apt-get install -y chromium && pip install playwright  (never `playwright install`: it downloads a browser)"
# A system browser in a container: no sandbox, GPU, network chatter or first-run dialogs.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
IO = {"bytes": 2009108, "capacity": 8192}


def _io_rows() -> list[Row]:
    rows = []
    for repeat in range(5):
        for variant, seconds, reads in (("unbuffered", 0.120 + repeat * 1e-3, 2009108), ("buffered", 0.011, 247)):
            common = {"suite": "io_buffering", "implementation": "serde_json", "variant": variant, "repeat": repeat}
            rows.append(
                Row(case="parse", metric="seconds", value=seconds, unit="s", params={"bytes": IO["bytes"]}, **common)
            )
            rows.append(
                Row(case="parse_syscalls", metric="read_syscalls", value=reads, unit="count", params=IO, **common)
            )
        rows.append(
            Row(
                "io_buffering",
                "write_syscalls",
                "std::io",
                "buffered",
                "write_syscalls",
                1,
                "count",
                repeat,
                {"lines": 3},
            )
        )
    return rows


def _load_rows() -> list[Row]:
    """62 series (more than a table shows), one client-bound and one noisy, and a rows check that lost rows."""
    rows = []
    metrics = (("rps", 1e5, "1/s"), ("cpu_s_per_request", 9e-6, "s"), ("rss_peak_bytes", 8e6, "bytes"))
    metrics += (("latency_p50_s", 2e-4, "s"), ("latency_p99_s", 2e-3, "s"))
    for repeat in range(3):
        for i, impl in enumerate(("axum", "gnet", "nethttp", "actix")):
            bound = impl == "gnet"
            for metric, value, unit in metrics:
                noise = 3.0 if impl == "actix" and metric == "latency_p99_s" and repeat == 2 else 1.0
                rows.append(
                    Row(
                        "toy_http",
                        "ceiling",
                        impl,
                        "",
                        metric,
                        value * (1 + 0.1 * i) * noise,
                        unit,
                        repeat,
                        {"connections": 64},
                        driver="oha",
                        client_bound=bound,
                    )
                )
        for c in (1, 2, 4, 8, 16, 32, 64, 128):
            for metric, value, unit in metrics:
                rows.append(
                    Row(
                        "toy_http",
                        "sweep",
                        "axum",
                        f"c{c:03d}",
                        metric,
                        value * (1 + c / 100 + repeat / 1000),
                        unit,
                        repeat,
                        {"connections": c},
                        driver="oha",
                    )
                )
        for metric, value in (("rows_acked", 1000), ("rows_found", 1000 if repeat else 998)):
            rows.append(Row("toy_http", "rows_check", "axum", "", metric, value, "count", repeat))
    return rows


def make_run(out: Path) -> Path:
    run_dir = new_run_dir(out)
    RowWriter(run_dir).write(_io_rows() + _load_rows())
    env = {
        "profile": "smoke",
        "cpu_model": "Synthetic CPU",
        "cpu_count": 2,
        "git_commit": "0123456789abcdef" * 2 + "01234567",
        "suites": ["io_buffering", "toy_http"],
        "notes": ["toy_http: wrk not installed, its rows are missing"],
        "schema_version": 2,
    }
    (run_dir / "env.json").write_text(json.dumps(env))
    (run_dir / "logs" / "pytest.log").write_text(
        "FAILED suites/test_toy_http.py::test_ceiling[nethttp] - nethttp on http://127.0.0.1:1 failed verification\n"
    )
    finalize_run(run_dir)
    point_latest(run_dir)
    return run_dir


@pytest.fixture(scope="module")
def browser():
    playwright = pytest.importorskip("playwright.sync_api", reason=f"Playwright for Python is missing: {INSTALL}")
    if CHROMIUM is None:
        pytest.skip(f"no chromium on PATH: {INSTALL}")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def open_page(browser, path: Path):
    """Opens `path`, returns (page, problems): console errors, page errors and failed requests."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
    page.goto(path.resolve().as_uri(), wait_until="load")
    return page, problems


def test_report_opens_cleanly_in_chromium(browser, tmp_path):
    run_dir = make_run(tmp_path / "reports")
    report = write_report(run_dir)
    page, problems = open_page(browser, report)
    try:
        images = page.evaluate("[...document.images].map(i => [i.getAttribute('src'), i.complete, i.naturalWidth])")
        assert len(images) >= 5, images
        assert all(complete and width > 0 for _src, complete, width in images), images
        assert page.locator("#verdict-table tbody tr").count() == 4  # the io_buffering claims
        assert page.locator("#verdict-table .badge.reproduced").count() >= 3
        longest = page.evaluate("Math.max(...[...document.querySelectorAll('tbody')].map(b => b.rows.length))")
        assert longest <= 50
        text = page.inner_text("body")
        assert "failed verification" in text and "wrk not installed" in text
        assert "client-bound" in text and "rows acknowledged" in text and "Showing 50 of 62 series" in text
        assert "e+0" not in text  # numbers for people
        page.screenshot(path=str(run_dir / "screenshot.png"), full_page=True)
    finally:
        page.close()
    assert not problems, problems
    assert (run_dir / "screenshot.png").stat().st_size > 10_000


def test_index_lists_runs_and_links_resolve(browser, tmp_path):
    out = tmp_path / "reports"
    first = make_run(out)
    write_report(first)
    second = new_run_dir(out)  # a run cut short before any row: listed, without a report
    (second / "env.json").write_text(json.dumps({"profile": "quick", "interrupted": "SIGINT"}))
    from polyperf.report.index import write_index

    index = write_index(out)
    page, problems = open_page(browser, index)
    try:
        rows = page.locator("#run-table tbody tr")
        assert rows.count() == 2
        assert "interrupted by SIGINT" in rows.nth(0).inner_text()  # newest first
        page.locator("a", has_text="report").first.click()
        page.wait_for_load_state("load")
        assert page.url.endswith(f"{first.name}/report.html")
        assert page.locator("#verdict-table").count() == 1
    finally:
        page.close()
    assert not problems, problems
