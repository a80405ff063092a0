"""The retry rule (orchestrate/retry.py) shared by `polyperf ab` and the main job's load runs: a failure of the
moment is tried again and counted; the same failure `limit` times in a row, `cap` failures, or a spent budget end
the tries; any other error passes at once."""

from __future__ import annotations

import pytest

from polyperf.orchestrate.retry import RepeatFailed, Retries, RetriesExhausted, retried


def _attempts(*outcomes):
    """An attempt that fails with the given failures in turn (None: succeeds with the attempt's number)."""
    calls = {"n": 0}

    def attempt():
        calls["n"] += 1
        outcome = outcomes[calls["n"] - 1] if calls["n"] <= len(outcomes) else None
        if outcome is not None:
            raise outcome
        return calls["n"]

    return attempt, calls


def _fail(kind="load generator failed", where="gnet-A"):
    return RepeatFailed(f"{where}: {kind}", kind=kind, where=where)


def test_a_failure_of_the_moment_is_tried_again_and_counted():
    retries = Retries(limit=3)
    attempt, calls = _attempts(_fail(), _fail())
    assert retries.run(attempt) == 3 and calls["n"] == 3
    assert retries.count == 2 and retries.failures == ["gnet-A: load generator failed"] * 2
    assert retries.record()["retries"] == 2 and "2 failed repeats retried" in retries.said()
    assert Retries().said() == ""


def test_the_same_failure_limit_times_in_a_row_stops():
    retries = Retries(limit=3)
    attempt, calls = _attempts(_fail(), _fail(), _fail(), None)
    with pytest.raises(RetriesExhausted, match="3 times in a row") as stopped:
        retries.run(attempt)
    assert calls["n"] == 3 and retries.count == 2 and not stopped.value.out_of_budget
    assert isinstance(stopped.value.__cause__, RepeatFailed)


def test_different_failures_do_not_add_up_but_the_cap_bounds_them():
    kinds = [_fail(where=w) for w in ("gnet-A", "axum-B")] * 3
    attempt, calls = _attempts(*kinds[:4])
    assert Retries(limit=2, cap=6).run(attempt) == 5  # never twice the same in a row: tried on
    attempt, calls = _attempts(*kinds)
    with pytest.raises(RetriesExhausted, match="4 failures in all"):
        Retries(limit=2, cap=4).run(attempt)
    assert calls["n"] == 4
    # the streak starts again with each repeat: two repeats that each fail once never stop the session
    retries = Retries(limit=2)
    for _ in range(2):
        attempt, _calls = _attempts(_fail())
        retries.run(attempt)
    assert retries.count == 2


def test_a_spent_budget_ends_the_tries_and_says_so():
    attempt, calls = _attempts(_fail(), _fail())
    with pytest.raises(RetriesExhausted, match="budget") as stopped:
        Retries(limit=5).run(attempt, keep_trying=lambda: False)
    assert stopped.value.out_of_budget and calls["n"] == 1


def test_other_errors_are_never_retried():
    attempt, calls = _attempts(ValueError("a server that cannot start"))
    retries = Retries()
    with pytest.raises(ValueError):
        retries.run(attempt)
    assert calls["n"] == 1 and retries.count == 0


@pytest.mark.parametrize("limit, cap", [(0, 5), (3, 2)])
def test_a_rule_that_could_not_stop_is_refused(limit, cap):
    with pytest.raises(ValueError, match="limit"):
        Retries(limit=limit, cap=cap)


def test_retried_turns_a_callers_failures_into_retries_and_notes():
    retries = Retries(limit=2, cap=2)
    attempt, _calls = _attempts(OSError("oha exited with 1"))
    assert retried(retries, attempt, where="c a (oha)", transient=(OSError,)) == (
        2,
        ["c a (oha): 1 failed attempt retried (last: oha exited with 1)"],
    )
    empty = iter([0, 0, 5])
    result, notes = retried(retries, lambda: next(empty), where="c a", transient=(), empty=lambda r: r == 0)
    assert result is None and notes == ["c a: served no request (2 times in a row; the repeat was not retried again)"]
    assert retried(retries, lambda: 7, where="c a", transient=()) == (7, [])
