"""What arrives inside a run folder, a store row or an HTTP answer is not trusted: each item here was tried as a
hostile user would, and each test fails on a polyperf that trusted it."""

from __future__ import annotations

from pathlib import Path

import pytest

from polyperf.report.history_page import _link


@pytest.mark.parametrize(
    "report",
    [
        "javascript:alert(document.domain)",
        "https://example.com/report.html",
        "//example.com/report.html",
        "/etc/passwd",
        "data:text/html,<script>alert(1)</script>",
    ],
)
def test_a_store_rows_report_outside_the_page_tree_is_text_not_a_link(tmp_path: Path, report: str) -> None:
    assert _link(report, tmp_path) is None
    assert _link(str(tmp_path / ".." / "elsewhere" / "report.html"), tmp_path) is None


def test_a_report_inside_the_tree_is_a_relative_link_that_cannot_name_a_scheme(tmp_path: Path) -> None:
    assert _link(str(tmp_path / "runs" / "r1" / "report.html"), tmp_path) == "./runs/r1/report.html"
    hostile = _link(str(tmp_path / "javascript:alert(document.domain)"), tmp_path)
    assert hostile is not None and hostile.startswith("./") and ":" not in hostile
