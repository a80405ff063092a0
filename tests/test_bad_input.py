"""Hostile but fair input to every command that reads a run (report, verdicts, compare, export, store add):
broken run folders and claims files get one line (exit 2 naming the file, the line or the entry) or a report that
renders, never a traceback, and the tidy table never loses rows. Hypothesis builds the broken inputs; the cases a
hostile but fair user tried first are spelled out before it."""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
import tempfile
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polyperf.analyse.claims import CLAIMS_FILE, load_claims
from polyperf.analyse.claims_file import ENTRY_FIELDS, check_claims_data
from polyperf.cli import main
from polyperf.record import Row
from polyperf.record.run_dir import RowWriter, finalize_run, load_run, new_run_dir

ROWS = 24  # 2 implementations x 2 metrics x 6 repeats


def _good_rows() -> list[Row]:
    rows = []
    for repeat in range(6):
        for impl, seconds, syscalls in (("fast", 0.010, 247), ("slow", 0.115, 2_009_109)):
            params = {"bytes": 1000}
            rows.append(Row("toy", "parse", impl, "", "seconds", seconds * (1 + repeat / 100), "s", repeat, params))
            rows.append(Row("toy", "parse", impl, "", "read_syscalls", float(syscalls), "count", repeat, params))
    return rows


def _run(out: Path, name: str = "good") -> Path:
    run_dir = new_run_dir(out, name)
    RowWriter(run_dir).write(_good_rows())
    (run_dir / "env.json").write_text(json.dumps({"schema_version": 2, "profile": "smoke"}))
    finalize_run(run_dir)
    return run_dir


def _claim(**changes: Any) -> dict[str, Any]:
    entry = {
        "id": "mine.slow_parse",
        "suite": "toy",
        "source": "a test",
        "statement": "slow parses ten times slower",
        "published": 11.5,
        "unit": "x",
        "measure": "ratio",
        "metric": "seconds",
        "select": {"case": "parse", "params": {"bytes": 1000}},
        "numerator": {"implementation": "slow"},
        "denominator": {"implementation": "fast"},
        "paired": True,
        "rule": {"kind": "within_factor", "factor": 2.0, "why": "order of magnitude"},
    }
    entry.update(changes)
    return {key: value for key, value in entry.items() if value is not None}


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
        warnings.simplefilter("default")
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _parquet_rows(run_dir: Path) -> int:
    return len(pd.read_parquet(run_dir / "results.parquet"))


def _assert_one_line(code: int, out: str, err: str, names: tuple[str, ...] = ()) -> None:
    assert code in (0, 1, 2), (code, err)
    assert "Traceback" not in out + err and "internal error" not in err, err
    if code == 2:
        assert any(name in out + err for name in names), (names, err)


# --- the named cases ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("content", [b"", b"garbage\n", b"\x00\xff" * 50])
def test_report_never_shrinks_the_table(tmp_path, content):
    run_dir = _run(tmp_path)
    (run_dir / "results.jsonl").write_bytes(content)
    code, out, err = _cli("report", str(run_dir))
    assert code == 0, err
    assert _parquet_rows(run_dir) == ROWS and len(pd.read_csv(run_dir / "results.csv")) == ROWS
    assert "results.parquet holds 24: the larger, results.parquet, is kept" in out
    assert "results.parquet, is kept" in (run_dir / "logs" / "polyperf.log").read_text()
    assert "results.parquet, is kept" in (run_dir / "report.html").read_text().split('id="flagged"', 1)[1]


def test_a_missing_csv_is_rebuilt_from_the_larger_parquet(tmp_path):
    run_dir = _run(tmp_path)
    (run_dir / "results.jsonl").write_text("")
    (run_dir / "results.csv").unlink()
    assert _cli("report", str(run_dir))[0] == 0
    assert len(pd.read_csv(run_dir / "results.csv")) == ROWS


def test_an_unreadable_parquet_is_moved_aside_not_overwritten(tmp_path):
    run_dir = _run(tmp_path)
    (run_dir / "results.parquet").write_bytes(b"not parquet")
    assert _cli("report", str(run_dir))[0] == 0
    assert _parquet_rows(run_dir) == ROWS
    assert (run_dir / "results.parquet.unreadable").read_bytes() == b"not parquet"


def _with_lines(run_dir: Path, lines: list[str]) -> None:
    with (run_dir / "results.jsonl").open("a") as fh:
        fh.write("".join(line + "\n" for line in lines))


def test_bad_lines_are_skipped_and_counted_with_number_and_reason(tmp_path):
    run_dir = _run(tmp_path)
    good = json.loads((run_dir / "results.jsonl").read_text().splitlines()[0])
    _with_lines(
        run_dir,
        [
            '{"value": ' + "9" * 5000 + "}",  # line 25: a number Python refuses
            json.dumps({**good, "schema_version": "two"}),  # 26
            json.dumps({**good, "value": -0.5}),  # 27: a negative time
            json.dumps({**good, "unit": "ms"}),  # 28
            json.dumps({k: v for k, v in good.items() if k != "unit"}),  # 29
            json.dumps({**good, "value": "fast"}),  # 30
            json.dumps({**good, "value": 1e308}),  # 31
            '{"cut',  # 32
        ],
    )
    with pytest.warns(
        UserWarning,
        match=r"6 unreadable lines skipped \(line 25, 26, 28, 29, 30 and 1 more\); "
        r"2 values left out \(NaN\) \(line 27, 31\)",
    ):
        table = load_run(run_dir)
    assert len(table) == ROWS + 2  # the negative time and the 1e308 keep their row, with NaN
    assert table["value"].isna().sum() == 2
    assert table.attrs["unreadable_lines"] == [25, 26, 28, 29, 30, 32] and table.attrs["left_out_lines"] == [27, 31]
    problems = table.attrs["problems"]
    assert problems[25].startswith("a number Python refuses") and problems[26].startswith("schema_version")
    assert problems[27] == "value negative: -0.5 s" and problems[28].startswith("unit: 'ms'")
    assert problems[29].startswith("unit: no unit") and problems[30].startswith("wrong type: value")
    assert problems[31].startswith("value out of range") and problems[32].startswith("not JSON")
    code, out, err = _cli("report", str(run_dir))
    assert code == 0, err
    assert "6 unreadable lines skipped, 2 values left out (NaN)" in out and "line 25: a number Python refuses" in out
    log = (run_dir / "logs" / "polyperf.log").read_text()
    assert "results.jsonl: 6 unreadable lines skipped: line 25, 26, 28, 29, 30, 32" in log
    assert "results.jsonl: 2 values left out (NaN): line 27, 31" in log
    assert "results.jsonl: value negative: line 27 (first: -0.5 s)" in log


@pytest.mark.parametrize("bad", [math.nan, math.inf, 1e308, -1.0, 1e-300])
def test_a_series_with_no_valid_values_leaves_the_rest_of_the_report(tmp_path, bad):
    run_dir = new_run_dir(tmp_path, "r")
    rows = [r if r.implementation == "fast" else r.__class__(**{**r.__dict__, "value": bad}) for r in _good_rows()]
    RowWriter(run_dir).write(rows)
    code, out, err = _cli("report", str(run_dir))
    assert code == 0, err
    html = (run_dir / "report.html").read_text()
    assert "no valid values" in html and "parse / slow: seconds" in html
    claims = tmp_path / "claims.toml"
    claims.write_text(tomli_w.dumps({"claims": [_claim()]}))
    code, out, err = _cli("verdicts", str(run_dir), "--claims", str(claims), "--json")
    assert code == 0, err
    (verdict,) = json.loads(out)
    assert (verdict["verdict"], verdict["reason"]) == ("inconclusive", "no valid values (every numerator value is NaN)")
    good = _run(tmp_path, "base")
    code, out, err = _cli("compare", str(good), str(run_dir), "--fail-on-regression", "0")
    _assert_one_line(code, out, err)
    assert code == 1  # B has no valid value where A has: the gate fails closed


@pytest.mark.parametrize("content", [b"[1,2]", b"{broken", b'{"a": ' + b"9" * 5000 + b"}", b"\xff\xfe"])
def test_a_broken_env_json_is_named_in_one_line(tmp_path, content):
    run_dir = _run(tmp_path)
    (run_dir / "env.json").write_bytes(content)
    code, _out, err = _cli("report", str(run_dir))
    assert code == 2 and "env.json" in err and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err


def test_a_results_jsonl_folder_is_named_in_one_line(tmp_path):
    run_dir = _run(tmp_path)
    (run_dir / "results.jsonl").unlink()
    (run_dir / "results.jsonl").mkdir()
    for argv in (["report", str(run_dir)], ["verdicts", str(run_dir)], ["compare", str(run_dir), str(run_dir)]):
        code, _out, err = _cli(*argv)
        assert code == 2 and "results.jsonl: is a folder" in err, (argv, err)
    assert _parquet_rows(run_dir) == ROWS


BAD_CLAIMS = [
    ({"claims": [_claim(rule="x")]}, "entry 'mine.slow_parse': rule: must be a table"),
    ({"claims": [_claim(select="x")]}, "entry 'mine.slow_parse': select: must be a table"),
    ({"claims": 5}, "claims must be [[claims]] tables, found a number 5"),
    ({"claim": [_claim()]}, "claim: unknown table (did you mean claims?)"),
    ({"claims": [_claim(rule={"kind": "within_factor", "factor": 2.0, "centre": 3.0})]}, "rule.centre: unknown key"),
    ({"claims": [_claim(select={"case": "parse", "cass": 1})]}, "select.cass: unknown column (did you mean case?)"),
    ({"claims": [_claim(published="eleven")]}, "entry 'mine.slow_parse': published: must be a number"),
    ({"claims": [_claim(published=0)]}, "published: must be above 0 for a ratio"),
    ({"claims": [_claim(published=-2.0)]}, "published: must be above 0 for a ratio"),
    ({"claims": [_claim(published=math.inf)]}, "published: must be finite"),
    ({"claims": [_claim(published=math.nan)]}, "published: must be finite"),
    ({"claims": [_claim(rule={"kind": "within_factor", "factor": 1.0})]}, "rule.factor: must be above 1"),
    ({"claims": [_claim(rule={"kind": "within_factor", "factor": -3})]}, "rule.factor: must be above 1"),
    ({"claims": [_claim(min_effect=-0.1)]}, "min_effect: must be at least 0"),
    ({"claims": [_claim(paired="yes")]}, "paired: must be true or false"),
    ({"claims": [_claim(measure="value")]}, 'numerator: only a measure = "ratio" entry has one'),
    (
        {"claims": [_claim(rule={"kind": "less_than", "threshold": 1, "factor": 2})]},
        "rule.factor: unknown key of a less_than rule",
    ),
    ({"claims": [_claim(metric=None)]}, "metric: missing"),
    ({"claims": [_claim(colour="red")]}, "colour: unknown field"),
    ({"claims": [1]}, "entry #1: must be a [[claims]] table"),
]


@pytest.mark.parametrize(("data", "message"), BAD_CLAIMS)
def test_a_claims_file_checked_strictly_names_the_entry_and_field(tmp_path, data, message):
    run_dir = _run(tmp_path)
    path = tmp_path / "claims.toml"
    path.write_text(tomli_w.dumps(data))
    code, _out, err = _cli("verdicts", str(run_dir), "--claims", str(path))
    assert code == 2 and message in err and str(path) in err, err
    assert len(err.strip().splitlines()) == 1


def test_claims_named_as_a_folder_or_missing(tmp_path):
    run_dir = _run(tmp_path)
    for path, message in ((tmp_path, "is a folder"), (tmp_path / "nope.toml", "no such file")):
        code, _out, err = _cli("verdicts", str(run_dir), "--claims", str(path))
        assert code == 2 and f"claims file {path}: {message}" in err, err


def test_a_good_claims_file_and_the_built_in_one_pass(tmp_path):
    run_dir = _run(tmp_path)
    path = tmp_path / "claims.toml"
    path.write_text(tomli_w.dumps({"claims": [_claim()]}))
    code, out, err = _cli("verdicts", str(run_dir), "--claims", str(path), "--json")
    assert code == 0, err
    assert json.loads(out)[0]["verdict"] in ("reproduced", "inconclusive", "not reproduced")
    assert len(load_claims(CLAIMS_FILE)) > 30  # every built-in entry passes the strict checks


# --- generated: broken run folders ------------------------------------------------------------------------

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**30), 10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
_FIELDS = ["run_id", "suite", "case", "implementation", "variant", "driver", "metric", "value", "unit", "repeat"]
_FIELDS += ["client_bound", "params", "schema_version"]


@st.composite
def _bad_line(draw: st.DrawFn, good: dict[str, Any]) -> str:
    kind = draw(st.sampled_from(["field", "drop", "bytes", "huge", "cut", "nested"]))
    if kind == "field":
        return json.dumps({**good, draw(st.sampled_from(_FIELDS)): draw(_SCALARS)})
    if kind == "drop":
        return json.dumps({k: v for k, v in good.items() if k != draw(st.sampled_from(_FIELDS))})
    if kind == "bytes":
        return draw(st.binary(max_size=40)).decode("latin-1").replace("\n", " ")
    if kind == "huge":
        return '{"value": ' + "7" * draw(st.integers(4301, 6000)) + "}"
    if kind == "nested":
        return "[" * 100_000 + "]" * 100_000
    text = json.dumps(good)
    return text[: draw(st.integers(0, len(text) - 1))]


@st.composite
def _broken_run(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "lines": draw(st.lists(st.integers(0, 10**6), max_size=6)),  # seeds for bad lines, drawn below
        "truncate": draw(st.one_of(st.none(), st.integers(0, 4000))),
        "jsonl_folder": draw(st.booleans()) and draw(st.booleans()),
        "env": draw(st.sampled_from([None, b"[1,2]", b"{", b"", b'"text"', b"{}", b"\xff", "folder"])),
        "parquet": draw(st.sampled_from(["keep", "keep", "drop", "garbage"])),
        "csv": draw(st.sampled_from(["keep", "keep", "drop", "garbage", "folder"])),
    }


def _break(run_dir: Path, spec: dict[str, Any], bad_lines: list[str]) -> None:
    jsonl = run_dir / "results.jsonl"
    if spec["truncate"] is not None:
        jsonl.write_bytes(jsonl.read_bytes()[: spec["truncate"]])
    with jsonl.open("a", encoding="utf-8", errors="surrogateescape") as fh:
        fh.write("".join(line + "\n" for line in bad_lines))
    if spec["jsonl_folder"]:
        jsonl.unlink()
        jsonl.mkdir()
    if spec["env"] == "folder":
        (run_dir / "env.json").unlink()
        (run_dir / "env.json").mkdir()
    elif spec["env"] is not None:
        (run_dir / "env.json").write_bytes(spec["env"])
    csv = run_dir / "results.csv"
    if spec["csv"] != "keep":
        csv.unlink()
    if spec["csv"] == "garbage":
        csv.write_bytes(b'a,"b\n\x00')
    elif spec["csv"] == "folder":
        csv.mkdir()
    if spec["parquet"] == "drop":
        (run_dir / "results.parquet").unlink()
    elif spec["parquet"] == "garbage":
        (run_dir / "results.parquet").write_bytes(b"PAR1 garbage")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=_broken_run(), data=st.data())
def test_every_command_on_a_broken_run_gives_one_line_and_keeps_every_row(spec, data):
    with tempfile.TemporaryDirectory() as tmp:
        base = _run(Path(tmp), "base")
        run_dir = _run(Path(tmp), "broken")
        good = json.loads((run_dir / "results.jsonl").read_text().splitlines()[0])
        bad_lines = [data.draw(_bad_line(good)) for _ in spec["lines"]]
        _break(run_dir, spec, bad_lines)
        held = _parquet_rows(run_dir) if spec["parquet"] == "keep" else 0
        held_csv = len(pd.read_csv(run_dir / "results.csv")) if spec["csv"] == "keep" else 0
        names = ("results.jsonl", "env.json", "results.parquet", str(run_dir))
        claims = Path(tmp) / "claims.toml"
        claims.write_text(tomli_w.dumps({"claims": [_claim()]}))
        for argv in (
            ["report", str(run_dir)],
            ["verdicts", str(run_dir)],
            ["verdicts", str(run_dir), "--claims", str(claims), "--json"],
            ["compare", str(base), str(run_dir), "--fail-on-regression", "0"],
            ["compare", str(run_dir), str(base)],
            ["export", str(run_dir), "--format", "bmf", "--out", str(Path(tmp) / "bmf.json")],
            ["store", "add", str(run_dir), "--store", str(Path(tmp) / "history.duckdb")],
        ):
            code, out, err = _cli(*argv)
            _assert_one_line(code, out, err, names)
            if held:  # never removed, never shrunk
                assert _parquet_rows(run_dir) >= held, argv
            if held_csv:
                assert len(pd.read_csv(run_dir / "results.csv")) >= held_csv, argv


# --- generated: broken claims files -------------------------------------------------------------------------

_TOML_VALUES = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.sampled_from(["kind", "case", "x", "center", "factor"]), st.integers(), max_size=2),
)
_TABLE_KEYS = ["rule", "select", "numerator", "denominator"]
_NOT_FIELDS = ["colour", "publshed", "Rule"]
_RULE_PARTS = ["kind", "factor", "tolerance", "threshold", "center", "why", "centre", "x"]


@st.composite
def _claims_data(draw: st.DrawFn) -> tuple[dict[str, Any], bool]:
    """(a claims file's data, whether it is surely wrong)."""
    entry = _claim()
    for _ in range(draw(st.integers(0, 3))):
        where = draw(st.sampled_from(["entry", "drop", "rule", "select", "unknown"]))
        if where == "entry":
            key = draw(st.sampled_from(sorted(ENTRY_FIELDS)))
            entry[key] = draw(_TOML_VALUES)
        elif where == "drop":
            entry.pop(draw(st.sampled_from(sorted(entry))), None)
        elif where == "rule" and isinstance(entry.get("rule"), dict):
            entry["rule"] = {**entry["rule"], draw(st.sampled_from(_RULE_PARTS)): draw(_TOML_VALUES)}
        elif where == "select" and isinstance(entry.get("select"), dict):
            entry["select"] = {**entry["select"], draw(st.text(min_size=1, max_size=5)): draw(_TOML_VALUES)}
        elif where == "unknown":
            entry[draw(st.sampled_from(_NOT_FIELDS))] = draw(_TOML_VALUES)
    top = draw(st.sampled_from(["claims", "claims", "claims", "claim", "5"]))
    wrong = top != "claims" or bool(set(entry) & set(_NOT_FIELDS))
    return ({"claims": 5} if top == "5" else {top: [entry]}), wrong


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_claims_data())
def test_any_claims_file_is_judged_or_refused_in_one_line(case):
    data, surely_wrong = case
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = _run(Path(tmp), "run")
        path = Path(tmp) / "claims.toml"
        path.write_text(tomli_w.dumps(data))
        code, out, err = _cli("verdicts", str(run_dir), "--claims", str(path))
        _assert_one_line(code, out, err, (f"claims file {path}",))
        assert code in (0, 2)
        if surely_wrong:
            assert code == 2
        if code == 2 and isinstance(data.get("claims"), list):
            entry = data["claims"][0]
            named = f"entry {entry['id']!r}" if isinstance(entry.get("id"), str) else "entry #1"
            assert named in err or "ids used twice" in err, err
        if code == 0:  # whatever passed the checks also builds
            check_claims_data(data, "x")


# --- generated: by field (env.json, results rows, store rows) -------------------------------------------------
# A document-level fuzz rarely reaches a field that parses and then misleads: here each field of each input polyperf
# reads from someone else is set to a hostile value on its own, the rest of the input left valid.

_NAMES = st.one_of(
    st.sampled_from(
        ["a.b", "os.path", "..", ".", "../x", "a/b", "/etc/passwd", "x\ny", "\u2028", "%s", "<b>x</b>", "--output=x"]
    ),
    st.sampled_from(["javascript:alert(1)", "polyperf.report.suites.bson", "__init__", "", " ", "\x00", "é" * 300]),
    st.text(max_size=12),
)
_ENV_FIELDS = ["cpu_model", "cpu_count", "cpu_affinity", "memory_bytes", "kernel", "git_commit", "git_dirty"]
_ENV_FIELDS += ["profile", "suites", "command", "seed", "suite_seconds", "notes", "interrupted", "schema_version"]
_ENV_FIELDS += ["polyperf_version", "cpu_quota", "server_cpu_quota", "git_branch", "python", "go"]
_ROW_COLUMNS = ["suite", "case", "implementation", "variant", "driver", "metric", "unit", "params", "run_id"]


def _commands(tmp: Path, run_dir: Path, base: Path) -> list[list[str]]:
    return [
        ["report", str(run_dir)],
        ["verdicts", str(run_dir), "--json"],
        ["compare", str(base), str(run_dir)],
        ["export", str(run_dir), "--format", "gobench", "--out", str(tmp / "go.txt")],
        ["store", "add", str(run_dir), "--store", str(tmp / "history.duckdb")],
    ]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(field=st.sampled_from(_ENV_FIELDS), value=st.one_of(_SCALARS, _NAMES))
def test_any_value_of_any_env_json_field_is_read_or_refused_in_one_line(field, value):
    with tempfile.TemporaryDirectory() as tmp:
        base, run_dir = _run(Path(tmp), "base"), _run(Path(tmp), "odd")
        (run_dir / "env.json").write_text(json.dumps({"schema_version": 2, "profile": "smoke", field: value}))
        for argv in _commands(Path(tmp), run_dir, base):
            code, out, err = _cli(*argv)
            _assert_one_line(code, out, err, ("env.json", field, str(run_dir)))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(column=st.sampled_from(_ROW_COLUMNS), value=st.one_of(_NAMES, _SCALARS))
def test_any_value_of_any_results_column_is_read_or_refused_in_one_line(column, value):
    with tempfile.TemporaryDirectory() as tmp:
        base, run_dir = _run(Path(tmp), "base"), _run(Path(tmp), "odd")
        good = json.loads((run_dir / "results.jsonl").read_text().splitlines()[0])
        with (run_dir / "results.jsonl").open("a", encoding="utf-8", errors="surrogateescape") as fh:
            for repeat in range(6):
                fh.write(json.dumps({**good, "repeat": repeat, column: value}) + "\n")
        finalize_run(run_dir)
        for argv in _commands(Path(tmp), run_dir, base):
            code, out, err = _cli(*argv)
            _assert_one_line(code, out, err, ("results.jsonl", str(run_dir)))
        outside = [p for p in Path(tmp).rglob("*.png") if p.parent != run_dir / "report" and "base" not in str(p)]
        assert not outside, outside  # no name writes a figure anywhere but the run's report folder


_STORE_TEXT = ["runs.git_commit", "runs.report", "runs.branch", "runs.machine", "runs.env", "runs.suites"]
_STORE_TEXT += ["series.suite", "series.case", "series.metric", "series.unit", "series.params", "verdicts.claim"]
_STORE_TEXT += ["verdicts.verdict", "verdicts.unit", "verdicts.reason", "runs.profile", "runs.cpu_model"]
_STORE_NUMBERS = ["points.value", "points.low", "points.high", "points.n", "samples.value", "runs.commit_time"]
_STORE_NUMBERS += ["verdicts.measured", "verdicts.ci_low", "verdicts.n", "runs.cores"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    change=st.one_of(
        st.tuples(st.sampled_from(_STORE_TEXT), _NAMES),
        st.tuples(
            st.sampled_from(_STORE_NUMBERS),
            st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(2**31), 2**31 - 1)),
        ),
    )
)
def test_any_value_of_any_store_column_is_shown_or_refused_in_one_line(change):
    import duckdb

    (column, value) = change
    table, name = column.split(".")
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "history.duckdb"
        runs = [_run(Path(tmp), f"2026010{i}-000000-aaaa") for i in range(1, 4)]
        for i, run_dir in enumerate(runs):
            env = {"schema_version": 2, "profile": "smoke", "git_commit": f"{i + 1:040x}", "cpu_count": 2}
            (run_dir / "env.json").write_text(json.dumps(env))
            assert _cli("store", "add", str(run_dir), "--store", str(store))[0] == 0
        with duckdb.connect(str(store)) as con:  # someone else's store, with one odd value
            if name in ("n", "cores", "commit_time") and not (isinstance(value, int) and abs(value) < 2**31):
                value = 0
            con.execute(f'UPDATE {table} SET "{name}" = ?', [value])
        code, out, err = _cli("history", "--store", str(store), "--out", tmp, "--html", str(Path(tmp) / "h.html"))
        _assert_one_line(code, out, err, (str(store),))
        page = Path(tmp) / "h.html"
        if page.exists():
            hrefs = [h for h in re.findall(r'href="([^"]*)"', page.read_text()) if h != "data:,"]
            assert all(h.startswith(("./", "#")) for h in hrefs), hrefs
