"""`polyperf export RUN --format bmf|github-action-benchmark|gobench`: a run in another tool's format."""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path


def _cmd_export(args: argparse.Namespace) -> int:
    from polyperf.common.atomic import write_text_atomic
    from polyperf.record import load_run, resolve_run
    from polyperf.report.export import export_text

    run_dir = resolve_run(args.run)
    with warnings.catch_warnings():  # skipped lines are said once, below, on stderr
        warnings.simplefilter("ignore")
        table = load_run(run_dir)
    if table.empty:
        raise ValueError(f"{run_dir}: no rows to export")
    text, note = export_text(table, args.format, gab_tool=args.gab_tool)
    if skipped := table.attrs.get("unreadable_lines"):
        print(f"polyperf: {run_dir.name}: {len(skipped)} unreadable lines skipped", file=sys.stderr)
    if note:
        print(f"polyperf: {note}", file=sys.stderr)
    if args.out:
        write_text_atomic(Path(args.out), text)
        print(f"polyperf: {args.format} export of {run_dir.name} written to {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


# The same add_parsers shape as new, remote, runs, tools and verdicts: each module owns its sub-commands and flags.
def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="write a run in Bencher's, github-action-benchmark's or Go's benchmark format",
        description="Exports a run for other tools: one value per independent repeat (the median of its samples), "
        "values in base units, which way is better as polyperf's metric catalogue declares it.\n"
        "  bmf: Bencher Metric Format JSON (value, lower_value and upper_value: the 95%% interval of the median, "
        "the range over repeats for exact counts; no bounds below 6 repeats)\n"
        "  github-action-benchmark: its custom JSON, for `tool: customSmallerIsBetter` (default) or "
        "customBiggerIsBetter (--gab-tool); a file holds the series better one way\n"
        "  gobench: the Go benchmark format with `Unit` lines (better=, assume=exact), one line per repeat; "
        "compare two runs with `benchstat a.txt b.txt`\n"
        "examples:\n"
        "  polyperf export reports/latest --format bmf --out bmf.json\n"
        "  polyperf export base --format gobench > base.txt && polyperf export head --format gobench > head.txt",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run", metavar="RUN", help="run directory, or an output dir meaning its latest run")
    p.add_argument("--format", required=True, choices=("bmf", "github-action-benchmark", "gobench"))
    p.add_argument("--out", default=None, metavar="FILE", help="write here (replaced whole) instead of stdout")
    p.add_argument(
        "--gab-tool",
        default="customSmallerIsBetter",
        choices=("customSmallerIsBetter", "customBiggerIsBetter"),
        help="github-action-benchmark only: the workflow's `tool:`, which picks the series better that way",
    )
    p.set_defaults(func=_cmd_export)
