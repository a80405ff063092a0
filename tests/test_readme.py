"""The README stays a page that fits on a screen, and every link and picture in it leads somewhere: the site's pages
are checked by `mkdocs build --strict` (`nox -s docs`), the README, which MkDocs does not build, here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
# [text](target) and ![alt](target), the target up to a space, a `#` or the closing parenthesis
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s#]+)(?:#[^)]*)?\)")


def test_the_readme_is_under_200_lines():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) < 200, f"README.md has {len(lines)} lines: move the detail into docs/"


def test_every_local_link_and_picture_of_the_readme_exists():
    targets = [t for t in LINK.findall(README.read_text(encoding="utf-8")) if "://" not in t]
    assert len(targets) >= 10, "the README links the documentation's pages"
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert not missing, f"README.md links to missing files: {missing}"


def test_every_page_of_the_site_is_reachable_from_the_readme():
    """A reader of the README on a forge finds every page; the site's own nav is checked by mkdocs --strict."""
    linked = {Path(t).name for t in LINK.findall(README.read_text(encoding="utf-8"))}
    pages = {p.name for p in (ROOT / "docs").glob("*.md") if p.name != "index.md"}
    assert not pages - linked, f"README.md links none of: {sorted(pages - linked)}"
