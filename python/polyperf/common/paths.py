"""Where the checkout's parts live: the apps' sources and the project-built tools; a suite's name from its file."""

from __future__ import annotations

from pathlib import Path

__all__ = ["GO_APPS", "LOGS_GUIDE", "LOG_PARTS", "REPO_ROOT", "RUST_APPS", "TOOLS_DIR", "log_part", "suite_of"]

REPO_ROOT = Path(__file__).resolve().parents[3]
RUST_APPS = REPO_ROOT / "rust_apps"
GO_APPS = REPO_ROOT / "go_apps"
# Load generators and renderers the project installs itself (cargo install / go install, pinned).
TOOLS_DIR = REPO_ROOT / ".tools"

# A run's logs/ folder, one part per component: a person looks for "the log" of one thing and finds it by name.
LOG_PARTS = {
    "servers": "one log per server process started (and PostgreSQL's)",
    "builds": "one log per build of an app",
    "load": "one folder per load generator (oha, wrk, bombardier, locust, drill) with its raw per-call files",
    "counts": "the counting servers' allocation and syscall traces",
    "benches": "one folder per Go or Cargo benchmark suite: its build and each repeat's own output",
}
LOGS_GUIDE = (
    "logs: polyperf.log (this log: the run's own lines), pytest.log (pytest's output, every suite), "
    "<generator>.log (one line per load run of that generator), "
    "workers-<suite>.log (the microbenchmarks' worker processes), "
    + ", ".join(f"{name}/ ({what})" for name, what in LOG_PARTS.items())
)


def log_part(log_dir: Path, part: str, *sub: str) -> Path:
    """`log_dir/part/sub...`, made if missing: where a component's files go inside a run's logs/ folder."""
    if part not in LOG_PARTS:
        raise ValueError(f"unknown part of a logs folder: {part!r}")
    folder = Path(log_dir, part, *sub)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def suite_of(nodeid_or_path: str | Path) -> str:
    """`suites/test_io_buffering.py::test_x[a]` -> `io_buffering`: a suite is the file `test_<name>.py`."""
    return Path(str(nodeid_or_path).split("::", 1)[0]).stem.removeprefix("test_")
