"""The code under test at a git revision, for `polyperf ab`: the PyO3 extension and the server apps built from
that revision's sources, each cached by the git objects it is built from (most changes leave most of them alone
and reuse their builds). A revision is checked out in a temporary git worktree only while something of it must be
built, then the worktree is removed: the cache holds builds, not checkouts.

The extension is built with cargo exactly as maturin builds it (a release cdylib of `rust_ext/` with pyo3's
extension-module linking); the Rust apps with `cargo build --release --locked`, the Go apps with `go build
-trimpath`, as `polyperf build` builds them. cargo shares one target directory per workspace across revisions, so
dependencies compile once; each build is copied into a folder named by its source key, which a worker process or
server then runs (`gate.worker`, `gate.servers`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from polyperf.build.builder import binary_env
from polyperf.build.lock import build_lock
from polyperf.build.registry import get_app
from polyperf.common import steps
from polyperf.common.paths import REPO_ROOT, TOOLS_DIR

__all__ = ["AB_CACHE", "Revision", "RevisionError", "prepare", "resolve"]

AB_CACHE = Path(os.environ.get("POLYPERF_AB_CACHE") or TOOLS_DIR / "ab")
# what the extension is built from: its crate, and the crate of BSON paths it shares with rust_apps
# and the workspace manifest bson_paths inherits its edition, lints and profiles from
EXTENSION_SOURCES = ("rust_ext", "rust_apps/bson_paths", "rust_apps/Cargo.lock", "rust_apps/Cargo.toml")
# what an app is built from: its whole workspace (Cargo) or module (Go)
APP_SOURCES = {"rust": ("rust_apps",), "go": ("go_apps",)}


class RevisionError(ValueError):
    """A revision that cannot be resolved or built (said in one line)."""


@dataclass(frozen=True)
class Revision:
    """A revision as given (`name`), its commit, the folder holding its built extension (None when not asked
    for) and its built server binaries by app name."""

    name: str
    commit: str
    extension: Path | None
    binaries: Mapping[str, Path] = field(default_factory=dict)


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
        return _git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{name}^{{commit}}", repo=repo)
    except RevisionError:
        raise RevisionError(f"unknown revision {name!r} in {repo}") from None


@contextlib.contextmanager
def _worktree(commit: str, cache: Path, repo: Path) -> Iterator[Path]:
    """`commit` checked out in a worktree of its own for as long as the block runs, removed afterwards."""
    tree = cache / "worktrees" / commit
    tree.parent.mkdir(parents=True, exist_ok=True)
    _git("worktree", "prune", repo=repo)  # a folder removed by hand (or a killed session) leaves a stale entry
    if not (tree / ".git").exists():
        shutil.rmtree(tree, ignore_errors=True)
        _git("worktree", "add", "--detach", "--force", "--end-of-options", str(tree), commit, repo=repo)
    try:
        yield tree
    finally:
        with contextlib.suppress(RevisionError):
            _git("worktree", "remove", "--force", "--end-of-options", str(tree), repo=repo)
        shutil.rmtree(tree, ignore_errors=True)


def _toolchain(language: str) -> str:
    """The compiler's full version and the environment that changes what it builds (RUSTFLAGS, CARGO_*, CC...),
    as the cache key's salt: a toolchain upgrade or another flag is another build."""
    args = ["go", "version"] if language == "go" else ["rustc", "-vV"]
    try:
        version = subprocess.run(args, capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        version = ""  # the build itself says the tool is missing
    return repr((version, sorted(binary_env(os.environ).items())))


def _source_key(commit: str, repo: Path, sources: Sequence[str] = EXTENSION_SOURCES, salt: str = "") -> str:
    """The git object ids of `sources` at `commit` (and `salt`, e.g. the toolchain): equal ids, equal builds."""
    ids = [_git("rev-parse", "--verify", "--end-of-options", f"{commit}:{path}", repo=repo) for path in sources]
    return hashlib.sha256(" ".join([*ids, salt] if salt else ids).encode()).hexdigest()[:16]


def extension_key(commit: str, repo: Path = REPO_ROOT) -> str:
    """The extension's cache key: every source and manifest its build reads, the Rust toolchain with the flags
    that change its output, and the Python it is built for."""
    return _source_key(commit, repo, EXTENSION_SOURCES, f"{_toolchain('rust')} {sys.version}")


def _run_build(cmd: list[str], *, cwd: Path | None, env: Mapping[str, str], log: Path, what: str, key: str) -> None:
    """Runs one build with its output in `log`, announced with the time the step took here last (`key`)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with steps.step(what, f"ab build {key}"), log.open("w", encoding="utf-8") as out:
        try:
            code = subprocess.run(cmd, cwd=cwd, env=dict(env), stdout=out, stderr=subprocess.STDOUT, check=False)
        except OSError as exc:
            raise RevisionError(f"{what}: {exc}") from None
    if code.returncode != 0:
        raise RevisionError(f"{what} failed (exit {code.returncode}): see {log}")


def _keep(built: Path, target: Path) -> None:
    """Copies a build into the cache under its key; a build cut short never leaves a half-copied file behind."""
    if not built.exists():
        raise RevisionError(f"the build wrote no {built.name} at {built}")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    shutil.copy2(built, partial)
    partial.replace(target)


def _build_extension(tree: Path, target: Path, cache: Path) -> None:
    env = {
        **os.environ,
        "CARGO_TARGET_DIR": str(cache / "target"),
        "PYO3_PYTHON": sys.executable,
        "PYO3_BUILD_EXTENSION_MODULE": "1",  # what maturin sets: no link against libpython
    }
    cmd = ["cargo", "build", "--release", "--lib", "--manifest-path", str(tree / "rust_ext" / "Cargo.toml")]
    log = cache / "logs" / f"extension-{target.parent.parent.name}.log"
    what = f"building the extension of {tree.name[:12]} with cargo"
    _run_build(cmd, cwd=None, env=env, log=log, what=what, key="extension")
    _keep(cache / "target" / "release" / "lib_native.so", target)


def _build_app(tree: Path, app_name: str, target: Path, cache: Path) -> None:
    app, _variant = get_app(app_name)
    log = cache / "logs" / f"{app_name}-{target.parent.name}.log"
    what = f"building {app_name} of {tree.name[:12]}"
    if app.language == "rust":
        env = {**os.environ, "CARGO_TARGET_DIR": str(cache / "apps-target")}
        manifest = tree / "rust_apps" / "Cargo.toml"
        cmd = ["cargo", "build", "--release", "--locked", "--manifest-path", str(manifest), "-p", app_name]
        cmd += ["--bin", app_name]
        _run_build(cmd, cwd=None, env=env, log=log, what=what, key=app_name)
        _keep(cache / "apps-target" / "release" / app_name, target)
    else:
        partial = target.with_name(target.name + ".build")
        partial.parent.mkdir(parents=True, exist_ok=True)
        cmd = ["go", "build", "-trimpath", "-o", str(partial), f"./cmd/{app_name}"]
        _run_build(cmd, cwd=tree / "go_apps", env=os.environ, log=log, what=what, key=app_name)
        partial.replace(target)


def prepare(
    name: str,
    *,
    extension: bool = True,
    apps: Sequence[str] = (),
    cache: Path = AB_CACHE,
    repo: Path = REPO_ROOT,
) -> Revision:
    """Resolves `name` and returns its builds: the extension (when asked for) and each app's release binary,
    each built in a temporary worktree unless the cache already holds a build of the same sources."""
    commit = resolve(name, repo)
    wanted: dict[str, Path] = {}
    if extension:
        module = f"_native{sysconfig.get_config_var('EXT_SUFFIX')}"
        wanted["extension"] = cache / "extensions" / extension_key(commit, repo) / "polyperf" / module
    for app_name in apps:
        app, _variant = get_app(app_name)
        key = _source_key(commit, repo, APP_SOURCES[app.language], _toolchain(app.language))
        wanted[app_name] = cache / "apps" / key / app_name
    missing = {what: path for what, path in wanted.items() if not path.exists()}
    if missing:
        # one build at a time in the cache's shared cargo target folders; a waiter finds the builds done
        with build_lock(cache / "target", f"ab builds of {commit[:12]}"), _worktree(commit, cache, repo) as tree:
            for what, path in missing.items():
                if path.exists():  # built by the process this one waited for
                    continue
                if what == "extension":
                    _build_extension(tree, path, cache)
                else:
                    _build_app(tree, what, path, cache)
    folder = wanted["extension"].parent.parent if extension else None
    return Revision(name, commit, folder, {a: p for a, p in wanted.items() if a != "extension"})
