"""The `polyperf` command: a thin layer over the library (`polyperf.run`, `write_report`, ...)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from polyperf.profiles import PROFILES

DESCRIPTION = """\
polyperf re-measures published performance claims (buffered vs unbuffered I/O, BSON
deserialization, Rust vs Go servers, build settings) on this machine, and writes tidy
results, figures and a claims verdict table.

typical use:
  polyperf run                      # every suite, quick profile, report at the end
  polyperf run io_buffering --profile smoke
  polyperf report reports/latest    # re-render a run's report
"""


def _cmd_run(args: argparse.Namespace) -> int:
    from polyperf.runner import run

    outcome = run(args.suites, profile=args.profile, out=args.out, suites_dir=args.suites_dir,
                  pytest_args=args.pytest_args or (), report=not args.no_report)
    print(f"\nrun directory: {outcome.run_dir}")
    if outcome.report:
        print(f"report:        {outcome.report}")
    if not outcome.ok:
        print(f"pytest exited with {outcome.pytest_exit_code}: see {outcome.run_dir / 'logs' / 'pytest.log'}",
              file=sys.stderr)
    return outcome.pytest_exit_code


def _cmd_report(args: argparse.Namespace) -> int:
    from polyperf.report import write_report
    from polyperf.results import finalize_run, resolve_run

    run_dir = resolve_run(args.run)
    finalize_run(run_dir)  # a run cut short by a crash gets its parquet/CSV here
    print(write_report(run_dir))
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    from polyperf.runner import available_suites, find_suites_dir

    folder = find_suites_dir() if args.suites_dir is None else args.suites_dir
    print("suites:")
    for name in available_suites(folder):
        print(f"  {name}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="polyperf", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("run", help="run suites (all by default), write the run directory and the report",
                       description="Run suites through pytest into OUT/runs/<run-id>/, point OUT/latest at "
                                   "it, write report.html and summary.md, print their paths.")
    p.add_argument("suites", nargs="*", metavar="SUITE",
                   help="suite names, the module name without test_ (e.g. io_buffering); default: all")
    p.add_argument("--profile", choices=PROFILES, default="quick",
                   help="smoke: seconds (CI); quick: a few minutes (default); full: article sizes and beyond")
    p.add_argument("--out", default="reports", help="output directory (default: reports)")
    p.add_argument("--suites-dir", default=None, help="where the suites live (default: ./suites)")
    p.add_argument("--no-report", action="store_true", help="skip writing the report")
    p.add_argument("--pytest-args", nargs=argparse.REMAINDER,
                   help="everything after this is passed to pytest (e.g. -k unbuffered -x)")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("report", help="(re)write report.html and summary.md for a run",
                       description="Render a run directory's figures, claims table and summaries.")
    p.add_argument("run", nargs="?", default="reports/latest",
                   help="run directory, or an output dir meaning its latest run (default: reports/latest)")
    p.set_defaults(func=_cmd_report)

    p = sub.add_parser("list", help="list the suites", description="List the available suites.")
    p.add_argument("--suites-dir", default=None, help="where the suites live (default: ./suites)")
    p.set_defaults(func=_cmd_list)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (FileNotFoundError, ValueError) as exc:
        print(f"polyperf: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("polyperf: interrupted; partial results are kept in the run directory", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
