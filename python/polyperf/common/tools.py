"""Tools found on PATH or installed by the project at pinned versions into `.tools/` — the README's two
commands need no apt step for them."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from polyperf.common.paths import TOOLS_DIR
from polyperf.common.steps import step
from polyperf.errors import ToolchainMissing

__all__ = ["FIRST_BUILD", "cargo_install", "require_tool"]

_INSTALL_HINTS = {"cargo": "install Rust from https://rustup.rs", "go": "install Go from https://go.dev/dl"}
# What a first build took on a shared 2-core VM, said before one starts (later runs say their own last time).
FIRST_BUILD = {"oha": "about 4 min on 2 idle cores, 15 min on 2 busy ones"}


def require_tool(tool: str, hint: str | None = None) -> str:
    path = shutil.which(tool)
    if path is None:
        raise ToolchainMissing(f"`{tool}` not found on PATH: {hint or _INSTALL_HINTS.get(tool, 'install it')}")
    return path


def _installed_version(binary: Path) -> str | None:
    try:
        done = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=False, timeout=30)
    except OSError:
        return None
    words = (done.stdout or done.stderr).split()
    return words[-1] if words else None


def _install(cmd: list[str], log: Path, binaries: Sequence[Path], env: dict[str, str] | None = None) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    log.write_text(f"$ {' '.join(cmd)}\n{done.stdout}{done.stderr}")
    if done.returncode != 0 or not all(b.exists() for b in binaries):
        tail = " | ".join(done.stderr.strip().splitlines()[-5:])
        raise ToolchainMissing(f"`{' '.join(cmd)}` failed (log {log}): {tail}")


def cargo_install(
    crate: str,
    version: str,
    binaries: Sequence[str],
    *,
    root: Path = TOOLS_DIR,
    install: bool = True,
    check_version: bool = True,
) -> list[Path]:
    """`<root>/bin/<binary>` for each binary of `crate@version`, installed with `cargo install --locked`
    (the crate's own lock file: builds reproducibly on the pinned toolchain) when missing."""
    paths = [root / "bin" / b for b in binaries]
    fresh = all(p.exists() for p in paths) and (not check_version or _installed_version(paths[0]) == version)
    if fresh:
        return paths
    if not install:
        raise ToolchainMissing(f"{crate} {version} not installed in {root}")
    require_tool("cargo")
    cmd = ["cargo", "install", f"{crate}@{version}", "--locked", "--root", str(root)]
    what = f"building {crate} {version} with cargo install into {root}"
    with step(what, f"cargo install {crate}@{version}", FIRST_BUILD.get(crate)):
        _install(cmd, root / f"{crate}-install.log", paths)
    return paths
