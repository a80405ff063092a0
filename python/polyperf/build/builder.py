"""Builds apps per variant with cargo or go, caches by source state, and measures what a build costs
(wall time, binary size). A build is skipped when the sources, toolchain and variant are unchanged
and the binary is still there; the recorded time is then that of the build which made it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

from polyperf.build.registry import App, get_app
from polyperf.common import procs
from polyperf.common.logs import log_tail
from polyperf.common.paths import GO_APPS, RUST_APPS
from polyperf.common.tools import require_tool
from polyperf.errors import BuildFailed

__all__ = ["BuildResult", "build"]

_SOURCE_SUFFIXES = {".rs", ".go", ".toml", ".lock", ".mod", ".sum"}


@dataclass(frozen=True)
class BuildResult:
    app: str
    variant: str
    binary: Path
    seconds: float
    binary_bytes: int
    cached: bool


def _toolchain_version(tool: str) -> str:
    args = [tool, "version"] if tool == "go" else ["rustc", "--version"]
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    return done.stdout.strip()


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


def _fingerprint(app: App, variant: str) -> str:
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
    digest.update(repr((variant, spec, _toolchain_version("go" if app.language == "go" else "cargo"))).encode())
    return digest.hexdigest()


def _command(app: App, variant: str) -> tuple[list[str], Path, dict[str, str]]:
    spec = app.variants[variant]
    env = dict(os.environ)
    if app.language == "rust":
        cmd = ["cargo", "build", "--locked", "--profile", str(spec.cargo_profile), "-p", app.name, "--bin", app.name]
        if spec.features:
            cmd += ["--features", ",".join(spec.features)]
        if spec.rustflags:
            env["RUSTFLAGS"] = spec.rustflags
        if spec.own_target_dir:
            env["CARGO_TARGET_DIR"] = str(app.target_dir(variant))
        return cmd, RUST_APPS, env
    app.binary(variant).parent.mkdir(parents=True, exist_ok=True)
    cmd = ["go", "build", "-trimpath", "-o", str(app.binary(variant)), f"./cmd/{app.name}"]
    return cmd, GO_APPS, env


def build(spec: str, *, force: bool = False, log_dir: Path | None = None) -> BuildResult:
    """Builds `app[:variant]` (release by default) unless an up-to-date binary exists."""
    app, variant = get_app(spec)
    require_tool("cargo" if app.language == "rust" else "go")
    binary = app.binary(variant)
    stamp = binary.with_name(f".{binary.name}.{variant}.polyperf-build.json")
    fingerprint = _fingerprint(app, variant)
    if not force and binary.exists() and stamp.exists():
        saved = json.loads(stamp.read_text())
        if saved.get("fingerprint") == fingerprint:
            return BuildResult(app.name, variant, binary, saved["seconds"], binary.stat().st_size, cached=True)
    cmd, cwd, env = _command(app, variant)
    if app.variants[variant].own_target_dir:  # a clean build: its time is what these settings cost
        shutil.rmtree(app.target_dir(variant), ignore_errors=True)
    log = Path(log_dir or tempfile.mkdtemp(prefix="polyperf-build-")) / f"build-{app.name}-{variant}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"$ {' '.join(cmd)}\n")
    started = time.perf_counter()
    code = procs.run(cmd, log_path=log, cwd=cwd, env=env)  # a build never outlives the harness either
    seconds = time.perf_counter() - started
    if code != 0 or not binary.exists():
        raise BuildFailed(
            f"building {app.name}:{variant} failed ({' '.join(cmd)} in {cwd}; log {log}): {log_tail(log, 6)}"
        )
    stamp.write_text(json.dumps({"fingerprint": fingerprint, "seconds": seconds}))
    return BuildResult(app.name, variant, binary, seconds, binary.stat().st_size, cached=False)
