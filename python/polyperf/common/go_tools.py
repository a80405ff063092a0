"""Go tools built by the project at pinned versions into `.tools/bin`, from the Go module proxy, with the Go
toolchain the project already needs (benchstat, to read `polyperf export --format gobench`)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from polyperf.common.logs import log_tail
from polyperf.common.paths import TOOLS_DIR
from polyperf.common.tools import require_tool
from polyperf.errors import ToolchainMissing

__all__ = ["BENCHSTAT_VERSION", "ensure_benchstat", "go_build_pinned"]

# golang.org/x/perf has no release tags; this pseudo-version is its newest commit when the export was written.
BENCHSTAT_MODULE = "golang.org/x/perf"
BENCHSTAT_VERSION = "v0.0.0-20260908200009-22c9c6c9d4da"
BENCHSTAT_INSTALL = f"go install {BENCHSTAT_MODULE}/cmd/benchstat@{BENCHSTAT_VERSION}"


def go_build_pinned(module: str, version: str, package: str, name: str, *, root: Path = TOOLS_DIR) -> Path:
    """`<root>/bin/<name>`, built from `package` of `module@version` if missing or of another version.

    As for bombardier: a throwaway module `go get`s the pinned package (its dependencies as the module's go.mod
    selects them, checked by go.sum) and `go build`s it; `go install MODULE@VERSION` would also ask the proxy
    for the module's version list, which a proxy may refuse while serving the version itself."""
    binary, stamp = root / "bin" / name, root / f"{name}.version"
    wanted = f"{module} {version}"
    if binary.exists() and stamp.exists() and stamp.read_text().strip() == wanted:
        return binary
    go = require_tool("go")
    root.mkdir(parents=True, exist_ok=True)
    log = root / f"{name}-install.log"
    env = {**os.environ, "GOTOOLCHAIN": "local"}  # build with the installed Go, never download another
    with tempfile.TemporaryDirectory(dir=root, prefix=f"{name}-build-") as tmp, log.open("w") as out:
        for cmd in (
            [go, "mod", "init", f"polyperf.local/tools/{name}"],
            [go, "get", f"{package}@{version}"],
            [go, "build", "-trimpath", "-o", str(binary), package],
        ):
            out.write(f"$ {' '.join(cmd)}\n")
            out.flush()
            done = subprocess.run(cmd, cwd=tmp, env=env, stdout=out, stderr=subprocess.STDOUT, check=False, timeout=600)
            if done.returncode != 0:
                out.close()
                raise ToolchainMissing(
                    f"`{' '.join(cmd)}` failed (exit {done.returncode}; log {log}): {log_tail(log, 3)}"
                )
    stamp.write_text(wanted + "\n")
    return binary


def ensure_benchstat(*, root: Path = TOOLS_DIR) -> Path:
    """benchstat at BENCHSTAT_VERSION in `<root>/bin` (built on first use, a few seconds with modules cached)."""
    package = f"{BENCHSTAT_MODULE}/cmd/benchstat"
    return go_build_pinned(BENCHSTAT_MODULE, BENCHSTAT_VERSION, package, "benchstat", root=root)
