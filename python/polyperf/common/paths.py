"""Where the checkout's parts live: the apps' sources and the project-built tools; a suite's name from its file."""

from __future__ import annotations

from pathlib import Path

__all__ = ["GO_APPS", "REPO_ROOT", "RUST_APPS", "TOOLS_DIR", "suite_of"]

REPO_ROOT = Path(__file__).resolve().parents[3]
RUST_APPS = REPO_ROOT / "rust_apps"
GO_APPS = REPO_ROOT / "go_apps"
# Load generators and renderers the project installs itself (cargo install / go install, pinned).
TOOLS_DIR = REPO_ROOT / ".tools"


def suite_of(nodeid_or_path: str | Path) -> str:
    """`suites/test_io_buffering.py::test_x[a]` -> `io_buffering`: a suite is the file `test_<name>.py`."""
    return Path(str(nodeid_or_path).split("::", 1)[0]).stem.removeprefix("test_")
