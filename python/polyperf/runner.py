"""`polyperf.run(...)`: run suites through pytest into a fresh run directory, with the answers as they come.

Suites run one pytest child each, those that need no server first (`SUITE_ORDER`): after each one the table is
finalized, the report and summary rewritten, and the claims decided so far printed, so the first verdicts come
within minutes while the server suites still run. Each suite builds what it needs inside its own child, so no build
overlaps another suite's measurement. pytest's output goes to the run's `logs/pytest.log` and is echoed, less
pytest-benchmark's table of raw timings (in the log; `benchmark_table=True` shows it).

pytest runs in a child process so a crashing extension or a Ctrl-C cannot take the run directory
with it: whatever rows were recorded stay in `results.jsonl` and are finalized here. This process owns the run
(`record.run.Run`): it writes env.json, and the child's additions (suite times, the seed, notes) reach it through
the run's additions file. SIGINT, SIGTERM and SIGHUP are recorded by the run and forwarded to the child; an
interrupted run is marked so in `env.json` and at the top of its report.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from polyperf.common import procs, steps
from polyperf.common.paths import suite_of
from polyperf.common.profiles import get_profile
from polyperf.progress import Progress
from polyperf.record.run import Run
from polyperf.record.run_dir import UnreadableLines, finalize_run, load_env, log_line, unreadable_note

__all__ = ["RunOutcome", "available_suites", "find_suites_dir", "run"]

# What the first `polyperf run` of every suite is expected to take here (later runs say their own last time):
# the README's figures for a shared 2-core VM, builds cached; a first run also builds (each build says so).
_EXPECTED = {("quick", True): "about 8 min on 2 cores, plus first builds", ("smoke", True): "about 3 min on 2 cores"}
STOP_GRACE = 12.0  # seconds a signalled pytest gets to tear down its servers before it is killed
# The order of the main job: the suites that need no server first (their answers come within minutes of the
# start), then the server suites, the quickest first. A suite not named here runs after these, by name.
SUITE_ORDER = (
    "io_buffering",
    "bson",
    "scheduler",
    "bson_server",
    "devices_postgres",
    "http_frameworks",
    "build_profiles",
)
NO_TESTS = 5  # pytest's exit code when a suite's tests were all deselected (`-k`): not a failure of the run


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
    """The suites' files in `SUITE_ORDER` (all suites when none are named)."""
    known = available_suites(suites_dir)
    unknown = [s for s in suites if s not in known]
    if unknown:
        raise ValueError(f"unknown suite(s) {', '.join(unknown)}; available: {', '.join(known)}")
    chosen = sorted(dict.fromkeys(suites or known), key=_order_key)
    return [suites_dir / f"test_{s}.py" for s in chosen]


def _order_key(suite: str) -> tuple[int, str]:
    return (SUITE_ORDER.index(suite) if suite in SUITE_ORDER else len(SUITE_ORDER), suite)


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


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_TABLE_START = re.compile(r"^-+ benchmark\b")  # pytest-benchmark's table: "---- benchmark 'group': 4 tests ----"
_TABLE_END = "OPS: Operations Per Second"  # the last line of its legend


class _Echo:
    """pytest's log, echoed to the terminal line by line as it grows, less pytest-benchmark's table of raw
    timings (kept in the log) unless asked for; the status line is repainted under it."""

    def __init__(self, log: IO[str], *, quiet: bool, table: bool, progress: Progress | None) -> None:
        self.log, self.quiet, self.table, self.progress = log, quiet, table, progress
        self.partial = ""
        self.in_table = False

    def _keep(self, line: str) -> bool:
        plain = _ANSI.sub("", line)
        if self.table:
            return True
        if not self.in_table and _TABLE_START.match(plain):
            self.in_table = True
        if self.in_table:
            self.in_table = _TABLE_END not in plain
            return False
        return True

    def pump(self, final: bool = False) -> None:
        chunk = self.partial + self.log.read()
        lines = chunk.splitlines(keepends=True)
        self.partial = "" if final or not lines or lines[-1].endswith("\n") else lines.pop()
        shown = "".join(line for line in lines if self._keep(line))
        if shown and not self.quiet:
            if self.progress is not None:
                self.progress.clear()
            sys.stdout.write(shown)
            sys.stdout.flush()
        if self.progress is not None and not self.quiet and not final:
            self.progress.draw()


def _stream(cmd: list[str], run: Run, cwd: Path, echo: _Echo, seed_env: dict[str, str]) -> tuple[int, str | None]:
    """Runs one pytest child with its output appended to the run's log (echoed from there: a pipe would break the
    child's teardown if this process died). Returns (exit code, name of the signal that interrupted it, if any).

    pytest runs in its own process group with a parent-death signal, so it stops even on a SIGKILL of this
    process; signals this process receives are forwarded, and a pytest that has not stopped `STOP_GRACE`
    seconds after one is killed (its servers and load generators die with it)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **seed_env}
    proc = procs.spawn(cmd, log_path=run.run_dir / "logs" / "pytest.log", cwd=cwd, env=env)
    forward = _Forward(proc)
    with run.signals_handled(forward):
        while proc.poll() is None:
            echo.pump()
            if forward.first_at is not None and time.monotonic() - forward.first_at > STOP_GRACE:
                procs.stop(proc, grace=2.0, sig=signal.SIGKILL)
            time.sleep(0.1)
        echo.pump(final=True)
        if echo.progress is not None:
            echo.progress.clear()
    return proc.returncode, run.interrupted


def _seed_env(pytest_args: Sequence[str]) -> dict[str, str]:
    """One seed for every suite's random orders: the one given (`--seed`, POLYPERF_SEED), else drawn here."""
    if any(a == "--seed" or a.startswith("--seed=") for a in pytest_args) or os.environ.get("POLYPERF_SEED"):
        return {}
    return {"POLYPERF_SEED": str(secrets.randbelow(2**32))}


def _combined(codes: Sequence[int]) -> int:
    """The run's exit code from its suites': the first failure's; `NO_TESTS` only when no suite ran a test."""
    ran = [c for c in codes if c != NO_TESTS]
    if not ran:
        return NO_TESTS if codes else 0
    return next((c for c in ran if c != 0), 0)


def _answers(
    run_dir: Path, done: Sequence[str], total: int, *, final: bool, quiet: bool, started: float
) -> Path | None:
    """After a suite: the table finalized, the report and summary rewritten, the answers so far printed (and when,
    in the run's log: the README's "first answers after" figures come from there)."""
    from polyperf.report import write_report
    from polyperf.report.answers import judge_run
    from polyperf.report.terminal import answers_text

    begun = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreadableLines)  # said once, at the end
        table = finalize_run(run_dir)
        answers = judge_run(run_dir, table)  # judged once, into verdicts.json: the report, store and compare read it
        report_path = write_report(run_dir)
    log_line(
        run_dir,
        f"answers after {len(done)} of {total} suites ({done[-1] if done else 'none'}): shown "
        f"{time.monotonic() - started:.0f} s after the start (report written in {time.monotonic() - begun:.1f} s)",
    )
    if not quiet:
        env = load_env(run_dir)
        new = None if final else done[-1:]
        text = answers_text(
            answers.records, done=done, total=total, new=new, env=env, notes=env.get("notes", []) if final else ()
        )
        print(f"\n{text}\npolyperf: report {report_path}\n", flush=True)
    return report_path


def run(
    suites: Sequence[str] = (),
    *,
    profile: str = "quick",
    out: str | os.PathLike[str] = "reports",
    suites_dir: str | os.PathLike[str] | None = None,
    pytest_args: Sequence[str] = (),
    report: bool = True,
    quiet: bool = False,
    benchmark_table: bool = False,
) -> RunOutcome:
    """Runs the named suites (all by default, in `SUITE_ORDER`) and returns where the results and report are.
    With `report`, every suite's answers are written and printed as soon as it ends."""
    get_profile(profile)  # fail on a bad profile name before creating anything
    folder = Path(suites_dir) if suites_dir else find_suites_dir()
    files = _suite_files(list(suites), folder)
    available = available_suites(folder)
    names = [suite_of(f) for f in files]
    run_ = Run.create(Path(out).resolve(), latest=True, profile=profile, suites=names)
    run_dir = run_.run_dir
    common = [f"--polyperf-profile={profile}", f"--polyperf-run-dir={run_dir}", "-v", "-ra", "--color=yes"]
    progress = Progress(run_dir, profile)
    echo = None
    key = f"polyperf run --profile {profile} {' '.join(sorted(names))}"
    if not quiet:
        what = f"running {len(names)} suite{'s' if len(names) > 1 else ''} ({profile} profile) into {run_dir}"
        steps.announce(steps.describe(what, key, _EXPECTED.get((profile, len(names) == len(available)))))
    seed_env = _seed_env(pytest_args)
    started = time.monotonic()
    codes: list[int] = []
    interrupted = None
    report_path = None
    with (run_dir / "logs" / "pytest.log").open("a+", encoding="utf-8", errors="replace") as log:
        log.seek(0)
        echo = _Echo(log, quiet=quiet, table=benchmark_table, progress=progress)
        for index, file in enumerate(files):
            if not quiet:
                print(f"\npolyperf: suite {index + 1} of {len(files)}: {names[index]}", flush=True)
            cmd = [sys.executable, "-m", "pytest", str(file), *common, *pytest_args]
            code, interrupted = _stream(cmd, run_, folder.parent, echo, seed_env)
            codes.append(code)
            last = index == len(files) - 1
            if interrupted:
                break
            if report and not last:
                done = names[: index + 1]
                report_path = _answers(run_dir, done, len(names), final=False, quiet=quiet, started=started)
    code = _combined(codes)
    if code == 0 and not interrupted and len(codes) == len(files):  # a failed or cut-short run is no estimate
        steps.record(key, time.monotonic() - started)
    table = run_.finish()  # the child's env.json additions merged; `latest` points here since the start
    if (skipped := table.attrs.get("unreadable_lines")) and not quiet:
        print(f"polyperf: {unreadable_note(len(skipped))}", file=sys.stderr, flush=True)
    # a SIGHUP means the terminal is gone: keep what was measured and leave the report to `polyperf report`
    if report and interrupted != "SIGHUP":
        report_path = _answers(run_dir, names[: len(codes)], len(names), final=True, quiet=quiet, started=started)
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
