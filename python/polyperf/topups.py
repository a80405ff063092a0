"""The run's second phase: repeats added where the verdicts need them, while the budget lasts.

After the suites' first batch, `polyperf run` judges the run, asks `analyse.allocate` which open entry one more
batch of repeats is likeliest to decide for the fewest seconds, and runs again only the tests that wrote that
entry's series (`producers.json`), in a pytest child of their own, with new repeat numbers (`common.repeats`): a
fresh worker process or a restarted server per repeat, as in the first batch. A test whose repeats loop over
targets (`LoadEnv.interleave`) measures again only the targets the open entries select, and its cost per repeat is
estimated as that share of its first batch's. Then it judges again, until nothing
open can be decided within the budget left. Every entry's evidence is an e-process (`analyse.anytime`), so the
added repeats extend the same sequences and the family's error rate is spent once.

`polyperf run --continue RUN` does the same on a run made earlier on the same commit and machine: its sequences
go on where they stopped.
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from polyperf.analyse.allocate import choose, declared, family_target, needs, open_of
from polyperf.analyse.claims import Verdict, selected_rows
from polyperf.common.repeats import ENV as MORE_ENV
from polyperf.common.repeats import PLAN_ENV, TARGETS_ENV
from polyperf.record.run import Run, read_producers
from polyperf.record.run_dir import UnreadableLines, log_line

__all__ = ["TopUps", "add_repeats", "claim_nodes", "claim_targets"]

RATE = 0.05  # the family's false discovery rate (`analyse.family`)
FIRST_OVERHEAD_S = 12.0  # per suite file of a batch: pytest start, fixtures, server starts; then as measured
MAX_BATCHES = 60  # a bound on the loop whatever the estimates say


@dataclass
class TopUps:
    """What the second phase did: its batches (entry, repeats, seconds, exit code) and why each open entry is open."""

    budget_s: float
    batches: list[dict[str, object]] = field(default_factory=list)
    open: dict[str, str] = field(default_factory=dict)

    def as_record(self) -> dict[str, object]:
        return {"budget_s": round(self.budget_s, 1), "batches": self.batches, "open": self.open}


def claim_nodes(table: pd.DataFrame, verdict: Verdict, producers: Mapping[str, Mapping[str, list]]) -> list[str]:
    """The tests that wrote any series the entry selects, in the order they first ran."""
    keys: set[tuple[str, ...]] = set()
    for rows in selected_rows(table, verdict.claim):
        cols = ["suite", "case", "implementation", "variant", "metric"]
        keys |= {tuple(map(str, k)) for k in rows[cols].drop_duplicates().itertuples(index=False)}
    return [node for node, seen in producers.items() if keys & {tuple(map(str, s)) for s in seen.get("series", [])}]


def claim_targets(table: pd.DataFrame, verdict: Verdict) -> set[tuple[str, str]]:
    """The (implementation, variant) pairs whose rows the entry selects: what a narrowing test measures again."""
    pairs: set[tuple[str, str]] = set()
    for rows in selected_rows(table, verdict.claim):
        found = rows[["implementation", "variant"]].drop_duplicates().itertuples(index=False)
        pairs |= {(str(implementation), str(variant)) for implementation, variant in found}
    return pairs


def _cost_per_repeat(
    nodes: Sequence[str],
    producers: Mapping[str, Mapping[str, list]],
    durations: dict,
    targets: set[tuple[str, str]] | None = None,
) -> float:
    """Seconds one more repeat of these tests takes: each test's first-batch time over its first batch's repeats;
    for a test that narrows a top-up to the entry's targets, the share of its targets those are; else what its
    earlier top-ups cost per repeat, once it had some."""
    total = 0.0
    for node in nodes:
        seen = producers.get(node, {})
        added = seen.get("added", [])
        cost = float(durations.get(node, 0.0)) / max(1, len(seen.get("repeats", [])) - len(added))
        pairs = {(str(s[2]), str(s[3])) for s in seen.get("series", []) if len(s) >= 4}
        if seen.get("narrows") and targets and pairs:
            cost *= max(1, len(pairs & targets)) / len(pairs)
        elif added and seen.get("added_s"):
            cost = float(seen["added_s"]) / len(added)
        total += cost
    return max(total, 0.5)


def _files(chosen: Sequence[tuple[str, int]], nodes: Mapping[str, Sequence[str]]) -> set[str]:
    """The suite files a batch runs tests of."""
    return {node.split("::")[0] for claim, _count in chosen for node in nodes[claim]}


def _batch_seconds(
    chosen: Sequence[tuple[str, int]], costs: Mapping[str, float], nodes: Mapping[str, Sequence[str]], overhead: float
) -> float:
    """What a batch is expected to take: its repeats at their cost, and the overhead once per suite file."""
    return sum(count * costs[claim] for claim, count in chosen) + overhead * max(1, len(_files(chosen, nodes)))


def _judge(run: Run, judge: Callable[[pd.DataFrame], list[Verdict]]) -> tuple[pd.DataFrame, list[Verdict]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreadableLines)  # said once, at the end of the run
        table = run.write_table()
    return table, judge(table)


def _durations(run_dir: Path) -> dict[str, float]:
    try:
        data = json.loads((run_dir / "durations.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def add_repeats(
    run: Run,
    *,
    deadline: float,
    judge: Callable[[pd.DataFrame], list[Verdict]],
    stream: Callable[[list[str], dict[str, str]], tuple[int, str | None]],
    pytest_cmd: Callable[[Sequence[str]], list[str]],
    quiet: bool = False,
) -> TopUps:
    """Batches of repeats until `deadline` (time.monotonic()) or nothing open can be decided; `stream(cmd, env)`
    runs one pytest child (the runner's, with its signals and log), `pytest_cmd(nodes)` builds its command."""
    run_dir = run.run_dir
    done = TopUps(max(0.0, deadline - time.monotonic()))
    overhead = FIRST_OVERHEAD_S
    stuck: dict[str, str] = {}  # entries whose tests failed, or added no repeat, when run again: never chosen again
    failures: dict[str, int] = {}
    for _ in range(MAX_BATCHES):
        table, verdicts = _judge(run, judge)
        producers, durations = read_producers(run_dir), _durations(run_dir)
        tests, declared_parts = declared(verdicts)
        entries = [entry for v in verdicts for entry in open_of(v)]
        open_needs = needs(entries, family_target(tests, declared_parts, RATE))
        by_id = {v.claim.id: v for v in verdicts}
        nodes = {n.claim: claim_nodes(table, by_id[n.claim], producers) for n in open_needs}
        targets = {c: claim_targets(table, by_id[c]) for c in nodes}
        costs = {
            c: _cost_per_repeat(ns, producers, durations, targets[c])
            for c, ns in nodes.items()
            if ns and c not in stuck
        }
        why = {n.claim: n.why for n in open_needs}
        remaining = deadline - time.monotonic()
        chosen, done.open = choose(open_needs, costs, remaining, overhead)
        # each suite file in a batch starts its own fixtures (servers, builds checked, worker pools): the batch
        # pays the overhead once per file, so the most expensive choices go until the whole batch fits
        while chosen and _batch_seconds(chosen, costs, nodes, overhead) > remaining:
            claim, _count = chosen.pop()
            done.open[claim] = f"the budget: {why[claim]} (it did not fit beside the batch's other tests)"
        done.open.update({claim: why for claim, why in stuck.items() if claim in done.open})
        if not chosen:
            break
        start = int(pd.to_numeric(table["repeat"], errors="coerce").max()) + 1 if not table.empty else 0
        plan: dict[str, int] = {}
        wanted: dict[str, set[tuple[str, str]]] = {}
        for claim, count in chosen:
            for node in nodes[claim]:
                plan[node] = max(plan.get(node, 0), count)
                wanted.setdefault(node, set()).update(targets[claim])
        left = deadline - time.monotonic()
        expected = _batch_seconds(chosen, costs, nodes, overhead)
        files = len(_files(chosen, nodes))
        for claim, count in chosen:
            line = f"adding {count} repeats to {claim} ({why[claim]})"
            log_line(run_dir, f"top-up: {line}")
            if not quiet:
                print(f"\npolyperf: {line}", flush=True)
        if not quiet:
            print(f"polyperf: one batch of {len(plan)} tests, ≈ {expected:.0f} s of the {left:.0f} s left", flush=True)
        n_before = {c: (by_id[c].measured.n if by_id[c].measured else 0) for c, _ in chosen}
        began = time.monotonic()
        env = {
            MORE_ENV: f"{start}:{max(plan.values())}",
            PLAN_ENV: json.dumps(plan),
            TARGETS_ENV: json.dumps({node: sorted(map(list, pairs)) for node, pairs in wanted.items()}),
        }
        code, interrupted = stream(pytest_cmd(list(plan)), env)
        took = time.monotonic() - began
        done.batches.append(
            {
                "claims": dict(chosen),
                "tests": plan,
                "first_repeat": start,
                "seconds": round(took, 1),
                "exit_code": code,
            }
        )
        if interrupted:
            done.open.update({c: f"the run was interrupted ({interrupted}) while repeats were added" for c in plan})
            break
        if code == 0:
            overhead = max(3.0, (took - (expected - overhead * files)) / files)
        after = {v.claim.id: v for v in _judge(run, judge)[1]}
        for claim, _ in chosen:
            v = after.get(claim)
            if v is None or v.measured is None or v.measured.n <= n_before[claim]:
                stuck[claim] = f"its tests added no repeat when run again (pytest exit {code}; see logs/pytest.log)"
            elif code != 0:
                failures[claim] = failures.get(claim, 0) + 1
                if failures[claim] >= 2:
                    stuck[claim] = "its tests failed twice when run again (see logs/pytest.log)"
    if not quiet and done.batches:
        spent = sum(float(b["seconds"]) for b in done.batches)  # type: ignore[arg-type]
        added = sum(sum(b["claims"].values()) for b in done.batches)  # type: ignore[union-attr]
        print(f"polyperf: {added} repeats in {len(done.batches)} batches, {spent:.0f} s", file=sys.stderr, flush=True)
    return done
