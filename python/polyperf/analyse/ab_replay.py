"""Replayed gate sessions of `polyperf ab` on banked real A/A pairs: how often the gate alarms on no change, how
often it catches an injected one, and how long it takes. Pure: a bank and a generator in, sessions and their
summary out (no I/O, no clocks); `gate.calibrate` reads the bank and draws the figure.

A session replays `gate.session.run_ab`'s loop on pairs drawn from the bank: after each pair every series' interval is
updated by ab's own sequence (`sequential.verdicts` at the family's Bonferroni level, `analyse.ab.overall`); it
stops at the first pair, from `min_pairs` on, whose overall verdict is not "undecided" (a regression, a series
inconsistent, or every series decided), or when the drawn pairs' own measured wall time passes the budget, or at the
pair limit. A session is a first session: a rerun that continues a stored sequence is not replayed.

Failed repeats stay where the bank recorded them: before a drawn repeat come the attempts that failed just before it
while it was recorded, each spending its share of their seconds from the budget. The session retries them under
`polyperf ab`'s rule (`orchestrate.retry`): it ends "failed" when `retry_limit` of them come in a row (all failures
of one stretch are taken to be the same failure: the worst case), and ends on the budget when their time spends it.

Pairs are drawn as a moving-block bootstrap (Künsch 1989): blocks of `block` consecutive repeats, each block
starting at a uniformly drawn repeat, joined in the order drawn. Within a block, pairs keep their time order, so
drift and autocorrelation of the shared machine over `block` repeats are replayed as they happened. All series of
a repeat are drawn together, so their dependence (one process or one duet measures them all) is kept too.
A change is injected by multiplying B by `factor` in one series drawn per session, or in a given set of series
(the way the extension's test knob slows every case that parses).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd
from scipy.stats import binomtest

from polyperf.analyse.ab import overall
from polyperf.analyse.sequential import INCONSISTENT, SLOWER, UNDECIDED, verdicts

__all__ = ["FAILED", "Bank", "GateRule", "Session", "draw_blocks", "replay", "run_session", "summarise"]

FAILED = "failed"  # a session that ended on a failure repeated: no verdict


@dataclass(frozen=True)
class Bank:
    """A/A pairs of one gate family: `a` and `b` are (repeats, series) in time order; `wall_s` is what each repeat
    (one pair of every series) took; `failed` the attempts that failed just before it, and `failed_s` their seconds."""

    series: tuple[str, ...]
    a: np.ndarray
    b: np.ndarray
    wall_s: np.ndarray
    failed: np.ndarray | None = None
    failed_s: np.ndarray | None = None

    def __post_init__(self) -> None:
        for name in ("failed", "failed_s"):
            if getattr(self, name) is None:
                object.__setattr__(self, name, np.zeros(len(self.wall_s), int if name == "failed" else float))

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, failures: pd.DataFrame | None = None) -> Bank:
        """From the bank's rows (columns suite, series, repeat, a, b, repeat_wall_s); pairs are joined by repeat and
        a repeat that lacks a series or holds a value that is not positive is left out whole. `failures` (columns
        before_repeat, seconds: one row per failed attempt) places each failed attempt before the repeat that came
        after it, or the next one kept."""
        keyed = frame.assign(key=frame["suite"] + "/" + frame["series"].astype(str))
        a = keyed.pivot_table(index="repeat", columns="key", values="a", aggfunc="first").sort_index()
        b = keyed.pivot_table(index="repeat", columns="key", values="b", aggfunc="first").reindex_like(a)
        wall = keyed.groupby("repeat")["repeat_wall_s"].first().reindex(a.index)
        whole = a.notna().all(axis=1) & b.notna().all(axis=1) & (a > 0).all(axis=1) & (b > 0).all(axis=1)
        whole &= wall.notna() & (wall > 0)
        kept = a.index[whole].to_numpy()
        failed, failed_s = np.zeros(len(kept), int), np.zeros(len(kept))
        if failures is not None and len(failures) and len(kept):
            at = np.searchsorted(kept, failures["before_repeat"].to_numpy(), side="left")
            inside = at < len(kept)  # failures after the last kept repeat lead to no pair
            np.add.at(failed, at[inside], 1)
            np.add.at(failed_s, at[inside], failures["seconds"].to_numpy(float)[inside])
        return cls(
            tuple(a.columns),
            a[whole].to_numpy(float),
            b[whole].to_numpy(float),
            wall[whole].to_numpy(float),
            failed,
            failed_s,
        )

    @property
    def repeats(self) -> int:
        return len(self.wall_s)


@dataclass(frozen=True)
class GateRule:
    """ab's settings for one session: the family's alpha, the band, the pair limits and the budget in seconds."""

    alpha: float
    threshold: float
    min_pairs: int
    max_pairs: int
    budget_s: float
    retry_limit: int = 1  # the same failure this many times in a row ends the session; 1: no retries


@dataclass(frozen=True)
class Session:
    verdict: str  # overall: "slower", "decided", "undecided" (as `analyse.ab.overall`), or FAILED
    stopped: str  # "decided", "budget", "pair limit", "failure repeated"
    pairs: int
    seconds: float
    verdicts: tuple[str, ...]  # per series, at the stop
    injected: tuple[int, ...]  # the series whose B was multiplied
    factor: float
    retries: int = 0  # failed attempts retried

    @property
    def caught(self) -> bool:
        """A series whose B was multiplied was decided slower (the gate exits 1 on it)."""
        return bool(self.verdicts) and any(self.verdicts[j] == SLOWER for j in self.injected)


def draw_blocks(repeats: int, block: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` repeat indices: blocks of `block` consecutive repeats, starts uniform over the bank, in order."""
    if not 1 <= block <= repeats:
        raise ValueError(f"the block length must lie in [1, {repeats}], got {block}")
    starts = rng.integers(0, repeats - block + 1, size=math.ceil(count / block))
    return (starts[:, None] + np.arange(block)[None, :]).ravel()[:count]


@lru_cache(maxsize=4096)
def _overall(verdicts: tuple[str, ...]) -> str:
    return overall(pd.DataFrame({"verdict": list(verdicts)}))


def run_session(
    bank: Bank, rows: np.ndarray, rule: GateRule, *, factor: float = 1.0, injected: Sequence[int] = (0,)
) -> Session:
    """One gate session on the bank's repeats `rows` (in that order), B of the series `injected` times `factor`;
    the failed attempts banked before each drawn repeat are met, and retried, on the way to it."""
    injected = tuple(injected)
    spent = bank.wall_s[rows] + bank.failed_s[rows]
    wall = np.cumsum(spent)
    # the pairs a session can reach: up to the first whose end passes the budget, and the pair limit
    reach = min(int(np.searchsorted(wall, rule.budget_s, side="right")) + 1, rule.max_pairs, len(rows))
    a, b = bank.a[rows[:reach]], bank.b[rows[:reach]].copy()
    b[:, list(injected)] *= factor
    d = np.log(b / a)
    level = rule.alpha / len(bank.series)
    # each series' verdict after every prefix of its pairs, as ab's table reads it after each pair
    by_series = [verdicts(d[:, j].tolist(), level, rule.threshold) for j in range(d.shape[1])]
    now: tuple[str, ...] = ()
    retries = 0
    for n in range(1, reach + 1):
        row = rows[n - 1]
        failed = int(bank.failed[row])
        for i in range(1, failed + 1):  # as `Retries.run`: the limit first, then the budget, then one more try
            t = float(wall[n - 1] - spent[n - 1] + i * bank.failed_s[row] / failed)
            if i >= rule.retry_limit:
                return Session(FAILED, "failure repeated", n - 1, t, now, injected, factor, retries)
            if t > rule.budget_s:
                return Session(_overall(now), "budget", n - 1, t, now, injected, factor, retries)
            retries += 1
        now = tuple(series[n - 1] for series in by_series)
        verdict = _overall(now)
        if n >= rule.min_pairs and verdict != UNDECIDED:
            return Session(verdict, "decided", n, float(wall[n - 1]), now, injected, factor, retries)
        if wall[n - 1] > rule.budget_s:
            return Session(verdict, "budget", n, float(wall[n - 1]), now, injected, factor, retries)
    return Session(_overall(now), "pair limit", reach, float(wall[reach - 1]), now, injected, factor, retries)


def replay(
    bank: Bank,
    rule: GateRule,
    *,
    factor: float,
    sessions: int,
    block: int,
    rng: np.random.Generator,
    targets: Sequence[int] | None = None,
    session: Callable[..., Session] = run_session,
) -> list[Session]:
    """`sessions` replayed sessions; each draws its pairs, and the one series it slows unless `targets` are given."""
    # enough pairs for the longest session the budget allows on the bank's quickest repeats
    count = min(rule.max_pairs, math.ceil(rule.budget_s / float(bank.wall_s.min())) + 1)
    out = []
    for _ in range(sessions):
        rows = draw_blocks(bank.repeats, block, count, rng)
        injected = tuple(targets) if targets is not None else (int(rng.integers(len(bank.series))),)
        out.append(session(bank, rows, rule, factor=factor, injected=injected))
    return out


def _exact(hits: int, n: int) -> tuple[float, float]:
    ci = binomtest(hits, n).proportion_ci(confidence_level=0.95, method="exact")
    return float(ci.low), float(ci.high)


def summarise(sessions: Sequence[Session]) -> dict[str, float]:
    """Alarms (overall "slower") and catches (the injected series slower), each with its exact (Clopper–Pearson)
    two-sided 95% interval; undecided, inconsistent and failed sessions, and the sessions that ended in a verdict
    (every one that did not fail) with their exact lower 95% bound; the retries; the pairs and minutes to the end."""
    n = len(sessions)
    if n == 0:
        raise ValueError("no sessions to summarise")
    alarms = sum(s.verdict == SLOWER for s in sessions)
    caught = sum(s.caught for s in sessions)
    undecided = sum(s.verdict == UNDECIDED for s in sessions)
    inconsistent = sum(s.verdict == INCONSISTENT for s in sessions)
    failed = sum(s.verdict == FAILED for s in sessions)
    pairs = np.array([s.pairs for s in sessions], float)
    minutes = np.array([s.seconds / 60 for s in sessions])
    return {
        "sessions": n,
        "factor": sessions[0].factor,
        "alarms": alarms,
        "alarm_rate": alarms / n,
        "alarm_low": _exact(alarms, n)[0],
        "alarm_high": _exact(alarms, n)[1],
        "caught": caught,
        "caught_rate": caught / n,
        "caught_low": _exact(caught, n)[0],
        "caught_high": _exact(caught, n)[1],
        "undecided": undecided,
        "inconsistent": inconsistent,
        "failed": failed,
        "verdict_rate": (n - failed) / n,
        "verdict_low": _exact(n - failed, n)[0],
        "retried": sum(s.retries > 0 for s in sessions),
        "retries": sum(s.retries for s in sessions),
        "pairs_median": float(np.median(pairs)),
        "pairs_p90": float(np.quantile(pairs, 0.9)),
        "minutes_median": float(np.median(minutes)),
        "minutes_p90": float(np.quantile(minutes, 0.9)),
    }
