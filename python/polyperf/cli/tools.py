"""`polyperf audit`: tools that work on any command, not only on polyperf's own suites."""

from __future__ import annotations

import argparse


def _cmd_audit(args: argparse.Namespace) -> int:
    from polyperf.measure.syscall_audit import audit

    cmd = list(args.cmd)
    if cmd[:1] == ["--"]:
        cmd = cmd[1:]
    if not cmd:
        raise ValueError("audit needs a command: polyperf audit -- CMD ARGS...")
    report = audit(
        cmd,
        stack_traces=not args.no_stack_traces,
        tiny=args.tiny,
        min_run=args.min_run,
        timeout=args.timeout,
        stdout_to_stderr=args.json,  # stdout holds the JSON alone
    )
    print(report.to_json() if args.json else report.to_text())
    return 1 if report.flagged and args.fail_on_flag else 0


# The same add_parsers shape as export, new, remote, runs and verdicts: each module owns its sub-commands.
def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "audit",
        help="trace a command's reads and writes; flag likely unbuffered I/O (runs of tiny syscalls)",
        description="Runs CMD under `strace -f` and reports reads and writes per file and per size bucket. A file "
        "with a run of at least --min-run consecutive reads or writes of at most --tiny bytes is flagged as "
        "likely unbuffered I/O, with a call stack where strace supports it (the command then runs a second "
        "time, traced with stacks for the flagged files only). Example:\n"
        "  polyperf audit -- python -c 'import json; json.load(open(\"big.json\", buffering=0))'",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--tiny", type=int, default=16, help="bytes at or below which a syscall is tiny (default 16)")
    p.add_argument("--min-run", type=int, default=64, help="consecutive tiny syscalls that flag a file (default 64)")
    p.add_argument("--no-stack-traces", action="store_true", help="trace once, without the stack-trace rerun")
    p.add_argument(
        "--json",
        action="store_true",
        help="print the findings as JSON (flagged paths under `flagged`), alone on stdout: the command's own "
        "output goes to stderr",
    )
    p.add_argument("--fail-on-flag", action="store_true", help="exit 1 when a file is flagged (for CI)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds before the command is stopped")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ARGS", help="the command to audit")
    p.set_defaults(func=_cmd_audit)
