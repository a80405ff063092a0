"""The `polyperf` command: a thin layer over the library (`polyperf.run`, `write_report`, ...); one module
per group of commands, each adding its subparsers."""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from polyperf.cli import ab, apps, export, history, new, remote, runs, tools, verdicts
from polyperf.common.redact import redact

DESCRIPTION = """\
polyperf re-measures published performance claims (buffered vs unbuffered I/O, BSON
deserialization, Rust vs Go servers, build settings) on this machine, and writes tidy
results, figures and a claims verdict table.

typical use:
  polyperf run                      # every suite, quick profile, report at the end
  polyperf run io_buffering --profile smoke
  polyperf report reports/latest    # re-render a run's report
  polyperf verdicts reports/latest --claims my_claims.toml --json
  polyperf new suite mine --dir my_suites && polyperf run --suites-dir my_suites mine
  polyperf history --fail-on-regression   # change points over commits in the runs' history
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="polyperf", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in (runs, new, ab, verdicts, history, apps, tools, remote, export):
        group.add_parsers(sub)
    return parser


def _one_line_warnings(fallback: Callable[..., None]) -> Callable[..., None]:
    """polyperf's own warnings (unreadable lines skipped, say) speak to users: one plain line on stderr, without
    Python's file, line number and class name. Other libraries' warnings print as they always do."""

    def show(message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any) -> None:
        if category.__module__.startswith("polyperf."):
            print(f"polyperf: warning: {redact(str(message))}", file=sys.stderr)
        else:
            fallback(message, category, *args, **kwargs)

    return show


def main(argv: Sequence[str] | None = None) -> int:
    from polyperf.common.procs import install_signal_handlers
    from polyperf.errors import PolyperfError

    args = build_parser().parse_args(argv)
    install_signal_handlers()
    try:
        with warnings.catch_warnings():  # puts Python's own warning printer back on the way out
            warnings.showwarning = _one_line_warnings(warnings.showwarning)
            return args.func(args)
    except (OSError, ValueError, PolyperfError) as exc:  # bad input: a file that is a folder, unreadable, invalid
        print(f"polyperf: error: {redact(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("polyperf: interrupted; partial results are kept in the run directory", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug: one line for users, the traceback on request (tests assert it never shows)
        if os.environ.get("POLYPERF_TRACEBACK"):
            raise
        print(
            f"polyperf: internal error: {type(exc).__name__}: {redact(str(exc))} (a bug; POLYPERF_TRACEBACK=1 shows "
            "where)",
            file=sys.stderr,
        )
        return 70


if __name__ == "__main__":
    raise SystemExit(main())
