"""`polyperf history backfill REV_RANGE`: run suites at each commit of a range, each in a git worktree of its own,
and add every finished run to the store; commits the store already holds for this machine and profile are skipped
(as asv's `run HASHFILE`).

Each commit runs with its own harness, suites and apps (PYTHONPATH points into its worktree, so the servers are
built from its sources), and with the Rust extension built here, copied in where the commit has none built.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from polyperf.common.paths import REPO_ROOT
from polyperf.record.env import collect_cpu, collect_os
from polyperf.record.env_record import is_commit
from polyperf.store.records import StoreError, fingerprint

__all__ = ["BackfillPlan", "backfill", "plan_backfill", "this_machine"]


@dataclass(frozen=True)
class BackfillPlan:
    to_run: list[str]
    stored: list[str]  # in the range, already in the store for this machine and profile


def this_machine() -> str:
    """This machine's fingerprint (no CPU budget: backfill runs without one)."""
    return fingerprint({**collect_cpu(), **collect_os()})


def _git(*args: str, cwd: Path = REPO_ROOT) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise StoreError(f"git {' '.join(args)}: {(done.stderr or done.stdout).strip().splitlines()[-1:]}")
    return done.stdout


def plan_backfill(rev_range: str, stored_commits: set[str], *, repo: Path = REPO_ROOT) -> BackfillPlan:
    """The commits of `rev_range` (oldest first; a single revision means just that commit)."""
    args = ["rev-list", "--reverse"] if ".." in rev_range else ["rev-list", "-n", "1"]
    args += ["--end-of-options", rev_range]
    commits = _git(*args, cwd=repo).split()
    if not all(is_commit(c) for c in commits):
        raise StoreError(f"{rev_range}: git gave something other than commit ids")
    if not commits:
        raise StoreError(f"{rev_range}: no commits in this range")
    return BackfillPlan([c for c in commits if c not in stored_commits], [c for c in commits if c in stored_commits])


def _extension_into(worktree: Path) -> None:
    package = worktree / "python" / "polyperf"
    if not package.is_dir() or any(package.glob("_native*.so")):
        return
    for built in Path(__file__).resolve().parents[1].glob("_native*.so"):  # this polyperf's own package folder
        shutil.copy2(built, package / built.name)


def _run_suites(cmd: list[str], cwd: Path, env: dict[str, str]) -> None:
    subprocess.run(cmd, cwd=cwd, env=env, check=False)


def run_at(commit: str, suites: Sequence[str], profile: str, out: Path, *, repo: Path = REPO_ROOT) -> Path | None:
    """Runs `suites` at `commit` in a fresh worktree; the run folder it made under `out`, None if it made none."""
    base = Path(tempfile.mkdtemp(prefix="polyperf-backfill-"))
    worktree = base / commit[:12]
    _git("worktree", "add", "--detach", "--end-of-options", str(worktree), commit, cwd=repo)
    try:
        _extension_into(worktree)
        before = set((out / "runs").glob("*")) if (out / "runs").exists() else set()
        # the backfill adds each run to the store it was given; the run must not add itself elsewhere first
        env = {**os.environ, "PYTHONPATH": str(worktree / "python"), "POLYPERF_STORE": "off"}
        cmd = [sys.executable, "-m", "polyperf", "run", *suites, "--profile", profile, "--out", str(out)]
        _run_suites(cmd, worktree, env)
        made = sorted(set((out / "runs").glob("*")) - before)
        return made[-1] if made else None
    finally:
        _git("worktree", "remove", "--force", "--end-of-options", str(worktree), cwd=repo)
        shutil.rmtree(base, ignore_errors=True)


def backfill(
    plan: BackfillPlan,
    suites: Sequence[str],
    profile: str,
    out: Path,
    add: Callable[[Path], str],
    say: Callable[[str], None] = print,
) -> int:
    """Runs each planned commit and adds its run (`add` returns what became of it); the number of runs added."""
    added = 0
    for number, commit in enumerate(plan.to_run, start=1):
        say(f"polyperf: backfill {number}/{len(plan.to_run)}: {commit[:12]} ({', '.join(suites) or 'every suite'})")
        run_dir = run_at(commit, suites, profile, out)
        if run_dir is None:
            say(f"polyperf: {commit[:12]}: the run made no run folder; nothing stored")
            continue
        outcome = add(run_dir)
        added += outcome.startswith("added")
        say(f"polyperf: {commit[:12]}: {outcome}")
    return added
