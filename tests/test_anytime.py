"""The anytime-valid evidence behind every verdict (`analyse.anytime`): the sign e-process's values, that it is a
martingale where the median sits at the threshold, the confidence sequence it inverts to (order statistics, the
decision it implies), and its coverage when the interval is looked at after every repeat, against the fixed-n
interval it replaced."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import beta, binom

from polyperf.analyse import anytime, stats
from polyperf.analyse.anytime import (
    evidence,
    log_evidence,
    min_repeats,
    paired_ratio,
    ratio_of_medians,
    repeats_to_reach,
    summarize,
)

BOUND = 40.0  # a 95% interval excludes t where the one-sided e-process reaches 2 / (1 - 0.95)


def _most_short(n: int, bound: float = BOUND) -> int:
    """The most of n repeats beyond t whose evidence stays under `bound` (n: no interval at this n)."""
    return max((k for k in range(n + 1) if evidence(k, n) < bound), default=-1)


# --- the e-process --------------------------------------------------------------------------------------------------


def test_all_repeats_beyond_the_threshold_give_the_documented_evidence():
    # the module's stated figures: 100 at n = 8, 1,233 at n = 12, and 77 for 11 of 12 (the closed form by hand)
    mixture = ((0.6, 0.15), (0.75, 0.25), (0.9, 0.3), (0.97, 0.3))

    def by_hand(k: int, n: int) -> float:
        return sum(w * (2 * p) ** k * (2 * (1 - p)) ** (n - k) for p, w in mixture)

    for k, n, stated in ((8, 8, 100.3), (12, 12, 1233.4), (11, 12, 76.63)):
        assert evidence(k, n) == pytest.approx(by_hand(k, n), rel=1e-9)
        assert evidence(k, n) == pytest.approx(stated, abs=0.05)
    assert evidence(0, 0) == 1.0 and log_evidence(3, 0) == 0.0
    for n in range(1, 60):  # more repeats beyond the threshold is more evidence, fewer is less
        values = [evidence(k, n) for k in range(n + 1)]
        assert all(a < b for a, b in itertools.pairwise(values)), n
        assert evidence(0, n) < 1.0 < evidence(n, n)


@pytest.mark.parametrize("null", [0.5, 0.4, 0.2])
def test_the_e_process_is_a_martingale_at_the_threshold_and_a_supermartingale_behind_it(null):
    """Ville's inequality needs E[E_{n+1} | the first n] <= E_n when P(beyond) <= 1/2: exactly equal at 1/2 (the
    worst null), smaller behind it. Checked for every (k, n) up to 120, and its mean over the binomial is <= 1."""
    for n in range(120):
        for k in range(n + 1):
            step = null * evidence(k + 1, n + 1) + (1 - null) * evidence(k, n + 1)
            if null == 0.5:
                assert step == pytest.approx(evidence(k, n), rel=1e-9), (k, n)
            else:
                assert step <= evidence(k, n) * (1 + 1e-12), (k, n, null)
    for n in (1, 8, 40, 120):
        mean = sum(binom.pmf(k, n, null) * evidence(k, n) for k in range(n + 1))
        assert mean == pytest.approx(1.0) if null == 0.5 else mean < 1.0


def test_seven_repeats_are_the_fewest_with_a_95_percent_interval():
    n = min_repeats()
    assert n == 7 and evidence(n - 1, n - 1) < BOUND <= evidence(n, n)
    rng = np.random.default_rng(1)
    assert not summarize(rng.normal(size=n - 1)).has_interval
    z = rng.normal(size=n)
    s = summarize(z)
    assert (s.low, s.high, s.min_n) == (min(z), max(z), n)
    # each side of an unpaired ratio is bounded at 97.5%: one repeat more per side
    need = min_repeats(0.975)
    assert need == n + 1 and evidence(need - 1, need - 1) < 80 <= evidence(need, need)
    assert not ratio_of_medians(rng.lognormal(size=need - 1), rng.lognormal(size=need - 1)).has_interval
    unpaired = ratio_of_medians(x := rng.lognormal(size=need), y := rng.lognormal(size=need))
    assert unpaired.min_n == need
    assert (unpaired.low, unpaired.high) == pytest.approx((min(x) / max(y), max(x) / min(y)))


# --- the confidence sequence ----------------------------------------------------------------------------------------


def _samples(rng: np.random.Generator, n: int) -> np.ndarray:
    kind = rng.integers(3)
    if kind == 0:
        return rng.lognormal(0, 1, n)
    if kind == 1:
        return np.round(rng.exponential(3, n))  # ties
    return rng.normal(5, 1, n)


def test_the_interval_is_order_statistics_and_holds_its_point():
    rng = np.random.default_rng(2)
    for _ in range(400):
        n = int(rng.integers(min_repeats(), 120))
        z = _samples(rng, n)
        s, ordered, k = summarize(z), np.sort(z), _most_short(n)
        assert (s.low, s.high) == (ordered[n - k - 1], ordered[k]), n
        assert s.low <= s.median <= s.high and s.n == n
        den = rng.lognormal(0, 0.2, n)
        pr, logs = paired_ratio(den * np.exp(z / 10), den), np.sort(z / 10)
        assert (math.log(pr.low), math.log(pr.high)) == pytest.approx((logs[n - k - 1], logs[k]), abs=1e-9)
        assert pr.low <= pr.median <= pr.high


def test_a_decision_is_exactly_where_its_interval_clears_the_bound():
    """p <= 1 - L exactly when the interval at level L excludes t, for random data, thresholds at, between and
    around the repeats, and several levels; the p-value is 1/e, twice the one-sided tail."""
    rng = np.random.default_rng(3)
    checked = 0
    for _ in range(150):
        n = int(rng.integers(1, 80))
        z = _samples(rng, n)
        ordered = np.sort(z)
        thresholds = np.concatenate(
            [ordered, (ordered[1:] + ordered[:-1]) / 2, rng.uniform(z.min() - 1, z.max() + 1, 8)]
        )
        for level in (0.9, 0.95, 0.99, 0.999):
            s = summarize(z, level)
            for t in thresholds:
                p_above, p_below = 2 * s.p_above(t), 2 * s.p_below(t)
                assert (p_above <= 1 - level) == (s.has_interval and s.low > t), (n, level, t)
                assert (p_below <= 1 - level) == (s.has_interval and s.high < t), (n, level, t)
                e_above, e_below = s.evidence(t)
                assert p_above == pytest.approx(min(1.0, 1 / e_above)) and p_below == pytest.approx(
                    min(1.0, 1 / e_below)
                )
                checked += 1
    assert checked > 40_000


def test_a_paired_ratio_decides_on_its_log_ratios_the_same_way():
    rng = np.random.default_rng(4)
    for _ in range(150):
        n = int(rng.integers(min_repeats(), 60))
        den = rng.lognormal(0, 0.3, n)
        s = paired_ratio(2 * den * rng.lognormal(0, 0.1, n), den)
        for t in np.exp(rng.uniform(math.log(1.5), math.log(2.6), 30)):
            assert (2 * s.p_above(t) <= 0.05) == (s.low > t) and (2 * s.p_below(t) <= 0.05) == (s.high < t)


@pytest.mark.xfail(
    strict=True,
    reason="the unpaired p-value is the first of 400 fixed errors at which the interval clears t: where the interval "
    "first clears t between 0.0492 and 0.05 it reads 0.0518, so a 95% interval clear of t is judged undecided",
)
def test_an_unpaired_decision_is_where_its_interval_clears_the_bound():
    """Just inside each end of the 95% interval, the test that decides must decide: 2 x tail <= 0.05."""
    rng = np.random.default_rng(3)
    for n in range(min_repeats(0.975), 120):
        s = ratio_of_medians(rng.lognormal(0, 0.1, n), rng.lognormal(0, 0.1, n))
        assert 2 * s.p_above(s.low * (1 - 1e-12)) <= 0.05, n
        assert 2 * s.p_below(s.high * (1 + 1e-12)) <= 0.05, n


# --- coverage when looked at after every repeat ---------------------------------------------------------------------

HORIZON = 200


def _ranks(estimate) -> tuple[np.ndarray, np.ndarray]:
    """For n = 1..HORIZON, the 0-based order statistics `estimate` (of sorted values 1..n) returns as its interval
    (NaN: none)."""
    low, high = np.full(HORIZON, np.nan), np.full(HORIZON, np.nan)
    for n in range(1, HORIZON + 1):
        s = estimate(np.arange(1.0, n + 1))
        if s.has_interval:  # a paired ratio reads back exp(log(value)): round to the value
            low[n - 1], high[n - 1] = round(s.low) - 1, round(s.high) - 1
    return low, high


def _paired(values: np.ndarray) -> object:
    """A paired ratio whose log-ratios are log(values) (its interval read back on the values' scale)."""
    return paired_ratio(values, np.ones_like(values))


def _ever_misses(z: np.ndarray, truth: float, ranks: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Per row of z (one sequence of repeats), whether the interval after some repeat excluded `truth`: its low
    end, order statistic r, lies above the truth when at most r repeats lie below it; its high end likewise."""
    low, high = ranks
    below = np.cumsum(z < truth, axis=1)
    has = ~np.isnan(low)
    return ((below[:, has] <= low[has]) | (below[:, has] >= high[has] + 1)).any(axis=1)


def _upper(misses: int, runs: int) -> float:
    """One-sided 99% Clopper-Pearson upper bound of a miss rate."""
    return 1.0 if misses == runs else float(beta.ppf(0.99, misses + 1, runs - misses))


def _lower(misses: int, runs: int) -> float:
    """One-sided 99% Clopper-Pearson lower bound of a miss rate."""
    return 0.0 if misses == 0 else float(beta.ppf(0.01, misses, runs - misses + 1))


ESTIMATES = {"anytime": summarize, "anytime paired": _paired, "fixed n": stats.summarize}


def test_the_shortcut_is_the_interval_itself():
    """The simulations below read each interval through its order statistics' ranks; here the same sequences are
    judged with the real estimate after every repeat (the paired ratio of values x over 1s is the median of x)."""
    rng = np.random.default_rng(5)
    z = rng.lognormal(0, 1, (15, HORIZON))
    for name, estimate in ESTIMATES.items():
        fast = _ever_misses(z, 1.0, _ranks(estimate))
        slow = [
            any((s := estimate(row[:n])).has_interval and not s.low <= 1.0 <= s.high for n in range(1, HORIZON + 1))
            for row in z
        ]
        assert fast.tolist() == slow, name
        if name == "fixed n":
            assert fast.any()


@pytest.mark.parametrize(
    ("name", "draw", "truth"),
    [
        ("lognormal", lambda rng, shape: rng.lognormal(0, 1, shape), 1.0),
        ("exponential", lambda rng, shape: rng.exponential(1, shape), math.log(2)),
    ],
)
def test_an_interval_looked_at_after_every_repeat_misses_at_most_5_percent(name, draw, truth):
    """20,000 sequences of up to 200 independent repeats of a skewed distribution with a known median. The anytime
    interval (of a median, or of a paired ratio's log-ratios), looked at after every repeat, ever excludes the median
    in at most 5% of them (the one-sided 99% upper bound of the measured rate, about 3.6%); the fixed-n interval it
    replaced, looked at the same way, does in more than 5% (its lower bound; about 28%)."""
    rng = np.random.default_rng(6)
    runs = 20_000
    z = draw(rng, (runs, HORIZON))
    for estimate in ("anytime", "anytime paired"):
        misses = int(_ever_misses(z, truth, _ranks(ESTIMATES[estimate])).sum())
        assert _upper(misses, runs) <= 0.05, (name, estimate, misses / runs)
    fixed = _ranks(stats.summarize)
    misses = int(_ever_misses(z, truth, fixed).sum())
    assert _lower(misses, runs) > 0.05, (name, misses / runs)
    # at one n fixed in advance the old interval holds its level: looking after every repeat is what breaks it
    low, high = int(fixed[0][49]), int(fixed[1][49])
    exact = binom.cdf(low, 50, 0.5) + binom.sf(high, 50, 0.5)  # at most `low` below, or more than `high`
    below = (z[:, :50] < truth).sum(axis=1)
    at_50 = int(((below <= low) | (below >= high + 1)).sum())
    assert exact <= 0.05 and _lower(at_50, runs) <= exact <= _upper(at_50, runs)


def test_an_unpaired_ratio_looked_at_after_every_repeat_misses_at_most_5_percent():
    """Two independent skewed series (medians 3 and 1), one repeat more on each side each step: the ratio of medians'
    interval, judged after every step with the real `ratio_of_medians`, ever excludes 3 in at most 5% of runs."""
    rng = np.random.default_rng(8)
    runs, misses = 400, 0
    for _ in range(runs):
        x = 3 * rng.lognormal(0, 1, HORIZON)
        y = np.exp(rng.exponential(1, HORIZON) - math.log(2))
        for n in range(min_repeats(0.975), HORIZON + 1):
            s = ratio_of_medians(x[:n], y[:n])
            if not s.low <= 3.0 <= s.high:
                misses += 1
                break
    assert _upper(misses, runs) <= 0.05, misses / runs


# --- the projection allocation reads --------------------------------------------------------------------------------


def test_repeats_to_reach_projects_at_the_shrunk_share():
    assert repeats_to_reach(12, 12, evidence(12, 12) / 2) == 0  # already there
    assert repeats_to_reach(4, 8, 20.0) is None and repeats_to_reach(3, 8, 20.0) is None  # a coin, or behind
    assert repeats_to_reach(30, 50, 1e9, limit=10) is None  # not within the limit
    for beyond, n, target in ((7, 8, 20.0), (10, 12, 600.0), (30, 40, 200.0), (5, 6, 1000.0)):
        assert evidence(beyond, n) < target
        more = repeats_to_reach(beyond, n, target)
        share = (beyond + 0.5) / (n + 1)
        assert more is not None and more > 0
        assert log_evidence(beyond + share * more, n + more) >= math.log(target)
        assert log_evidence(beyond + share * (more - 1), n + more - 1) < math.log(target)
        assert repeats_to_reach(beyond + 1, n + 1, target) <= more  # one more beyond never needs more
    assert anytime.repeats_to_reach(8, 8, 20.0) < repeats_to_reach(6, 8, 20.0)
