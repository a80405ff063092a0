"""`polyperf run | report | compare`: runs of suites and what is made of them."""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from polyperf.common.profiles import PROFILES

if TYPE_CHECKING:
    import pandas as pd

# `polyperf run` options that the load suites read through the pytest plugin (pytest option = CLI option)
_LOAD_OPTIONS = ("server_cpus", "client_cpus", "server_cpu_quota", "cpu_quota_period_ms", "seed")


def _load_options(args: argparse.Namespace) -> list[str]:
    given = [
        f"--{name.replace('_', '-')}={getattr(args, name)}" for name in _LOAD_OPTIONS if getattr(args, name) is not None
    ]
    return [*given, *(["--flamegraph"] if args.flamegraph else [])]


def _seconds(text: str) -> float:
    """540, 90s, 9m, 1.5h -> seconds; argparse turns the ValueError into one usage line."""
    units = {"s": 1.0, "m": 60.0, "h": 3600.0}
    text = text.strip().lower()
    scale = units.get(text[-1:])
    value = float(text[:-1] if scale else text)
    if value < 0 or value != value:
        raise ValueError(f"a budget is a time >= 0, not {text!r}")
    return value * (scale or 1.0)


def _cmd_run(args: argparse.Namespace) -> int:
    from polyperf.common.cpus import CpuSplitError, split_cpus
    from polyperf.runner import run

    try:  # refused in one line before anything starts
        split_cpus(
            args.server_cpus or os.environ.get("POLYPERF_SERVER_CPUS"),
            args.client_cpus or os.environ.get("POLYPERF_CLIENT_CPUS"),
        )
    except (CpuSplitError, ValueError) as exc:
        print(f"polyperf run: {exc}", file=sys.stderr)
        return 2
    if args.continue_run is not None:  # refused in one line: another commit or machine, or no run there
        from polyperf.record.run import Run
        from polyperf.record.run_dir import resolve_run

        try:
            args.continue_run = resolve_run(args.continue_run)
            Run.check_resumable(args.continue_run)
        except (OSError, ValueError) as exc:
            print(f"polyperf run --continue: {exc}", file=sys.stderr)
            return 2
    if args.database_url:  # through the environment, not pytest's argv: a URL may hold a password
        os.environ["POLYPERF_DATABASE_URL"] = args.database_url
    outcome = run(
        args.suites,
        profile=args.profile,
        out=args.out,
        suites_dir=args.suites_dir,
        pytest_args=[*_load_options(args), *(args.pytest_args or ())],
        report=not args.no_report,
        benchmark_table=args.benchmark_table,
        budget_s=args.budget,
        continue_run=args.continue_run,
        claims=args.claims or (),
    )
    print(f"\nrun directory: {outcome.run_dir}")
    if outcome.report:
        print(f"report:        {outcome.report}")
    if outcome.interrupted:
        print(
            f"polyperf: interrupted by {outcome.interrupted}; the rows measured so far are kept in {outcome.run_dir}",
            file=sys.stderr,
        )
        return 128 + signal.Signals[outcome.interrupted].value
    if not outcome.ok:
        print(
            f"pytest exited with {outcome.pytest_exit_code}: see {outcome.run_dir / 'logs' / 'pytest.log'}",
            file=sys.stderr,
        )
    return outcome.pytest_exit_code


def _cmd_report(args: argparse.Namespace) -> int:
    from polyperf.record.run import Run
    from polyperf.record.run_dir import UnreadableLines, resolve_run, skipped_note
    from polyperf.report import write_report

    run_dir = resolve_run(args.run)
    table = Run(run_dir).write_table()  # a run cut short by a crash gets its parquet/CSV here; none ever shrinks
    for note in (skipped_note(table), table.attrs.get("kept")):
        if note:
            print(f"polyperf: {note}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreadableLines)  # said above in one line
        print(write_report(run_dir))
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from polyperf.analyse.compare import compare, to_markdown, verdict_changes
    from polyperf.analyse.gate import DRIFT_NOTE, FAMILY_NOTE, attribute_missing, check_settings, gate
    from polyperf.record import load_run, resolve_run
    from polyperf.record.lines import valid_rows
    from polyperf.report.answers import run_answers
    from polyperf.report.compare_figure import compare_figure
    from polyperf.report.flags import failed_tests

    try:
        check_settings(args.alpha, args.fail_on_regression)
    except ValueError as exc:
        print(f"polyperf compare: {exc}", file=sys.stderr)
        return 2
    run_a, run_b = resolve_run(args.run_a), resolve_run(args.run_b)
    frame_a, frame_b = load_run(run_a), load_run(run_b)
    table = compare(valid_rows(frame_a), valid_rows(frame_b), alpha=args.alpha)  # a NaN row has no value to compare
    failed_b = [(flag.suite, flag.subject) for flag in failed_tests(run_b)]
    invalid_b = _series_keys(frame_b) - _series_keys(valid_rows(frame_b))
    table = attribute_missing(table, failed_b, invalid_b)  # why B lacks a series of A: a failed test, or a choice
    print(
        f"polyperf compare: A = {run_a.name}, B = {run_b.name} (change = Hodges-Lehmann ratio B/A - 1 with its 95% "
        f"interval; Mann-Whitney U at alpha {args.alpha}, {FAMILY_NOTE})\n"
    )
    print(to_markdown(table, only_changes=args.only_changes))
    if not table.empty:
        figure = Path(args.figure) if args.figure else run_b / f"compare-{run_a.name}.png"
        compare_figure(table, figure)
        print(f"\nfigure: {figure}")
    if args.markdown:
        Path(args.markdown).write_text(to_markdown(table, only_changes=args.only_changes), encoding="utf-8")
    if not frame_a.empty and not frame_b.empty:
        answers = [run_answers(run, frame) for run, frame in ((run_a, frame_a), (run_b, frame_b))]
        for side, answer in zip("AB", answers, strict=True):
            if answer.note:  # a run older than verdicts.json: judged now, and said
                print(f"polyperf compare: run {side}: {answer.note}", file=sys.stderr)
        moved = verdict_changes(answers[0].records, answers[1].records)
        print(f"\nverdicts that changed: {len(moved)}")
        for row in moved.itertuples():
            print(f"  {row.claim} ({row.kind}): {row.verdict_a} -> {row.verdict_b}; B: {row.reason_b}")
    if args.gate_timings:
        print(f"polyperf compare: {DRIFT_NOTE}", file=sys.stderr)
    threshold = args.fail_on_regression if args.fail_on_regression is not None else math.inf
    result = gate(table, threshold, gate_timings=args.gate_timings)
    if result.failed:
        runs = f" (A = {run_a}, B = {run_b})" if result.exit_code == 2 else ""  # no data: say which folders
        print(f"polyperf compare: {result.reason}{runs}{_profiles_differ(run_a, run_b)}", file=sys.stderr)
        return result.exit_code
    if args.fail_on_regression is not None:
        print(f"polyperf compare: {result.reason}")
    return 0


def _series_keys(frame: pd.DataFrame) -> set[tuple[str, ...]]:
    """(suite, case, implementation, metric) of every series with a row in `frame`."""
    columns = ["suite", "case", "implementation", "metric"]
    if frame.empty or not set(columns) <= set(frame.columns):
        return set()
    return {tuple(map(str, key)) for key in frame[columns].fillna("").drop_duplicates().itertuples(index=False)}


def _profiles_differ(run_a: Path, run_b: Path) -> str:
    """ "; A ran profile quick, B smoke" when the two runs' env.json name different profiles, else ""."""
    from polyperf.record.run_dir import load_env

    profiles = []
    for run in (run_a, run_b):
        try:
            profiles.append(load_env(run).get("profile"))
        except (OSError, ValueError):
            return ""
    if profiles[0] == profiles[1] or None in profiles:
        return ""
    return f"; A ran profile {profiles[0]}, B {profiles[1]}: the profiles measure different series"


# The same add_parsers shape as export, new, remote, tools and verdicts: each module owns its sub-commands and flags.
def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="run suites (all by default), write the run directory and the report",
        description="Run suites through pytest into OUT/runs/<run-id>/, point OUT/latest at it, and answer each "
        "published claim. The suites that need no server run first (io_buffering, bson, scheduler), then the "
        "server suites; after each suite the report, the summary and this terminal show the claims decided so far "
        "(one line each: the verdict, its headline against the published figure, the measured value with its 95% "
        "interval and n), and at the end every claim, the counts by outcome and what was not measured and why. "
        "pytest's output is echoed and kept in RUN/logs/pytest.log; RUN/logs/polyperf.log says where every other "
        "log is.",
    )
    p.add_argument(
        "suites",
        nargs="*",
        metavar="SUITE",
        help="suite names, the module name without test_ (e.g. io_buffering); default: all",
    )
    p.add_argument(
        "--profile",
        choices=PROFILES,
        default="quick",
        help="smoke: seconds (CI); quick: a few minutes (default); full: article sizes and beyond",
    )
    p.add_argument("--out", default="reports", help="output directory (default: reports)")
    p.add_argument("--suites-dir", default=None, help="where the suites live (default: ./suites)")
    p.add_argument(
        "--claims",
        action="append",
        metavar="FILE",
        help="a claims file of yours (TOML, the format of `polyperf verdicts --help`), judged with polyperf's own; "
        "repeatable. claims.toml and *.claims.toml beside the suites are read without it",
    )
    p.add_argument("--no-report", action="store_true", help="skip writing the report (and the answers)")
    p.add_argument(
        "--budget",
        type=_seconds,
        default=None,
        metavar="TIME",
        help="the whole run's time, e.g. 540, 9m or 1h (default: smoke 0, quick 555, full 1h). What the suites' first "
        "batch leaves goes to more repeats of the entries still undecided, the likeliest to be decided first; an "
        "entry left open says whether its data or the budget kept it so. 0: the first batch only",
    )
    p.add_argument(
        "--continue",
        dest="continue_run",
        default=None,
        metavar="RUN",
        help="add repeats to an earlier run of this commit on this machine instead of starting again: its "
        "sequences go on where they stopped (anytime-valid evidence: the error rate is spent once); suites it "
        "measured are not run again",
    )
    p.add_argument(
        "--benchmark-table",
        action="store_true",
        help="also show pytest-benchmark's table of raw timings on screen (it is always in logs/pytest.log)",
    )
    load = p.add_argument_group("load suites (servers and load generators pinned apart)")
    load.add_argument(
        "--server-cpus", default=None, help="CPUs the servers run on, e.g. 0 or 0-1 (default: first half)"
    )
    load.add_argument("--client-cpus", default=None, help="CPUs the load generators run on (default: the rest)")
    load.add_argument(
        "--server-cpu-quota",
        default=None,
        metavar="FRACTION|auto|none",
        help="put each server in a CPU cgroup with this many CPUs of quota (e.g. 0.5) so one client core can "
        "saturate it and capacity per server CPU-second is measured at saturation; auto: the largest budget at "
        "which the client is not the limit (needs root and a writable cgroup v1 `cpu` or v2 `cpu.max`); none: never. "
        "http_frameworks uses auto by itself where the client has no more CPUs than the server",
    )
    load.add_argument("--cpu-quota-period-ms", type=float, default=None, help="the budget's CFS period (default 10)")
    # Flag definitions shaped like cli/ab.py's and cli/history.py's: each sub-command owns its flags and help.
    load.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed of the random order of the servers (and generators) in each repeat; default: drawn, and "
        "recorded in env.json either way",
    )
    load.add_argument("--flamegraph", action="store_true", help="add a perf flamegraph of each server (needs perf)")
    load.add_argument(
        "--database-url",
        default=None,
        metavar="URL",
        help="your PostgreSQL for the database suites instead of a throwaway cluster (tables named per run, "
        "never dropped; the restart cases are skipped)",
    )
    p.add_argument(
        "--pytest-args",
        nargs=argparse.REMAINDER,
        help="everything after this is passed to pytest (e.g. -k unbuffered -x)",
    )
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser(
        "report",
        help="(re)write report.html and summary.md for a run",
        description="Render a run directory's figures, claims table and summaries.",
    )
    p.add_argument(
        "run",
        nargs="?",
        default="reports/latest",
        help="run directory, or an output dir meaning its latest run (default: reports/latest)",
    )
    p.set_defaults(func=_cmd_report)

    p = sub.add_parser(
        "compare",
        help="did B get faster or slower than A? per series, with intervals and a significance test",
        description="Compares two runs series by series (suite, case, implementation, variant, driver, metric, "
        "params): the change as the Hodges-Lehmann ratio with its own 95%% interval, a Mann-Whitney U test as "
        "benchstat does it (alpha 0.05; 'too few samples' when no verdict is possible) with the timed series' "
        "p-values Holm-adjusted as one family, labelled improved / regressed / no change; exact counts (syscalls, "
        "allocations, rows) compared exactly, counts per request within 2%% or half a count; a series client-bound "
        "in either run is marked and never gated. Then the claims whose verdict changed. Writes a figure. "
        "The gate (--fail-on-regression) fails on exact counts only, unless --gate-timings: two runs taken at "
        "different times differ by more than the changes a gate looks for, which no test inside the runs can see; "
        "for timings use `polyperf ab`. A timed series regressed beyond PCT only when its whole interval lies "
        "beyond PCT. It fails closed: B with no series exits 2; B lacking a series of A exits 1, named 'failed in "
        "B' when a test of its suite failed in B; a series B measured on other series of the same case (a target "
        "picked by calibration, a generator not installed) is 'not produced in B' and not gated.",
    )
    p.add_argument("run_a", metavar="RUN_A", help="the baseline run directory (or an output dir: its latest)")
    p.add_argument("run_b", metavar="RUN_B", help="the run to judge")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")
    p.add_argument("--only-changes", action="store_true", help="list only series that changed")
    p.add_argument("--markdown", default=None, metavar="FILE", help="also write the table as Markdown (CI comment)")
    p.add_argument("--figure", default=None, metavar="PNG", help="default: RUN_B/compare-<run A>.png")
    p.add_argument(
        "--fail-on-regression",
        type=float,
        default=None,
        metavar="PCT",
        help="exit 1 when a gated series regressed beyond PCT percent (finite, >= 0): an exact count by more than "
        "PCT, a timed series with its whole 95%% interval beyond PCT",
    )
    p.add_argument(
        "--gate-timings",
        action="store_true",
        help="also gate timed series (primary metrics only); drift between the two runs is not controlled: "
        "prefer `polyperf ab`",
    )
    p.set_defaults(func=_cmd_compare)
