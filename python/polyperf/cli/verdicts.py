"""`polyperf verdicts RUN [--claims FILE ...] [--json] [--write]`: a run judged again, against the built-in claims or a
user's own files; with --write, the run's verdicts.json is replaced (the only way it changes after the run)."""

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
carries a distribution-free 95% interval: order statistics for a median (n >= 6); for a paired ratio the median of
per-repeat ratios with the sign-test interval (n >= 6 pairs); for an unpaired ratio the ratio of medians, each
side's interval at 97.5% (7 + 7 repeats). Below that n there is no interval and the verdict is "inconclusive: too
few samples". Exact counts (unit count, whole numbers) are judged on every repeat, at any n. An estimate within the
noise floor (the interval's half-width on the side facing the bound, at least the entry's min_effect) of a bound
is never decided.

A verdict has two parts. Direction (rule less_than / greater_than): reproduced / opposite / inconclusive. Size
(an entry with a published figure): measured / published with its interval, "as published" inside the entry's
margin, "larger" / "smaller" wholly outside it, else inconclusive. An entry that claims a value (rule within_*) is
judged inside / outside its band. `verdict` stays one of reproduced / not reproduced / inconclusive / not measured
(the direction, or the band); `headline` says both parts: "reproduced, 5.6x larger than published (63.5x vs 11.43x)".
Every tested part of the run forms one family, controlled together (--family: e-BH on the parts' e-values at a 5%
false discovery rate by default, or Benjamini-Yekutieli or Holm's family-wise error rate on 1/e; all hold under any
dependence between the tests, which a mix of direction and equivalence tests on shared rows needs, and at the number
of repeats a run stopped at): an outcome its own interval decides but the family's
adjustment does not is "inconclusive", and says so. A part held back by the noise floor cannot be declared and
enters the family with p = 1, so that it cannot lower the bar for the others. Exact counts are not tests.

A claims file is TOML, one [[claims]] table per entry (the built-in one is python/polyperf/analyse/claims.toml).
`polyperf run` also reads claims.toml and *.claims.toml beside the suites and `--claims FILE`, keeps them in the run
folder, and every later command judges the run against them; an id used twice is refused in one line.

  [[claims]]
  id = "mine.unbuffered_slower"
  kind = "claim"                  # "check": your own expectation; "derived": your restatement of a claim
  suite = "io_buffering"
  source = "who said it, where"
  statement = "unbuffered parsing is slower than buffered"
  published = 11.43               # the published figure; leave out for a direction-only claim
  margin = 2.0                    # size "as published" within 11.43 ÷/× 2 (or margin_abs = 1.5, in the unit);
                                  # left out: (1 + half the last written digit / published) x 1.25 for timings,
                                  # x 1 for exact counts (11.43: 1.2505)
  unit = "x"
  measure = "ratio"               # or "value": the median of the selected rows
  metric = "seconds"
  select = { case = "parse", params = { bytes = 2009108 } }
  numerator = { variant = "unbuffered" }
  denominator = { variant = "buffered" }
  paired = false                  # true when the two were measured interleaved, repeat by repeat
  min_effect = 0.05               # optional: differences under 5% are never decided
  rule = { kind = "greater_than", threshold = 1.0, why = "..." }
  [claims.conditions]             # optional, printed beside the verdict
  input = "a 2 MB GeoJSON file"   # also machine, versions: the article's own
  measured_on = "a generated GeoJSON file of the article's size"
  # rule kinds: within_factor (factor), within_abs (tolerance), less_than / greater_than (threshold);
  # within_* centre on `published`, or on rule.center for a check.

Every key is checked (python/polyperf/analyse/claims_file.py): an unknown key, also inside rule or select (a typo
such as `centre`, or [[claim]] for [[claims]]), a value of the wrong type, a `published` figure that is not finite or
not above 0 for a ratio, a factor not above 1 or a min_effect below 0 is refused in one line that names the entry
and the field.
"""


def _fmt(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "–"
    return f"{value:,.0f}" if float(value).is_integer() and abs(value) >= 100 else f"{value:.4g}"


def _text(records: list[dict]) -> str:
    lines = []
    titles = (("claim", "Claims"), ("derived", "Derived (polyperf's restatements of a claim)"), ("check", "Checks"))
    for kind, title in titles:
        chosen = [r for r in records if r["kind"] == kind]
        if not chosen:
            continue
        lines.append(f"{title}:")
        for r in chosen:
            interval = f"[{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}]" if r["ci_low"] is not None else "no interval"
            floor = "exact" if r["noise_floor"] == 0 else f"±{r['noise_floor']:.1%}" if r["noise_floor"] else "–"
            lines.append(
                f"  {r['verdict']:<15} {r['claim']}: {_fmt(r['measured'])} {interval} n={r['n']} floor {floor}"
                f"\n  {'':<15} {r['headline']}\n  {'':<15} {r['reason']}"
            )
    return "\n".join(lines) if lines else "no entries"


def _cmd_verdicts(args: argparse.Namespace) -> int:
    from polyperf.analyse.verdict_records import claims_for, judge
    from polyperf.record import load_run, resolve_run
    from polyperf.record.run_dir import UnreadableLines
    from polyperf.record.verdicts_file import VERDICTS_FILE, VerdictsFileError, read_verdicts, write_verdicts

    run_dir = resolve_run(args.run)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UnreadableLines)
        table = load_run(run_dir)
    for warning in caught:
        print(f"polyperf verdicts: {warning.message}", file=sys.stderr)
    entries, files = claims_for(table, [Path(c) for c in args.claims or ()], run_dir=run_dir)
    records, family = judge(table, entries, family=args.family)
    if args.write:  # the one way a run's verdicts change after it ran: asked for, and said
        try:
            before = read_verdicts(run_dir)
        except VerdictsFileError:  # a damaged file is what --write is for
            before = None
        written = write_verdicts(run_dir, records, files, written_by="polyperf verdicts --write", family=family)
        was = ", ".join(f"{s.path} ({s.sha256[:12]})" for s in before.claims_files) if before else "none"
        now = ", ".join(f"{s.path} ({s.sha256[:12]})" for s in written.claims_files)
        print(
            f"polyperf verdicts: {run_dir / VERDICTS_FILE} rewritten: judged against {now} (before: {was}); "
            f"`polyperf report {run_dir}` redraws its report",
            file=sys.stderr,
        )
    elif (run_dir / VERDICTS_FILE).exists():
        print(
            f"polyperf verdicts: judged now; the run's own {VERDICTS_FILE} (what it printed) is unchanged "
            "(--write replaces it)",
            file=sys.stderr,
        )
    if args.json:
        json.dump(records, sys.stdout, indent=2, ensure_ascii=False)
        print()
    else:
        print(f"polyperf verdicts: {run_dir}")
        if family:
            print(f"Family: {family}.")
        print(_text(records))
    return 0


# The same add_parsers shape as export, new, remote, runs and tools: each module owns its sub-commands and flags.
def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "verdicts",
        help="judge a run against the published claims, or against your own claims file",
        description="Judge a run again against the built-in claims (the entries of the suites it ran) or every entry "
        "of your own claims files. A run writes its verdicts once, into verdicts.json, as it runs; the report, store, "
        "compare and history read that file. This command prints a new judgement, and with --write replaces the "
        "file.\n\n" + VERDICTS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "run",
        nargs="?",
        default="reports/latest",
        help="run directory, or an output dir meaning its latest run (default: reports/latest)",
    )
    p.add_argument(
        "--claims",
        action="append",
        metavar="FILE",
        help="your claims file (TOML, the format below); give it again for more files, judged as one family. Without "
        "it: polyperf's claims and those the run was made with (claims.toml beside its suites, `run --claims`)",
    )
    p.add_argument(
        "--write",
        action="store_true",
        help="replace the run's verdicts.json with these verdicts (the report, store, compare and history read it; "
        "a run is otherwise judged once, when it runs)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print a JSON list, one object per entry: claim, suite, kind, verdict, headline, direction, size, "
        "size_ratio, size_ci_low, size_ci_high, reason, measured, ci_low, ci_high (null without an interval), n, "
        "noise_floor, method, published, rule, p_values, p_adjusted, family (tests, declarable, method, error, "
        "rate), family_level, family_ci_low, family_ci_high (the interval at the level the family decides at: it "
        "clears a bound exactly where the family declares), ...",
    )
    p.add_argument(
        "--family",
        choices=("ebh", "by", "holm"),
        default="ebh",
        help="how the run's tests are controlled together, under any dependence, on each part's e-value: ebh "
        "(e-BH, false discovery rate 5%%; default, as `polyperf run` judges), by (Benjamini-Yekutieli on 1/e) or "
        "holm (family-wise error rate 5%%)",
    )
    p.set_defaults(func=_cmd_verdicts)
