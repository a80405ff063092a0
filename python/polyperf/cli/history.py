"""`polyperf store add RUN…` and `polyperf history [backfill]`: the runs' history, its change points and its page."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported on use: the command line starts without pandas
    import pandas as pd

STORE_HELP = (
    "the history store: a DuckDB file, or a postgresql:// URL for a team's store (default: $POLYPERF_STORE, else "
    "<out>/history.duckdb)"
)
HISTORY_DESCRIPTION = """\
Finds change points in every series over commits (one value per run: the median of its repeats) and in every
claim's measured value, on one machine fingerprint (CPU model, cores, kernel, CPU budget; by default the newest
run's). Measured values: candidates from binary segmentation (ruptures) and E-Divisive means (Apache Otava), each
confirmed by a Mann-Whitney test at p <= 1e-4 and a shift of at least 2 times the series' own noise and 2%; a
level left again within 5 points, back the way it came, and 4 or more swings between two levels are not changes; a
run of steps one way that a straight ramp explains better is one slope (its start, end and rate per commit); a
change with fewer than 5 points after it is pending (not gated unless --include-pending). Exact counts (the metric
catalogue's) change at any difference. Each change: the commits on either side, its size (Hodges-Lehmann ratio of the
points after over those before, 95% Moses interval) and its p-value; the catalogue says regression or improvement.
Changes at one commit are grouped; creep is a Mann-Kendall trend over the newest 30 commits with Sen's slope.
"""


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _pct(value: float) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{value:+.1%}"


def _change_line(row: pd.Series) -> str:
    from polyperf.analyse.changepoints import p_text  # imported on use: `polyperf --help` loads no Otava
    from polyperf.report.history import series_name

    interval = (
        f" [{_pct(row['change_low'])}, {_pct(row['change_high'])}]"
        if not row["exact"] and math.isfinite(row["change_low"])
        else ""
    )
    significance = "exact count" if row["exact"] else p_text(row["p_value"])
    if row.get("state") == "pending":
        significance += f"; pending: {row['points_after']} point{'s' if row['points_after'] != 1 else ''} after it"
    if row.get("kind") == "slope":
        return (
            f"{row['label']:<11} {series_name(row)}: slope of {_pct(row['rate'])} per commit, {_pct(row['change'])} "
            f"in all ({significance}), from {str(row['commit_before'])[:12]} to {str(row['commit_stop'])[:12]}"
        )
    return (
        f"{row['label']:<11} {series_name(row)}: {_pct(row['change'])}{interval} ({significance}), between "
        f"{str(row['commit_before'])[:12]} and {str(row['commit_after'])[:12]}"
    )


def _cmd_store_add(args: argparse.Namespace) -> int:
    from polyperf.store import add_runs, open_store

    store = open_store(args.store, out=args.out)
    outcomes = add_runs(store, args.runs)
    for path, outcome in outcomes:
        print(f"{path}: {outcome}")
    return 0 if all(not o.startswith("not stored") for _, o in outcomes) else 2


def _creep_line(row: pd.Series) -> str:
    from polyperf.report.history import series_name

    return (
        f"creep       {series_name(row)}: {_pct(row['slope'])} per commit [{_pct(row['slope_low'])}, "
        f"{_pct(row['slope_high'])}], {_pct(row['drift'])} over {row['points']} commits "
        f"(Mann-Kendall p = {row['p_value']:.1g}, {row['label']}), {str(row['commit_first'])[:12]} to "
        f"{str(row['commit_last'])[:12]}"
    )


def _json(history: object, changes: pd.DataFrame, groups: list[dict]) -> str:
    import json

    def records(frame: pd.DataFrame) -> list[dict]:
        return json.loads(frame.to_json(orient="records")) if not frame.empty else []

    return json.dumps(
        {
            "machine": history.machine,  # type: ignore[attr-defined]
            "changes": records(changes),
            "groups": groups,
            "creep": records(history.creep),  # type: ignore[attr-defined]
        },
        indent=1,
        default=str,
    )


def _cmd_history(args: argparse.Namespace) -> int:

    from polyperf.report.history import all_changes, build_history, gate, group_changes, pending_at, series_name
    from polyperf.store import open_store

    if args.newest < 1:
        print(f"polyperf: --newest must be at least 1 (got {args.newest})", file=sys.stderr)
        return 2
    store = open_store(args.store, out=args.out)
    history = build_history(store, machine=args.machine, suite=args.suite, since=args.since, profile=args.profile)
    changes = all_changes(history)
    groups = group_changes(changes, series_name)
    if args.json:
        print(_json(history, changes, groups))
    else:
        runs, commits = history.points["run_id"].nunique(), len(history.commits)
        claims = history.verdicts["claim"].nunique()
        pending = int((changes["state"] == "pending").sum()) if "state" in changes else 0
        shared = [g for g in groups if g["count"] > 1]
        print(
            f"machine {history.machine}: {_count(runs, 'run')} over {_count(commits, 'commit')}, "
            f"{history.points['series_id'].nunique()} series, {_count(claims, 'claim')}; "
            f"{_count(len(changes), 'change')} ({pending} pending), {_count(len(history.creep), 'creeping series')}"
        )
        for _, row in changes.iterrows():
            print("  " + _change_line(row))
        for group in shared:
            print(
                f"  {group['count']} series changed between {str(group['commit_before'])[:12]} and "
                f"{str(group['commit_after'])[:12]} ({group['regressions']} regressed, {group['improvements']} "
                f"improved, {group['state']})"
            )
        for _, row in history.creep.iterrows():
            print("  " + _creep_line(row))
    if not args.no_html:
        from polyperf.report.history_page import write_history_page

        page = write_history_page(history, Path(args.html or Path(args.out) / "history.html"))
        print(f"history page: {page}", file=sys.stderr if args.json else sys.stdout)
    if args.fail_on_regression:
        failing = gate(history, args.newest, include_pending=args.include_pending)
        waiting = pending_at(history, args.newest)
        note = (
            ""
            if args.include_pending or waiting.empty
            else f"; {len(waiting)} pending (not yet confirmed, not gated: --include-pending gates them)"
        )
        if not failing.empty:
            print(
                f"polyperf: {len(failing)} regression{'s' if len(failing) > 1 else ''} at the newest "
                f"{args.newest} commits{note}",
                file=sys.stderr,
            )
            return 1
        if note:
            print(f"polyperf: no confirmed regression at the newest {args.newest} commits{note}", file=sys.stderr)
    return 0


def _cmd_evaluate_tcpd(args: argparse.Namespace) -> int:
    import json

    from polyperf.report.tcpd_eval import evaluate_collection, read_tcpd

    try:
        collection = read_tcpd(Path(args.annotated), Path(args.annotations) if args.annotations else None)
    except ValueError as exc:
        print(f"polyperf: {exc}", file=sys.stderr)
        return 2
    result = evaluate_collection(collection, args.k)
    if args.json:
        print(json.dumps({"margin": args.k, "left_out_multivariate": collection.multivariate, **result}, indent=1))
        return 0
    left_out = (
        f"; {_count(len(collection.multivariate), 'multivariate series')} left out" if collection.multivariate else ""
    )
    print(f"{_count(len(collection.series), 'annotated series')}{left_out}; F1 within {args.k} points, and Cover:")
    for name, figures in result.items():
        print(f"  {name:<9} F1 {figures['f1']:.3f}  Cover {figures['cover']:.3f}")
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    import json

    from polyperf.report.history_eval import evaluate_annotated, read_annotated
    from polyperf.report.tcpd_eval import is_tcpd

    if args.k < 0:
        print(f"polyperf: --k must be 0 or more points (got {args.k})", file=sys.stderr)
        return 2
    if args.annotations or is_tcpd(Path(args.annotated)):
        return _cmd_evaluate_tcpd(args)
    try:
        frame = read_annotated(Path(args.annotated))
    except ValueError as exc:
        print(f"polyperf: {exc}", file=sys.stderr)
        return 2
    if args.first is not None:
        if args.first < 2:
            print(f"polyperf: --first must be 2 points or more (got {args.first})", file=sys.stderr)
            return 2
        frame = frame.groupby("series", sort=False).head(args.first)
    result = evaluate_annotated(frame, args.k)
    s = result.detector
    by_push = result.by_push if result.by_push is not None else s
    if args.json:
        figures = {"precision": s.precision, "recall": s.recall, "f1": s.f1}
        print(
            json.dumps(
                {
                    "k": s.k,
                    "series": s.series,
                    "annotated_changes": s.truths,
                    "detections": s.detections,
                    "matched": s.hits,
                    **{k: None if math.isnan(v) else v for k, v in figures.items()},
                    "alerts_valid": result.valid_alerts,
                    "alerts_invalid": result.invalid_alerts,
                    "alerts_valid_share": None if math.isnan(result.alerts_valid_share) else result.alerts_valid_share,
                    "series_with_invalid_alerts": result.series_with_invalid,
                    "series_without_alerts": result.series_without_alerts,
                    "untriaged_alerts": result.untriaged_alerts,
                    "detections_left_out": result.detections_left_out,
                    "pending_not_scored": result.pending,
                    "by_push_series": by_push.series,
                    "by_push_detections": by_push.detections,
                    "by_push_matched": by_push.hits,
                    "by_push_precision": None if math.isnan(by_push.precision) else by_push.precision,
                },
                indent=1,
            )
        )
        return 0
    alerts = result.valid_alerts + result.invalid_alerts
    print(
        f"{s.series} series ({result.series_with_invalid} with invalid alerts, "
        f"{result.series_without_alerts} without alerts): {_count(s.truths, 'valid change')}"
    )
    print(
        f"polyperf: {_count(s.detections, 'change')} found, {s.hits} within {s.k} points of a valid one: "
        f"precision {s.precision:.2f}, recall {s.recall:.2f}, F1 {s.f1:.2f}"
    )
    by_hand = s.series - by_push.series
    print(
        "  judged as the alerts are, by push (a push people confirmed on any series counts for all)"
        + (f", leaving out {by_hand} series whose alerts were all recorded by hand" if by_hand else "")
        + f": precision {by_push.precision:.2f} ({by_push.hits} of {_count(by_push.detections, 'change')})"
    )
    if result.pending:
        print(
            f"  {_count(result.pending, 'change')} still pending at the end of a series: not yet an answer, not scored"
        )
    print(
        f"the annotated alerts: {result.valid_alerts} of {_count(alerts, 'alert')} valid "
        f"(their precision {result.alerts_valid_share:.2f})"
    )
    if result.untriaged_alerts:
        print(
            f"{_count(result.untriaged_alerts, 'alert')} still under investigation: neither truth nor alert; "
            f"{_count(result.detections_left_out, 'detection')} only near one left out of the score"
        )
    return 0


def _cmd_backfill(args: argparse.Namespace) -> int:
    from polyperf.store import add_runs, open_store
    from polyperf.store.backfill import backfill, plan_backfill, this_machine

    store = open_store(args.store, out=args.out)
    try:
        stored = store.stored_commits(machine=this_machine(), profile=args.profile)
    except Exception as exc:  # an empty or absent store holds nothing to skip
        if "no history store here yet" not in str(exc):
            raise
        stored = set()
    plan = plan_backfill(args.rev_range, stored)
    print(f"polyperf: {_count(len(plan.to_run), 'commit')} to run, {len(plan.stored)} already stored (skipped)")
    if args.dry_run:
        for commit in plan.to_run:
            print(f"  would run {commit}")
        return 0
    suites = [s for part in args.suites or [] for s in part.split(",") if s]

    def add(run_dir: Path) -> str:
        return add_runs(store, [run_dir])[0][1]

    backfill(plan, suites, args.profile, Path(args.out).resolve(), add)
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    store = sub.add_parser("store", help="the runs' history store: add runs to it")
    store_sub = store.add_subparsers(dest="store_command", required=True, metavar="ACTION")
    add = store_sub.add_parser("add", help="add finished runs (run folders) to the history store")
    add.add_argument(
        "runs", nargs="+", metavar="RUN", help="run folders (interrupted or half-written ones are refused)"
    )
    add.add_argument("--store", default=None, help=STORE_HELP)
    add.add_argument("--out", default="reports", help="where the runs live (the default store sits beside them)")
    add.set_defaults(func=_cmd_store_add)

    hist = sub.add_parser(
        "history",
        help="change points over commits in every series and claim; the history page; backfill",
        description=HISTORY_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    hist.add_argument("--store", default=None, help=STORE_HELP)
    hist.add_argument("--out", default="reports", help="where the runs live (the default store sits beside them)")
    hist.add_argument("--suite", default=None, help="only this suite's series and claims")
    hist.add_argument("--machine", default=None, help="machine fingerprint (default: the newest run's)")
    hist.add_argument("--profile", default=None, help="only runs of this profile")
    hist.add_argument("--since", default=None, help="only commits made since this date (YYYY-MM-DD)")
    hist.add_argument(
        "--json", action="store_true", help="print the changes, their groups by commit and the creep as JSON"
    )
    hist.add_argument("--html", default=None, metavar="PATH", help="where to write the page (<out>/history.html)")
    hist.add_argument("--no-html", action="store_true", help="do not write the history page")
    hist.add_argument(
        "--fail-on-regression", action="store_true", help="exit 1 when a regression is found at the newest commits"
    )
    hist.add_argument(
        "--newest", type=int, default=5, metavar="N", help="what --fail-on-regression counts as newest (default 5)"
    )
    hist.add_argument(
        "--include-pending",
        action="store_true",
        help="--fail-on-regression also fails on pending changes (fewer than 5 points after them, not yet confirmed)",
    )
    hist.set_defaults(func=_cmd_history)
    hist_sub = hist.add_subparsers(dest="history_command", required=False, metavar="[backfill | evaluate]")
    evaluate = hist_sub.add_parser(
        "evaluate",
        help="score change detection against an annotated history: precision, recall and F1 at k points",
        description=(
            "Runs the change detection of `polyperf history` on every series of an annotated history and matches its "
            "confirmed changes to the changes people confirmed, within K points, one to one (changes still pending "
            "at the end of a series are counted apart). Prints precision, recall and F1, and beside them the "
            "annotated alerts' own valid share, on the same series. Precision is printed twice: series by series, "
            "and by push as alert summaries are judged (a push people confirmed on any series counts for all; "
            "series whose only annotations were recorded by hand are left out). "
            "ANNOTATED is a CSV with columns series, value and alert (rows in commit order within a series; alert "
            "empty, valid, invalid, missed: a true change no alert raised, or untriaged; an optional revision "
            "column names the push), or Perfherder series as Mozilla's REALISE-Performance dataset lays them out "
            "(data/all-datasets-annotated-aggregated/: one CSV per series, triage outcomes TP, FP, FN, SP, TN in "
            "alert_summary_status_general), one file or a folder of them. "
            "Or series in the change-point literature's layout (the Turing change-point dataset, TCPD: one JSON "
            "file per series, values in series[0].raw, and an annotations.json mapping each series' name to each "
            "annotator's change points): a JSON file or a folder holding annotations.json. Then the literature's F1 "
            "(K is its margin) and Cover are printed for polyperf, and for binary segmentation and PELT at their "
            "published defaults and a detector that never reports a change, all run on the same series."
        ),
    )
    evaluate.add_argument(
        "annotated",
        metavar="ANNOTATED",
        help="an annotated CSV (series,value,alert), Perfherder series (a CSV or a folder), or TCPD series (JSON)",
    )
    evaluate.add_argument("--k", type=int, default=5, help="tolerance (the F1 margin) in points (default 5)")
    evaluate.add_argument(
        "--first", type=int, default=None, metavar="N", help="score only the first N points of each series"
    )
    evaluate.add_argument("--json", action="store_true", help="print the figures as JSON")
    evaluate.add_argument(
        "--annotations",
        default=None,
        metavar="FILE",
        help="TCPD layout: the annotations JSON (default: annotations.json in the folder, or beside the file)",
    )
    evaluate.set_defaults(func=_cmd_evaluate)
    back = hist_sub.add_parser(
        "backfill",
        help="run suites at each commit of a range (in worktrees), skipping commits already stored",
        description=(
            "Runs suites at each commit of REV_RANGE, each in a git worktree of its own (the commit's harness, suites "
            "and apps; the Rust extension built here), and adds every finished run to the store. Commits the store "
            "already holds for this machine and profile are skipped."
        ),
    )
    back.add_argument("rev_range", metavar="REV_RANGE", help="e.g. v0.1..main, or one commit")
    back.add_argument("--suites", action="append", help="suites to run (comma-separated; default every suite)")
    back.add_argument("--profile", default="smoke", help="profile of each run (default smoke)")
    back.add_argument("--dry-run", action="store_true", help="list the commits it would run and those it skips")
    # SUPPRESS: given before `backfill` (to `history`), they are not reset here
    back.add_argument("--store", default=argparse.SUPPRESS, help=STORE_HELP)
    back.add_argument("--out", default=argparse.SUPPRESS, help="where the runs are written (default reports)")
    back.set_defaults(func=_cmd_backfill)
