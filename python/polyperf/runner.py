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
from typing import IO, Any

from polyperf.common import procs, steps
from polyperf.common.paths import suite_of
from polyperf.common.profiles import get_profile
from polyperf.progress import Progress
from polyperf.record.run import Run
from polyperf.record.run_dir import UnreadableLines, load_env, log_line, unreadable_note
from polyperf.record.suite_files import keep_claims

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
# What every suite's pytest child gets wherever its folder is (the checkout's pyproject gives them only inside it):
# polyperf's plugin by name (registered once even where it is installed or a conftest lists it), and locust's own
# pytest plugin off (its import patches the standard library with gevent, under the suites' servers and timers).
PYTEST_OPTIONS = ("-p", "polyperf.record.pytest_plugin", "-p", "no:locust")


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
    """`suites/` next to the working directory (the checkout's, or a folder of suites of your own: no conftest.py
    needed), else the source tree's of an editable install."""
    here, checkout = Path(start or Path.cwd()) / "suites", Path(__file__).resolve().parents[2] / "suites"
    if (here / "conftest.py").exists() or any(here.glob("test_*.py")):
        return here
    if (checkout / "conftest.py").exists():
        return checkout
    raise FileNotFoundError(
        "cannot find the polyperf suites/ directory: run from the repository root or pass --suites-dir"
    )


def _suite_paths(folder: Path) -> dict[str, Path]:
    """Suite name -> what pytest is given: `test_<name>.py`, and a Go package or Cargo crate with benches (the
    folder itself or one inside it), named after its folder."""
    from polyperf.orchestrate.native_bench import native_kind

    paths = {suite_of(p): p for p in folder.glob("test_*.py")}
    for candidate in [folder, *sorted(p for p in folder.iterdir() if p.is_dir())] if folder.is_dir() else []:
        if native_kind(candidate) is not None:
            paths.setdefault(candidate.resolve().name, candidate)
    return paths


def available_suites(suites_dir: Path | None = None) -> list[str]:
    return sorted(_suite_paths(suites_dir or find_suites_dir()))


def _suite_files(suites: Sequence[str], suites_dir: Path) -> list[Path]:
    """The suites' files (or folders) in `SUITE_ORDER` (all suites when none are named)."""
    paths = _suite_paths(suites_dir)
    known = sorted(paths)
    unknown = [s for s in suites if s not in known]
    if unknown:
        raise ValueError(f"unknown suite(s) {', '.join(unknown)}; available: {', '.join(known) or 'none'}")
    chosen = sorted(dict.fromkeys(suites or known), key=_order_key)
    return [paths[s] for s in chosen]


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


def _claims_files(files: Sequence[Path], given: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """The claims files beside the suites (`claims.toml`, `*.claims.toml`) and those given, checked together with
    polyperf's own before anything starts: a bad file or an id used twice is one error line (ValueError)."""
    from polyperf.analyse.user_claims import merged_claims
    from polyperf.record.suite_files import claims_files_beside

    found = [*claims_files_beside(files), *(Path(p) for p in given)]
    merged_claims(found)
    return found


def _needs_native(files: Sequence[Path]) -> list[str]:
    """The suites that import polyperf's Rust extension, where it is not built (each says so first, and fails at
    collection with the same words; the others run without it)."""
    import importlib.util

    if importlib.util.find_spec("polyperf._native") is not None:
        return []
    imports = re.compile(r"^\s*(from polyperf import .*\b_native\b|(from|import) polyperf\._native\b)", re.M)
    texts = {f: f.read_text(encoding="utf-8", errors="replace") for f in files if f.is_file()}
    return [suite_of(f) for f, text in texts.items() if imports.search(text)]


def _answers(run_: Run, done: Sequence[str], total: int, *, final: bool, quiet: bool, started: float) -> Path | None:
    """After a suite: the table finalized, the answers so far judged into verdicts.json and printed (and when, in the
    run's log: the README's "first answers after" figures come from there); at the end of the run, the report and
    summary too. The report is not rewritten after every suite: it took 2-15 s each time (51 s of a main job's
    budget, better spent on repeats), and the end of the run writes it on every way out but a lost terminal."""
    from polyperf.report import write_report
    from polyperf.report.answers import judge_run
    from polyperf.report.terminal import answers_text

    run_dir, begun = run_.run_dir, time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreadableLines)  # said once, at the end
        table = run_.write_table()
        # judged once, into verdicts.json: the report, store and compare read it
        top_ups = load_env(run_dir).get("top_ups") or {}  # why an entry the run left open is open, said beside it
        answers = judge_run(run_dir, table, suites=done, still_open=top_ups.get("open", {}))
        report_path = write_report(run_dir) if final else None
    log_line(
        run_dir,
        f"answers after {len(done)} of {total} suites ({done[-1] if done else 'none'}): shown "
        f"{time.monotonic() - started:.0f} s after the start ("
        + (
            f"report written in {time.monotonic() - begun:.1f} s)"
            if final
            else f"judged in {time.monotonic() - begun:.1f} s)"
        ),
    )
    if not quiet:
        env = load_env(run_dir)
        new = None if final else done[-1:]
        text = answers_text(
            answers.records, done=done, total=total, new=new, env=env, notes=env.get("notes", []) if final else ()
        )
        where = f"report {report_path}" if report_path else f"the report follows when the run ends ({run_dir})"
        print(f"\n{text}\npolyperf: {where}\n", flush=True)
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
    budget_s: float | None = None,
    continue_run: str | os.PathLike[str] | None = None,
    claims: Sequence[str | os.PathLike[str]] = (),
) -> RunOutcome:
    """Runs the named suites (all by default, in `SUITE_ORDER`) and returns where the results and report are.
    With `report`, every suite's answers are written and printed as soon as it ends. Then, until `budget_s`
    seconds after the start (default: the profile's), repeats go to the entries still undecided (`topups`).
    `continue_run`: a run of this commit and machine whose sequences go on (its suites that ran are not run again).
    The run is judged against polyperf's claims, the claims files beside the suites and `claims` (files), all kept
    in the run folder."""
    budget_s = get_profile(profile).budget_s if budget_s is None else budget_s  # a bad profile fails here
    folder = Path(suites_dir) if suites_dir else find_suites_dir()
    files = _suite_files(list(suites), folder)
    available = available_suites(folder)
    names = [suite_of(f.resolve()) for f in files]
    claims_files = _claims_files(files, claims)
    already: list[str] = []  # suites a continued run measured before: not run again
    if continue_run is not None:
        run_ = Run.resume(continue_run)
        already = [n for n in names if n in _suites_with_rows(run_)]
        files = [f for f in files if suite_of(f.resolve()) not in already]
        names = [*already, *(suite_of(f.resolve()) for f in files)]
    else:
        run_ = Run.create(Path(out).resolve(), latest=True, profile=profile, suites=names)
    run_dir = run_.run_dir
    if continue_run is None:  # a continued run keeps the claims files it was judged against
        keep_claims(run_dir, claims_files)
    common = [f"--polyperf-profile={profile}", f"--polyperf-run-dir={run_dir}", "-v", "-ra", "--color=yes"]
    common += PYTEST_OPTIONS
    progress = Progress(run_dir, profile)
    echo = None
    key = f"polyperf run --profile {profile} {' '.join(sorted(names))}"
    if (unbuilt := _needs_native(files)) and not quiet:
        from polyperf import NATIVE_MISSING

        print(f"polyperf: {', '.join(unbuilt)}: {NATIVE_MISSING}", file=sys.stderr, flush=True)
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
                print(f"\npolyperf: suite {index + 1} of {len(files)}: {suite_of(file)}", flush=True)
            cmd = [sys.executable, "-m", "pytest", str(file), *common, *pytest_args]
            code, interrupted = _stream(cmd, run_, folder.parent, echo, seed_env)
            codes.append(code)
            last = index == len(files) - 1
            if interrupted:
                break
            if report and (not last or budget_s > 0):  # the first batch's answers, before any top-up
                done = names[: len(already) + index + 1]
                report_path = _answers(run_, done, len(names), final=False, quiet=quiet, started=started)
        if not interrupted and budget_s > 0:  # past the budget too: each open entry then says the budget left it open
            interrupted = _top_up(run_, started + budget_s, folder, echo, seed_env, [*common, *pytest_args], quiet)
    code = _combined(codes)
    if code == 0 and not interrupted and len(codes) == len(files):  # a failed or cut-short run is no estimate
        steps.record(key, time.monotonic() - started)
    table = run_.finish()  # the child's env.json additions merged; `latest` points here since the start
    if (skipped := table.attrs.get("unreadable_lines")) and not quiet:
        print(f"polyperf: {unreadable_note(len(skipped))}", file=sys.stderr, flush=True)
    # a SIGHUP means the terminal is gone: keep what was measured and leave the report to `polyperf report`
    if report and interrupted != "SIGHUP":
        done = names[: len(already) + len(codes)]
        report_path = _answers(run_, done, len(names), final=True, quiet=quiet, started=started)
    if not interrupted:
        _add_to_history(run_dir, quiet)
    return RunOutcome(run_dir, code, report_path, interrupted)


def _top_up(
    run_: Run, deadline: float, folder: Path, echo: _Echo, seed_env: dict[str, str], args: list[str], quiet: bool
) -> str | None:
    """Repeats for the entries still undecided until `deadline` (`topups`); returns the signal that interrupted it."""
    from polyperf.analyse.claims import evaluate
    from polyperf.analyse.verdict_records import claims_for
    from polyperf.topups import add_repeats

    def judge(table: Any) -> list:  # a table; polyperf's claims and the run's own, as the answers judge them
        return evaluate(table, claims_for(table, run_dir=run_.run_dir)[0])

    topped = add_repeats(
        run_,
        deadline=deadline,
        judge=judge,
        stream=lambda cmd, env: _stream(cmd, run_, folder.parent, echo, {**seed_env, **env}),
        pytest_cmd=lambda nodes: [sys.executable, "-m", "pytest", *nodes, *args],
        quiet=quiet,
    )
    run_.update_env(top_ups=topped.as_record())
    return run_.interrupted


def _suites_with_rows(run_: Run) -> list[str]:
    """The suites a run holds rows of (read from its table, so a suite that ran but recorded nothing is run again)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreadableLines)
        table = run_.write_table()
    return sorted(set(table["suite"].dropna())) if "suite" in table else []


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
