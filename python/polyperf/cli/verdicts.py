"""`polyperf verdicts RUN [--claims FILE] [--json]`: a run judged against the built-in claims or a user's own file."""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from pathlib import Path

VERDICTS_HELP = """\
Every entry of a claims file selects rows of the run and states a rule. The rows are summarised to one value per
independent repeat (load run or benchmark round); a ratio of paired repeats joins them by repeat. The estimate
carries a distribution-free 95% interval: order statistics for a median (n >= 6), Hodges-Lehmann with the exact
rank interval for a ratio (paired: n >= 6 pairs; unpaired: 4 + 4 repeats). Below that n there is no interval and
the verdict is "inconclusive: too few samples". Exact counts (unit count, whole numbers) are judged on every
repeat, at any n. An estimate within the noise floor (the interval's half-width, at least the entry's min_effect)
of a bound of the rule is "inconclusive". Otherwise: reproduced / not reproduced when the whole interval lies on
one side.

A claims file is TOML, one [[claims]] table per entry (the built-in one is python/polyperf/analyse/claims.toml):

  [[claims]]
  id = "mine.unbuffered_slower"
  kind = "claim"                  # or "check": your own expectation rather than a published claim
  suite = "io_buffering"
  source = "who said it, where"
  statement = "unbuffered parsing is slower than buffered"
  published = 11.43               # the published figure; leave out for a direction-only claim
  unit = "x"
  measure = "ratio"               # or "value": the median of the selected rows
  metric = "seconds"
  select = { case = "parse", params = { bytes = 2009108 } }
  numerator = { variant = "unbuffered" }
  denominator = { variant = "buffered" }
  paired = false                  # true when the two were measured interleaved, repeat by repeat
  min_effect = 0.05               # optional: differences under 5% are never decided
  rule = { kind = "greater_than", threshold = 1.0, why = "..." }
  # rule kinds: within_factor (factor), within_abs (tolerance), less_than / greater_than (threshold);
  # within_* centre on `published`, or on rule.center for a check.
"""


def _fmt(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "–"
    return f"{value:,.0f}" if float(value).is_integer() and abs(value) >= 100 else f"{value:.4g}"


def _text(records: list[dict]) -> str:
    lines = []
    for kind, title in (("claim", "Claims"), ("check", "Checks (polyperf's own expectations)")):
        chosen = [r for r in records if r["kind"] == kind]
        if not chosen:
            continue
        lines.append(f"{title}:")
        for r in chosen:
            interval = f"[{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}]" if r["ci_low"] is not None else "no interval"
            floor = "exact" if r["noise_floor"] == 0 else f"±{r['noise_floor']:.1%}" if r["noise_floor"] else "–"
            lines.append(
                f"  {r['verdict']:<15} {r['claim']}: {_fmt(r['measured'])} {interval} n={r['n']} floor {floor}"
                f"\n  {'':<15} {r['reason']}"
            )
    return "\n".join(lines) if lines else "no entries"


def _cmd_verdicts(args: argparse.Namespace) -> int:
    from polyperf.analyse.claims import evaluate, load_claims
    from polyperf.record import load_run, resolve_run
    from polyperf.record.run_dir import UnreadableLines

    run_dir = resolve_run(args.run)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UnreadableLines)
        table = load_run(run_dir)
    for warning in caught:
        print(f"polyperf verdicts: {warning.message}", file=sys.stderr)
    if args.claims:
        entries = load_claims(Path(args.claims))
    else:
        suites = set(table["suite"].dropna()) if "suite" in table else set()
        entries = [c for c in load_claims() if c.suite in suites]
    records = [v.as_record() for v in evaluate(table, entries)]
    if args.json:
        json.dump(records, sys.stdout, indent=2, ensure_ascii=False)
        print()
    else:
        print(f"polyperf verdicts: {run_dir}")
        print(_text(records))
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "verdicts",
        help="judge a run against the published claims, or against your own claims file",
        description="Judge a run against the built-in claims (the entries of the suites it ran) or every entry of "
        "your own claims file.\n\n" + VERDICTS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "run",
        nargs="?",
        default="reports/latest",
        help="run directory, or an output dir meaning its latest run (default: reports/latest)",
    )
    p.add_argument("--claims", default=None, metavar="FILE", help="your claims file (TOML, the format below)")
    p.add_argument(
        "--json",
        action="store_true",
        help="print a JSON list, one object per entry: claim, suite, kind, verdict, reason, measured, ci_low, "
        "ci_high (null without an interval), n, noise_floor, method, published, rule, ...",
    )
    p.set_defaults(func=_cmd_verdicts)
