"""Nothing measured is lost when documentation moves: every number of an older README must still appear, at least
as often, in today's README.md and docs/. A check to run by hand while moving text, not a test: a number that is
measured again may rightly change.

    python tests/check_docs_numbers.py            # against the README of the commit before the docs site
    python tests/check_docs_numbers.py REV        # against README.md at another git revision

Exit 1, listing each number found fewer times than before with the old lines that held it."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The last commit whose README held the whole documentation, before it moved into docs/.
BEFORE_DOCS_SITE = "7d34572"
# 2,009,108 · 0.0507 · 1e-4 · 2^14 · 10^6 · 8.6 · 4,000: a number, with its thousands separators and decimals
NUMBER = re.compile(r"\d+(?:[.,]\d+)*(?:e-?\d+)?(?:\^-?\d+)?")


def numbers(text: str) -> Counter[str]:
    # a separator or point at the end of a sentence is not part of the number
    return Counter(m.group().rstrip(".,") for m in NUMBER.finditer(text))


def current_text(root: Path = ROOT) -> str:
    pages = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    return "\n".join(page.read_text(encoding="utf-8") for page in pages if page.exists())


def lost(old: str, new: str) -> dict[str, tuple[int, int]]:
    """Each number of `old` that `new` holds fewer times: number -> (times before, times now)."""
    before, now = numbers(old), numbers(new)
    return {n: (count, now[n]) for n, count in before.items() if now[n] < count}


def main(argv: list[str]) -> int:
    rev = argv[0] if argv else BEFORE_DOCS_SITE
    try:
        old = subprocess.run(
            ["git", "show", f"{rev}:README.md"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
    except subprocess.CalledProcessError as exc:
        print(f"check_docs_numbers: cannot read README.md at {rev}: {exc.stderr.strip()}", file=sys.stderr)
        return 2
    missing = lost(old, current_text())
    for number, (before, now) in sorted(missing.items()):
        print(f"{number}: {before} time(s) before, {now} now")
        for line in old.splitlines():
            if number in numbers(line):
                print(f"    {line.strip()[:150]}")
    distinct, total = len(numbers(old)), sum(numbers(old).values())
    print(f"check_docs_numbers: {len(missing)} of {distinct} distinct numbers ({total} in all) appear fewer times")
    return 1 if missing else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
