"""Suites of the user's own, in a repository outside the checkout (tmp_path), end to end: a Python suite written by
`polyperf new`, run without the Rust extension, judged against the claims beside it and `--claims`; polyperf's
pytest plugin through its entry point; a suite's own metric gated by `compare`; a Go package and a criterion crate
as they are. Each run is a smoke run of a few seconds."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import polyperf
from polyperf.analyse.claims import evaluate
from polyperf.analyse.user_claims import merged_claims
from polyperf.cli.new import write_suite
from polyperf.orchestrate.native_bench import NativePlan, label_of, run_native_suite
from polyperf.record.run import Run
from polyperf.record.run_dir import load_run

PACKAGE = Path(polyperf.__file__).parent
CRITERION = Path(__file__).parent / "testdata" / "microbench" / "criterion"
# A claims entry spelled out as TOML (as in tests/test_verdicts_cli.py): the test reads what a user writes.
EXTRA = """
[[claims]]
id = "docs.contender_under_a_second"
suite = "docs"
source = "a test"
statement = "the contender parses the document in under a second"
unit = "s"
measure = "value"
metric = "seconds"
select = { case = "parse", implementation = "contender" }
rule = { kind = "less_than", threshold = 1.0 }
"""


def _polyperf(*args: str, cwd: Path, pythonpath: str | None = None, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "POLYPERF_STORE": "off", **env}
    if pythonpath is not None:
        environment["PYTHONPATH"] = pythonpath
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=cwd, env=environment, capture_output=True, text=True, timeout=300
    )


def _without_extension(tmp_path: Path) -> Path:
    """polyperf's Python package without its compiled extension, as a checkout never built would have it."""
    root = tmp_path / "unbuilt"
    shutil.copytree(PACKAGE, root / "polyperf", ignore=shutil.ignore_patterns("_native*", "__pycache__"))
    return root


@pytest.mark.slow
def test_a_python_suite_of_ones_own_without_the_extension(tmp_path):
    repo = tmp_path / "repo"
    written = write_suite("docs", "micro", repo / "suites")
    stub = next(p for p in written if p.suffix == ".toml")
    stub.write_text(stub.read_text().replace("EDIT: what the article measured on", "canada.json"))
    (repo / "more.toml").write_text(EXTRA)
    unbuilt = _without_extension(tmp_path)
    args = ["polyperf", "run", "--suites-dir", "suites", "--profile", "smoke", "--out", "reports"]
    done = _polyperf(*args, "--claims", "more.toml", cwd=repo, pythonpath=str(unbuilt))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    answers = done.stdout[done.stdout.index("polyperf: answers after 1 of 1 suites (docs)") :]
    assert "docs.contender_vs_baseline: " in answers and "docs.contender_under_a_second: " in answers
    assert "published on canada.json; measured on EDIT: what this suite measures on" in answers
    [run_dir] = (repo / "reports" / "runs").iterdir()
    summary = (run_dir / "summary.md").read_text()
    report = (run_dir / "report.html").read_text()
    for text in (summary, report):
        assert "docs.contender_vs_baseline" in text and "docs.contender_under_a_second" in text
        assert "published on canada.json" in text
    # the user's files move on (or polyperf is upgraded): the run keeps the claims it was made with
    stub.unlink()
    (repo / "more.toml").unlink()
    done = _polyperf("polyperf", "verdicts", str(run_dir), "--json", cwd=repo, pythonpath=str(unbuilt))
    assert done.returncode == 0, done.stderr
    verdicts = {v["claim"]: v for v in json.loads(done.stdout)}
    assert verdicts["docs.contender_vs_baseline"]["n"] == 6 and verdicts["docs.contender_vs_baseline"]["margin"]
    assert verdicts["docs.contender_under_a_second"]["verdict"] != "not measured"


@pytest.mark.slow
def test_an_id_clash_stops_the_run_before_it_starts(tmp_path):
    repo = tmp_path / "repo"
    write_suite("docs", "micro", repo / "suites")
    (repo / "clash.toml").write_text(EXTRA.replace("docs.contender_under_a_second", "docs.contender_vs_baseline"))
    args = ["polyperf", "run", "--suites-dir", "suites", "--profile", "smoke", "--out", "reports"]
    done = _polyperf(*args, "--claims", "clash.toml", cwd=repo)
    assert done.returncode == 2 and not (repo / "reports").exists()
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("polyperf: error: claims file clash.toml: id 'docs.contender_vs_baseline' is already used")


@pytest.mark.slow
def test_a_suite_needing_the_extension_says_why_first(tmp_path):
    repo = tmp_path / "repo"
    (repo / "suites").mkdir(parents=True)
    (repo / "suites" / "test_rusty.py").write_text("from polyperf import _native\n\ndef test_x():\n    pass\n")
    args = ["polyperf", "run", "--suites-dir", "suites", "--profile", "smoke", "--out", "reports", "--no-report"]
    done = _polyperf(*args, cwd=repo, pythonpath=str(_without_extension(tmp_path)))
    first = done.stderr.splitlines()[0]
    assert first.startswith("polyperf: rusty: polyperf's Rust extension (polyperf._native) is not built here")
    assert done.returncode != 0 and "maturin develop --release" in done.stdout  # the import says it again


def _entry_point(tmp_path: Path) -> str:
    """A distribution whose only content is polyperf's pytest11 entry point, as `pip install` writes it."""
    site = tmp_path / "site"
    info = site / "polyperf_plugin_probe-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: polyperf-plugin-probe\nVersion: 0\n")
    (info / "entry_points.txt").write_text(
        "[pytest11]\npolyperf.record.pytest_plugin = polyperf.record.pytest_plugin\n"
    )
    return os.pathsep.join([str(site), str(PACKAGE.parent)])


@pytest.mark.slow
def test_the_plugin_records_wherever_pytest_runs_and_only_when_asked(tmp_path):
    path = _entry_point(tmp_path)
    repo = tmp_path / "repo"
    (repo / "my_suites").mkdir(parents=True)
    (repo / "my_suites" / "test_mine.py").write_text(
        "def test_row(record):\n    record('seconds', 0.5, 's', case='c', implementation='i')\n"
    )
    (repo / "tests").mkdir()
    (repo / "tests" / "test_plain.py").write_text("def test_plain():\n    assert True\n")
    plain = ["pytest", "-q", "-p", "no:locust"]
    done = _polyperf(*plain, "my_suites", "--polyperf-profile=smoke", cwd=repo, pythonpath=path)
    assert done.returncode == 0, done.stdout[-2000:]
    [run_dir] = (repo / "reports" / "runs").iterdir()
    assert load_run(run_dir)[["suite", "metric", "value"]].values.tolist() == [["mine", "seconds", 0.5]]
    shutil.rmtree(repo / "reports")
    done = _polyperf(*plain, "tests", cwd=repo, pythonpath=path)
    assert done.returncode == 0 and not (repo / "reports").exists()  # a project's own tests make no run
    done = _polyperf(*plain, "my_suites", cwd=repo, pythonpath=path)
    assert done.returncode == 1 and "polyperf records nothing in this session: pass --polyperf-profile" in done.stdout
    # inside the checkout the conftest lists the plugin too: registered once
    checkout = PACKAGE.parents[1]
    args = ["pytest", "suites/test_io_buffering.py", "--polyperf-profile=smoke", "-k", "no_such_test", "-q"]
    done = _polyperf(*args, f"--polyperf-out={tmp_path / 'out'}", cwd=checkout, pythonpath=path)
    assert done.returncode == 5, done.stdout[-2000:] + done.stderr[-2000:]  # no test selected, no plugin error


COUNTED = """
import os

from polyperf.record.catalogue import metric

POLYPERF_METRICS = [metric("widgets", "count", "lower", "widgets made per call", exact=True)]


def test_widgets(record):
    for repeat in range(6):
        record("widgets", int(os.environ["WIDGETS"]), "count", case="make", implementation="mine", repeat=repeat)
"""


@pytest.mark.slow
def test_a_suites_own_metric_is_gated_by_compare(tmp_path):
    repo = tmp_path / "repo"
    (repo / "suites").mkdir(parents=True)
    (repo / "suites" / "test_counted.py").write_text(COUNTED)
    args = ["polyperf", "run", "--suites-dir", "suites", "--profile", "smoke", "--no-report"]
    for out, widgets in (("a", "3"), ("b", "3"), ("c", "4")):
        assert _polyperf(*args, "--out", out, cwd=repo, WIDGETS=widgets).returncode == 0
    gate = ["polyperf", "compare", "--fail-on-regression", "0"]
    same = _polyperf(*gate, "a/latest", "b/latest", cwd=repo)
    assert same.returncode == 0, same.stdout[-2000:] + same.stderr
    worse = _polyperf(*gate, "a/latest", "c/latest", cwd=repo)
    assert worse.returncode == 1 and "widgets" in worse.stdout + worse.stderr, worse.stdout[-2000:]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("go") is None, reason="needs the Go toolchain")
def test_a_go_package_as_it_is(tmp_path):
    repo = tmp_path / "repo"
    write_suite("strbuild", "go", repo / "benches")
    args = ["polyperf", "run", "--suites-dir", "benches", "--profile", "smoke", "--out", "reports"]
    done = _polyperf(*args, cwd=repo)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "strbuild.contender_vs_baseline: " in done.stdout
    [run_dir] = (repo / "reports" / "runs").iterdir()
    rows = load_run(run_dir)
    seconds = rows[rows["metric"] == "seconds"]
    assert sorted(seconds["implementation"].unique()) == ["Baseline", "Contender"]
    assert seconds.groupby("implementation")["repeat"].apply(sorted).tolist() == [list(range(6))] * 2
    slots = {(r.repeat, r.params["slot"]) for r in seconds.itertuples()}
    assert len(slots) == 12  # each repeat ran both sides, each in a process of its own, in a drawn order
    assert (run_dir / "logs" / "benches" / "strbuild" / "build.log").exists()


def test_go_and_criterion_names_become_case_implementation_variant():
    assert label_of("mine", "Stdlib") == {"case": "mine", "implementation": "Stdlib", "variant": ""}
    assert label_of("mine", "Parse/stdlib/small") == {"case": "Parse", "implementation": "stdlib", "variant": "small"}


def test_a_criterion_crate_as_it_is(tmp_path, monkeypatch):
    """cargo is stood in for by a script that writes criterion's files (captured from real runs) where
    CRITERION_HOME says: the build, the repeats, the reading and the claims, without minutes of compiling."""
    tools = tmp_path / "bin"
    tools.mkdir()
    calls = tmp_path / "calls.txt"
    (tools / "cargo").write_text(
        f'#!/bin/sh\necho "$@" >> {calls}\ncase "$*" in *--no-run*) exit 0;; esac\n'
        f'mkdir -p "$CRITERION_HOME" && cp -r {CRITERION}/. "$CRITERION_HOME"/\n'
    )
    (tools / "cargo").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    crate = tmp_path / "sched"
    (crate / "benches").mkdir(parents=True)
    (crate / "Cargo.toml").write_text('[package]\nname = "sched"\n')
    run = Run.create(tmp_path / "out", profile="smoke")
    plan = NativePlan(repeats=3, seed=1)
    assert run_native_suite(crate, "sched", run.recorder("sched"), plan, run.run_dir) == "cargo"
    run.finish()
    lines = [line for line in calls.read_text().splitlines() if line.startswith("bench")]  # not `--version`
    assert lines[0] == "bench --no-run" and len(lines) == 4 and lines[1].startswith("bench -- --warm-up-time")
    rows = load_run(run.run_dir)
    cases = set(map(tuple, rows[["case", "implementation"]].drop_duplicates().values.tolist()))
    assert ("old_threadpool", "ping_pong") in cases and ("multi_thread", "spawn_many") in cases
    assert sorted(rows["repeat"].unique()) == [0, 1, 2]
    claim = EXTRA.replace("docs.contender_under_a_second", "sched.ping_pong").replace(
        'suite = "docs"', 'suite = "sched"'
    )
    claim = claim.replace('case = "parse", implementation = "contender"', 'case = "old_threadpool"')
    claim = claim.replace("less_than", "greater_than").replace("threshold = 1.0", "threshold = 0.0")
    (crate / "claims.toml").write_text(claim)
    [verdict] = evaluate(rows, merged_claims([crate / "claims.toml"])[-1:])
    assert verdict.measured is not None and verdict.measured.n == 3 and verdict.verdict != "not measured"
    assert isinstance(rows, pd.DataFrame)


def test_the_scheduler_suite_records_criterion_and_go_through_the_same_path():
    import importlib.util

    path = PACKAGE.parents[1] / "suites" / "test_scheduler.py"
    spec = importlib.util.spec_from_file_location("scheduler_suite", path)
    suite = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(suite)
    rows = []
    found = suite._record_criterion(
        lambda *args, **kw: rows.append((args, kw)), CRITERION, implementation="tokio", repeat=2, params={"cpus": "0"}
    )
    labels = {(kw["case"], kw["implementation"], kw["variant"], kw["repeat"]) for _args, kw in rows}
    assert ("ping_pong", "tokio", "old_threadpool", 2) in labels and len(found) == 4
    assert sum(len(e.sample_s) for e in found) + len(found) == len(rows)  # every sample, and criterion's estimate


def test_a_suite_that_ran_names_its_claims_not_measured(tmp_path):
    from polyperf.analyse.claims import evaluate
    from polyperf.report.terminal import answers_text

    write_suite("docs", "micro", tmp_path)
    claims = [c for c in merged_claims([tmp_path / "docs.claims.toml"]) if c.suite == "docs"]
    empty = pd.DataFrame(columns=["suite", "case", "implementation", "variant", "metric", "value", "unit", "repeat"])
    verdicts = evaluate(empty, claims)
    assert [v.verdict for v in verdicts] == ["not measured"]
    text = answers_text(verdicts, done=["docs"], total=1)
    assert "docs.contender_vs_baseline: suite docs has no rows in this run" in text and "no claims yet" not in text


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("go") is None or shutil.which("git") is None, reason="needs Go and git")
def test_ab_gates_a_go_package_of_ones_own_across_two_commits(tmp_path):
    repo = tmp_path / "repo"
    write_suite("strbuild", "go", repo / "benches")
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    source = repo / "benches" / "strbuild" / "strbuild_test.go"
    slower = source.read_text().replace("j < 64; j++ {\n\t\t\tsb.", "j < 256; j++ {\n\t\t\tsb.")
    assert slower != source.read_text()  # the contender now does four times the work
    source.write_text(slower)
    subprocess.run([*git, "commit", "-qam", "head"], check=True)
    args = ["polyperf", "ab", "HEAD~1", "HEAD", "strbuild", "--suites-dir", "benches", "--budget", "240"]
    done = _polyperf(*args, "--seed", "7", cwd=repo)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    [line] = [row for row in done.stdout.splitlines() if row.startswith("| strbuild / Contender")]
    assert "**slower**" in line and "polyperf ab: a regression was decided" in done.stderr
    assert "Go benchmarks: the CPU time of a fresh `go test` process" in done.stdout
