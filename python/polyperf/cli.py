"""The `polyperf` command: a thin layer over the library (`polyperf.run`, `write_report`, ...)."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from polyperf.common.profiles import PROFILES

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

    outcome = run(
        args.suites,
        profile=args.profile,
        out=args.out,
        suites_dir=args.suites_dir,
        pytest_args=args.pytest_args or (),
        report=not args.no_report,
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
    from polyperf.record.run_dir import finalize_run, resolve_run
    from polyperf.report import write_report

    run_dir = resolve_run(args.run)
    finalize_run(run_dir)  # a run cut short by a crash gets its parquet/CSV here
    print(write_report(run_dir))
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    from polyperf.build.registry import APPS
    from polyperf.runner import available_suites, find_suites_dir

    folder = find_suites_dir() if args.suites_dir is None else args.suites_dir
    print("suites:")
    for name in available_suites(folder):
        print(f"  {name}")
    print("\napps (APP:VARIANT; the first variant listed is the default):")
    for app in APPS.values():
        variants = [app.default_variant, *(v for v in app.variants if v != app.default_variant)]
        print(f"  {app.name:<16} {app.language:<4} {app.summary}")
        print(f"  {'':<16} variants: {', '.join(variants)}; endpoints: {', '.join(app.endpoints)}")
    return 0


def _cmd_build(args: argparse.Namespace) -> int:
    from polyperf.build import APPS, build
    from polyperf.record import Recorder, finalize_run, new_run_dir, point_latest
    from polyperf.record.env import write_env
    from polyperf.record.rows import build_rows
    from polyperf.record.run_dir import RowWriter

    specs = args.apps or list(APPS)
    run_dir = new_run_dir(Path(args.out))
    write_env(run_dir, command="build", apps=specs)
    record = Recorder(RowWriter(run_dir), "build")
    for spec in specs:
        print(f"building {spec} ...", flush=True)
        result = build(spec, force=args.force, log_dir=run_dir / "logs")
        record.many(build_rows(result), case="build", implementation=result.app, variant=result.variant)
        state = "cached" if result.cached else "built"
        print(f"  {state}: {result.binary} ({result.binary_bytes:,} bytes, {result.seconds:.1f} s)")
    finalize_run(run_dir)
    point_latest(run_dir)
    print(f"build times and sizes recorded in {run_dir}")
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    import time

    from polyperf.build import build
    from polyperf.common.cpus import parse_cpus
    from polyperf.serve.server import Server

    build(args.app)
    log_dir = Path(args.out) / "serve-logs"
    with Server(
        args.app,
        log_dir=log_dir,
        port=args.port,
        host=args.host,
        cpus=parse_cpus(args.server_cpus),
        workers=args.workers,
        database_url=args.database_url,
        args=args.app_args or (),
    ) as server:
        print(f"{server.name} serving at {server.url}  (log: {server.log_path}; Ctrl-C stops it)", flush=True)
        while True:
            time.sleep(0.5)
            server.check_alive()


def _cmd_verify(args: argparse.Namespace) -> int:
    import contextlib
    import tempfile

    from polyperf.build import build
    from polyperf.build.registry import APPS, get_app
    from polyperf.serve.postgres import ThrowawayPostgres
    from polyperf.serve.server import Server
    from polyperf.serve.verify import verify

    specs = args.apps or list(APPS)
    failures = 0
    log_dir = Path(tempfile.mkdtemp(prefix="polyperf-verify-"))
    with contextlib.ExitStack() as stack:
        dsn = args.database_url
        if args.with_postgres and not dsn:
            print("starting a throwaway PostgreSQL ...", flush=True)
            dsn = stack.enter_context(ThrowawayPostgres(log_dir)).dsn
        for spec in specs:
            app, variant = get_app(spec)
            build(spec)
            with Server(spec, log_dir=log_dir, database_url=dsn) as server:
                checks = verify(server.url, app.checks, with_db=bool(dsn) and app.uses_database)
            bad = [c for c in checks if not c.ok]
            failures += bool(bad)
            print(f"{app.name}:{variant}: {len(checks) - len(bad)}/{len(checks)} checks passed")
            for c in bad:
                print(f"  FAIL {c.name}: {c.detail}")
    print(f"server logs: {log_dir}")
    return 1 if failures else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="polyperf", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser(
        "run",
        help="run suites (all by default), write the run directory and the report",
        description="Run suites through pytest into OUT/runs/<run-id>/, point OUT/latest at "
        "it, write report.html and summary.md, print their paths.",
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
    p.add_argument("--no-report", action="store_true", help="skip writing the report")
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
        "list",
        help="list the suites and the apps with their variants",
        description="List the suites and the app registry (language, variants, endpoints).",
    )
    p.add_argument("--suites-dir", default=None, help="where the suites live (default: ./suites)")
    p.set_defaults(func=_cmd_list)

    p = sub.add_parser(
        "build",
        help="build apps (release by default); record build time and binary size",
        description="Build APP[:VARIANT] with cargo or go (cached by source state) and record "
        "build_seconds and binary_bytes into a new run directory.",
    )
    p.add_argument("apps", nargs="*", metavar="APP[:VARIANT]", help="default: every app, default variant")
    p.add_argument("--force", action="store_true", help="rebuild even if the binary is up to date")
    p.add_argument("--out", default="reports", help="output directory (default: reports)")
    p.set_defaults(func=_cmd_build)

    p = sub.add_parser(
        "serve",
        help="build and run one app in the foreground for manual poking",
        description="Build if needed, start APP[:VARIANT] on 127.0.0.1, print its URL. "
        "Ctrl-C or SIGTERM stops it and everything it started.",
    )
    p.add_argument("app", metavar="APP[:VARIANT]")
    p.add_argument("--port", type=int, default=None, help="default: a free port")
    p.add_argument("--host", default="127.0.0.1", help="bind address (default: 127.0.0.1)")
    p.add_argument("--workers", type=int, default=None, help="worker threads / event loops")
    p.add_argument("--server-cpus", default=None, help="pin the server to these CPUs, e.g. 0 or 0-1")
    p.add_argument("--database-url", default=None, help="PostgreSQL URL for the devices apps' POST")
    p.add_argument("--out", default="reports", help="where the server log goes (OUT/serve-logs)")
    p.add_argument("--app-args", nargs=argparse.REMAINDER, help="extra arguments passed to the app")
    p.set_defaults(func=_cmd_serve)

    p = sub.add_parser(
        "verify",
        help="build, start and check every endpoint of apps (status, headers, bodies, 4xx)",
        description="HTTP conformance checks run before any load; exit code 1 if an app fails.",
    )
    p.add_argument("apps", nargs="*", metavar="APP[:VARIANT]", help="default: every app")
    p.add_argument(
        "--with-postgres",
        action="store_true",
        help="start a throwaway PostgreSQL so POST /api/devices is checked end to end",
    )
    p.add_argument("--database-url", default=None, help="use this PostgreSQL instead of a throwaway one")
    p.set_defaults(func=_cmd_verify)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from polyperf.common.procs import install_signal_handlers
    from polyperf.errors import PolyperfError

    args = build_parser().parse_args(argv)
    install_signal_handlers()
    try:
        return args.func(args)
    except (FileNotFoundError, ValueError, PolyperfError) as exc:
        print(f"polyperf: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("polyperf: interrupted; partial results are kept in the run directory", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
