"""Builds apps per variant with cargo or go, caches by source state, and measures what a build costs
(wall time, binary size). A build is skipped when the sources, toolchain, variant, command line, cargo
configuration and every environment variable that changes the binary are unchanged, and the binary is the
one that build wrote; the recorded time is then that of the build which made it."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import subprocess
import tempfile
import time
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from polyperf.build.lock import build_lock
from polyperf.build.registry import App, get_app
from polyperf.common import procs, steps
from polyperf.common.atomic import write_text_atomic
from polyperf.common.logs import log_tail
from polyperf.common.paths import GO_APPS, RUST_APPS
from polyperf.common.tools import require_tool
from polyperf.errors import BuildFailed

__all__ = ["BuildResult", "binary_env", "build", "build_app"]

_SOURCE_SUFFIXES = {".rs", ".go", ".toml", ".lock", ".mod", ".sum"}
# What changes a binary besides its sources: rustc/cargo flags, every CARGO_* setting (profile overrides,
# encoded rustflags, linker, incremental), the C compiler a build script runs (mimalloc is C: cc-rs reads
# CC/CFLAGS/..., also as TARGET_*, HOST_* and *_<target>), and Go's build settings.
_ENV_EXACT = frozenset(
    {"RUSTFLAGS", "RUSTC", "RUSTC_WRAPPER", "RUSTC_WORKSPACE_WRAPPER", "RUSTC_BOOTSTRAP", "RUSTUP_TOOLCHAIN"}
    | {"GOFLAGS", "GOAMD64", "GOARCH", "GOOS", "GOEXPERIMENT", "GOTOOLCHAIN", "CGO_ENABLED"}
)
_ENV_PREFIXES = ("CARGO_", "CGO_")
_CC_VARS = ("CC", "CXX", "AR", "ARFLAGS", "CFLAGS", "CXXFLAGS", "LDFLAGS", "CRATE_CC_NO_DEFAULTS")
# CARGO_* settings that change where or how verbosely cargo works, never what it produces (and registry
# tokens, which must not be hashed into files); CARGO_TARGET_DIR is the harness's own, part of the path.
_ENV_IGNORED_PREFIXES = (
    "CARGO_TERM_",
    "CARGO_HTTP_",
    "CARGO_NET_",
    "CARGO_REGISTRY_",
    "CARGO_REGISTRIES_",
    "CARGO_CACHE_",
    "CARGO_LOG",
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET_DIR",
    "CARGO_BUILD_JOBS",
)


def binary_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment variables of `environ` that change what a cargo or go build produces (pure)."""

    def counts(name: str) -> bool:
        if name.startswith(_ENV_IGNORED_PREFIXES):
            return False
        if name in _ENV_EXACT or name.startswith(_ENV_PREFIXES):
            return True
        return any(
            name == var or name.startswith(f"{var}_") or name in (f"TARGET_{var}", f"HOST_{var}") for var in _CC_VARS
        )

    return {name: environ[name] for name in sorted(environ) if counts(name)}


@dataclass(frozen=True)
class BuildResult:
    app: str
    variant: str
    binary: Path
    seconds: float
    binary_bytes: int
    cached: bool
    # CPU time of the build (user + system, every compiler process): on a busy machine the wall time grows with
    # the contention, this much less; None for a cached build made before it was recorded
    cpu_seconds: float | None = None


def _toolchain_version(tool: str, env: Mapping[str, str]) -> str:
    # rustc -vV: version, commit, host and LLVM version, as the build's own environment selects them
    args = [tool, "version"] if tool == "go" else ["rustc", "-vV"]
    done = subprocess.run(args, capture_output=True, text=True, check=False, env=dict(env))
    return done.stdout.strip()


def _cargo_configs(cwd: Path, env: Mapping[str, str]) -> list[Path]:
    """cargo's configuration files for a build in `cwd`: `.cargo/config[.toml]` there and in every parent
    directory, and in CARGO_HOME; they can set rustflags, profiles and the linker."""
    home = Path(env.get("CARGO_HOME") or Path.home() / ".cargo")
    folders = [*(d / ".cargo" for d in (cwd, *cwd.parents)), home]
    return [f / name for f in folders for name in ("config", "config.toml") if (f / name).is_file()]


def _source_roots(app: App) -> list[Path]:
    """What an app's binary is built from: for Rust the workspace's own files, the app's crate and the
    workspace crates it depends on (so a change elsewhere in the workspace does not force the build-settings
    variants into a clean rebuild); for Go the whole module."""
    if app.language != "rust":
        return [GO_APPS]
    manifest = tomllib.loads((app.source_dir / "Cargo.toml").read_text())
    local = [
        RUST_APPS / name for name in manifest.get("dependencies", {}) if (RUST_APPS / name / "Cargo.toml").exists()
    ]
    return [*sorted(RUST_APPS.glob("*.toml")), RUST_APPS / "Cargo.lock", app.source_dir, *local]


def _fingerprint(app: App, variant: str, cmd: list[str], cwd: Path, env: Mapping[str, str]) -> str:
    skip = {"target", "bin", ".git"}
    digest = hashlib.sha256()
    for root in _source_roots(app):
        paths = [root] if root.is_file() else []
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d not in skip)  # prune every target/
            paths += [Path(folder) / name for name in sorted(files)]
        for path in paths:
            if path.suffix in _SOURCE_SUFFIXES and path.exists():
                digest.update(str(path.relative_to(root.parent)).encode() + b"\0" + path.read_bytes() + b"\0")
    spec = app.variants[variant]
    toolchain = _toolchain_version("go" if app.language == "go" else "cargo", env)
    configs = [(str(p), p.read_bytes()) for p in _cargo_configs(cwd, env)] if app.language == "rust" else []
    digest.update(repr((variant, spec, toolchain, cmd, sorted(binary_env(env).items()), configs)).encode())
    return digest.hexdigest()


def _command(app: App, variant: str) -> tuple[list[str], Path, dict[str, str]]:
    spec = app.variants[variant]
    env = dict(os.environ)
    if app.language == "rust":
        binary = spec.binary_name or app.name
        cmd = ["cargo", "build", "--locked", "--profile", str(spec.cargo_profile), "-p", app.name, "--bin", binary]
        if spec.features:
            cmd += ["--features", ",".join(spec.features)]
        if spec.rustflags:  # added to the user's own flags (a linker choice, say), which stay in the fingerprint
            env["RUSTFLAGS"] = " ".join(f for f in (env.get("RUSTFLAGS", "").strip(), spec.rustflags) if f)
        if spec.own_target_dir:
            env["CARGO_TARGET_DIR"] = str(app.target_dir(variant))
        return cmd, RUST_APPS, env
    app.binary(variant).parent.mkdir(parents=True, exist_ok=True)
    cmd = ["go", "build", "-trimpath", "-o", str(app.binary(variant)), f"./cmd/{app.name}"]
    return cmd, GO_APPS, env


def _binary_id(binary: Path) -> list[int]:
    stat = binary.stat()
    return [stat.st_size, stat.st_mtime_ns]


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _cached(binary: Path, stamp: Path, fingerprint: str) -> dict | None:
    """The stamp of the build if `binary` is the very file a build with this fingerprint wrote (a binary
    rebuilt by hand with other flags since then has another size or mtime), else None."""
    if not binary.exists() or not stamp.exists():
        return None
    try:
        saved = json.loads(stamp.read_text())
    except json.JSONDecodeError:
        return None
    if saved.get("fingerprint") != fingerprint or saved.get("binary") != _binary_id(binary):
        return None
    return saved


def _announce(app: App, variant: str, cmd: list[str], stamp: Path) -> None:
    """One line before a build starts, with its last time (the step cache, else the stamp of the build being
    replaced); a clean build of its own says what such builds took here."""
    try:
        last = float(json.loads(stamp.read_text())["seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        last = None
    clean = app.variants[variant].own_target_dir
    what = f"building {app.name}:{variant} with {' '.join(cmd[:2])}" + (", clean" if clean else "")
    expected = "about 1.5–3 min on 2 cores" if clean else None  # the build_profiles variants, measured here
    steps.announce(steps.describe(what, f"build {app.name}:{variant}", expected, last=last))


def build(spec: str, *, force: bool = False, log_dir: Path | None = None) -> BuildResult:
    """Builds `app[:variant]` (release by default) unless an up-to-date binary exists."""
    app, variant = get_app(spec)
    return build_app(app, variant, force=force, log_dir=log_dir)


def build_app(app: App, variant: str, *, force: bool = False, log_dir: Path | None = None) -> BuildResult:
    """`build` for a registry entry: cached unless the fingerprint or the binary changed, or `force`."""
    require_tool("cargo" if app.language == "rust" else "go")
    binary = app.binary(variant)
    stamp = binary.with_name(f".{binary.name}.{variant}.polyperf-build.json")
    cmd, cwd, env = _command(app, variant)
    fingerprint = _fingerprint(app, variant, cmd, cwd, env)
    saved = None if force else _cached(binary, stamp, fingerprint)
    if saved is not None:
        return BuildResult(
            app.name, variant, binary, saved["seconds"], binary.stat().st_size, True, saved.get("cpu_seconds")
        )
    with build_lock(_lock_target(app, variant), f"{app.name}:{variant}"):
        # after any wait: the process that held the lock may have just built this very binary
        saved = None if force else _cached(binary, stamp, fingerprint)
        if saved is not None:
            size = binary.stat().st_size
            return BuildResult(app.name, variant, binary, saved["seconds"], size, True, saved.get("cpu_seconds"))
        return _run_build(app, variant, cmd, cwd, env, stamp, fingerprint, log_dir)


def _lock_target(app: App, variant: str) -> Path:
    """The folder a build writes in: the variant's own cargo target folder, the workspace's, or Go's bin/."""
    return app.target_dir(variant) if app.language == "rust" else app.binary(variant).parent


def _run_build(
    app: App,
    variant: str,
    cmd: list[str],
    cwd: Path,
    env: dict[str, str],
    stamp: Path,
    fingerprint: str,
    log_dir: Path | None,
) -> BuildResult:
    binary = app.binary(variant)
    _announce(app, variant, cmd, stamp)
    if app.variants[variant].own_target_dir:  # a clean build: its time is what these settings cost
        shutil.rmtree(app.target_dir(variant), ignore_errors=True)
    log = Path(log_dir or tempfile.mkdtemp(prefix="polyperf-build-")) / f"build-{app.name}-{variant}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"$ {' '.join(cmd)}\n")
    started, cpu_before = time.perf_counter(), _children_cpu_s()
    code = procs.run(cmd, log_path=log, cwd=cwd, env=env)  # a build never outlives the harness either
    seconds, cpu_seconds = time.perf_counter() - started, _children_cpu_s() - cpu_before
    if code != 0 or not binary.exists():
        raise BuildFailed(
            f"building {app.name}:{variant} failed ({' '.join(cmd)} in {cwd}; log {log}): {log_tail(log, 6)}"
        )
    saved = {"fingerprint": fingerprint, "seconds": seconds, "cpu_seconds": cpu_seconds, "binary": _binary_id(binary)}
    write_text_atomic(stamp, json.dumps(saved))
    steps.record(f"build {app.name}:{variant}", seconds)
    return BuildResult(app.name, variant, binary, seconds, binary.stat().st_size, False, cpu_seconds)
