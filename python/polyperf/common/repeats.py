"""Which repeats a suite measures. In a run's first batch, repeats 0 .. n-1. In a top-up (`polyperf run` adding
repeats to the entries still undecided, `analyse.allocate`), the numbers the runner hands its pytest child in
`POLYPERF_MORE` ("START:COUNT"): new repeat numbers after every one already in the run, so the added rows extend the
same series; `POLYPERF_MORE_PLAN` (JSON, test node id -> COUNT) gives some tests of the batch a count of their own,
read against the test pytest is running (`PYTEST_CURRENT_TEST`). Read from the environment because a top-up's
repeats also run in worker processes of their own."""

from __future__ import annotations

import json
import os

__all__ = ["ENV", "PLAN_ENV", "TARGETS_ENV", "repeat_numbers", "top_up", "top_up_targets"]

ENV = "POLYPERF_MORE"
PLAN_ENV = "POLYPERF_MORE_PLAN"
# JSON, test node id -> [[implementation, variant], ...]: the targets whose series the batch's open entries select
TARGETS_ENV = "POLYPERF_MORE_TARGETS"


def _mine(name: str, what: str) -> object:
    """The running test's value in the JSON object of environment variable `name` (None: absent)."""
    text = os.environ.get(name)
    current = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
    if not text or not current:
        return None
    try:
        return json.loads(text).get(current)
    except (ValueError, AttributeError):
        raise ValueError(f"{name} must be a JSON object of test ids and {what}") from None


def _planned(count: int) -> int:
    """This test's own count in the batch's plan, else `count`."""
    mine = _mine(PLAN_ENV, "counts")
    return int(mine) if isinstance(mine, int) and mine >= 1 else count


def top_up_targets() -> set[tuple[str, str]] | None:
    """In a top-up, the (implementation, variant) pairs the running test needs to measure again, else None (all):
    a test that loops over targets measures only those, since the other targets' entries are decided."""
    if top_up() is None:
        return None
    mine = _mine(TARGETS_ENV, "lists of [implementation, variant]")
    if not isinstance(mine, list):
        return None
    return {(str(pair[0]), str(pair[1])) for pair in mine if isinstance(pair, list) and len(pair) == 2}


def top_up() -> tuple[int, int] | None:
    """(first new repeat, how many) in a top-up, else None. A malformed value is an error, never a silent batch."""
    text = os.environ.get(ENV, "").strip()
    if not text:
        return None
    try:
        start, count = (int(part) for part in text.split(":"))
    except ValueError:
        raise ValueError(f"{ENV} must be START:COUNT (whole numbers), not {text!r}") from None
    if start < 0 or count < 1:
        raise ValueError(f"{ENV} needs START >= 0 and COUNT >= 1, not {text!r}")
    return start, _planned(count)


def repeat_numbers(first_batch: int) -> range:
    """The repeats to measure of a series whose first batch has `first_batch` repeats. A top-up measures its own
    numbers for every repeated series, and skips a series measured once (context for the report, never a verdict's
    sample: one repeat decides nothing)."""
    more = top_up()
    if more is None:
        return range(first_batch)
    if first_batch <= 1:
        return range(0)
    return range(more[0], more[0] + more[1])
