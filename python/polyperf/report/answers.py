"""A run's answers, judged once: `judge_run` judges the run's table and writes verdicts.json where `polyperf run`
produces its answers (after each suite, and at the end); `run_answers` is what every later reader uses, the file
the run wrote, or, for a run written before runs kept their verdicts, its table judged now and marked as such.
Re-judging a run against another claims file is `polyperf verdicts RUN --claims FILE --write`, never a side
effect of reading or storing it."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from polyperf.analyse.verdict_records import claims_for, judge, judged_now
from polyperf.record.verdicts_file import RunVerdicts, read_verdicts, write_verdicts

__all__ = ["judge_run", "run_answers"]


def judge_run(
    run_dir: str | os.PathLike[str],
    table: pd.DataFrame,
    claims_files: Sequence[str | os.PathLike[str]] = (),
    *,
    family: str | None = None,
    written_by: str = "polyperf run",
    suites: Sequence[str] = (),
    still_open: Mapping[str, str] | None = None,
) -> RunVerdicts:
    """Judges `table` (polyperf's entries and the run's own claims files', of the suites it holds or `suites` names;
    or every entry of `claims_files`) as one family and writes the records to `run_dir/verdicts.json`; returns them.
    ValueError (one line) for a bad claims file."""
    claims, files = claims_for(table, [Path(f) for f in claims_files], run_dir=Path(run_dir), suites=suites)
    records, described = judge(table, claims, family=family)
    for record in records:  # the run's own word on an entry its repeats left open: the data, or the budget
        if record.get("verdict") == "inconclusive" and record.get("claim") in (still_open or {}):
            record["still_open"] = still_open[record["claim"]]
    return write_verdicts(run_dir, records, files, written_by=written_by, family=described)


def run_answers(run_dir: str | os.PathLike[str], table: pd.DataFrame | None = None) -> RunVerdicts:
    """The verdicts the run wrote; for an older run without verdicts.json, `table` (loaded when not given) judged
    now against the built-in claims, with a `note` that says so. VerdictsFileError for a damaged file."""
    written = read_verdicts(run_dir)
    if written is not None:
        return written
    if table is None:
        from polyperf.record.run_dir import load_run

        table = load_run(Path(run_dir))
    return judged_now(table, Path(run_dir))
