"""`polyperf.run(...)`: run suites through pytest into a fresh run directory, then write the report.

pytest runs in a child process so a crashing extension or a Ctrl-C cannot take the run directory
with it: whatever rows were recorded stay in `results.jsonl` and are finalized here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from polyperf.envinfo import write_env
from polyperf.profiles import get_profile
from polyperf.results import finalize_run, new_run_dir, point_latest

__all__ = ["RunOutcome", "available_suites", "find_suites_dir", "run"]


@dataclass(frozen=True)
class RunOutcome:
    run_dir: Path
    pytest_exit_code: int
    report: Path | None

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
    return sorted(p.stem.removeprefix("test_") for p in folder.glob("test_*.py"))


def _suite_files(suites: Sequence[str], suites_dir: Path) -> list[Path]:
    known = available_suites(suites_dir)
    unknown = [s for s in suites if s not in known]
    if unknown:
        raise ValueError(f"unknown suite(s) {', '.join(unknown)}; available: {', '.join(known)}")
    return [suites_dir / f"test_{s}.py" for s in (suites or known)]


def _stream(cmd: list[str], log_path: Path, cwd: Path, quiet: bool) -> int:
    """Runs pytest, echoing its progress and keeping a copy in the run's logs."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with log_path.open("w", encoding="utf-8") as log, subprocess.Popen(
        cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    ) as proc:
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                log.write(line)
                log.flush()
                if not quiet:
                    sys.stdout.write(line)
                    sys.stdout.flush()
            return proc.wait()
        except KeyboardInterrupt:
            # pytest got the same SIGINT and is tearing down its servers: wait for it, bounded.
            try:
                return proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                return proc.wait()


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
    run_dir = new_run_dir(Path(out).resolve())
    write_env(run_dir, profile=profile, suites=[f.stem.removeprefix("test_") for f in files])
    point_latest(run_dir)
    cmd = [
        sys.executable, "-m", "pytest", *map(str, files),
        f"--polyperf-profile={profile}",
        f"--polyperf-run-dir={run_dir}",
        "-v", "-rA", "--color=yes",
        *pytest_args,
    ]
    code = _stream(cmd, run_dir / "logs" / "pytest.log", folder.parent, quiet)
    finalize_run(run_dir)
    report_path = None
    if report:
        from polyperf.report import write_report

        report_path = write_report(run_dir)
    return RunOutcome(run_dir, code, report_path)
