"""Long steps say what they do: a build or an install that takes more than a few seconds prints one line as it
starts, with how long it took last time (kept in `.tools/step-times.json`) or, the first time, how long it is
expected to take. Output goes to stderr, flushed, unless a sink is set (the pytest plugin sets one that gets
past pytest's capture).

Standard library only: noxfile.py loads this file by path before polyperf is installed.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["CACHE", "announce", "describe", "last_seconds", "record", "set_sink", "step"]

# beside the project-built tools (git-ignored); the same place as paths.TOOLS_DIR, computed here without importing
# polyperf, which noxfile.py cannot do before the install this module announces
CACHE = Path(__file__).resolve().parents[3] / ".tools" / "step-times.json"

_sink: Callable[[str], None] | None = None


def set_sink(sink: Callable[[str], None] | None) -> None:
    """Where `announce` writes (None: stderr)."""
    global _sink
    _sink = sink


def announce(line: str) -> None:
    if _sink is not None:
        _sink(line)
        return
    print(line, file=sys.stderr, flush=True)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min".replace(".0 min", " min")
    return f"{seconds / 3600:.1f} h"


def _load(cache: Path) -> dict[str, float]:
    try:
        data = json.loads(cache.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.items() if isinstance(v, int | float)} if isinstance(data, dict) else {}


def last_seconds(key: str, cache: Path = CACHE) -> float | None:
    """How long step `key` took the last time it completed here, if it ever did."""
    return _load(cache).get(key)


def record(key: str, seconds: float, cache: Path = CACHE) -> None:
    """Records the step's time (temp file + rename: concurrent runs never leave half a file). Best effort: a
    read-only checkout only loses the estimate."""
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cache.parent, prefix=f".{cache.name}.", suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({**_load(cache), key: round(seconds, 1)}, fh, indent=1, sort_keys=True)
        os.replace(tmp, cache)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def describe(
    what: str, key: str, expected: str | None = None, *, last: float | None = None, cache: Path = CACHE
) -> str:
    """`polyperf: building X (last time 95 s) …`: the time of step `key` in the cache, else `last` (a time kept
    elsewhere, such as a build stamp), else the expectation given (e.g. "about 4 min on 2 cores"), else none."""
    cached = last_seconds(key, cache)
    last = cached if cached is not None else last
    when = f"last time {_duration(last)}" if last is not None else expected
    return f"polyperf: {what}" + (f" ({when})" if when else "") + " …"


@contextlib.contextmanager
def step(what: str, key: str, expected: str | None = None, *, cache: Path = CACHE) -> Iterator[None]:
    """Announces a long step, then records how long it took when it succeeds."""
    announce(describe(what, key, expected, cache=cache))
    started = time.monotonic()
    yield
    record(key, time.monotonic() - started, cache)
