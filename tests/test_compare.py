"""`polyperf compare`: labels on synthetic runs (fixed seed), benchstat's too-few-samples rule, exact counts,
the regression gate, and the Markdown and figure outputs."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from polyperf.analyse.compare import (
    compare,
    direction,
    to_markdown,
    too_few_samples,
    worst_regression,
)
from polyperf.report.compare_figure import compare_figure

CASES = ("parse_unbuffered", "parse_buffered", "parse_read_all")


def _rows(run_id: str, case: str, metric: str, unit: str, values, *, params=None, client_bound=False, driver=""):
    return [
        dict(
            run_id=run_id,
            suite="io_buffering",
            case=case,
            implementation="rust",
            variant="",
            driver=driver,
            metric=metric,
            value=float(v),
            unit=unit,
            repeat=i,
            client_bound=client_bound,
            params=dict(params or {"bytes": 65536}),
        )
        for i, v in enumerate(values)
    ]


def _run(
    run_id: str,
    seed: int,
    *,
    slow_case: str | None = None,
    repeats: int = 10,
    syscalls: int = 65537,
    client_bound: bool = False,
):
    """Timings ~ lognormal around a per-case base, rps around 1000; `slow_case` is tripled (and its rps a third)."""
    rng = np.random.default_rng(seed)
    rows = []
    for base, case in zip((0.30, 0.03, 0.02), CASES, strict=True):
        factor = 3.0 if case == slow_case else 1.0
        rows += _rows(run_id, case, "seconds", "s", base * factor * rng.lognormal(0, 0.03, repeats))
        rows += _rows(run_id, case, "read_syscalls", "count", [syscalls if case == CASES[0] else 9] * repeats)
    rows += _rows(
        run_id,
        "http",
        "rps",
        "req/s",
        1000 * rng.lognormal(0, 0.02, repeats),
        driver="oha",
        params={"connections": 50},
        client_bound=client_bound,
    )
    return pd.DataFrame(rows)


def _label(df: pd.DataFrame, case: str, metric: str) -> str:
    (label,) = df[(df["case"] == case) & (df["metric"] == metric)]["label"]
    return label


def test_tripled_times_regress():
    df = compare(_run("A", 1), _run("B", 2, slow_case="parse_buffered"))
    assert _label(df, "parse_buffered", "seconds") == "regressed"
    row = df[(df["case"] == "parse_buffered") & (df["metric"] == "seconds")].iloc[0]
    assert 1.7 < row["change"] < 2.3 and row["change_low"] <= row["change"] <= row["change_high"]
    assert row["p_value"] < 0.001
    assert worst_regression(df) > 0.10
    assert math.isclose(worst_regression(df), row["change"])
    assert _label(df, "parse_unbuffered", "read_syscalls") == "equal"


def test_faster_is_improved_and_lower_rps_regresses():
    a, b = _run("A", 1, slow_case="parse_read_all"), _run("B", 2)
    df = compare(a, b)
    assert _label(df, "parse_read_all", "seconds") == "improved"
    assert worst_regression(df) == 0.0
    slower = b.assign(value=np.where(b["metric"] == "rps", b["value"] / 2, b["value"]))
    df = compare(a, slower)
    assert _label(df, "http", "rps") == "regressed"
    assert math.isclose(worst_regression(df), 0.5, rel_tol=0.05)  # throughput halved: 50% worse


@pytest.mark.parametrize("bound_side", ["A", "B"])
def test_a_series_client_bound_on_either_side_is_marked_and_not_gated(bound_side):
    a = _run("A", 1, client_bound=bound_side == "A")
    b = _run("B", 2, client_bound=bound_side == "B")
    b = b.assign(value=np.where(b["metric"] == "rps", b["value"] / 2, b["value"]))
    df = compare(a, b)
    row = df[df["metric"] == "rps"].iloc[0]
    assert row["label"] == "regressed" and row["client_bound"]
    assert (row["client_bound_a"], row["client_bound_b"]) == (bound_side == "A", bound_side == "B")
    assert worst_regression(df) == 0.0
    assert f"(client-bound in {bound_side}; not gated)" in to_markdown(df)


def test_identical_runs_no_change():
    a = _run("A", 7)
    df = compare(a, a.assign(run_id="B"))
    timed = df[df["metric"].isin(["seconds", "rps"])]
    assert set(timed["label"]) == {"no change"}
    assert (timed["change"] == 0).all() and (timed["p_value"] > 0.05).all()
    assert worst_regression(df) == 0.0


def test_two_samples_each_too_few():
    df = compare(_run("A", 1, repeats=2), _run("B", 2, repeats=2, slow_case="parse_buffered"))
    assert _label(df, "parse_buffered", "seconds") == "too few samples"
    assert worst_regression(df) == 0.0
    assert df[df["metric"] == "seconds"]["change"].notna().all()  # the change is still shown


# The smallest two-sided p-value is 2 / C(n_a + n_b, n_a): 2/6 at 2+2, 2/35 at 3+4, 2/70 at 4+4, 2/45 at 2+8,
# 2/40 = alpha exactly at 1+39 (not below it), 2/41 at 1+40.
@pytest.mark.parametrize(
    ("n_a", "n_b", "too_few"),
    [
        (1, 1, True),
        (2, 2, True),
        (3, 3, True),
        (3, 4, True),
        (4, 4, False),
        (3, 5, False),
        (2, 8, False),
        (1, 39, True),
        (1, 40, False),
        (0, 10, True),
    ],
)
def test_too_few_rule(n_a, n_b, too_few):
    assert too_few_samples(n_a, n_b) is too_few


def test_one_syscall_more_is_a_regression_and_gated():
    df = compare(_run("A", 1), _run("B", 2, syscalls=65538))
    assert _label(df, "parse_unbuffered", "read_syscalls") == "regressed"
    assert _label(df, "parse_buffered", "read_syscalls") == "equal"
    assert math.isclose(worst_regression(df), 1 / 65537)
    fewer = compare(_run("A", 1), _run("B", 2, syscalls=257))
    assert _label(fewer, "parse_unbuffered", "read_syscalls") == "improved"


@pytest.mark.parametrize(
    ("a", "b", "label"),
    [
        (12.0, 13.0, "regressed"),  # one allocation more per request
        (12.0, 12.2, "equal"),  # within half a count
        (100.0, 101.5, "equal"),  # within 2%
        (100.0, 97.0, "improved"),
        (0.0, 1.0, "regressed"),
    ],
)
def test_counts_per_request_within_tolerance(a, b, label):
    run_a = pd.DataFrame(_rows("A", "ceiling", "allocations_per_request", "count", [a, a * 1.001, a]))
    run_b = pd.DataFrame(_rows("B", "ceiling", "allocations_per_request", "count", [b, b * 1.001, b]))
    df = compare(run_a, run_b)
    assert df["label"].item() == label
    assert (worst_regression(df) > 0) is (label == "regressed")


def test_whole_numbers_are_not_exact_by_value():
    # only the catalogue makes a metric exact: identical whole numbers of another are sampled, and three a side
    # are too few to test
    a = pd.DataFrame(_rows("A", "pool", "connections_opened", "count", [12, 12, 12]))
    b = pd.DataFrame(_rows("B", "pool", "connections_opened", "count", [13, 13, 13]))
    assert compare(a, b)["label"].item() == "too few samples"
    a = pd.DataFrame(_rows("A", "pool", "read_syscalls", "count", [12, 12, 12]))
    b = pd.DataFrame(_rows("B", "pool", "read_syscalls", "count", [13, 13, 13]))
    assert compare(a, b)["label"].item() == "regressed"


def test_one_sided_series_and_params_key():
    a = pd.DataFrame(_rows("A", "c", "seconds", "s", [1, 2, 3, 4], params={"b": 1, "a": 2}))
    b = pd.DataFrame(
        _rows("B", "c", "seconds", "s", [1, 2, 3, 4], params={"a": 2, "b": 1})
        + _rows("B", "new", "seconds", "s", [1, 2])
    )
    b["params"] = b["params"].map(json.dumps)  # v1 tables store params as JSON text
    df = compare(a, b)
    assert dict(zip(df["case"], df["label"], strict=True)) == {"c": "no change", "new": "only in B"}


def test_directions():
    assert [
        direction(m, u)
        for m, u in [
            ("seconds", "s"),
            ("latency_p99_ms", "ms"),
            ("cpu_us_per_request", "us"),
            ("rps", "req/s"),
            ("mb_per_s", "MB/s"),
            ("errors", "count"),
            ("rss_peak_bytes", "bytes"),
            ("server_threads", "count"),
            ("allocations_per_request", "count"),
            ("syscalls_per_request_by_name", "count"),
        ]
    ] == [-1, -1, -1, 1, 1, -1, -1, 0, -1, 0]


def test_markdown_and_figure(tmp_path):
    df = compare(_run("A", 1), _run("B", 2, slow_case="parse_buffered", syscalls=70000, client_bound=True))
    text = to_markdown(df)
    assert "(client-bound in B; not gated)" in text
    lines = text.splitlines()
    assert lines[0].startswith("| series") and "| result" in lines[0]
    assert "**regressed**" in lines[2]  # regressions first
    assert "**regressed**" in text
    assert "+" in lines[2] and "%" in lines[2]
    assert "no change" not in to_markdown(df, only_changes=True)
    path = compare_figure(df, tmp_path / "compare.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_repeats_slot_does_not_split_its_series():
    def run(run_id, scale):
        rows = _rows(run_id, "ceiling", "rps", "1/s", [1000 * scale + i for i in range(6)], driver="oha")
        for i, row in enumerate(rows):
            row["params"] = {"connections": 64, "slot": i % 3}
        return pd.DataFrame(rows)

    df = compare(run("A", 1.0), run("B", 0.5))
    assert len(df) == 1 and df["params"].item() == '{"connections":64}'
    assert (df["n_a"].item(), df["label"].item()) == (6, "regressed")


def test_samples_inside_a_repeat_count_once():
    """Ten criterion samples in each of two rounds are two repeats, not twenty samples: too few to decide."""

    def run(run_id, scale):
        rows = []
        for rnd in range(2):
            samples = _rows(run_id, "spawn_many", "seconds", "s", [scale * (1 + 0.001 * i) for i in range(10)])
            for i, row in enumerate(samples):
                row.update(repeat=rnd, params={"round": rnd, "sample": i, "iterations": 100 + rnd})
            rows += samples
        return pd.DataFrame(rows)

    df = compare(run("A", 1.0), run("B", 3.0))
    assert len(df) == 1
    assert (df["n_a"].item(), df["n_b"].item(), df["label"].item()) == (2, 2, "too few samples")
