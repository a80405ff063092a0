"""Builds apps per variant with cargo or go, caches by source state, and measures what a build costs
(wall time, binary size). A build is skipped when the sources, toolchain and variant are unchanged
and the binary is still there; the recorded time is then that of the build which made it."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
import time
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


def _fingerprint(app: App, variant: str) -> str:
    root = RUST_APPS if app.language == "rust" else GO_APPS
    skip = {"target", "bin", ".git"}
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if (rel.parts and rel.parts[0] in skip) or not path.is_file() or path.suffix not in _SOURCE_SUFFIXES:
            continue
        digest.update(str(rel).encode() + b"\0" + path.read_bytes() + b"\0")
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
