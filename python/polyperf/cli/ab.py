"""`polyperf ab BASE HEAD [SUITES…]`: the CI gate that measures two revisions in one session until it decides."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

DESCRIPTION = """\
Builds the code under test at two git revisions (the extension and the servers, each built with cargo or go in a
temporary worktree and cached under .tools/ab by its sources), then measures both in one session: every repeat
measures A (BASE) and B (HEAD), each in a fresh process or server, in a seeded random order; pairs are joined by
repeat. After every pair an anytime-valid confidence sequence of each series' ratio B/A is updated (a sign-test
sequence of the median paired log-ratio, Howard et al. 2021; the family's level shared by Bonferroni), and the
session stops when every series is decided, or a regression is, or a series is inconsistent, or the budget runs out
("undecided within budget", never a guess). A decided series keeps its decision. "Inconsistent": the running
intersection of a series' intervals emptied, so its pairs do not share one median (drift, or a change during the
session); it is never turned into a verdict. The change printed is the median paired ratio, clamped into its
interval. The harness, workloads and analysis are the current checkout's. Interleaving on one machine is what lets
slowdowns of 10% or less be seen on shared machines (Laaber et al. 2019), where two runs at different times differ
by more.

A rerun continues: a session of the same BASE and HEAD commits (and harness commit, suites, alpha) on the same
machine fingerprint adds its pairs to those stored by earlier sessions (OUT/ab-sequences/), so rerunning an
undecided or failed job adds evidence instead of drawing a fresh alpha. A stored sequence that was inconsistent is
set aside and a new one starts. Delete its file to start over by hand.

A failed repeat costs a repeat, not the answer: a repeat that fails for a reason of the moment (a load generator
that failed or had not finished, a window that served no request, a worker that did not finish) is tried again, its
time spent from the budget, and the retries are counted in the output and in env.json. The session stops on a
failure (exit 2, the pairs so far judged and kept in the run folder) only when the same failure comes 10 times in a
row; a server that cannot start, or a worker that raises, stops it at once.

Suites: io_buffering and bson (microbenchmarks, through each revision's own extension: the least CPU time of a
call per worker process, A and B back to back) and http_frameworks (gnet, axum and net/http devices APIs and both
hyper runtimes, each revision's binaries: a fresh server per side and repeat, A and B loaded at the same time by
one oha each at a fixed rate, servers and load generators pinned to different CPUs; the server's CPU per request
is gated).

examples:
  polyperf ab origin/main HEAD io_buffering bson --markdown ab.md
  polyperf ab origin/main HEAD http_frameworks          # budget 540 s by default for servers

exit: 0 no regression: every series decided, or undecided within budget (said in the output; with
--fail-on-undecided: 4); 1 a regression decided; 3 inconsistent (no verdict can be drawn: rerun on a quieter machine);
2 bad input, or the same failure 10 times in a row; 130 interrupted."""


def _env_pair(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, value


def _cmd_ab(args: argparse.Namespace) -> int:
    from polyperf.gate.options import ABOptions
    from polyperf.gate.session import run_ab

    if not (math.isfinite(args.threshold) and args.threshold >= 0):
        print(f"polyperf ab: --threshold must be finite and >= 0, got {args.threshold}", file=sys.stderr)
        return 2
    options = ABOptions(
        base=args.base,
        head=args.head,
        suites=tuple(args.suites or ("io_buffering",)),
        threshold=args.threshold / 100,
        alpha=args.alpha,
        max_pairs=args.max_pairs,
        budget_s=args.budget,
        seed=args.seed,
        env_b=dict(args.test_env_b or ()),
        out=Path(args.out),
    )
    if args.suites_dir is not None:  # a suite of your own: a Go package in (or at) that folder
        from polyperf.gate.native import run_ab_native

        folder = Path(args.suites_dir)
        [suite] = options.suites if len(options.suites) == 1 else [""]
        folder = folder if folder.resolve().name == suite else folder / suite
        outcome = run_ab_native(options, folder)
    else:
        try:
            options.check()
        except ValueError as exc:
            print(f"polyperf ab: {exc}", file=sys.stderr)
            return 2
        outcome = run_ab(options)
    print(outcome.markdown)
    print(f"run directory: {outcome.run_dir}")
    if args.markdown:
        Path(args.markdown).write_text(outcome.markdown, encoding="utf-8")
    if outcome.interrupted:
        print("polyperf ab: interrupted; the pairs measured so far are judged above and kept", file=sys.stderr)
        return 130
    if outcome.verdict == "slower":
        print("polyperf ab: a regression was decided", file=sys.stderr)
        return 1
    if outcome.verdict == "inconsistent":
        print("polyperf ab: inconsistent: a series' pairs share no median; no verdict", file=sys.stderr)
        return 3
    if outcome.verdict == "undecided":
        if args.fail_on_undecided:
            print("polyperf ab: undecided within budget (--fail-on-undecided); a rerun continues", file=sys.stderr)
            return 4
        print("polyperf ab: undecided within budget (not a pass on evidence, not a failure)", file=sys.stderr)
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ab",
        help="CI gate: two git revisions measured interleaved in one session until a verdict is decided",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("base", metavar="BASE", help="the baseline revision (A), e.g. origin/main")
    p.add_argument("head", metavar="HEAD", help="the revision to judge (B), e.g. HEAD")
    p.add_argument("suites", nargs="*", metavar="SUITE", help="io_buffering (default), bson and/or http_frameworks")
    p.add_argument(
        "--threshold",
        type=float,
        default=2.0,
        metavar="PCT",
        help="changes within ±PCT%% do not matter (default 2): a series is decided slower or faster when its whole "
        "interval lies beyond the band, 'no change' when inside it",
    )
    p.add_argument("--alpha", type=float, default=0.05, help="the family's error rate, in (0, 1) (default 0.05)")
    p.add_argument(
        "--budget",
        type=float,
        default=None,
        metavar="S",
        help="seconds of pairs at most (default 170, or 540 with a server suite)",
    )
    p.add_argument("--max-pairs", type=int, default=200, help="pairs at most (default 200)")
    p.add_argument(
        "--fail-on-undecided",
        action="store_true",
        help="exit 4 when the budget runs out before every series is decided (default: exit 0, said in the output); "
        "a rerun continues the stored sequence",
    )
    p.add_argument("--seed", type=int, default=None, help="seed of the A/B order (default: drawn, in env.json)")
    p.add_argument("--out", default="reports", help="output directory of the run folder (default: reports)")
    p.add_argument(
        "--suites-dir",
        default=None,
        metavar="DIR",
        help="SUITE is a Go package of yours in (or at) DIR: its Benchmark functions at BASE and HEAD of the git "
        "repository DIR is in, each side a fresh process of a fixed number of iterations, CPU time per iteration gated",
    )
    p.add_argument("--markdown", default=None, metavar="FILE", help="also write the table as Markdown (PR comment)")
    p.add_argument(
        "--test-env-b",
        action="append",
        type=_env_pair,
        metavar="NAME=VALUE",
        help="test only: extra environment for B's processes, e.g. POLYPERF_TEST_SLOWDOWN_PCT=10 to inject a "
        "calibrated slowdown into the extension's parse_json_file and the net/http server's handler",
    )
    p.set_defaults(func=_cmd_ab)
