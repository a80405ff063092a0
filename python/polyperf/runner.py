"""`polyperf.run(...)`: run suites through pytest into a fresh run directory, then write the report.

pytest runs in a child process so a crashing extension or a Ctrl-C cannot take the run directory
with it: whatever rows were recorded stay in `results.jsonl` and are finalized here. This process owns the run
(`record.run.Run`): it writes env.json, and the child's additions (suite times, the seed, notes) reach it through
the run's additions file. SIGINT, SIGTERM and SIGHUP are recorded by the run and forwarded to the child; an
interrupted run is marked so in `env.json` and at the top of its report.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polyperf.common import procs, steps
from polyperf.common.paths import suite_of
from polyperf.common.profiles import get_profile
from polyperf.progress import Progress
from polyperf.record.run import Run
from polyperf.record.run_dir import UnreadableLines, log_line, unreadable_note

__all__ = ["RunOutcome", "available_suites", "find_suites_dir", "run"]

# What the first `polyperf run` of every suite is expected to take here (later runs say their own last time):
# the README's figures for a shared 2-core VM, builds cached; a first run also builds (each build says so).
_EXPECTED = {("quick", True): "about 8 min on 2 cores, plus first builds", ("smoke", True): "about 3 min on 2 cores"}
STOP_GRACE = 12.0  # seconds a signalled pytest gets to tear down its servers before it is killed


@dataclass(frozen=True)
class RunOutcome:
    run_dir: Path
    pytest_exit_code: int
    report: Path | None
    interrupted: str | None = None  # the signal that stopped the run early, e.g. "SIGTERM"

    @property
    def ok(self) -> bool:
        return self.pytest_exit_code == 0


def find_suites_dir(start: Path | None = None) -> Path:
    """`suites/` of the checkout: next to the working directory, or the source tree of an editable install."""
    candidates = [Path(start or Path.cwd()) / "suites", Path(__file__).resolve().parents[2] / "suites"]
    for candidate in candidates:
        if (candidate / "conftest.py").exists():
            return candidate
    raise FileNotFoundError(
        "cannot find the polyperf suites/ directory: run from the repository root or pass --suites-dir"
    )


def available_suites(suites_dir: Path | None = None) -> list[str]:
    folder = suites_dir or find_suites_dir()
    return sorted(suite_of(p) for p in folder.glob("test_*.py"))


def _suite_files(suites: Sequence[str], suites_dir: Path) -> list[Path]:
    known = available_suites(suites_dir)
    unknown = [s for s in suites if s not in known]
    if unknown:
        raise ValueError(f"unknown suite(s) {', '.join(unknown)}; available: {', '.join(known)}")
    return [suites_dir / f"test_{s}.py" for s in (suites or known)]


class _Forward:
    """SIGINT, SIGTERM and SIGHUP, once the run has recorded them, are passed on to the pytest child (in its own
    process group, so a terminal's Ctrl-C reaches it only this way)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.first_at: float | None = None

    def __call__(self, signum: int) -> None:
        self.first_at = self.first_at or time.monotonic()
        # pytest turns SIGINT and SIGTERM into an orderly stop (fixtures tear down, rows are finalized)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGINT if signum == signal.SIGINT else signal.SIGTERM)


def _echo_new(log: Any, quiet: bool, progress: Progress | None = None) -> None:
    chunk = log.read()
    if chunk and not quiet:
        if progress is not None:
            progress.clear()
        sys.stdout.write(chunk)
        sys.stdout.flush()
    if progress is not None and not quiet:
        progress.draw()


def _stream(
    cmd: list[str], run: Run, cwd: Path, quiet: bool, progress: Progress | None = None
) -> tuple[int, str | None]:
    """Runs pytest with its output in the run's log (echoed from there: a pipe would break the child's
    teardown if this process died). Returns (exit code, name of the signal that interrupted it, if any).

    pytest runs in its own process group with a parent-death signal, so it stops even on a SIGKILL of this
    process; signals this process receives are forwarded, and a pytest that has not stopped `STOP_GRACE`
    seconds after one is killed (its servers and load generators die with it)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    log_path = run.run_dir / "logs" / "pytest.log"
    proc = procs.spawn(cmd, log_path=log_path, cwd=cwd, env=env)
    forward = _Forward(proc)
    with log_path.open("r", encoding="utf-8", errors="replace") as log, run.signals_handled(forward):
        while proc.poll() is None:
            _echo_new(log, quiet, progress)
            if forward.first_at is not None and time.monotonic() - forward.first_at > STOP_GRACE:
                procs.stop(proc, grace=2.0, sig=signal.SIGKILL)
            time.sleep(0.1)
        _echo_new(log, quiet)
        if progress is not None:
            progress.clear()
    return proc.returncode, run.interrupted


def run(
    suites: Sequence[str] = (),
    *,
    profile: str = "quick",
    out: str | os.PathLike[str] = "reports",
    suites_dir: str | os.PathLike[str] | None = None,
    pytest_args: Sequence[str] = (),
    report: bool = True,
    quiet: bool = False,
) -> RunOutcome:
    """Runs the named suites (all by default) and returns where the results and report are."""
    get_profile(profile)  # fail on a bad profile name before creating anything
    folder = Path(suites_dir) if suites_dir else find_suites_dir()
    files = _suite_files(list(suites), folder)
    available = available_suites(folder)
    names = [suite_of(f) for f in files]
    run_ = Run.create(Path(out).resolve(), latest=True, profile=profile, suites=names)
    run_dir = run_.run_dir
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        *map(str, files),
        f"--polyperf-profile={profile}",
        f"--polyperf-run-dir={run_dir}",
        "-v",
        "-rA",
        "--color=yes",
        *pytest_args,
    ]
    progress = Progress(run_dir, profile)
    key = f"polyperf run --profile {profile} {' '.join(names)}"
    if not quiet:
        what = f"running {len(names)} suite{'s' if len(names) > 1 else ''} ({profile} profile) into {run_dir}"
        steps.announce(steps.describe(what, key, _EXPECTED.get((profile, len(names) == len(available)))))
    started = time.monotonic()
    code, interrupted = _stream(cmd, run_, folder.parent, quiet, progress)
    if code == 0 and not interrupted:  # a failed or cut-short run is no estimate of the next
        steps.record(key, time.monotonic() - started)
    table = run_.finish()  # the child's env.json additions merged; `latest` points here since the start
    if (skipped := table.attrs.get("unreadable_lines")) and not quiet:
        print(f"polyperf: {unreadable_note(len(skipped))}", file=sys.stderr, flush=True)
    report_path = None
    # a SIGHUP means the terminal is gone: keep what was measured and leave the report to `polyperf report`
    if report and interrupted != "SIGHUP":
        from polyperf.report import write_report

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnreadableLines)  # said above in one line
            report_path = write_report(run_dir)
    if not interrupted:
        _add_to_history(run_dir, quiet)
    return RunOutcome(run_dir, code, report_path, interrupted)


def _add_to_history(run_dir: Path, quiet: bool) -> None:
    """A finished run joins the history (`polyperf history`): `POLYPERF_STORE`, else `history.duckdb` beside the
    runs; `POLYPERF_STORE=off` turns it off. A store that fails costs the run nothing: one line, in its log too."""
    if os.environ.get("POLYPERF_STORE") == "off":
        return
    try:
        from polyperf.store import add_runs, open_store

        outcome = add_runs(open_store(out=run_dir.parent.parent), [run_dir])[0][1]
    except Exception as exc:  # the run is measured and written: nothing here may lose it
        outcome = f"not stored: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
    if outcome.startswith("not stored"):
        log_line(run_dir, f"history: {outcome}")
        if not quiet:
            print(f"polyperf: history: {outcome}", file=sys.stderr, flush=True)
