"""The stated rates of change detection, measured on seeded simulations that can fail: each rate is asserted with
an exact (Clopper-Pearson) one-sided 95% binomial bound, so a detector that runs at the limit does not pass on luck.

Noise families, all about 3% per point: lognormal; bimodal (30% of points 6% higher, 1% noise in each mode);
integer-quantised (whole milliseconds of a 30 ms timing: steps of 3.3%); occasional outliers (2% of points 1.3-2x).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import beta

from polyperf.analyse.changepoints import find_changes
from polyperf.analyse.creep import find_creep

FAMILIES = ("lognormal", "bimodal", "integer", "outliers")


def noise(rng: np.random.Generator, family: str, n: int) -> np.ndarray:
    if family == "lognormal":
        return rng.lognormal(0, 0.03, n)
    if family == "bimodal":
        return np.where(rng.random(n) < 0.3, 1.06, 1.0) * rng.lognormal(0, 0.01, n)
    if family == "integer":
        return np.round(30 * rng.lognormal(0, 0.03, n))
    if family == "outliers":
        values = rng.lognormal(0, 0.03, n)
        return np.where(rng.random(n) < 0.02, values * rng.uniform(1.3, 2.0, n), values)
    raise ValueError(family)


def upper(successes: int, trials: int) -> float:
    """One-sided 95% Clopper-Pearson upper bound of a binomial proportion."""
    return 1.0 if successes >= trials else float(beta.ppf(0.95, successes + 1, trials - successes))


def lower(successes: int, trials: int) -> float:
    return 0.0 if successes <= 0 else float(beta.ppf(0.05, successes, trials - successes + 1))


def test_the_bounds_are_exact() -> None:
    # 0 of 59 is the classic rule of three: the bound is 1 - 0.05 ** (1 / 59)
    assert upper(0, 59) == pytest.approx(1 - 0.05 ** (1 / 59))
    assert lower(59, 59) == pytest.approx(0.05 ** (1 / 59))


@pytest.mark.parametrize("family", FAMILIES)
def test_pure_noise_gives_at_most_005_false_changes_per_series_per_500_commits(family: str) -> None:
    rng = np.random.default_rng(FAMILIES.index(family) + 500)
    series = 200
    found = [find_changes(noise(rng, family, 500)) for _ in range(series)]
    counts = [sum(c.state == "confirmed" for c in changes) for changes in found]
    pending = sum(c.state == "pending" for changes in found for c in changes)
    # each of the 499 places a change can sit in a series is one trial: the bound on a false change per place,
    # times 499, bounds false changes per series per 500 commits
    places = series * 499
    rate = upper(sum(counts), places) * 499
    print(
        f"{family}: {sum(counts)} false confirmed changes in {series} series of 500 commits "
        f"(bound {rate:.3f} per series); {pending} pending at the newest commits"
    )
    assert rate <= 0.05


def test_a_10_percent_step_at_3_percent_noise_is_found_within_one_commit_in_95_percent() -> None:
    rng = np.random.default_rng(20261126)
    trials, found = 1000, 0
    for _ in range(trials):
        at = int(rng.integers(10, 50))
        values = noise(rng, "lognormal", 60) * np.where(np.arange(60) >= at, 1.10, 1.0)
        found += any(abs(c.index - at) <= 1 and c.state == "confirmed" for c in find_changes(values))
    print(f"10% step at 3% noise: found within one commit in {found} of {trials}; bound {lower(found, trials):.3f}")
    assert lower(found, trials) >= 0.95


def test_one_outlier_at_the_newest_commit_is_never_a_confirmed_change() -> None:
    rng = np.random.default_rng(44)
    trials, confirmed, pending = 300, 0, 0
    for _ in range(trials):
        values = rng.lognormal(0, 0.03, 81)
        values[-1] = np.exp(4 * 0.03)  # a 4-sigma point, newest
        changes = find_changes(values)
        confirmed += any(c.state == "confirmed" for c in changes)
        pending += any(c.state == "pending" for c in changes)
    print(f"4-sigma newest outlier: confirmed change in {confirmed} of {trials}, pending in {pending}")
    assert upper(confirmed, trials) <= 0.05


def _creep(rng: np.random.Generator, family: str, per_commit: float) -> bool:
    values = noise(rng, family, 30) * (1 + per_commit) ** np.arange(30)
    return find_creep(values) is not None


def test_creep_of_03_percent_per_commit_over_30_commits_is_reported_in_80_percent() -> None:
    rng = np.random.default_rng(30)
    trials = 500
    found = sum(_creep(rng, "lognormal", 0.003) for _ in range(trials))
    print(f"0.3%/commit creep over 30 commits at 3% noise: reported in {found} of {trials}")
    assert lower(found, trials) >= 0.80


@pytest.mark.parametrize("family", FAMILIES)
def test_creep_on_noise_is_reported_in_under_1_percent_of_series(family: str) -> None:
    rng = np.random.default_rng(FAMILIES.index(family) + 3000)
    trials = 2000
    false = sum(_creep(rng, family, 0.0) for _ in range(trials))
    print(f"{family}: creep reported on {false} of {trials} noise series")
    assert upper(false, trials) <= 0.01


def test_autocorrelated_noise_gives_at_most_005_false_changes_per_series_per_500_commits() -> None:
    # AR(1) noise, each point 0.5 of the last plus a fresh 3%: machine state that lingers from one run to the next.
    # Successive differences alone understate how far such a level wanders: 1.22 false changes per series (100
    # series) before the detector allowed for it
    rng = np.random.default_rng(600)
    series, phi, confirmed = 200, 0.5, 0
    for _ in range(series):
        shocks = rng.normal(0, 0.03, 500)
        logs = np.zeros(500)
        for t in range(1, 500):
            logs[t] = phi * logs[t - 1] + shocks[t]
        confirmed += sum(c.state == "confirmed" for c in find_changes(np.exp(logs)))
    rate = upper(confirmed, series * 499) * 499
    print(f"AR(1) 0.5 noise: {confirmed} false confirmed changes in {series} series of 500 commits (bound {rate:.3f})")
    assert rate <= 0.05
