"""A user's own claims and metrics, in folders outside the checkout (tmp_path): found beside the suites, kept in the
run, merged with polyperf's registry (a clash is one line), the size margin derived by its written rule, the
article's conditions beside the verdict, the scaffold, and metrics a suite declares joining the catalogue."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polyperf.analyse.claims import load_claims
from polyperf.analyse.user_claims import SAMPLED_SPREAD, claims_of_run, merged_claims, stated_precision
from polyperf.cli.new import write_suite
from polyperf.record import catalogue
from polyperf.record.run_dir import new_run_dir
from polyperf.record.suite_files import claims_files_beside, keep_claims, keep_metrics, kept_claims, kept_metrics
from polyperf.report.view import conditions_text

# A claims entry spelled out as TOML, like test_analyse.py's and cli/new.py's: the test reads what a user writes.
ENTRY = """
[[claims]]
id = "{id}"
suite = "mine"
source = "a README"
statement = "a is {published} times b"
unit = "x"
measure = "ratio"
metric = "{metric}"
select = {{ case = "c" }}
numerator = {{ implementation = "a" }}
denominator = {{ implementation = "b" }}
paired = true
published = {published}
rule = {{ kind = "greater_than", threshold = 1.0 }}
{extra}
"""


def _file(path: Path, *entries: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    defaults = {"metric": "seconds", "published": "6", "extra": ""}
    path.write_text("".join(ENTRY.format(**{**defaults, **e}) for e in entries), encoding="utf-8")
    return path


def test_claims_files_are_found_beside_the_suites(tmp_path):
    suites = tmp_path / "my_suites"
    own = _file(suites / "claims.toml", {"id": "mine.a"})
    named = _file(suites / "test_mine.claims.toml", {"id": "mine.b"})
    (suites / "test_mine.py").write_text("")
    _file(tmp_path / "elsewhere" / "claims.toml", {"id": "mine.c"})
    found = claims_files_beside([suites / "test_mine.py", suites])
    assert found == [own.resolve(), named.resolve()]


def test_kept_claims_survive_the_folder_and_name_their_origin(tmp_path):
    run_dir = new_run_dir(tmp_path / "out")
    source = _file(tmp_path / "suites" / "claims.toml", {"id": "mine.a"})
    keep_claims(run_dir, [source])
    keep_claims(run_dir, [source])  # a second session of the same run: refreshed, not doubled
    source.unlink()  # the user's folder moved on; the run still holds what it was judged with
    [(copy, origin)] = kept_claims(run_dir)
    assert origin == str(source.resolve()) and copy.parent == run_dir / "claims"
    ids = [c.id for c in claims_of_run(run_dir)]
    assert ids[-1] == "mine.a" and len(ids) == len(load_claims()) + 1


def test_an_id_used_twice_is_one_line_naming_both_files(tmp_path):
    first = _file(tmp_path / "a" / "claims.toml", {"id": "mine.a"})
    second = _file(tmp_path / "b" / "claims.toml", {"id": "mine.a"})
    with pytest.raises(ValueError) as caught:
        merged_claims([first, second])
    message = str(caught.value)
    assert "\n" not in message and str(first) in message and str(second) in message and "'mine.a'" in message
    builtin = load_claims()[0].id
    clash = _file(tmp_path / "c" / "claims.toml", {"id": builtin})
    with pytest.raises(ValueError, match=rf"'{builtin}' is already used by polyperf's own claims"):
        merged_claims([clash])
    assert [c.id for c in merged_claims([first, first])][-1] == "mine.a"  # one file named twice counts once


def test_a_bad_kept_file_is_named_by_its_origin(tmp_path):
    run_dir = new_run_dir(tmp_path / "out")
    source = _file(tmp_path / "s" / "claims.toml", {"id": "mine.a", "extra": "colour = 1"})
    keep_claims(run_dir, [source])
    with pytest.raises(ValueError, match=rf"^claims file {source.resolve()}: entry 'mine.a': colour: unknown field"):
        claims_of_run(run_dir)


@pytest.mark.parametrize(
    ("written", "precision"), [("6", 0.5), ("6.0", 0.05), ("3.73", 0.005), ("1.5e-5", 5e-7), ("2009119", 0.5)]
)
def test_stated_precision_is_half_the_last_written_digit(tmp_path, written, precision):
    [claim] = merged_claims([_file(tmp_path / "c.toml", {"id": "m.x", "published": written})], builtin=None)
    assert stated_precision(claim.published) == pytest.approx(precision)


def test_the_margin_rule_timed_and_exact(tmp_path):
    path = _file(
        tmp_path / "c.toml",
        {"id": "m.timed", "published": "6"},
        {"id": "m.exact", "published": "257", "metric": "read_syscalls"},
        {"id": "m.own", "published": "6", "extra": "margin = 2.0"},
    )
    timed, exact, own = merged_claims([path], builtin=None)
    assert timed.margin == pytest.approx((1 + 0.5 / 6) * SAMPLED_SPREAD)  # 1.354: 6x is as published in 4.43–8.13
    assert timed.size_band == pytest.approx((6 / 1.3541667, 6 * 1.3541667))
    assert exact.margin == pytest.approx(1 + 0.5 / 257)  # an exact count: its stated precision only
    assert own.margin == 2.0  # a margin given is never replaced
    assert [c.margin for c in merged_claims()] == [c.margin for c in load_claims()]  # polyperf's own untouched


def test_conditions_are_checked_and_printed_beside_this_run(tmp_path):
    extra = '[claims.conditions]\ninput = "canada.json"\nmeasured_on = "a generated canada-like document"'
    [claim] = merged_claims([_file(tmp_path / "c.toml", {"id": "m.x", "extra": extra})], builtin=None)
    env = {"cpu_model": "AMD EPYC", "cpu_count": 2}
    assert conditions_text(claim.conditions, env) == (
        "published on canada.json; measured on a generated canada-like document, AMD EPYC × 2"
    )
    assert conditions_text({}, env) == ""
    bad = _file(tmp_path / "d.toml", {"id": "m.y", "extra": '[claims.conditions]\ninptu = "x"'})
    with pytest.raises(ValueError, match=r"entry 'm.y': conditions: inptu: unknown key \(did you mean input\?\)"):
        merged_claims([bad], builtin=None)


@pytest.mark.parametrize("kind", ["micro", "load", "go"])
def test_the_scaffold_writes_a_suite_and_a_claim_that_loads(tmp_path, kind):
    written = write_suite("mine", kind, tmp_path / "suites")
    claims = [p for p in written if p.suffix == ".toml"]
    [claim] = merged_claims(claims)[-1:]
    assert claim.suite == "mine" and claim.margin is not None and claim.conditions
    for suite in (p for p in written if p.suffix == ".py"):
        compile(suite.read_text(), str(suite), "exec")  # a Python suite is valid Python as written
    with pytest.raises(ValueError, match="not overwriting"):
        write_suite("mine", kind, tmp_path / "suites")


def test_the_scaffold_refuses_a_bad_name(tmp_path):
    with pytest.raises(ValueError, match=r"^suite name 'My-Suite': lowercase"):
        write_suite("My-Suite", "micro", tmp_path)


@pytest.fixture
def clean_catalogue(monkeypatch):
    monkeypatch.setattr(catalogue, "_DECLARED", {})


def test_a_suites_metric_joins_the_catalogue_through_its_run(tmp_path, clean_catalogue):
    run_dir = new_run_dir(tmp_path / "out")
    mine = catalogue.metric("documents_per_s", "1/s", "higher", "documents parsed per second")
    assert catalogue.metric_info("documents_per_s") is None
    keep_metrics(run_dir, [mine], "test_mine.py")
    assert catalogue.metric_info("documents_per_s") == mine
    catalogue._DECLARED.clear()  # another process: loading the run declares it again
    assert kept_metrics(run_dir) == [mine] and catalogue.metric_info("documents_per_s") == mine
    assert json.loads((run_dir / "metrics.json").read_text())["documents_per_s"]["better"] == "higher"


def test_a_metric_declared_otherwise_is_one_line(tmp_path, clean_catalogue):
    run_dir = new_run_dir(tmp_path / "out")
    with pytest.raises(ValueError, match=r"^test_mine.py: metric seconds is declared otherwise by polyperf's"):
        keep_metrics(run_dir, [catalogue.metric("seconds", "s", "higher", "faster is more")], "test_mine.py")
    with pytest.raises(ValueError, match="base unit"):
        catalogue.metric("parse_ms", "ms", "lower", "a unit that is not a base unit")
    assert not (run_dir / "metrics.json").exists()
