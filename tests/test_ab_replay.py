"""The replayed calibration of `polyperf ab` (analyse/ab_replay.py, gate/calibrate.py): its bookkeeping on banks with
known exact answers, its agreement with ab's own verdict table, and a short replay of the committed bank."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from polyperf.analyse.ab import evaluate_pairs, overall
from polyperf.analyse.ab_replay import Bank, GateRule, draw_blocks, replay, run_session, summarise
from polyperf.analyse.sequential import median_sequence
from polyperf.gate.calibrate import gate_rule, load_bank, main

BANK = Path(__file__).parent / "data" / "ab_bank"
RULE = GateRule(alpha=0.05, threshold=0.02, min_pairs=10, max_pairs=200, budget_s=170.0)


def _bank(a: np.ndarray, b: np.ndarray, wall: float = 2.0) -> Bank:
    series = tuple(f"s/{j}" for j in range(a.shape[1]))
    return Bank(series, a, b, np.full(a.shape[0], wall))


def _first_interval(k: int, rule: GateRule = RULE) -> int:
    """The first n at which ab's sequence at alpha / k gives any interval (computed on a constant series)."""
    seq = median_sequence([0.0] * rule.max_pairs, rule.alpha / k)
    return next(cs.n for cs in seq if cs.has_interval)


def test_identical_sides_decide_no_change_at_the_first_interval():
    """A == B exactly: every interval is [1, 1], so the session ends "decided" the first time an interval exists
    (and not before min_pairs), having spent exactly that many pairs' wall time."""
    a = np.exp(np.random.default_rng(1).normal(0, 0.1, size=(300, 4)))
    bank = _bank(a, a.copy())
    rows = np.arange(300)
    s = run_session(bank, rows, RULE)
    n = max(_first_interval(4), RULE.min_pairs)
    assert (s.verdict, s.stopped, s.pairs, s.seconds) == ("decided", "decided", n, 2.0 * n)
    assert set(s.verdicts) == {"no change"} and not s.caught


def test_an_injected_change_is_caught_on_the_injected_series_only():
    a = np.exp(np.random.default_rng(2).normal(0, 0.1, size=(300, 3)))
    bank = _bank(a, a.copy())
    s = run_session(bank, np.arange(300), RULE, factor=1.10, injected=(2,))
    assert s.verdict == "slower" and s.caught and s.verdicts[2] == "slower"
    assert s.pairs == max(_first_interval(3), RULE.min_pairs)
    # the same change on another series is not a catch of series 2
    other = run_session(bank, np.arange(300), RULE, factor=1.10, injected=(0,))
    assert other.verdicts[2] != "slower" and other.verdicts[0] == "slower"
    both = run_session(bank, np.arange(300), RULE, factor=1.10, injected=(0, 2))
    assert both.verdicts == ("slower", "no change", "slower") and both.caught


def test_the_budget_is_spent_in_the_drawn_pairs_own_wall_time():
    """No interval can exist before the budget: the session stops at the first pair whose end passes it."""
    a = np.ones((50, 2))
    bank = _bank(a, a * 1.01, wall=10.0)
    s = run_session(bank, np.arange(50), GateRule(0.05, 0.02, 10, 200, budget_s=35.0))
    assert (s.verdict, s.stopped, s.pairs, s.seconds) == ("undecided", "budget", 4, 40.0)
    limited = run_session(bank, np.arange(50), GateRule(0.05, 0.02, 10, 3, budget_s=1e9))
    assert (limited.stopped, limited.pairs) == ("pair limit", 3)


def test_blocks_are_consecutive_repeats_inside_the_bank():
    rows = draw_blocks(100, 7, 50, np.random.default_rng(3))
    assert len(rows) == 50 and rows.min() >= 0 and rows.max() < 100
    for start in range(0, 49, 7):
        block = rows[start : start + 7]
        assert np.array_equal(block, np.arange(block[0], block[0] + len(block)))
    with pytest.raises(ValueError):
        draw_blocks(5, 6, 10, np.random.default_rng(0))


def _ab_rows(bank: Bank, used: np.ndarray, injected: tuple[int, ...], factor: float) -> pd.DataFrame:
    """The rows ab would have recorded for these repeats: one per series, side and repeat."""
    slowed = np.where(np.isin(np.arange(len(bank.series)), injected), factor, 1.0)
    frames = [
        pd.DataFrame(
            {
                "suite": "s",
                "case": name,
                "implementation": "i",
                "metric": "cpu_seconds",
                "variant": side,
                "value": values[:, j],
                "unit": "s",
                "repeat": np.arange(len(used)),
            }
        )
        for side, values in (("A", bank.a[used]), ("B", bank.b[used] * slowed))
        for j, name in enumerate(bank.series)
    ]
    return pd.concat(frames)


def test_the_replay_judges_as_abs_verdict_table_does():
    """At the pair a replayed session stops, ab's own `evaluate_pairs` on the same pairs gives the same verdicts:
    the replay's shortcut (one sequence per series, read at each prefix) is ab's decision, not a copy of it."""
    rng = np.random.default_rng(4)
    drift = np.cumsum(rng.normal(0, 0.004, 400))[:, None]  # moves the paired difference, not only both sides
    a = np.exp(rng.normal(0, 0.03, size=(400, 3)))
    b = a * np.exp(rng.standard_t(3, size=(400, 3)) * 0.02 + drift * np.array([1.0, 0.0, 0.5]))
    bank = _bank(a, b, wall=1.0)
    stops = set()
    for seed in range(6):
        rows = draw_blocks(400, 10, 200, np.random.default_rng(seed))
        s = run_session(bank, rows, RULE, factor=1.0 + 0.03 * (seed % 3), injected=(seed % 3,))
        table = evaluate_pairs(_ab_rows(bank, rows[: s.pairs], s.injected, s.factor), alpha=0.05, threshold=0.02)
        assert tuple(table.sort_values("case")["verdict"]) == s.verdicts
        assert overall(table) == s.verdict
        stops.add(s.verdict)
    assert len(stops) >= 2  # the check saw more than one kind of ending


def test_exact_bounds_and_counts():
    a = np.ones((40, 1))
    bank = _bank(a, a.copy())
    runs = replay(bank, RULE, factor=1.0, sessions=20, block=5, rng=np.random.default_rng(0))
    summary = summarise(runs)
    assert summary["sessions"] == 20 and summary["alarms"] == 0 and summary["caught"] == 0
    assert summary["alarm_low"] == 0 and math.isclose(summary["alarm_high"], 1 - 0.025 ** (1 / 20))
    with pytest.raises(ValueError):
        summarise([])


def test_pairs_are_joined_by_repeat_and_partial_repeats_left_out():
    frame = pd.DataFrame(
        {
            "suite": "s",
            "series": ["x", "y", "y", "x", "x", "y"],
            "repeat": [0, 0, 1, 2, 1, 2],  # series x lacks nothing; repeat 1 is whole; y's repeat 1 precedes x's
            "a": [1.0, 2.0, 3.0, 4.0, 5.0, -1.0],
            "b": [1.5, 2.5, 3.5, 4.5, 5.5, 6.5],
            "repeat_wall_s": [1.0, 1.0, 2.0, 3.0, 2.0, 3.0],
        }
    )
    bank = Bank.from_frame(frame)
    assert bank.series == ("s/x", "s/y")
    assert bank.a.tolist() == [[1.0, 2.0], [5.0, 3.0]]  # repeat 2 left out whole: y's A is not positive
    assert bank.wall_s.tolist() == [1.0, 2.0]


@pytest.mark.skipif(not BANK.exists(), reason="no committed bank")
def test_a_short_replay_of_the_committed_bank():
    banks = load_bank(BANK)
    assert set(banks) == {"micro", "servers"}
    for family, bank in banks.items():
        assert bank.repeats >= 100 and np.all(bank.a > 0) and np.all(bank.b > 0)
        rule = gate_rule(family)
        # a doubling is far beyond every series' noise: every session must catch it, on the series it slowed
        doubled = summarise(replay(bank, rule, factor=2.0, sessions=15, block=10, rng=np.random.default_rng(5)))
        assert doubled["caught"] == 15 and doubled["pairs_median"] <= 40
        same = summarise(replay(bank, rule, factor=1.0, sessions=15, block=10, rng=np.random.default_rng(6)))
        assert same["caught"] == same["alarms"] <= 15 and same["minutes_median"] * 60 <= rule.budget_s + 60


@pytest.mark.skipif(not BANK.exists(), reason="no committed bank")
def test_the_bank_holds_2000_real_pairs_per_family_and_each_recording_replays_alone():
    banks = load_bank(BANK)
    assert all(bank.repeats * len(bank.series) >= 2000 for bank in banks.values())
    one = sorted(BANK.glob("servers*.csv.gz"))[0]
    alone = load_bank(one)
    assert set(alone) == {"servers"} and alone["servers"].repeats < banks["servers"].repeats


@pytest.mark.parametrize(
    "args",
    [["--sessions", "0"], ["--block", "0"], ["--curve-sessions", "-1"]],
)
def test_bad_settings_are_refused_in_one_line(args, capsys):
    assert main([str(BANK), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "must be >= 1" in err


def test_a_folder_without_a_bank_is_refused_in_one_line(tmp_path, capsys):
    assert main([str(tmp_path), "--sessions", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no bank files" in err


@pytest.mark.parametrize(
    "args, says",
    [
        (["--minutes", "0"], "--minutes must be > 0"),
        (["--minutes", "nan"], "--minutes must be > 0"),
        (["--minutes", "1", "--max-repeats", "0"], "--max-repeats must be >= 1"),
    ],
)
def test_the_recorder_refuses_bad_settings_in_one_line(args, says, tmp_path, capsys):
    from polyperf.gate.bank import main as record_main

    assert record_main(["micro", str(tmp_path / "new.csv"), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err
    assert not (tmp_path / "new.csv").exists()


def test_the_recorder_never_appends_to_an_earlier_recording(tmp_path, capsys):
    from polyperf.gate.bank import main as record_main

    earlier = tmp_path / "bank.csv"
    earlier.write_text("family\n")
    assert record_main(["micro", str(earlier), "--minutes", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "exists" in err and earlier.read_text() == "family\n"


def test_a_file_that_is_no_bank_is_refused_in_one_line(tmp_path, capsys):
    (tmp_path / "x.csv").write_text("family,suite,value\nmicro,io,1\n")
    assert main([str(tmp_path), "--sessions", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "lacks the columns series, repeat, a, b, repeat_wall_s" in err


def test_failures_banked_before_a_repeat_are_met_in_place_and_retried():
    frame = pd.DataFrame(
        [
            dict(family="f", suite="s", series="x", repeat=r, a=1.0, b=1.0 if r != 2 else -1.0, repeat_wall_s=1.0)
            for r in range(5)
        ]
    )
    failures = pd.DataFrame({"before_repeat": [1, 2, 2, 9], "seconds": [3.0, 1.0, 1.0, 5.0]})
    bank = Bank.from_frame(frame, failures)
    # repeat 2 is left out (B not positive): its two failures move to repeat 3; none follows the last repeat
    assert bank.failed.tolist() == [0, 1, 2, 0] and bank.failed_s.tolist() == [0, 3, 2, 0]
    rule = GateRule(alpha=0.05, threshold=0.02, min_pairs=50, max_pairs=10, budget_s=100.0, retry_limit=3)
    rows = np.arange(4)
    ran = run_session(bank, rows, rule)
    assert ran.retries == 3 and ran.pairs == 4 and ran.seconds == pytest.approx(4 + 3 + 2)
    stopped = run_session(bank, rows, replace_rule(rule, retry_limit=2))  # two in a row before repeat 3: stop
    assert (stopped.verdict, stopped.stopped, stopped.pairs, stopped.retries) == ("failed", "failure repeated", 2, 2)
    assert stopped.seconds == pytest.approx(2 + 3 + 2)
    spent = run_session(bank, rows, replace_rule(rule, budget_s=3.5))  # the failures' time spends the budget
    assert (spent.stopped, spent.pairs, spent.retries) == ("budget", 1, 0)
    no_retry = run_session(bank, rows, replace_rule(rule, retry_limit=1))
    assert (no_retry.verdict, no_retry.pairs) == ("failed", 1)
    assert summarise([ran, stopped, no_retry])["failed"] == 2


def replace_rule(rule: GateRule, **changes) -> GateRule:
    import dataclasses

    return dataclasses.replace(rule, **changes)


@pytest.mark.skipif(not BANK.exists(), reason="no committed bank")
def test_on_the_busy_bank_with_its_failures_in_place_server_sessions_end_in_a_verdict():
    """The busy recording's 20 failed attempts stay where they happened (their meta file places them). Without
    retries most sessions meet one and end in an error; with ab's rule at least 95% end in a verdict (docs/gate.md:
    1,000 of 1,000 replayed sessions, at each condition)."""
    bank = load_bank(BANK / "servers.csv.gz")["servers"]
    assert int(bank.failed.sum()) == 20 and int(bank.failed.max()) == 9  # as the recorder logged them
    rule = gate_rule("servers")
    assert rule.retry_limit == 10
    for factor, sessions in ((1.0, 300), (1.05, 200)):
        runs = summarise(replay(bank, rule, factor=factor, sessions=sessions, block=10, rng=np.random.default_rng(7)))
        assert runs["verdict_rate"] >= 0.95 and runs["retried"] > sessions / 3, runs
        assert runs["alarms"] == 0 if factor == 1.0 else runs["caught"] >= 0.95 * sessions
    without = replace_rule(rule, retry_limit=1)  # a session that stops on the first failure, as before
    runs = summarise(replay(bank, without, factor=1.0, sessions=300, block=10, rng=np.random.default_rng(7)))
    assert runs["verdict_rate"] <= 0.5 and runs["retries"] == 0, runs
