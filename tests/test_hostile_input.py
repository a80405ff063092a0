"""What arrives inside a run folder, a store row or an HTTP answer is not trusted: each item here was tried as a
hostile user would, and each test fails on a polyperf that trusted it."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import pytest

from polyperf.cli import main
from polyperf.common.atomic import open_append, write_text_atomic
from polyperf.common.redact import redact
from polyperf.record.env_record import RunEnv
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


def _run(out: Path, run_id: str = "20260101-000000-aaaa", **env: object) -> Path:
    """A finished run folder with a suite of no figures of its own (its default figures are drawn)."""
    from test_store import make_run

    from polyperf.record import Row
    from polyperf.record.run_dir import RowWriter, finalize_run

    run = make_run(out, run_id, "c1", **env)
    RowWriter(run).write([Row("plain", "c", "i", "v", "seconds", 1.0 + r / 10, "s", repeat=r) for r in range(3)])
    finalize_run(run)
    return run


def _env(run_dir: Path, **fields: object) -> None:
    env = json.loads((run_dir / "env.json").read_text())
    (run_dir / "env.json").write_text(json.dumps({**env, **fields}))


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "internal error" not in lines[0] and "Traceback" not in err, err
    return lines[0]


def test_a_commit_that_is_an_option_never_reaches_git(tmp_path: Path, capsys) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    run = _run(tmp_path / "reports")
    _env(run, git_commit=f"--output={victim}")
    assert main(["store", "add", str(run), "--store", str(tmp_path / "h.duckdb")]) in (1, 2)
    assert victim.read_text() == "precious\n"
    said = capsys.readouterr()
    assert "git_commit" in said.out + said.err and "internal error" not in said.err


@pytest.mark.parametrize("commit", ["c1", "HEAD", "a" * 39, "A" * 40, "g" * 40, "a" * 40 + "\n", ""])
def test_a_commit_is_forty_hex_characters_or_refused(commit: str) -> None:
    with pytest.raises(ValueError, match="git_commit"):
        RunEnv.from_json({"git_commit": commit})
    assert RunEnv.from_json({"git_commit": "0123456789abcdef" * 2 + "01234567"}).git_commit


def test_a_figure_link_planted_in_a_run_folder_is_refused(tmp_path: Path, capsys) -> None:
    run = _run(tmp_path / "reports")
    assert main(["report", str(run)]) == 0
    figure = next((run / "report").glob("*.png"))
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    figure.unlink()
    figure.symlink_to(victim)
    capsys.readouterr()
    assert main(["report", str(run)]) == 2
    assert "symbolic link" in _one_line(capsys.readouterr().err)
    assert victim.read_text() == "precious\n" and figure.is_symlink()


def test_compare_never_writes_its_figure_through_a_link_in_run_b(tmp_path: Path, capsys) -> None:
    run_a, run_b = _run(tmp_path / "a"), _run(tmp_path / "b", run_id="20260101-000000-bbbb")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (run_b / f"compare-{run_a.name}.png").symlink_to(victim)
    assert main(["compare", str(run_a), str(run_b)]) == 2
    assert "symbolic link" in capsys.readouterr().err
    assert victim.read_text() == "precious\n"


@pytest.mark.parametrize("name", ["report.html", "summary.md", "report"])
def test_a_page_or_folder_link_planted_in_a_run_folder_is_refused(tmp_path: Path, capsys, name: str) -> None:
    run = _run(tmp_path / "reports")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run / name).symlink_to(elsewhere if name == "report" else elsewhere / "page")
    assert main(["report", str(run)]) == 2
    assert "symbolic link" in _one_line(capsys.readouterr().err)
    assert list(elsewhere.iterdir()) == []


def test_the_log_is_never_appended_through_a_planted_link(tmp_path: Path, capsys) -> None:
    from polyperf.record.run_dir import log_line

    run = _run(tmp_path / "reports")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (run / "logs" / "polyperf.log").unlink(missing_ok=True)
    (run / "logs" / "polyperf.log").symlink_to(victim)
    log_line(run, "a line")
    log_line(run, "another line")
    assert victim.read_text() == "precious\n"
    assert "symbolic link" in _one_line(capsys.readouterr().err)


def test_written_files_follow_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        write_text_atomic(tmp_path / "private.txt", "x")
        with open_append(tmp_path / "appended.log") as fh:
            fh.write("x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "private.txt").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "appended.log").stat().st_mode) == 0o600


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("memory_bytes", "x"),
        ("cpu_count", [2]),
        ("cpu_affinity", 3),
        ("git_dirty", "yes"),
        ("suites", {"a": 1}),
        ("suite_seconds", {"bson": "slow"}),
        ("notes", 7),
        ("schema_version", -1),
        ("kernel", {"v": 1}),
    ],
)
def test_a_field_of_the_wrong_type_is_one_line_and_exit_2(tmp_path: Path, capsys, field: str, value: object) -> None:
    run = _run(tmp_path / "reports")
    _env(run, **{field: value})
    assert main(["report", str(run)]) == 2
    assert field in _one_line(capsys.readouterr().err)


def test_a_suite_named_like_a_module_path_imports_nothing(tmp_path: Path, capsys) -> None:
    from polyperf.record import Row
    from polyperf.record.run_dir import RowWriter, finalize_run

    run = _run(tmp_path / "reports")
    rows = [
        Row(suite, "c", "i", "v", "seconds", 1.0 + r, "s", repeat=r)
        for suite in ("a.b", "../x", "os.path", "a/b")
        for r in range(3)
    ]
    RowWriter(run).write(rows)
    finalize_run(run)
    assert main(["report", str(run)]) == 0
    assert not list(tmp_path.glob("**/x*.png")) and all(p.parent == run / "report" for p in run.glob("**/*.png"))


def test_one_bad_run_does_not_break_the_report_of_the_others(tmp_path: Path, capsys) -> None:
    out = tmp_path / "reports"
    good, bad = _run(out, "20260101-000000-aaaa"), _run(out, "20260102-000000-bbbb")
    _env(bad, memory_bytes="x")
    assert main(["report", str(good)]) == 0
    index = (out / "index.html").read_text()
    assert f"{good.name}/report.html" in index and f"{bad.name}/report.html" not in index
    assert re.search(r"unreadable: .*field memory_bytes", index)  # the one-line note of why it was skipped


@pytest.mark.parametrize(
    "store",
    [
        "postgresql://127.0.0.1:1/x?password=hunter2",
        "postgresql://:hunter2@127.0.0.1:1/x",
        "postgresql://u:hun@ter2@127.0.0.1:1/x",
        "postgresql://u:hunter2@127.0.0.1:1/x?sslmode=disable",
        "postgres://127.0.0.1:1/x?sslmode=disable&password=hunter2",
    ],
)
def test_a_store_password_is_never_printed_nor_logged(tmp_path: Path, capsys, store: str) -> None:
    run = _run(tmp_path / "reports")
    assert main(["store", "add", str(run), "--store", store]) == 2
    err = capsys.readouterr().err
    assert "hunter2" not in err and "hun@ter2" not in err and "ter2" not in err and "***" in err
    assert "hunter2" not in "".join(p.read_text() for p in run.glob("logs/*"))


@pytest.mark.parametrize(
    "text",
    [
        "host=db password=hunter2 dbname=x",
        "host=db password='hunter 2' dbname=x",
        "PGPASSWORD=hunter2 psql",
        "Database(dsn='postgresql://u:hunter2@h/x')",
        "{'password': 'hunter2', 'host': 'h'}",
    ],
)
def test_every_form_of_a_secret_is_redacted(text: str) -> None:
    assert "hunter" not in redact(text) and "***" in redact(text)


def test_the_go_export_keeps_every_name_on_its_line(tmp_path: Path, capsys) -> None:
    from polyperf.record import Row
    from polyperf.record.run_dir import RowWriter, finalize_run

    run = _run(tmp_path / "reports")
    evil = "x\nBenchmarkForged 1 0 ns/op\u2028\r"
    RowWriter(run).write(
        [Row(f"s{evil}", f"c{evil}", f"i{evil}", f"v{evil}", f"m{evil}", 1.0 + r, "s", repeat=r) for r in range(3)]
    )
    finalize_run(run)
    assert main(["export", str(run), "--format", "gobench"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert not [line for line in lines if "Forged" in line.split(" ")[0] and not line.startswith("BenchmarkS")]
    assert all(line.startswith(("#", "Unit ", "Benchmark")) for line in lines)
    benchmarks = [line for line in lines if line.startswith("Benchmark")]
    assert sum("Forged" in line for line in benchmarks) == 3 and all(len(line.split(" ")) == 4 for line in benchmarks)


def test_a_store_opened_for_reading_reaches_no_other_file(tmp_path: Path) -> None:
    import duckdb

    from polyperf.store import StoreError, add_runs, open_store

    secret = tmp_path / "secret.txt"
    secret.write_text("the contents of another file\n")
    path = tmp_path / "history.duckdb"
    add_runs(open_store(path), [_run(tmp_path / "reports")])
    with duckdb.connect(str(path)) as con:  # someone else's store: a view where a table was
        con.execute("ALTER TABLE runs RENAME TO runs_kept")
        con.execute(
            f"CREATE VIEW runs AS SELECT r.* REPLACE (c.content AS profile) FROM runs_kept r, read_text('{secret}') c"
        )
    with pytest.raises(StoreError) as caught:
        open_store(path).runs()
    assert "another file" not in str(caught.value) and "\n" not in str(caught.value)
