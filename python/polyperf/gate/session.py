"""`polyperf ab BASE HEAD`: two revisions measured in one session, repeat by repeat, until the A/B gate decides.
The gate's entry point (`run_ab`); it sits beside `runner` (a session that measures, records and judges), above
the stages it uses. The gate's other files: `options` (what a session is asked), `micro` and `worker` (the
microbenchmarks' sides), `servers` (the servers' duet), `sequences` (the stored pairs a rerun continues), `bank` and
`calibrate` (real A/A pairs recorded and replayed); its pure analysis is `analyse.ab` and `analyse.ab_replay`.

Each revision's code under test is built once (`build.revisions`, cached by its sources): the extension for the
microbenchmark suites, the server binaries for the server suites. Every repeat then measures A and B, in an order
drawn from a seeded generator in balanced blocks (AB BA or BA AB): drift of a shared machine hits both alike, and
a pair is one repeat. For microbenchmarks a side is a fresh worker process (`gate.worker`) loading that revision's
extension, A and B back to back; for servers each side is a fresh process of each server, A and B loaded at the
same time (`gate.servers`: a duet, which the shared machine's drift cannot tell apart). After each pair the
confidence sequences (`analyse.sequential`) are updated; the session stops when every gated series is decided, when
a regression is, when a series' pairs share no median ("inconsistent"), or when the budget runs out ("undecided
within budget"). A session of the same revisions on the same machine continues the pairs stored by the sessions
before it (`gate.sequences`): a rerun adds evidence, it does not draw a fresh alpha. The harness, the workloads and the
analysis are the current checkout's; only the code under test comes from each revision. A repeat that fails for a
reason of the moment is tried again (`orchestrate.retry`), and counted in ab.md and env.json.
"""

from __future__ import annotations

import contextlib
import functools
import random
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from polyperf.analyse.ab import GATED_METRICS, evaluate_pairs, overall, to_markdown
from polyperf.build.revisions import Revision, prepare
from polyperf.common.atomic import write_text_atomic
from polyperf.gate.micro import micro_rows, orders, run_worker
from polyperf.gate.options import ABOptions, ABOutcome
from polyperf.gate.sequences import StoredSequence
from polyperf.gate.servers import ServerSides, apps_of
from polyperf.orchestrate.retry import Retries, RetriesExhausted
from polyperf.record.run import Run
from polyperf.record.run_dir import load_env
from polyperf.record.schema import Row
from polyperf.store.records import fingerprint

__all__ = ["ABOptions", "ABOutcome", "run_ab"]


def _header(options: ABOptions, revs: dict[str, Revision], seed: int, pairs: int, elapsed: float, stop: str) -> dict:
    return {
        "base": f"`{options.base}` {revs['A'].commit[:12]}",
        "head": f"`{options.head}` {revs['B'].commit[:12]}",
        "seed": seed,
        "pairs": pairs,
        "elapsed_s": elapsed,
        "stopped": stop,
    }


def _experiment(options: ABOptions, revs: dict[str, Revision], env: dict[str, Any]) -> dict[str, Any]:
    """What a later session must share with this one to continue its sequence (`gate.sequences`)."""
    return {
        "base": revs["A"].commit,
        "head": revs["B"].commit,
        "harness": env.get("git_commit"),
        "machine": fingerprint(env),
        "suites": sorted(options.suites),
        "alpha": options.alpha,
        "env_b": sorted(options.env_b.items()),
    }


def _stored_rows(pair: list[Row], offset: int) -> list[dict[str, Any]]:
    """A pair's gated rows as the sequence store keeps them, its repeat numbered on from the earlier sessions'."""
    return [{**r.__dict__, "repeat": r.repeat + offset} for r in pair if r.metric in GATED_METRICS]


def _summary(verdict: str, table: pd.DataFrame, threshold: float) -> str:
    if verdict == "slower":
        slower = table[table["verdict"] == "slower"]
        return f"regression: {len(slower)} series decided slower by more than {threshold:.1%}"
    if verdict == "inconsistent":
        broken = table[table["verdict"] == "inconsistent"]
        return (
            f"inconsistent: the pairs of {len(broken)} series do not share one median (drift, or a change during "
            "the session); no verdict can be drawn from them"
        )
    if verdict == "undecided":
        still = int((table["verdict"] == "undecided").sum()) if len(table) else 0
        return f"undecided within budget: {still} series still undecided (a rerun continues this sequence)"
    return "no regression: every series decided"


def run_ab(options: ABOptions) -> ABOutcome:
    """Builds both revisions (cached), measures them pair by pair into a new run folder (a `Run`: it makes the
    folder, writes env.json, points `latest` and finishes the table), and judges."""
    options.check()
    seed = options.seed if options.seed is not None else random.SystemRandom().randrange(2**31)
    apps = apps_of(options.servers)
    revs = {
        side: prepare(name, extension=bool(options.micro), apps=apps, cache=options.cache)
        for side, name in (("A", options.base), ("B", options.head))
    }
    sides = {
        side: {"name": r.name, "commit": r.commit, "extension": str(r.extension or ""), **{
            f"binary_{app}": str(path) for app, path in r.binaries.items()}}
        for side, r in revs.items()
    }  # fmt: skip
    record = {"sides": sides, "seed": seed}
    out = Path(options.out).resolve()
    with Run.create(out, latest=True, profile="ab", suites=list(options.suites), ab=record) as run:
        inputs, log = run.run_dir / "inputs", run.run_dir / "logs" / "workers.log"
        spec: dict[str, Any] = {"suites": options.micro, "inputs": str(inputs), "target_s": options.target_s}
        if options.micro:
            run_worker(revs["B"], {**spec, "make_inputs": True}, {}, log)
            chosen = run_worker(revs["B"], spec, {}, log)  # untimed: fixes each case's number of calls
            spec["calls"] = {f"{s}/{c}": v["calls"] for s, cases in chosen.items() for c, v in cases.items()}
        with StoredSequence.open(Path(options.out), _experiment(options, revs, load_env(run.run_dir))) as stored:
            judge = _judge(options, stored)
            restarted = stored.set_aside is not None
            session = _Session(options, revs, spec, run, seed, record, Retries(limit=options.retry_limit))
            frames, stop, conditions, elapsed = _pairs_until_decided(session, stored, judge)
        outcome = _finish(session, stored, judge, frames, (stop, conditions, elapsed, restarted))
        shutil.rmtree(inputs, ignore_errors=True)  # made again by every session; the rows are what is kept
    if session.failed is not None:  # the same failure came again and again: no verdict, the pairs kept
        raise session.failed
    return outcome


def _finish(session: _Session, stored: StoredSequence, judge: Any, frames: list[pd.DataFrame], how: tuple) -> ABOutcome:
    """Judges the pairs, writes ab.md and ab.json, records the session in env.json and finishes the run."""
    options, run, retries = session.options, session.run, session.retries
    stop, conditions, elapsed, restarted = how
    pairs = len(frames)
    table = judge(frames)
    verdict = overall(table) if len(table) else "undecided"
    header = _header(options, session.revs, session.seed, pairs, elapsed, stop)
    header["summary"] = _summary(verdict, table, options.threshold)
    header["servers"] = conditions
    header["earlier"] = (stored.offset, restarted)
    header["retries"] = retries.said()
    markdown = to_markdown(table, header)
    write_text_atomic(run.run_dir / "ab.md", markdown)  # never through a link planted in the run folder
    write_text_atomic(run.run_dir / "ab.json", table.to_json(orient="records", indent=1))
    done = {"pairs": pairs, "elapsed_s": elapsed, "verdict": verdict, "stopped": stop, "retries": retries.record()}
    sequence = {"file": str(stored.path), "earlier_pairs": stored.offset, "set_aside": str(stored.set_aside or "")}
    run.update_env(ab={**session.record, **({"servers": conditions} if conditions else {}), **done,
                       "sequence": sequence})  # fmt: skip
    if stop == "interrupted":
        run.mark_interrupted("SIGINT")  # a SIGTERM or SIGHUP was recorded as itself already
    run.finish()
    return ABOutcome(
        run.run_dir, table, verdict, markdown, pairs, elapsed, stop == "interrupted", stored.offset, retries.count
    )


def _judge(options: ABOptions, stored: StoredSequence) -> Any:
    """The verdicts over the earlier sessions' pairs and this session's; an inconsistent stored sequence is set
    aside first (its pairs share no median: they cannot be continued), and the session starts a new one."""

    def judge(frames: list[pd.DataFrame]) -> pd.DataFrame:
        rows = [f for f in (stored.earlier, *frames) if len(f)]
        if not rows:
            return pd.DataFrame()
        return evaluate_pairs(pd.concat(rows, ignore_index=True), alpha=options.alpha, threshold=options.threshold)

    if len(stored.earlier) and overall(judge([])) == "inconsistent":
        stored.restart()
    return judge


@dataclass
class _Session:
    """What the loop of one session needs: its settings, revisions, the workers' spec, its run and seed, the `ab`
    record of env.json so far, and its retries (`failed`: the failure that ended it, if one did)."""

    options: ABOptions
    revs: dict[str, Revision]
    spec: dict[str, Any]
    run: Run
    seed: int
    record: dict[str, Any]
    retries: Retries
    failed: RetriesExhausted | None = None

    def measure(self, repeat: int, order: tuple[str, str], servers: ServerSides | None) -> list[Row]:
        """One pair: the microbenchmarks' two worker processes in `order`, then the servers' duet."""
        log, pair = self.run.run_dir / "logs" / "workers.log", []
        for slot, side in enumerate(order if self.options.micro else ()):
            env = self.options.env_b if side == "B" else {}
            pair += micro_rows(run_worker(self.revs[side], self.spec, env, log), side, repeat, slot)
        if servers is not None:  # both sides at once, started in this repeat's order
            pair += servers.measure(repeat, order)
        return pair


def _pairs_until_decided(
    session: _Session, stored: StoredSequence, judge: Any
) -> tuple[list[pd.DataFrame], str, dict[str, Any], float]:
    """Measures pair after pair (each written whole to the run and to the stored sequence) until the verdict over
    all pairs is no longer undecided, or the budget or pair limit is reached; a repeat that fails for a reason of
    the moment is tried again (`orchestrate.retry`: its time is spent from the budget). Returns this session's pairs
    (their repeats numbered on from the stored ones), why it stopped, the servers' conditions and the seconds."""
    options, run = session.options, session.run
    sides_order, offset = orders(session.seed), stored.offset
    frames: list[pd.DataFrame] = []
    stop, conditions = "budget", {}
    started = time.monotonic()

    def in_budget() -> bool:
        return time.monotonic() - started <= options.budget

    with contextlib.ExitStack() as stack:
        servers = None
        if options.servers:
            servers = ServerSides(options.servers, session.revs, log_dir=run.run_dir / "logs", env_b=options.env_b)
            stack.enter_context(servers)
            conditions = servers.conditions
            run.update_env(ab={**session.record, "servers": conditions})
        started = time.monotonic()
        try:
            for repeat in range(options.max_pairs):
                order = next(sides_order)
                pair = session.retries.run(
                    functools.partial(session.measure, repeat, order, servers), keep_trying=in_budget
                )
                run.writer.write(pair)  # whole pairs only: a pair cut short is no pair
                stored.add(run.run_dir.name, _stored_rows(pair, offset))
                frames.append(pd.DataFrame(_stored_rows(pair, offset)))
                verdict = overall(judge(frames))
                if offset + len(frames) >= options.min_pairs and verdict != "undecided":
                    stop = {"slower": "regression decided", "inconsistent": "a series inconsistent"}.get(
                        verdict, "every series decided"
                    )
                    break
                if not in_budget():
                    break
            else:
                stop = "pair limit"
        except KeyboardInterrupt:
            stop = "interrupted"  # the pairs measured so far are judged and kept
        except RetriesExhausted as exc:
            if not exc.out_of_budget:
                stop, session.failed = f"a failure repeated: {exc}", exc
    return frames, stop, conditions, time.monotonic() - started
