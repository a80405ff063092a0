"""Every entry of the built-in registry selects rows of a quick run (the golden table, made from quick runs of every
suite by tests/make_claims_golden.py): a renamed case, metric or variant fails here instead of turning a verdict
silently into "not measured"."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from polyperf.analyse.claims import evaluate, load_claims, selected_rows
from polyperf.record.schema import as_frame, upgrade

GOLDEN = Path(__file__).with_name("testdata") / "claims_golden.jsonl.gz"  # tests/make_claims_golden.py

ENTRIES = load_claims()
# Entries whose rows no quick run records yet, each with the reason; remove an id once the golden table is remade
# (tests/make_claims_golden.py) from a run that records its rows.
AWAITING_ROWS: dict[str, str] = {}


@pytest.fixture(scope="module")
def golden():
    with gzip.open(GOLDEN, "rt", encoding="utf-8") as fh:
        return as_frame(upgrade([json.loads(line) for line in fh]))


@pytest.mark.parametrize("claim", ENTRIES, ids=[c.id for c in ENTRIES])
def test_every_entry_selects_rows_of_a_quick_run(golden, claim):
    if claim.id in AWAITING_ROWS:
        pytest.skip(AWAITING_ROWS[claim.id])
    for side in selected_rows(golden, claim):
        assert not side.empty, f"{claim.id}: selects no row of a quick run"
    [verdict] = evaluate(golden, [claim])
    assert verdict.verdict != "not measured", verdict.reason
    assert verdict.measured.n >= (1 if verdict.measured.method.startswith("exact") else 4), verdict.reason


def test_the_golden_table_comes_from_quick_runs(golden):
    assert set(golden["suite"]) == {c.suite for c in ENTRIES}


def test_entries_awaiting_rows_still_select_nothing(golden):
    """An exemption ends when the golden table holds the entry's rows: then this fails until it is removed."""
    for claim in ENTRIES:
        if claim.id in AWAITING_ROWS:
            assert any(side.empty for side in selected_rows(golden, claim)), f"{claim.id} selects rows now"
