"""`polyperf history backfill`: the commits of a range, oldest first, less those the store holds for this machine
and profile; a dry run lists them and runs nothing; a worktree per commit is made and removed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from test_store import make_run

from polyperf.cli import main
from polyperf.record.env import collect_cpu, collect_os
from polyperf.store import StoreError, add_runs, open_store
from polyperf.store import backfill as backfill_module
from polyperf.store.backfill import plan_backfill, run_at


def _repo(tmp_path: Path, commits: int) -> tuple[Path, list[str]]:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    subprocess.run([*git, "init", "-q"], check=True)
    made = []
    for i in range(commits):
        (repo / "f.txt").write_text(str(i))
        subprocess.run([*git, "add", "f.txt"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", f"c{i}"], check=True)
        made.append(subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip())
    return repo, made


def test_the_plan_runs_each_commit_of_the_range_once_oldest_first(tmp_path: Path) -> None:
    repo, commits = _repo(tmp_path, 4)
    plan = plan_backfill(f"{commits[0]}..{commits[3]}", {commits[2]}, repo=repo)
    assert plan.to_run == [commits[1], commits[3]] and plan.stored == [commits[2]]
    assert plan_backfill(commits[1], set(), repo=repo).to_run == [commits[1]]
    with pytest.raises(StoreError):
        plan_backfill("no-such-rev..HEAD", set(), repo=repo)


def test_a_dry_run_skips_stored_commits_of_this_machine(tmp_path: Path, capsys) -> None:
    # a commit that is not a merge: the range from its parent holds it alone (HEAD may be a merge)
    newest = subprocess.run(
        ["git", "rev-list", "-n", "1", "--no-merges", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    before = subprocess.run(
        ["git", "rev-parse", f"{newest}~1"], capture_output=True, text=True, check=True
    ).stdout.strip()
    here = {**collect_cpu(), **collect_os()}
    store = tmp_path / "history.duckdb"
    add_runs(open_store(store), [make_run(tmp_path, "20260101-000000-aaaa", newest, **here)])
    assert main(["history", "backfill", f"{before}..{newest}", "--store", str(store), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "0 commits to run, 1 already stored (skipped)" in out
    other = tmp_path / "other.duckdb"
    assert main(["history", "backfill", f"{before}..{newest}", "--store", str(other), "--dry-run"]) == 0
    assert f"would run {newest}" in capsys.readouterr().out


def test_each_commit_runs_in_a_worktree_that_is_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, commits = _repo(tmp_path, 2)
    seen: list[tuple[str, str]] = []

    def fake_run(cmd: list[str], cwd: Path, env: dict) -> None:
        assert cmd[1:4] == ["-m", "polyperf", "run"] and "--profile" in cmd
        assert env["POLYPERF_STORE"] == "off"  # the backfill adds the run to its own store
        seen.append(((Path(cwd) / "f.txt").read_text(), env["PYTHONPATH"]))
        (tmp_path / "out" / "runs" / "20260101-000000-beef").mkdir(parents=True)

    monkeypatch.setattr(backfill_module, "_run_suites", fake_run)
    made = run_at(commits[0], ["io_buffering"], "smoke", tmp_path / "out", repo=repo)
    assert made is not None and made.name == "20260101-000000-beef"
    assert seen[0][0] == "0" and seen[0][1].endswith("/python")  # the commit's own files, its own harness
    listed = subprocess.run(["git", "-C", str(repo), "worktree", "list"], capture_output=True, text=True).stdout
    assert len(listed.strip().splitlines()) == 1  # only the main working tree is left
