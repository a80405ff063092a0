"""What machine and toolchains a run measured on (`env.json`), gathered by small tolerant collectors, and who
writes it (one process while the run is under way). The record's typed form is `RunEnv` (`env_record.py`).

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
from polyperf.common.paths import REPO_ROOT, suite_of
from polyperf.common.procs import pid_running
from polyperf.record.env_record import ENV_SCHEMA_VERSION, RunEnv
from polyperf.record.run_dir import ENV, ENV_ADDITIONS, OWNER, load_env, merge_env
from polyperf.record.schema import SCHEMA_VERSION

__all__ = [
    "ENV_SCHEMA_VERSION",
    "RunEnv",
    "add_note",
    "collect_env",
    "merge_additions",
    "owned_elsewhere",
    "read_env",
    "suite_seconds",
    "write_env",
]


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


# --- who writes env.json ----------------------------------------------------------------------------------
# One process writes env.json while a run is under way: the one whose pid is in the run's `owner.pid` (the `Run`
# that made the folder: `polyperf run`, a plain pytest session, a CLI command). Any other process (the pytest child
# of `polyperf run`) writes its additions (suite times, the seed, notes, a signal) to `env.additions.json`, which
# the owner merges when it finishes and `load_env` merges meanwhile. With no owner named, the writer is the owner.


def _owner(run_dir: Path) -> int | None:
    try:
        return int((Path(run_dir) / OWNER).read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None


def owned_elsewhere(run_dir: Path) -> bool:
    """Whether another live process owns this run's env.json (its pid in `owner.pid`)."""
    pid = _owner(run_dir)
    return pid is not None and pid != os.getpid() and pid_running(pid)  # a killed owner can write no more


def _read_object(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def write_env(run_dir: Path, **extra: Any) -> dict[str, Any]:
    """Extends `env.json` (collected afresh when there is none) with `extra`, or, in a process that does not own
    the run, its additions file; either is replaced whole (a signal mid-write leaves the old file or the new one).
    Returns what that file now holds."""
    run_dir = Path(run_dir)
    if owned_elsewhere(run_dir):
        path, env = run_dir / ENV_ADDITIONS, _read_object(run_dir / ENV_ADDITIONS)
        env = merge_env(env, extra)
    else:
        if _owner(run_dir) not in (None, os.getpid()):  # the owner died: this process writes env.json now
            merge_additions(run_dir)
        path = run_dir / ENV
        env = json.loads(path.read_text()) if path.exists() else collect_env()
        env.update(extra)
    write_text_atomic(path, json.dumps(env, indent=2, sort_keys=True, default=str) + "\n")
    return env


def merge_additions(run_dir: Path) -> None:
    """The owner's last word: other processes' additions merged into env.json, their file removed."""
    run_dir = Path(run_dir)
    additions = run_dir / ENV_ADDITIONS
    if not additions.exists():
        return
    try:
        extra = _read_object(additions)
    except ValueError:  # cut short by a kill: env.json keeps what the owner wrote
        extra = {}
    env = merge_env(_read_object(run_dir / ENV) if (run_dir / ENV).exists() else collect_env(), extra)
    write_text_atomic(run_dir / ENV, json.dumps(env, indent=2, sort_keys=True, default=str) + "\n")
    additions.unlink()


def add_note(run_dir: Path, note: str) -> None:
    """Adds a line to the run's `notes` in env.json (what was not measured and why, e.g. a missing tool); the
    report shows them at the top."""
    if owned_elsewhere(run_dir):
        write_env(run_dir, notes=[note])  # merged with the owner's notes, each once
        return
    path = Path(run_dir) / ENV
    env = json.loads(path.read_text()) if path.exists() else {}
    notes = [*env.get("notes", []), note]
    write_env(run_dir, notes=list(dict.fromkeys(notes)))


def read_env(path: str | os.PathLike[str] = "reports/latest") -> RunEnv:
    """The run's env.json as a typed record, upgraded from any version (additions not yet merged included)."""
    return RunEnv.from_json(load_env(path))


def suite_seconds(durations: dict[str, float]) -> dict[str, float]:
    """Each suite's time (setup, call and teardown of its tests), by suite name: what a run of it costs."""
    totals: dict[str, float] = {}
    for nodeid, seconds in durations.items():
        name = suite_of(nodeid)
        totals[name] = totals.get(name, 0.0) + seconds
    return {name: round(total, 1) for name, total in totals.items()}
