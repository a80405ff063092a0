"""`polyperf list | build | serve | verify`: the apps under test, one at a time."""

from __future__ import annotations

import argparse
from pathlib import Path


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
    from polyperf.build.registry import get_app
    from polyperf.record.rows import build_rows
    from polyperf.record.run import Run

    specs = args.apps or list(APPS)
    for spec in specs:  # an unknown app is refused before a run folder exists
        get_app(spec)
    with Run.create(Path(args.out), command="build", apps=specs) as run:
        record = run.recorder("build")
        for spec in specs:
            print(f"building {spec} ...", flush=True)
            result = build(spec, force=args.force, log_dir=run.run_dir / "logs")
            record.many(build_rows(result), case="build", implementation=result.app, variant=result.variant)
            state = "cached" if result.cached else "built"
            print(f"  {state}: {result.binary} ({result.binary_bytes:,} bytes, {result.seconds:.1f} s)")
        run.finish(latest=True)
    print(f"build times and sizes recorded in {run.run_dir}")
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
    for spec in specs:  # an unknown app is refused before the log folder exists
        get_app(spec)
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


# Each sub-parser spelled out, as in cli/remote.py and runs.py: each sub-command owns its flags and help.
def add_parsers(sub: argparse._SubParsersAction) -> None:
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
