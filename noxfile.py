"""Entry points for people and CI. Every session installs what it needs into its own virtualenv.

nox -s tests            the CI test command (fast tests of the harness, extension and apps)
nox -s bench            the main job: build, run every suite (quick profile), write the report
nox -s bench -- --profile full io_buffering
nox -s lint             ruff (check + format), import contracts, clippy + rustfmt, go vet + gofmt
nox -s report -- RUN    re-render a run's report
nox -s compare -- A B   what changed from run A to run B (--fail-on-regression PCT for CI)
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nox

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True

ROOT = Path(__file__).parent
RUST_APPS = ROOT / "rust_apps"
GO_APPS = ROOT / "go_apps"


def _install(session: nox.Session, extras: str = "") -> None:
    # Editable install: maturin compiles rust_ext/ in release mode into polyperf/_native.
    session.install("-e", f".{extras}")


def _install_load_tools(session: nox.Session) -> None:
    # oha (crates.io, cargo install --locked) and bombardier (Go module proxy) are built into .tools/ at
    # pinned versions: no apt step on a fresh machine.
    session.run(
        "python",
        "-c",
        "from polyperf.load import ensure_bombardier, ensure_oha; print(ensure_oha(), ensure_bombardier())",
    )


def _require(session: nox.Session, tool: str, hint: str) -> None:
    if shutil.which(tool) is None:
        session.error(f"`{tool}` not found on PATH: {hint}")


@nox.session
def tests(session: nox.Session) -> None:
    """Fast correctness tests: Python (harness, extension, apps end to end), Rust and Go unit tests."""
    _require(session, "cargo", "install Rust (https://rustup.rs) to build the extension and the apps")
    _install(session, "[test]")
    _install_load_tools(session)
    session.run("cargo", "test", "--quiet", "--manifest-path", "rust_ext/Cargo.toml", external=True)
    if (RUST_APPS / "Cargo.toml").exists():
        session.run("cargo", "test", "--quiet", "--workspace", "--manifest-path", "rust_apps/Cargo.toml", external=True)
    if (GO_APPS / "go.mod").exists():
        _require(session, "go", "install Go 1.22+ to build the Go apps")
        with session.chdir(GO_APPS):
            session.run("go", "test", "./...", external=True)
    session.run("pytest", "tests", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """The main job: every suite on its defaults (quick profile), then the report's path."""
    _install(session)
    _install_load_tools(session)
    session.run("polyperf", "run", *session.posargs)


@nox.session
def report(session: nox.Session) -> None:
    """Re-render the report of a run directory (default: reports/latest)."""
    _install(session)
    session.run("polyperf", "report", *session.posargs)


@nox.session
def compare(session: nox.Session) -> None:
    """Compare two runs (`nox -s compare -- RUN_A RUN_B [--fail-on-regression PCT]`): the CI gate."""
    _install(session)
    session.run("polyperf", "compare", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (lint + format), the import contracts between stages, clippy and rustfmt on every crate, go vet and
    gofmt on the Go module."""
    session.install("ruff", "import-linter")
    session.run("ruff", "check", "python", "suites", "tests", "noxfile.py")
    session.run("ruff", "format", "--check", "python", "suites", "tests", "noxfile.py")
    session.install("-e", ".", "--no-deps")  # import-linter reads the installed package's imports
    session.run("lint-imports")
    # rust_ext, the apps' workspace, and the 2019 scheduler crate that keeps its own lock file outside it
    for manifest, scope in (
        ("rust_ext/Cargo.toml", []),
        ("rust_apps/Cargo.toml", ["--workspace"]),
        ("rust_apps/sched_bench_old/Cargo.toml", []),
    ):
        if (ROOT / manifest).exists():
            session.run("cargo", "fmt", "--all", "--check", "--manifest-path", manifest, external=True)
            session.run(
                "cargo",
                "clippy",
                *scope,
                "--manifest-path",
                manifest,
                "--all-targets",
                "--",
                "-D",
                "warnings",
                external=True,
            )
    if (GO_APPS / "go.mod").exists():
        with session.chdir(GO_APPS):
            session.run("go", "vet", "./...", external=True)
            unformatted = session.run("gofmt", "-l", ".", external=True, silent=True)
            if unformatted and unformatted.strip():
                session.error(f"gofmt would reformat: {unformatted.split()}")
