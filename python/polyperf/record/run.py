"""`Run`: one run folder from start to finish. It makes the folder, writes its environment record, points `latest`
at it, keeps the progress, records an interrupt and finalizes the table. `polyperf run`, the pytest plugin, the
CLI's `build` and `load`, and the gate (`polyperf ab` and its bank) all go through it (pyperf's `Runner` owns its
JSON file the same way). Nothing outside `record/` makes a folder, writes env.json, finalizes a table or points
`latest` itself (tests/run_owner_check.py, run by `nox -s lint`).

env.json has one writer while a run is under way: the process that made the folder (its pid is in `owner.pid`).
A process given a folder another one made (the pytest child of `polyperf run`) is `attach`ed: its additions (suite
times, the seed, notes, a signal) go to `env.additions.json`, which the owner merges when it finishes. An owner
that died (a SIGKILL) hands over: the attached process merges and writes env.json itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from polyperf.common.atomic import write_text_atomic
from polyperf.common.paths import LOGS_GUIDE
from polyperf.record.env import RunEnv, add_note, collect_env, merge_additions, owned_elsewhere, read_env, write_env
from polyperf.record.recorder import Recorder
from polyperf.record.run_dir import (
    DURATIONS,
    ENV,
    JSONL,
    OWNER,
    PRODUCERS,
    PROGRESS,
    RowWriter,
    finalize_run,
    log_line,
    new_run_dir,
    point_latest,
)

__all__ = ["STOP_SIGNALS", "Run"]

# The signals that stop a run in an orderly way: Ctrl-C, a CI time-out or `kill`, a closed terminal.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Run:
    """A run folder and the one object that changes it. `Run.create(out, **settings)` makes a new one and owns its
    env.json; `Run.attach(run_dir)` works in a folder another process made."""

    def __init__(self, run_dir: Path, *, created: bool = False) -> None:
        self.run_dir = Path(run_dir)
        self.created = created  # this process made the folder
        self.interrupted: str | None = None
        self.finished = False
        self._writer: RowWriter | None = None
        self._previous: dict[int, Any] = {}

    @classmethod
    def create(
        cls, out: str | os.PathLike[str], *, run_id: str | None = None, latest: bool = False, **settings: Any
    ) -> Run:
        """`out/runs/<run-id>/` with `logs/`, an empty `results.jsonl` and env.json (the machine as collected, and
        `settings`: profile, suites, command...); `latest` points `out/latest` at it now."""
        run_dir = new_run_dir(Path(out), run_id)
        write_text_atomic(run_dir / OWNER, f"{os.getpid()}\n")
        record = RunEnv.from_json(collect_env(**settings))  # typed: a setting of the wrong type fails here
        write_text_atomic(run_dir / ENV, json.dumps(record.as_json(), indent=2, sort_keys=True, default=str) + "\n")
        if latest:
            point_latest(run_dir)
        log_line(run_dir, LOGS_GUIDE)
        return cls(run_dir, created=True)

    @classmethod
    def attach(cls, run_dir: str | os.PathLike[str]) -> Run:
        """A folder made elsewhere (`polyperf run` hands its pytest child one): from now on it is a run, even if
        nothing is recorded."""
        run_dir = Path(run_dir)
        (run_dir / "logs").mkdir(parents=True, exist_ok=True)
        (run_dir / JSONL).touch()
        return cls(run_dir)

    @classmethod
    def resume(cls, run_dir: str | os.PathLike[str]) -> Run:
        """An earlier run, owned again by this process to add repeats to it (`polyperf run --continue`): refused in
        one line when it is being written by a live process, or was made on another commit or machine."""
        run_dir = cls.check_resumable(run_dir)
        write_text_atomic(run_dir / OWNER, f"{os.getpid()}\n")
        log_line(run_dir, f"continued by process {os.getpid()}")
        return cls(run_dir, created=True)

    @staticmethod
    def check_resumable(run_dir: str | os.PathLike[str]) -> Path:
        """The run folder, if `resume` may take it; else ValueError saying why in one line."""
        run_dir = Path(run_dir).resolve()
        if not (run_dir / ENV).exists():
            raise ValueError(f"{run_dir} is not a run folder (no {ENV})")
        if owned_elsewhere(run_dir):
            raise ValueError(f"{run_dir} is being written by another process ({OWNER})")
        here, there = collect_env(), read_env(run_dir).as_json()
        for key in ("git_commit", "cpu_model", "cpu_count", "kernel"):
            if here.get(key) != there.get(key):
                raise ValueError(
                    f"{run_dir.name} was made with {key} = {there.get(key)!r}, this machine and checkout have "
                    f"{here.get(key)!r}: a run continues only on the same commit and machine"
                )
        return run_dir

    # --- rows -------------------------------------------------------------------------------------------------
    @property
    def writer(self) -> RowWriter:
        if self._writer is None:
            self._writer = RowWriter(self.run_dir)
        return self._writer

    def recorder(self, suite: str) -> Recorder:
        """`record(metric, value, unit, case=..., ...)` for one suite's rows."""
        return Recorder(self.writer, suite)

    # --- the environment record -------------------------------------------------------------------------------
    @property
    def env(self) -> RunEnv:
        return read_env(self.run_dir)

    @property
    def owns_env(self) -> bool:
        """Whether this process writes env.json itself (no other live process made the run)."""
        return not owned_elsewhere(self.run_dir)

    def update_env(self, **fields: Any) -> None:
        """Sets fields of the environment record (through the owner when another process owns it)."""
        write_env(self.run_dir, **fields)

    def add_note(self, note: str) -> None:
        """What was not measured and why; the report shows notes at the top."""
        add_note(self.run_dir, note)

    # --- progress ---------------------------------------------------------------------------------------------
    def write_progress(self, state: Mapping[str, Any]) -> None:
        """`progress.json`: the test under way and those to come (`polyperf run`'s status line reads it)."""
        write_text_atomic(self.run_dir / PROGRESS, json.dumps(dict(state)))

    def write_durations(self, durations: Mapping[str, float]) -> None:
        """`durations.json`: seconds per test, the next run's estimate of what remains (added to those of the
        run's earlier pytest sessions: `polyperf run` runs one per suite)."""
        try:
            earlier = json.loads((self.run_dir / DURATIONS).read_text())
        except (OSError, ValueError):
            earlier = {}
        merged = {**(earlier if isinstance(earlier, dict) else {}), **durations}
        write_text_atomic(self.run_dir / DURATIONS, json.dumps(merged, indent=0))

    def write_producers(
        self,
        produced: Mapping[str, Mapping[str, set]],
        *,
        narrowing: Iterable[str] = (),
        top_up_s: Mapping[str, float] | None = None,
    ) -> None:
        """`producers.json`: for each test, the series (suite, case, implementation, variant, metric) it wrote and
        its repeats, merged with the run's earlier pytest sessions (a top-up adds repeats to a test's list). A
        top-up's session (`top_up_s`: its seconds per test) also keeps the repeats it added and what they cost
        (`added`, `added_s`), so that the first batch's cost per repeat stays known; `narrows`: the test's repeats
        loop over targets that a top-up narrows to those an open entry measures."""
        merged = read_producers(self.run_dir)
        narrowing = set(narrowing)
        for nodeid, seen in produced.items():
            entry = merged.setdefault(nodeid, {"series": [], "repeats": []})
            entry["series"] = sorted({*map(tuple, entry["series"]), *seen["series"]})
            entry["repeats"] = sorted({*entry["repeats"], *seen["repeats"]})
            if nodeid in narrowing:
                entry["narrows"] = True
            if top_up_s is not None:
                entry["added"] = sorted({*entry.get("added", []), *seen["repeats"]})
                entry["added_s"] = round(float(entry.get("added_s", 0.0)) + float(top_up_s.get(nodeid, 0.0)), 3)
        write_text_atomic(self.run_dir / PRODUCERS, json.dumps(merged, indent=0))

    # --- stopping ---------------------------------------------------------------------------------------------
    def mark_interrupted(self, name: str) -> None:
        """Records the signal that stopped the run (the first one only). Never raises: a failure goes to the
        run's log, never in the way of the orderly stop that follows."""
        if self.interrupted is not None:
            return
        self.interrupted = name
        try:
            write_env(self.run_dir, interrupted=name)
        except Exception as exc:
            log_line(self.run_dir, f"env.json: could not record the {name} that stopped the run: {exc}")

    def install_signal_handlers(
        self, then: Callable[[int], None], signals: Sequence[int] = STOP_SIGNALS
    ) -> dict[int, Any]:
        """The one way a run handles signals: each of `signals` is recorded at once as the run's interrupt (the
        teardown that follows may itself be cut short), then handed to `then`. Returns the previous handlers."""

        def handle(signum: int, _frame: object) -> None:
            self.mark_interrupted(signal.Signals(signum).name)
            then(signum)

        return {sig: signal.signal(sig, handle) for sig in signals}

    @contextlib.contextmanager
    def signals_handled(self, then: Callable[[int], None], signals: Sequence[int] = STOP_SIGNALS) -> Iterator[None]:
        """`install_signal_handlers` while inside; the previous handlers come back after."""
        previous = self.install_signal_handlers(then, signals)
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    # --- a command's run: `with Run.create(...) as run:` -------------------------------------------------------
    def __enter__(self) -> Run:
        """SIGTERM and SIGHUP stop the command the way Ctrl-C does (recorded, then KeyboardInterrupt), so the
        way out below keeps what was measured."""
        self._previous = self.install_signal_handlers(_stop_like_ctrl_c, (signal.SIGTERM, signal.SIGHUP))
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        """Finishes a run the command did not finish itself (an error, an interrupt: rows kept, `latest` left
        where it was); a Ctrl-C is recorded as the run's interrupt."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        if exc_type is KeyboardInterrupt:
            self.mark_interrupted("SIGINT")  # a SIGTERM or SIGHUP was recorded as itself already
        if not self.finished:
            self.finish()

    def write_table(self) -> pd.DataFrame:
        """The parquet and CSV tables rewritten from the rows so far (never by fewer rows), while the run goes on:
        `polyperf run` after each suite, `polyperf report` on a run cut short. Returns the table."""
        return finalize_run(self.run_dir)

    # --- the end ----------------------------------------------------------------------------------------------
    def finish(self, *, latest: bool = False) -> pd.DataFrame:
        """Merges other processes' env.json additions (as owner, or for an owner that died), writes the parquet and
        CSV tables from the rows, and points `latest` at the run when asked; returns the table."""
        if self.owns_env:
            try:
                merge_additions(self.run_dir)
            except Exception as exc:  # the rows matter more than the record's last additions
                log_line(self.run_dir, f"env.json: could not merge the additions of other processes: {exc}")
            if self.created:
                (self.run_dir / OWNER).unlink(missing_ok=True)
        table = finalize_run(self.run_dir)
        self.finished = True
        if latest:
            point_latest(self.run_dir)
        return table


def _stop_like_ctrl_c(_signum: int) -> None:
    raise KeyboardInterrupt


def read_producers(run_dir: Path) -> dict[str, dict[str, list]]:
    """The run's `producers.json` ({} when absent or unreadable: a run made before top-ups, or none recorded)."""
    try:
        data = json.loads((Path(run_dir) / PRODUCERS).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
