"""The tail of a child's log, on one line, for one-line error messages."""

from __future__ import annotations

from pathlib import Path

__all__ = ["log_tail"]


def log_tail(path: Path, lines: int = 8) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return f"(no log at {path})"
    return " | ".join(text[-lines:]) or f"(empty log {path})"
