"""The pairs of `polyperf ab` sessions kept for the next session of the same experiment, so that a rerun continues the
confidence sequence instead of starting a fresh one (a fresh one would draw a fresh alpha on every rerun of an
undecided or failed CI job). It sits in the gate beside the session, and keeps its files beside the history store, under
`<out>/ab-sequences/`.

An experiment is: A's and B's commits (resolved ids), the harness's own commit (it holds the workloads), the
machine fingerprint the history store keys runs by (`store.records.fingerprint`), the suites, alpha and any test
environment given to B. Its pairs are one CSV file named by a hash of that key, appended pair by pair (an
interrupted session keeps its whole pairs), with the repeats numbered across sessions. An anytime-valid sequence
may be continued at any stopping time, so the guarantee holds over all sessions' pairs together. A sequence that
ended "inconsistent" (its pairs share no median) cannot be continued: its file is set aside and a new sequence
starts, said in the session's output. One session at a time holds an experiment (a lock file beside it).
"""

from __future__ import annotations

import csv
import fcntl
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pandas as pd

__all__ = ["COLUMNS", "DIRECTORY", "SequenceBusy", "StoredSequence", "experiment_key"]

DIRECTORY = "ab-sequences"
COLUMNS = ["session", "repeat", "suite", "case", "implementation", "metric", "unit", "variant", "value"]


class SequenceBusy(ValueError):
    """Another session of the same experiment holds its stored pairs (said in one line)."""


def experiment_key(parts: Mapping[str, Any]) -> str:
    """A short stable name of the experiment `parts` describe (commits, harness, machine, suites, alpha, env)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass
class StoredSequence:
    """The stored pairs of one experiment, opened for one session: `earlier` holds the pairs of the sessions before
    (repeats 0 .. `offset` - 1), `add` appends this session's pairs, numbered on from `offset`."""

    path: Path
    earlier: pd.DataFrame
    set_aside: Path | None = None
    _lock: IO[str] | None = None
    _out: IO[str] | None = None

    @classmethod
    def open(cls, out: Path, parts: Mapping[str, Any]) -> StoredSequence:
        folder = Path(out) / DIRECTORY
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{experiment_key(parts)}.csv"
        lock = path.with_suffix(".lock").open("w", encoding="utf-8")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            raise SequenceBusy(f"another ab session of these revisions on this machine holds {path}") from None
        path.with_suffix(".json").write_text(json.dumps(dict(parts), indent=1, default=str), encoding="utf-8")
        return cls(path, _read(path), _lock=lock)

    @property
    def offset(self) -> int:
        """How many pairs the earlier sessions measured (their repeats are 0 .. offset - 1)."""
        return int(self.earlier["repeat"].max()) + 1 if len(self.earlier) else 0

    def restart(self) -> None:
        """Sets the stored pairs aside (an inconsistent sequence is not continued) and starts a new sequence."""
        self.set_aside = self.path.with_name(f"{self.path.stem}.inconsistent-{self.offset}.csv")
        os.replace(self.path, self.set_aside)
        self.earlier = self.earlier.iloc[0:0]

    def add(self, session: str, rows: Iterable[Mapping[str, Any]]) -> None:
        """Appends one whole pair's rows (repeats already numbered on from `offset`), flushed at once."""
        if self._out is None:
            new = not self.path.exists()
            self._out = self.path.open("a", encoding="utf-8", newline="")
            if new:
                csv.writer(self._out).writerow(COLUMNS)
        writer = csv.writer(self._out)
        for row in rows:
            writer.writerow([session if c == "session" else row[c] for c in COLUMNS])
        self._out.flush()

    def close(self) -> None:
        for handle in (self._out, self._lock):
            if handle is not None:
                handle.close()
        self._out = self._lock = None

    def __enter__(self) -> StoredSequence:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _read(path: Path) -> pd.DataFrame:
    if not path.exists():
        return pd.DataFrame(columns=COLUMNS)
    # a line cut short by a crash is skipped; its pair then lacks a side and is dropped whole when pairs are joined
    frame = pd.read_csv(path, dtype={"session": str, "implementation": str}, on_bad_lines="skip")
    frame["implementation"] = frame["implementation"].fillna("")
    frame["value"] = pd.to_numeric(frame["value"], errors="coerce")
    frame["repeat"] = pd.to_numeric(frame["repeat"], errors="coerce")
    return frame.dropna(subset=["value", "repeat"]).astype({"repeat": int})
