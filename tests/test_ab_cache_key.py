"""ab's build cache keys: a build is reused only for the same sources, manifests and toolchain."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from polyperf.build import revisions


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    for path in revisions.EXTENSION_SOURCES:
        file = tmp_path / path if "." in Path(path).name else tmp_path / path / "Cargo.toml"
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(f"# {path}\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    return tmp_path


def test_the_extension_key_covers_the_workspace_manifest(repo: Path) -> None:
    first = revisions.extension_key(_git(repo, "rev-parse", "HEAD"), repo)
    (repo / "rust_apps" / "Cargo.toml").write_text('[workspace.lints.rust]\nunsafe_code = "forbid"\n')
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "two")
    assert revisions.extension_key(_git(repo, "rev-parse", "HEAD"), repo) != first


def test_the_extension_key_covers_the_toolchain_and_its_flags(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    commit = _git(repo, "rev-parse", "HEAD")
    first = revisions.extension_key(commit, repo)
    monkeypatch.setenv("RUSTFLAGS", "-C target-cpu=native")
    assert revisions.extension_key(commit, repo) != first
    monkeypatch.delenv("RUSTFLAGS")
    monkeypatch.setattr(revisions.subprocess, "run", _other_rustc(subprocess.run))
    assert revisions.extension_key(commit, repo) != first


def _other_rustc(run):
    def fake(args, *rest, **kwargs):
        if args[:1] == ["rustc"]:
            return subprocess.CompletedProcess(args, 0, stdout="rustc 9.99.0 (an upgrade)\n", stderr="")
        return run(args, *rest, **kwargs)

    return fake


def test_a_revision_cannot_be_an_option(repo: Path) -> None:
    for name in ("--output=/tmp/x", "-h"):
        with pytest.raises(revisions.RevisionError):
            revisions.resolve(name, repo)
