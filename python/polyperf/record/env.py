"""What machine and toolchains a run measured on (`env.json`), gathered by small tolerant collectors.

Each `collect_*` returns what it can and never raises: a missing `/proc` file or tool becomes None.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from polyperf.common.atomic import write_text_atomic
from polyperf.common.paths import REPO_ROOT
from polyperf.record.schema import SCHEMA_VERSION

__all__ = ["add_note", "collect_env", "suite_seconds", "write_env"]


def _command_output(*cmd: str, cwd: Path | None = None) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=20, cwd=cwd, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def collect_cpu() -> dict[str, Any]:
    model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {"cpu_model": model, "cpu_count": os.cpu_count(), "cpu_affinity": affinity}


def collect_memory() -> dict[str, Any]:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return {"memory_bytes": int(line.split()[1]) * 1024}
    except (OSError, ValueError, IndexError):
        pass
    return {"memory_bytes": None}


def collect_os() -> dict[str, Any]:
    return {"kernel": platform.release(), "os": platform.platform(), "machine": platform.machine()}


def collect_toolchains() -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "rustc": _command_output("rustc", "--version"),
        "cargo": _command_output("cargo", "--version"),
        "go": _command_output("go", "version"),
    }


def collect_git() -> dict[str, Any]:
    commit = _command_output("git", "rev-parse", "HEAD", cwd=REPO_ROOT)
    dirty = _command_output("git", "status", "--porcelain", cwd=REPO_ROOT)
    return {"git_commit": commit, "git_dirty": bool(dirty) if dirty is not None else None}


def collect_polyperf() -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    try:
        __version__ = version("polyperf")
    except PackageNotFoundError:  # run from a source tree that was never installed
        __version__ = None

    return {"polyperf_version": __version__, "schema_version": SCHEMA_VERSION}


COLLECTORS: list[Callable[[], dict[str, Any]]] = [
    collect_cpu,
    collect_memory,
    collect_os,
    collect_toolchains,
    collect_git,
    collect_polyperf,
]


def collect_env(**extra: Any) -> dict[str, Any]:
    """Everything the collectors find, plus `extra` (profile, suites, load settings...)."""
    env: dict[str, Any] = {}
    for collect in COLLECTORS:
        try:
            env.update(collect())
        except Exception as exc:  # a collector must never sink a run
            env[f"{collect.__name__}_error"] = str(exc)
    env.update(extra)
    return env


def write_env(run_dir: Path, **extra: Any) -> dict[str, Any]:
    """Writes (or extends) `env.json` in the run directory, replacing it whole (a signal mid-write leaves the
    old file or the new one)."""
    path = Path(run_dir) / "env.json"
    env = json.loads(path.read_text()) if path.exists() else collect_env()
    env.update(extra)
    write_text_atomic(path, json.dumps(env, indent=2, sort_keys=True, default=str) + "\n")
    return env


def add_note(run_dir: Path, note: str) -> None:
    """Adds a line to the run's `notes` in env.json (what was not measured and why, e.g. a missing tool); the
    report shows them at the top."""
    path = Path(run_dir) / "env.json"
    env = json.loads(path.read_text()) if path.exists() else {}
    notes = [*env.get("notes", []), note]
    write_env(run_dir, notes=list(dict.fromkeys(notes)))


def suite_seconds(durations: dict[str, float]) -> dict[str, float]:
    """Each suite's time (setup, call and teardown of its tests), by suite name: what a run of it costs."""
    totals: dict[str, float] = {}
    for nodeid, seconds in durations.items():
        name = nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py").removeprefix("test_")
        totals[name] = totals.get(name, 0.0) + seconds
    return {name: round(total, 1) for name, total in totals.items()}
