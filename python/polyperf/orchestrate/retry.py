"""A failed repeat costs a repeat, not the answer. On a busy machine a repeat can fail for a reason of the moment:
its load generator had not finished 15 s after it started, or its window served no request. `Retries.run` tries
such a repeat again, counts every retry and keeps each failure's text, and gives up only when the same failure
(same kind, same server or worker) has come `limit` times in a row, or the repeat has failed `cap` times in all, or
the caller's budget is spent. A failure that is not of the moment (a server that cannot start, a worker that
raises) is not a `RepeatFailed` and stops at once, as before.

Used by the gate (`gate.session`, `gate.bank`) and by the main job's load runs (`LoadEnv.run`); the gate's replay
(`analyse.ab_replay`) applies the same rule to the failures banked on a busy machine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from polyperf.errors import PolyperfError

__all__ = ["GATE_LIMIT", "LOAD_LIMIT", "RepeatFailed", "Retries", "RetriesExhausted", "retried"]

T = TypeVar("T")

# The gate: on the busy bank the longest run of failed server repeats was 9 in a row (a stall of 163 s); all
# others came alone. A limit of 10 outlasts it; a failure of the code under test (a server of B that hangs under
# load every time) still ends the session within 10 attempts, each bounded by its own time-out.
GATE_LIMIT = 10
# The main job: a lost load run costs one repeat of one entry, never the suite; three tries in a row bound the time.
LOAD_LIMIT = 3


class RepeatFailed(PolyperfError):
    """One attempt at a repeat failed for a reason of the moment. `kind` (e.g. "load generator did not finish",
    "no request served") and `where` (the server or worker) are the failure's identity."""

    def __init__(self, message: str, *, kind: str, where: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.where = where

    @property
    def identity(self) -> tuple[str, str]:
        return self.kind, self.where


class RetriesExhausted(PolyperfError):
    """A repeat's tries ended without a result: the same failure `limit` times in a row, `cap` failures in all, or
    (`out_of_budget`) the caller's budget spent meanwhile. The last failure is the cause."""

    def __init__(self, message: str, *, out_of_budget: bool = False) -> None:
        super().__init__(message)
        self.out_of_budget = out_of_budget


@dataclass
class Retries:
    """The retries of one session (or load environment): the rule, and what it has retried so far."""

    limit: int = GATE_LIMIT
    cap: int = 2 * GATE_LIMIT
    count: int = 0  # failed attempts that were tried again
    failures: list[str] = field(default_factory=list)  # every failed attempt's text, in order

    def __post_init__(self) -> None:
        if self.limit < 1 or self.cap < self.limit:
            raise ValueError(f"retries need 1 <= limit <= cap, got limit {self.limit}, cap {self.cap}")

    def run(self, attempt: Callable[[], T], *, keep_trying: Callable[[], bool] = lambda: True) -> T:
        """`attempt()`, tried again after each `RepeatFailed` until it returns; raises `RetriesExhausted` (from the
        last failure) when the rule gives up or `keep_trying()` says the budget is spent."""
        streak, last, tries = 0, None, 0
        while True:
            try:
                return attempt()
            except RepeatFailed as exc:
                tries += 1
                streak = streak + 1 if exc.identity == last else 1
                last = exc.identity
                self.failures.append(str(exc))
                if streak >= self.limit or tries >= self.cap:
                    said = f"{streak} times in a row" if streak >= self.limit else f"{tries} failures in all"
                    raise RetriesExhausted(f"{exc} ({said}; the repeat was not retried again)") from exc
                if not keep_trying():
                    raise RetriesExhausted(f"{exc} (the budget was spent)", out_of_budget=True) from exc
                self.count += 1

    def record(self) -> dict[str, Any]:
        """What the session's record keeps: the rule, the retries and the failures (the last 20 in full)."""
        return {"limit": self.limit, "retries": self.count, "failed": len(self.failures), "last": self.failures[-20:]}

    def said(self) -> str:
        """One line for the session's output ("" when nothing failed)."""
        if not self.failures:
            return ""
        return (
            f"{len(self.failures)} failed repeat{'s' if len(self.failures) != 1 else ''} retried "
            f"({self.count} retries; the same failure {self.limit} times in a row would stop); last: "
            f"{self.failures[-1]}"
        )


def retried(
    retries: Retries,
    attempt: Callable[[], T],
    *,
    where: str,
    transient: tuple[type[Exception], ...],
    empty: Callable[[T], bool] = lambda _result: False,
) -> tuple[T | None, list[str]]:
    """`attempt()` under `retries`, for a caller whose failures are other exceptions: one of type `transient`, or a
    result that `empty` says served nothing, is a failure of the moment. Returns (the result, or None when the tries
    ran out; the lines to note: the retries made, or why it gave up). Other exceptions pass through."""
    before = retries.count

    def once() -> T:
        try:
            result = attempt()
        except transient as exc:
            raise RepeatFailed(str(exc), kind=type(exc).__name__, where=where) from exc
        if empty(result):
            raise RepeatFailed("served no request", kind="no request served", where=where)
        return result

    try:
        result = retries.run(once)
    except RetriesExhausted as exc:
        return None, [f"{where}: {exc}"]
    made = retries.count - before
    if not made:
        return result, []
    return result, [f"{where}: {made} failed attempt{'s' if made != 1 else ''} retried (last: {retries.failures[-1]})"]
