"""A run's verdicts as plain records, the form `record.verdicts_file` keeps in verdicts.json and every reader (the
report, the terminal, `store`, `compare`, `history`) works from. Pure: verdicts in, dicts out; `judge` is the one
place a run's table is turned into them, so the run and an explicit re-judging (`polyperf verdicts --write`) agree.

A record is `Verdict.as_record()` plus what a reader needs that it lacks: the entry's note, its rule's kind,
threshold and centre (to say what was expected of an entry with no published figure), whether the family held a part
back, and the outcome in one word (opposite apart from not reproduced), unless `as_record` gives them itself.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from polyperf.analyse.claims import CLAIMS_FILE, Claim, Verdict, evaluate, load_claims
from polyperf.record.verdicts_file import RunVerdicts

__all__ = ["OUTCOMES", "claims_for", "judge", "judged_now", "outcome_of", "record_of", "records_of"]

# What a reader tells apart at a glance, in the forest plot's order of legend.
OUTCOMES = ("reproduced", "not reproduced", "opposite", "inconclusive", "not measured")


def outcome_of(record: Mapping[str, Any]) -> str:
    """The verdict, with "opposite" (the direction claimed, measured the other way) apart from the other ways of
    not being reproduced (outside a claimed band)."""
    if record.get("outcome"):
        return str(record["outcome"])
    verdict = str(record.get("verdict", ""))
    if verdict == "not reproduced" and record.get("direction") == "opposite":
        return "opposite"
    return verdict


def _threshold(claim: Claim) -> float | None:
    value = claim.rule.get("threshold")
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def record_of(verdict: Verdict) -> dict[str, Any]:
    """One entry's record: `as_record()`'s fields win over the additions here."""
    claim = verdict.claim
    parts = getattr(verdict, "parts", {}) or {}
    added = {
        "note": claim.note,
        "metric": claim.metric,
        "rule_kind": str(claim.rule.get("kind", "")),
        "threshold": _threshold(claim),
        "center": claim.center,
        "held_back": any(bool(getattr(p, "held_back", False)) for p in parts.values()),
        "conditions": dict(getattr(claim, "conditions", None) or {}),  # the article's input, machine, versions
    }
    record = verdict.as_record()
    for key, value in added.items():
        record.setdefault(key, value)
    record.setdefault("outcome", outcome_of(record))
    return record


def records_of(verdicts: Iterable[Verdict | Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Records of verdicts; records given as such pass through unchanged."""
    return [dict(v) if isinstance(v, Mapping) else record_of(v) for v in verdicts]


def judge(
    table: pd.DataFrame, claims: Sequence[Claim], *, family: str | None = None
) -> tuple[list[dict[str, Any]], str]:
    """The records of `claims` judged on `table` as one family (`analyse.claims.evaluate`; `family` as it takes it,
    its default when None), and the family in words."""
    options = {} if family is None else {"family": family}
    verdicts = evaluate(table, claims, **options)
    described = next((v.family.describe() for v in verdicts if getattr(v, "family", None) is not None), "")
    return records_of(verdicts), described


def claims_for(
    table: pd.DataFrame, files: Sequence[str | Path] = (), *, run_dir: Path | None = None, suites: Iterable[str] = ()
) -> tuple[list[Claim], list[Path]]:
    """The entries a run is judged against, and their files: every entry of the `files` given (their ids checked
    against polyperf's own), else polyperf's entries and those of the claims files kept in `run_dir` (the files the
    run was made with), of the suites the table holds or `suites` names (a suite that did not run has nothing to
    judge). ValueError, one line, for a bad file or an id given twice."""
    from polyperf.analyse.user_claims import claims_of_run, merged_claims
    from polyperf.record.suite_files import kept_claims

    if files:
        paths = [Path(f) for f in files]
        ids = {c.id for c in merged_claims(paths, builtin=None)}  # an id used twice across the files: one line
        merged_claims(paths)  # ... or one of polyperf's own
        claims = [c for path in paths for c in load_claims(path)]
        return [c for c in claims if c.id in ids], paths
    ran = (set(table["suite"].dropna()) if "suite" in table else set()) | set(suites)
    kept = kept_claims(Path(run_dir)) if run_dir is not None else []
    entries = claims_of_run(Path(run_dir)) if run_dir is not None else load_claims()
    return [c for c in entries if c.suite in ran], [CLAIMS_FILE, *(Path(origin) for _copy, origin in kept)]


def judged_now(table: pd.DataFrame, run_dir: Path | None = None) -> RunVerdicts:
    """The fallback for a run written before runs kept their verdicts: its table judged now against polyperf's
    claims and those kept in the run, marked as such (`RunVerdicts.origin`, and a `note` a reader shows)."""
    claims, files = claims_for(table, run_dir=run_dir)
    records, family = judge(table, claims)
    return RunVerdicts.judged_now(records, files, family)


def finite(value: Any) -> float | None:
    """A record's number as a float, None when absent or not finite."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


__all__ += ["finite"]
