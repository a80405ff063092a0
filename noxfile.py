"""Entry points for people and CI. Every session installs what it needs into its own virtualenv.

nox -s tests            the CI test command (fast tests of the harness, extension and apps)
nox -s bench            the main job: build, run every suite (quick profile), write the report
nox -s bench -- --profile full io_buffering
nox -s lint             ruff (check + format), import contracts, one run-folder owner, clippy + rustfmt, go vet + gofmt
nox -s report -- RUN    re-render a run's report
nox -s compare -- A B   what changed from run A to run B (--fail-on-regression PCT for CI)
nox -s mutants          mutation testing of analyse/ and record/: `mutants: N% killed (K of M)`
nox -s docs             the documentation site (MkDocs, Material theme) built with --strict into site/
"""

from __future__ import annotations

import importlib.util
import shutil
import tomllib
from pathlib import Path
from types import ModuleType

import nox

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True

ROOT = Path(__file__).parent
RUST_APPS = ROOT / "rust_apps"
GO_APPS = ROOT / "go_apps"


def _load_steps() -> ModuleType:
    """polyperf's announcer of long steps (standard library only), loaded by path: polyperf is not installed
    when the first step starts."""
    path = ROOT / "python" / "polyperf" / "common" / "steps.py"
    spec = importlib.util.spec_from_file_location("polyperf_steps", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Each step longer than a few seconds prints one line to stderr as it starts, with its last time here (kept in
# .tools/step-times.json) or, the first time, what it took on a shared 2-core VM.
STEPS = _load_steps()
FIRST_TIME = {
    # measured here with the cores shared: dependencies 85 s, the extension's clean release build 3.7 min
    "install": "about 5 min on 2 cores the first time: dependencies, and a release build of the extension",
}


def _step(session: nox.Session, what: str, first_time: str | None, *args: str, **kwargs: object) -> None:
    with STEPS.step(what, f"nox -s {session.name}: {what}", first_time):
        session.run(*args, **kwargs)


def _install(session: nox.Session, extras: str = "") -> None:
    # Editable install: maturin compiles rust_ext/ in release mode into polyperf/_native.
    what = f"installing polyperf{extras} and its dependencies with pip; maturin builds the Rust extension"
    with STEPS.step(what, f"nox -s {session.name}: pip install -e .{extras}", FIRST_TIME["install"]):
        session.install("-e", f".{extras}")


# oha (crates.io, cargo install --locked) and bombardier (Go module proxy) are built into .tools/ at pinned
# versions: no apt step on a fresh machine. oha's cargo install announces itself; bombardier's build here.
_LOAD_TOOLS = """
from polyperf.common.steps import step
from polyperf.errors import ToolchainMissing
from polyperf.load import ensure_bombardier, ensure_oha

ensure_oha()
try:
    ensure_bombardier(install=False)
except ToolchainMissing:
    with step("building bombardier with go build into .tools/", "go build bombardier", "under a minute"):
        ensure_bombardier()
"""


def _install_load_tools(session: nox.Session) -> None:
    session.run("python", "-c", _LOAD_TOOLS)


def _require(session: nox.Session, tool: str, hint: str) -> None:
    if shutil.which(tool) is None:
        session.error(f"`{tool}` not found on PATH: {hint}")


@nox.session
def tests(session: nox.Session) -> None:
    """Fast correctness tests: Python (harness, extension, apps end to end), Rust and Go unit tests."""
    _require(session, "cargo", "install Rust (https://rustup.rs) to build the extension and the apps")
    _install(session, "[test]")
    _install_load_tools(session)
    what = "compiling and running the extension's Rust tests (cargo test)"
    _step(session, what, None, "cargo", "test", "--quiet", "--manifest-path", "rust_ext/Cargo.toml", external=True)
    if (RUST_APPS / "Cargo.toml").exists():
        what = "compiling and running the apps' Rust tests (cargo test --workspace, debug builds)"
        manifest = ["--manifest-path", "rust_apps/Cargo.toml"]
        _step(session, what, None, "cargo", "test", "--quiet", "--workspace", *manifest, external=True)
    if (GO_APPS / "go.mod").exists():
        _require(session, "go", "install Go 1.22+ to build the Go apps")
        with session.chdir(GO_APPS):
            what = "compiling and running the Go tests (go test ./...)"
            _step(session, what, None, "go", "test", "./...", external=True)
    what = "running the Python tests (pytest tests; the first run also builds the apps they start)"
    _step(session, what, None, "pytest", "tests", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """The main job: every suite on its defaults (quick profile), the answers after each suite, the report's path.
    The load generators are built by the first suite that loads a server, after the suites that need none."""
    _install(session)
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
    session.run("python", "tests/run_owner_check.py")  # one owner per run folder: names import-linter cannot see
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


@nox.session
def docs(session: nox.Session) -> None:
    """The documentation site from docs/ and mkdocs.yml, built with `mkdocs build --strict`: a broken link, a
    missing page or a page left out of the nav fails it. Needs only the `docs` extra, not polyperf's build."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        requirements = tomllib.load(f)["project"]["optional-dependencies"]["docs"]
    session.install(*requirements)
    # Material's notice about MkDocs 2 is advice, not a problem with these pages
    session.run("mkdocs", "build", "--strict", env={"NO_MKDOCS_2_WARNING": "1"})


def _stage_mutants(session: nox.Session) -> Path:
    """A copy of the project in mutmut 3's layout: it imports mutated code only from ./, src/ or source/,
    so python/polyperf (with the extension the install just built) becomes src/polyperf. Made anew each
    time: results cached from older code or older tests would make the share say what is no longer true."""
    stage = Path(session.create_tmp()) / "mutants-stage"
    shutil.rmtree(stage, ignore_errors=True)
    skip = shutil.ignore_patterns("__pycache__", ".pytest_cache", ".hypothesis")
    shutil.copytree(ROOT / "python" / "polyperf", stage / "src" / "polyperf", ignore=skip)
    shutil.copytree(ROOT / "tests", stage / "tests", ignore=skip)
    shutil.copy2(ROOT / "pyproject.toml", stage / "pyproject.toml")
    return stage


@nox.session
def mutants(session: nox.Session) -> None:
    """Mutation testing (mutmut) of analyse/ and record/ against their fast unit tests; the last line is
    `mutants: N% killed (K of M)` (a timeout counts as killed; a mutant no test reaches, as survived)."""
    import json

    _install(session, "[test]")
    session.install("mutmut>=3.8,<4")
    stage = _stage_mutants(session)
    with session.chdir(stage):
        # exit code 0 whatever survives: the share below is the result
        session.run("mutmut", "run", "--max-children", "2", *session.posargs)
    by_file = {}
    for meta in sorted((stage / "mutants" / "src").rglob("*.py.meta")):
        codes = list(json.loads(meta.read_text())["exit_code_by_key"].values())
        if codes:  # mutmut's exit codes: 1 and 3 killed, 36 and the SIGXCPU family timed out
            killed = sum(code in (1, 3, 36, 24, -24, 152, 255) for code in codes)
            by_file[str(meta.relative_to(stage / "mutants" / "src"))[: -len(".meta")]] = (killed, len(codes))
    for name, (killed, total) in by_file.items():
        session.log(f"{name}: {100 * killed / total:.0f}% killed ({killed} of {total})")
    killed, total = sum(k for k, _ in by_file.values()), sum(t for _, t in by_file.values())
    if not total:  # e.g. --install-only
        session.log("no mutant recorded yet")
        return
    print(f"mutants: {100 * killed / total if total else 0:.0f}% killed ({killed} of {total})")
