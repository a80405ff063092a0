"""A run is judged once: `polyperf run` writes verdicts.json, and the report, the store and compare read it. The
format is frozen by a golden file; a run stored after its claims file changed keeps the verdicts it printed; an
older run without the file is judged when read, and says so."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from test_store import make_run

from polyperf.analyse.claims import load_claims
from polyperf.analyse.verdict_records import judge, outcome_of
from polyperf.cli import main
from polyperf.record.run_dir import load_run
from polyperf.record.verdicts_file import (
    JUDGED_NOW,
    VERDICTS_FILE,
    VERDICTS_SCHEMA_VERSION,
    WRITTEN,
    VerdictsFileError,
    claims_source,
    parse_verdicts,
    read_verdicts,
    write_verdicts,
)
from polyperf.report import write_report
from polyperf.report.answers import judge_run, run_answers
from polyperf.store import add_runs, open_store, read_run

DATA = Path(__file__).parent / "testdata" / "verdicts"
GOLDEN = DATA / "v1_verdicts.json"
TOY = DATA / "toy_claims.toml"


def _golden() -> dict:
    return json.loads(GOLDEN.read_text(encoding="utf-8"))


def test_the_v1_golden_file_reads_as_written():
    verdicts = parse_verdicts(_golden(), str(GOLDEN))
    assert verdicts.schema_version == 1 and verdicts.origin == WRITTEN and verdicts.note == ""
    assert [s.path for s in verdicts.claims_files] == ["claims/toy.toml"]
    assert verdicts.claims_files[0].sha256 == claims_source(TOY).sha256  # the toy file the golden was judged on
    assert verdicts.written_by == "polyperf run" and "Benjamini-Yekutieli" in verdicts.family
    by_id = {r["claim"]: r for r in verdicts.records}
    assert [by_id[i]["verdict"] for i in ("toy.parse_fast", "toy.reads", "toy.elsewhere")] == [
        "reproduced",
        "reproduced",
        "not measured",
    ]
    fast = by_id["toy.parse_fast"]
    assert fast["ci_low"] <= fast["measured"] <= fast["ci_high"] < 2.0 and fast["published"] == 1.5
    assert fast["family_ci_low"] <= fast["ci_low"] and fast["n"] == 7 and fast["unit"] == "s"


def test_a_run_judged_today_writes_every_field_the_golden_file_has(tmp_path):
    """The format does not lose a field silently: a fresh judgement of the golden's run has every key it has (a
    new key is fine, and goes into FORMAT.md's history with a version when readers need it)."""
    run = make_run(tmp_path, "20260101-000000-aaaa", "c1", verdicts=False)
    written = judge_run(run, load_run(run), [TOY])
    data = json.loads((run / VERDICTS_FILE).read_text())
    golden = _golden()
    assert set(golden) <= set(data) and data["schema_version"] == VERDICTS_SCHEMA_VERSION
    for old, new in zip(golden["verdicts"], data["verdicts"], strict=True):
        assert set(old) <= set(new), f"{old['claim']}: fields lost: {sorted(set(old) - set(new))}"
        assert (new["claim"], new["verdict"]) == (old["claim"], old["verdict"])
    assert read_verdicts(run).records == written.records


def test_bad_files_are_refused_in_one_line_naming_the_field(tmp_path):
    golden = _golden()
    cases = {
        "newer": ({**golden, "schema_version": 99}, "schema_version 99 is newer"),
        "no version": ({k: v for k, v in golden.items() if k != "schema_version"}, "schema_version must be"),
        "claims": ({**golden, "claims_files": [{"path": 3}]}, "claims_files[0]"),
        "verdict": ({**golden, "verdicts": [{**golden["verdicts"][0], "verdict": None}]}, "verdict must be text"),
        "number": ({**golden, "verdicts": [{**golden["verdicts"][0], "ci_low": "1.2"}]}, "ci_low must be a number"),
    }
    for name, (data, words) in cases.items():
        (tmp_path / VERDICTS_FILE).write_text(json.dumps(data))
        with pytest.raises(VerdictsFileError) as caught:
            read_verdicts(tmp_path)
        assert words in str(caught.value) and "\n" not in str(caught.value), name
    (tmp_path / VERDICTS_FILE).write_text("{not json")
    with pytest.raises(VerdictsFileError, match="not JSON"):
        read_verdicts(tmp_path)
    (tmp_path / VERDICTS_FILE).unlink()
    assert read_verdicts(tmp_path) is None  # no file: the caller judges it now


def test_numbers_that_json_cannot_hold_are_written_as_null(tmp_path):
    record = {"claim": "c", "suite": "s", "kind": "claim", "verdict": "inconclusive"}
    record |= {"measured": np.float64(1.5), "ci_low": math.nan, "ci_high": math.inf, "n": np.int64(4)}
    write_verdicts(tmp_path, [record], [TOY], written_by="test")
    [back] = read_verdicts(tmp_path).records
    assert back["measured"] == 1.5 and back["ci_low"] is None and back["ci_high"] is None and back["n"] == 4


def _claims(path: Path, threshold: float) -> Path:
    path.write_text(TOY.read_text().replace("threshold = 2.0", f"threshold = {threshold}"))
    return path


def test_storing_a_run_whose_claims_file_changed_keeps_the_verdicts_it_printed(tmp_path):
    run = make_run(tmp_path, "20260101-000000-aaaa", "c1", verdicts=False)
    table = load_run(run)
    claims = _claims(tmp_path / "mine.toml", 2.0)
    printed = {r["claim"]: r["verdict"] for r in judge_run(run, table, [claims]).records}
    assert printed["toy.parse_fast"] == "reproduced"
    _claims(claims, 0.5)  # the file changes after the run: judged again, the same rows would now say otherwise
    again = {r["claim"]: r["verdict"] for r in judge(table, load_claims(claims))[0]}
    assert again["toy.parse_fast"] == "not reproduced"
    assert read_verdicts(run).claims_files[0].changed() is True
    store = open_store(tmp_path / "history.duckdb")
    assert add_runs(store, [run]) == [(str(run), "added")]
    stored = store.verdicts().set_index("claim")["verdict"].to_dict()
    assert stored == {k: v for k, v in printed.items() if v != "not measured"}
    summary = (write_report(run).parent / "summary.md").read_text()  # the report, too, shows what the run printed
    assert "`toy.parse_fast`" in summary and "has no verdicts.json" not in summary
    assert str(claims.resolve()) in summary


def test_a_run_older_than_the_file_is_judged_when_read_and_says_so(tmp_path):
    run = make_run(tmp_path, "20260101-000000-aaaa", "c1", verdicts=False)
    answers = run_answers(run)
    assert answers.origin == JUDGED_NOW and "has no verdicts.json" in answers.note
    assert not (run / VERDICTS_FILE).exists()  # reading never writes
    [(_, outcome)] = add_runs(open_store(tmp_path / "history.duckdb"), [run])
    assert outcome.startswith("added; this run has no verdicts.json") and "judged now" in outcome
    assert read_run(run).verdicts_note == answers.note
    summary = (write_report(run).parent / "summary.md").read_text()
    assert "has no verdicts.json" in summary and not (run / VERDICTS_FILE).exists()


def test_a_damaged_verdicts_file_keeps_the_run_out_of_the_store(tmp_path):
    run = make_run(tmp_path, "20260101-000000-aaaa", "c1")
    (run / VERDICTS_FILE).write_text("[]")
    [(_, outcome)] = add_runs(open_store(tmp_path / "history.duckdb"), [run])
    assert outcome.startswith("not stored:") and "expected a JSON object" in outcome


def test_rejudging_is_an_explicit_command(tmp_path, capsys):
    run = make_run(tmp_path, "20260101-000000-aaaa", "c1")
    before = read_verdicts(run)
    claims = _claims(tmp_path / "mine.toml", 0.5)
    assert main(["verdicts", str(run), "--claims", str(claims), "--json"]) == 0
    assert read_verdicts(run) == before  # printed, not written
    assert "unchanged (--write replaces it)" in capsys.readouterr().err
    assert main(["verdicts", str(run), "--claims", str(claims), "--write", "--json"]) == 0
    after = read_verdicts(run)
    assert [s.path for s in after.claims_files] == [str(claims.resolve())]
    assert after.written_by == "polyperf verdicts --write"
    assert {r["claim"]: r["verdict"] for r in after.records}["toy.parse_fast"] == "not reproduced"
    assert "rewritten" in capsys.readouterr().err


def test_compare_reads_each_runs_own_verdicts(tmp_path, capsys):
    a = make_run(tmp_path, "20260101-000000-aaaa", "c1", verdicts=False)
    b = make_run(tmp_path, "20260102-000000-aaaa", "c2", verdicts=False)
    judge_run(a, load_run(a), [_claims(tmp_path / "a.toml", 2.0)])
    judge_run(b, load_run(b), [_claims(tmp_path / "b.toml", 0.5)])  # the same rows, judged by another file
    main(["compare", str(a), str(b)])
    assert "toy.parse_fast (claim): reproduced -> not reproduced" in capsys.readouterr().out


def test_outcome_tells_opposite_apart():
    base = {"claim": "c", "suite": "s", "kind": "claim"}
    assert outcome_of(base | {"verdict": "not reproduced", "direction": "opposite"}) == "opposite"
    assert outcome_of(base | {"verdict": "not reproduced", "direction": None}) == "not reproduced"
    assert outcome_of(base | {"verdict": "inconclusive", "outcome": "undecided: budget"}) == "undecided: budget"


def test_the_golden_toy_claims_still_load(tmp_path):
    shutil.copy(TOY, tmp_path / "toy.toml")
    assert [c.id for c in load_claims(tmp_path / "toy.toml")] == ["toy.parse_fast", "toy.reads", "toy.elsewhere"]


def test_every_command_docs_report_shows_parses():
    """The commands of docs/report.md, with the flags shown, are commands polyperf takes."""
    import re
    import shlex

    from polyperf.cli import build_parser

    text = (Path(__file__).parents[1] / "docs" / "report.md").read_text()
    commands = [line for block in re.findall(r"```\n(.*?)```", text, re.S) for line in block.splitlines()]
    commands += re.findall(r"`(polyperf [^`]+)`", text)
    shown = [shlex.split(c)[1:] for c in commands if c.startswith("polyperf ")]
    assert len(shown) >= 5
    for args in shown:
        build_parser().parse_args([a if not a.isupper() else "reports/latest" for a in args])  # RUN, A, B: a run


def test_a_damaged_file_still_gives_a_report_that_says_so(tmp_path):
    run = make_run(tmp_path, "20260101-000000-aaaa", "c1")
    (run / VERDICTS_FILE).write_text('{"schema_version": 99}')
    summary = (write_report(run).parent / "summary.md").read_text()
    assert "schema_version 99 is newer than this polyperf reads" in summary and "judged now against" in summary
