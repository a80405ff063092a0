"""Where a long run is: the suite, the test, the time spent and an estimate of what remains, on one status line
under pytest's own output (a terminal only; quiet under CI or when piped).

The pytest plugin writes `progress.json` (the test under way, its index, the total) and, at the end,
`durations.json` (seconds per test); the estimate uses the durations of the newest earlier run of the same
profile, and the share of tests done where there is none.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import TextIO

from polyperf.common.paths import suite_of
from polyperf.record.run_dir import DURATIONS, ENV, PROGRESS

__all__ = ["Progress", "previous_durations"]


def previous_durations(run_dir: Path, profile: str) -> dict[str, float]:
    """Seconds per test id from the newest earlier run of `profile` that recorded them."""
    for other in sorted(run_dir.parent.iterdir(), reverse=True):
        path = other / DURATIONS
        if other == run_dir or not path.exists():
            continue
        try:
            env = json.loads((other / ENV).read_text())
            if env.get("profile") == profile:
                return {k: float(v) for k, v in json.loads(path.read_text()).items()}
        except (OSError, ValueError):
            continue
    return {}


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return (
        f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        if seconds >= 3600
        else (f"{seconds // 60}:{seconds % 60:02d}")
    )


class Progress:
    """`draw()` repaints the status line; `clear()` removes it before other output is written."""

    def __init__(self, run_dir: Path, profile: str, stream: TextIO | None = None) -> None:
        self.path = run_dir / PROGRESS
        # read sys.stdout when the run starts, not at import: pytest and notebooks replace it
        self.stream = stream if stream is not None else sys.stdout
        self.enabled = bool(self.stream and self.stream.isatty()) and not os.environ.get("CI")
        self.history = previous_durations(run_dir, profile) if self.enabled else {}
        self.started = time.monotonic()
        self._shown = False

    def line(self) -> str | None:
        try:
            state = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None
        elapsed = time.monotonic() - self.started
        done, total, nodeid = int(state["index"]), int(state["total"]), str(state["nodeid"])
        suite, _, test = nodeid.partition("::")
        remaining = [t for t in state.get("pending", []) if t in self.history]
        if remaining and len(remaining) == len(state.get("pending", [])):
            left = sum(self.history[t] for t in remaining)
        else:  # no history for some tests: assume the rest takes as long per test as what is done so far
            left = elapsed / max(done, 1) * (total - done) if done else None
        estimate = f", ~{_clock(left)} left" if left is not None else ""
        name = suite_of(suite)
        return f"polyperf: {name} · {test} · test {done + 1}/{total} · {_clock(elapsed)} elapsed{estimate}"

    def draw(self) -> None:
        if not self.enabled:
            return
        text = self.line()
        if text:
            self.stream.write("\r\033[K\033[7m" + text[:200] + "\033[0m")
            self.stream.flush()
            self._shown = True

    def clear(self) -> None:
        if self._shown:
            self.stream.write("\r\033[K")
            self._shown = False
