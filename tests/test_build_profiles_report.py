"""The build_profiles report on a made-up table with known answers: speed-ups are paired by repeat and leave
client-bound runs out, the N range where the article's 2.64x holds is named, and the release vs 'R' difference
is attributed to the single settings measured beside it. Its figures render from the same table."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from polyperf.report.suites import build_profiles as bp

REPEATS = range(6)


def _rows(case: str, metric: str, variant: str, n: int, values: list[float], *, bound: bool = False) -> list[dict]:
    return [
        {
            "suite": bp.SUITE,
            "case": case,
            "metric": metric,
            "implementation": "actix_matrix",
            "variant": variant,
            "driver": "oha" if case == "ceiling" else "",
            "value": value,
            "unit": "1/s",
            "repeat": repeat,
            "client_bound": bound,
            "params": {"n": n, "server_cpus": "0", "client_cpus": "1"},
        }
        for repeat, value in zip(REPEATS, values, strict=False)
    ]


def _noisy(level: float) -> list[float]:
    return [level * f for f in (1.0, 1.02, 0.98, 1.01, 0.99, 1.03)]


def _table() -> pd.DataFrame:
    """dev at 100 req/s; release 3x dev at N = 4 and 20x at N = 120; the settings multiply: fat LTO 1.10x,
    codegen-units=1 1.05x, panic=abort 1.00x, 'R' 1.155x; the multiply alone 40x for release."""
    rows = []
    for n, release_over_dev in ((4, 3.0), (24, 8.0), (120, 20.0)):
        rows += _rows("ceiling", "rps", "dev", n, _noisy(100.0))
        rows += _rows("ceiling", "rps", "release", n, _noisy(100.0 * release_over_dev))
        rows += _rows("ceiling", "rps", "release-lto", n, _noisy(100.0 * release_over_dev * 1.155))
    for variant, gain in (("release-fat-lto", 1.10), ("release-cgu1", 1.05), ("release-abort", 1.0)):
        rows += _rows("ceiling", "rps", variant, 120, _noisy(2000.0 * gain))
        rows += _rows("multiply", "cpu_s_per_multiply", variant, 120, _noisy(1e-3 / gain))
    for variant, seconds in (("dev", 40e-3), ("release", 1e-3), ("release-lto", 1e-3 / 1.155)):
        rows += _rows("multiply", "cpu_s_per_multiply", variant, 120, _noisy(seconds))
    # client-bound runs that would say otherwise: left out
    rows += _rows("ceiling", "rps", "native", 120, [1.0] * 6, bound=True)
    # server CPU per request: 12x more in dev at N = 4 (the release run was client-bound: its CPU still counts)
    for n, dev_over_release in ((4, 12.0), (24, 30.0)):
        rows += _rows("ceiling", "cpu_s_per_request", "release-lto", n, _noisy(1e-4), bound=n == 4)
        rows += _rows("ceiling", "cpu_s_per_request", "dev", n, _noisy(1e-4 * dev_over_release))
    return pd.DataFrame(rows)


def test_speedup_pairs_repeats_and_inverts_times() -> None:
    table = _table()
    served = bp.speedup(table, bp.SERVED, "release", "dev", 120)
    alone = bp.speedup(table, bp.ALONE, "release", "dev", 120)
    assert served is not None and alone is not None
    assert served.median == pytest.approx(20.0, rel=1e-9) and served.n == 6
    assert alone.median == pytest.approx(40.0, rel=1e-9)
    assert bp.speedup(table, bp.SERVED, "release", "dev", 7) is None


def test_client_bound_runs_are_left_out_of_throughput_but_not_of_cpu_per_request() -> None:
    table = _table()
    assert bp.speedup(table, bp.SERVED, "native", "release", 120) is None
    capacity = bp.speedup(table, bp.CAPACITY, "release-lto", "dev", 4)
    assert capacity is not None and capacity.median == pytest.approx(12.0)


def test_sizes_are_read_from_the_rows() -> None:
    assert bp.sizes(_table(), bp.SERVED) == [4, 24, 120]


def test_article_range_names_where_the_ratio_crosses_2_64() -> None:
    table = _table()
    points = {n: bp.speedup(table, bp.SERVED, "release", "dev", n) for n in (4, 24, 120)}
    text = bp.article_range(points)  # 3.0x at N = 4, 8x at 24: above everywhere
    assert "above the article's 2.64x at every N measured" in text and "N = 4" in text
    lower = {1: _summary(1.5, 1.4, 1.6), 4: _summary(2.6, 2.4, 2.9), 24: _summary(8.0, 7.5, 8.5)}
    text = bp.article_range(lower)
    assert "within its 95% interval at N = 4;" in text
    assert "crosses it between N = 4 and 24" in text


def _summary(median: float, low: float, high: float) -> bp.Summary:
    return bp.Summary(median, low, high, 6)


def test_attribution_names_the_settings_and_what_is_left() -> None:
    text = bp.attribution(_table(), bp.SERVED)
    assert text is not None
    assert text.startswith("R / release 1.16x")  # 1.155, printed to two places
    assert "fat LTO alone 1.10x" in text and "codegen-units=1 alone 1.05x" in text and "panic=abort alone 1.00x" in text
    assert f"Their product, {1.10 * 1.05:.2f}x, leaves {1.155 / (1.10 * 1.05):.2f}x" in text
    assert "interact. The settings shown to matter (interval excluding 1): fat LTO, codegen-units=1." in text
    assert "do not differ measurably" not in text


def test_attribution_says_when_nothing_is_shown_to_matter() -> None:
    table = _table()
    noisy = table["variant"].isin([*bp.SETTINGS, bp.ARTICLE]) & (table["metric"] == "rps")
    table.loc[noisy, "value"] *= [0.5, 2.0, 0.6, 1.6, 1.0, 1.0] * (int(noisy.sum()) // 6)
    text = bp.attribution(table, bp.SERVED)
    assert text is not None
    assert "R and Cargo's release do not differ measurably in this run" in text
    assert "no single setting is shown to matter at this precision" in text


def test_attribution_needs_every_single_setting() -> None:
    table = _table()
    assert bp.attribution(table[table["variant"] != "release-cgu1"], bp.SERVED) is None


def test_figures_render_from_the_table() -> None:
    figures = bp.figures(_table())
    try:
        names = [f.name for f in figures]
        assert names[:3] == ["build_ratio_vs_n", "build_ladder", "build_attribution"]
        assert "build_rps" in names and "build_cpu" in names and "build_cost" not in names  # no build rows here
        assert figures[0].caption.startswith("Served capacity: R/D is above the article's 2.64x at every N measured")
        assert "12.00x" in figures[0].caption and "N = 4" in figures[0].caption
    finally:
        for f in figures:
            plt.close(f.figure)


def test_the_ladder_repeats_every_variant_the_registry_compares_as_a_claimed_one():
    """The suite gives the verdicts' repeats to `CLAIMED_VARIANTS` and fewer to the rest: an entry comparing any
    other variant would be judged on context repeats."""
    import importlib.util
    from pathlib import Path

    from polyperf.analyse.claims_file import load_claims

    path = Path(__file__).resolve().parents[1] / "suites" / "test_build_profiles.py"
    spec = importlib.util.spec_from_file_location("build_profiles_suite", path)
    suite = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(suite)
    compared = {
        side["variant"]
        for claim in load_claims()
        if claim.suite == "build_profiles" and claim.select.get("case") == "ceiling"
        for side in (claim.numerator, claim.denominator)
        if side and "variant" in side
    }
    assert compared and compared <= set(suite.CLAIMED_VARIANTS), compared
    headline = next(c for c in load_claims() if c.id == "build.release_vs_dev")
    assert headline.select["params"]["n"] == suite.HEADLINE_N
