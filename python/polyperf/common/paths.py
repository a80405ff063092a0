"""Where the checkout's parts live: the apps' sources and the project-built tools."""

from __future__ import annotations

from pathlib import Path

__all__ = ["GO_APPS", "REPO_ROOT", "RUST_APPS", "TOOLS_DIR"]

REPO_ROOT = Path(__file__).resolve().parents[3]
RUST_APPS = REPO_ROOT / "rust_apps"
GO_APPS = REPO_ROOT / "go_apps"
# Load generators and renderers the project installs itself (cargo install / go install, pinned).
TOOLS_DIR = REPO_ROOT / ".tools"
