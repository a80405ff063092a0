"""The code under test at a git revision, for `polyperf ab`: a worktree per commit and the PyO3 extension built
from it, cached by the source it is built from (most changes leave the extension alone and reuse a build).

The extension is built with cargo exactly as maturin builds it (a release cdylib of `rust_ext/` with pyo3's
extension-module linking), into one shared target directory so dependencies compile once for every revision,
then copied into a folder that a worker process puts first on its import path (`orchestrate.ab_worker`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from polyperf.common import steps
from polyperf.common.paths import REPO_ROOT, TOOLS_DIR

__all__ = ["AB_CACHE", "Revision", "RevisionError", "build_extension", "prepare", "resolve"]

AB_CACHE = Path(os.environ.get("POLYPERF_AB_CACHE") or TOOLS_DIR / "ab")
# what the extension is built from: its crate, and the crate of BSON paths it shares with rust_apps
EXTENSION_SOURCES = ("rust_ext", "rust_apps/bson_paths", "rust_apps/Cargo.lock")


class RevisionError(ValueError):
    """A revision that cannot be resolved or built (said in one line)."""


@dataclass(frozen=True)
class Revision:
    """A revision as given (`name`), its commit, its worktree and the folder holding its built extension."""

    name: str
    commit: str
    tree: Path
    extension: Path


def _git(*args: str, repo: Path = REPO_ROOT) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RevisionError(f"git {' '.join(args)}: {done.stderr.strip() or 'failed'}")
    return done.stdout.strip()


def resolve(name: str, repo: Path = REPO_ROOT) -> str:
    """The full commit id of `name` (a branch, tag, sha or HEAD~1)."""
    if not name or name.startswith("-"):
        raise RevisionError(f"not a revision: {name!r}")
    try:
        return _git("rev-parse", "--verify", "--quiet", f"{name}^{{commit}}", repo=repo)
    except RevisionError:
        raise RevisionError(f"unknown revision {name!r} in {repo}") from None


def _worktree(commit: str, cache: Path, repo: Path) -> Path:
    tree = cache / "worktrees" / commit
    if (tree / ".git").exists():
        return tree
    tree.parent.mkdir(parents=True, exist_ok=True)
    _git("worktree", "prune", repo=repo)  # a folder removed by hand leaves a stale entry behind
    _git("worktree", "add", "--detach", "--force", str(tree), commit, repo=repo)
    return tree


def _source_key(commit: str, repo: Path) -> str:
    """The git object ids of the extension's sources at `commit`: equal ids, equal builds."""
    ids = [_git("rev-parse", f"{commit}:{path}", repo=repo) for path in EXTENSION_SOURCES]
    return hashlib.sha256(" ".join(ids).encode()).hexdigest()[:16]


def build_extension(tree: Path, key: str, cache: Path = AB_CACHE) -> Path:
    """The folder holding `polyperf/_native<suffix>` built from `tree`'s rust_ext (cached under `key`)."""
    folder = cache / "extensions" / key
    target = folder / "polyperf" / f"_native{sysconfig.get_config_var('EXT_SUFFIX')}"
    if target.exists():
        return folder
    env = {
        **os.environ,
        "CARGO_TARGET_DIR": str(cache / "target"),
        "PYO3_PYTHON": sys.executable,
        "PYO3_BUILD_EXTENSION_MODULE": "1",  # what maturin sets: no link against libpython
    }
    cmd = ["cargo", "build", "--release", "--lib", "--manifest-path", str(tree / "rust_ext" / "Cargo.toml")]
    log = cache / "logs" / f"extension-{key}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    what = f"building the extension of {tree.name[:12]} with cargo"
    with steps.step(what, "ab extension build", "about 4 min on 2 cores"), log.open("w", encoding="utf-8") as out:
        code = subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
    if code != 0:
        raise RevisionError(f"the extension at {tree} did not build (exit {code}): see {log}")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    shutil.copyfile(cache / "target" / "release" / "lib_native.so", partial)
    partial.replace(target)  # a build cut short never leaves a half-copied module behind
    return folder


def prepare(name: str, *, cache: Path = AB_CACHE, repo: Path = REPO_ROOT) -> Revision:
    """Resolves `name`, checks it out in a worktree of its own and builds its extension (each cached)."""
    commit = resolve(name, repo)
    tree = _worktree(commit, cache, repo)
    return Revision(name, commit, tree, build_extension(tree, _source_key(commit, repo), cache))
