"""The gate of `polyperf compare` fails closed and gates timings only when asked; timed series are one family (Holm);
the change and its interval come from one estimator."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from polyperf.analyse.compare import compare, to_markdown
from polyperf.analyse.gate import holm
from polyperf.cli import main
from polyperf.record.run_dir import RowWriter, new_run_dir
from polyperf.record.schema import Row, as_frame


def _run(tmp_path, name: str, *, slow: float = 1.0, syscalls: int = 9, suite: str = "io_buffering", seed: int = 0):
    run_dir = new_run_dir(tmp_path / name)
    rng = np.random.default_rng(seed)
    rows = [
        Row(suite, "parse", "rust", "buffered", "seconds", 0.01 * slow * rng.lognormal(0, 0.01), "s", repeat)
        for repeat in range(8)
    ]
    rows += [Row(suite, "parse", "rust", "buffered", "read_syscalls", syscalls, "count", r) for r in range(3)]
    RowWriter(run_dir).write(rows)
    return str(run_dir)


def _gate(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["compare", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_an_unchanged_run_passes_and_says_what_was_gated(tmp_path, capsys):
    a, b = _run(tmp_path, "a"), _run(tmp_path, "b", seed=1)
    code, out, _ = _gate(capsys, a, b, "--fail-on-regression", "0")
    assert code == 0 and "no regression beyond 0% in the gated series (exact counts)" in out


def test_timings_are_not_gated_unless_asked_and_then_the_drift_is_named(tmp_path, capsys):
    a, b = _run(tmp_path, "a"), _run(tmp_path, "b", slow=1.5, seed=1)
    assert _gate(capsys, a, b, "--fail-on-regression", "10")[0] == 0
    code, _, err = _gate(capsys, a, b, "--fail-on-regression", "10", "--gate-timings")
    assert code == 1
    assert "drift between runs" in err and "polyperf ab" in err and "regressed beyond 10%" in err


def _said(err: str) -> list[str]:
    """stderr's lines less the note that a run older than verdicts.json was judged now (these runs have none)."""
    return [line for line in err.strip().splitlines() if "has no verdicts.json" not in line]


def test_one_syscall_more_fails_the_default_gate(tmp_path, capsys):
    a, b = _run(tmp_path, "a"), _run(tmp_path, "b", syscalls=10, seed=1)
    code, _, err = _gate(capsys, a, b, "--fail-on-regression", "0")
    assert code == 1 and "read_syscalls" in err and len(_said(err)) == 1


@pytest.mark.parametrize("content", ["", "garbage\n{not json\n"])
def test_a_b_with_no_series_fails_closed(tmp_path, capsys, content):
    a, b = _run(tmp_path, "a"), _run(tmp_path, "b")
    (tmp_path / "b").joinpath("x").exists()
    jsonl = next((tmp_path / "b" / "runs").iterdir()) / "results.jsonl"
    jsonl.write_text(content, encoding="utf-8")
    code, _, err = _gate(capsys, a, b, "--fail-on-regression", "0")
    assert code == 2 and "B holds no series" in err and "Traceback" not in err


def test_a_b_that_ran_another_suite_fails_closed(tmp_path, capsys):
    a, b = _run(tmp_path, "a"), _run(tmp_path, "b", suite="bson")
    code, _, err = _gate(capsys, a, b, "--fail-on-regression", "0")
    assert code == 1 and "B lacks 2 of A's series" in err


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--alpha", "-1", "--alpha must lie in (0, 1)"),
        ("--alpha", "0", "--alpha must lie in (0, 1)"),
        ("--alpha", "1", "--alpha must lie in (0, 1)"),
        ("--alpha", "nan", "--alpha must lie in (0, 1)"),
        ("--fail-on-regression", "nan", "finite percentage >= 0"),
        ("--fail-on-regression", "inf", "finite percentage >= 0"),
        ("--fail-on-regression", "-5", "finite percentage >= 0"),
    ],
)
def test_settings_that_switch_the_gate_off_or_turn_it_around_are_refused(tmp_path, capsys, option, value, message):
    a, b = _run(tmp_path, "a"), _run(tmp_path, "b")
    code, _, err = _gate(capsys, a, b, option, value)
    assert code == 2 and message in err and len(_said(err)) == 1


def test_holm_against_a_worked_example():
    adjusted = holm([0.01, 0.04, 0.03, 0.005, math.nan])
    assert adjusted[:4] == pytest.approx([0.03, 0.06, 0.06, 0.02]) and math.isnan(adjusted[4])


def _family(seed: int, series: int, shifted: int, n: int = 10) -> tuple[list[dict], list[dict]]:
    rng = np.random.default_rng(seed)
    rows_a, rows_b = [], []
    for s in range(series):
        factor = 1.3 if s < shifted else 1.0
        for side, rows, f in (("A", rows_a, 1.0), ("B", rows_b, factor)):
            for repeat, v in enumerate(rng.lognormal(0, 0.05, n)):
                rows.append(dict(run_id=side, suite="x", case=f"c{s}", implementation="", variant="", driver="",
                                 metric="seconds", value=0.01 * f * v, unit="s", repeat=repeat, client_bound=False,
                                 params={}))  # fmt: skip
    return rows_a, rows_b


def test_the_family_keeps_unchanged_series_from_being_flagged():
    """40 unchanged series, n = 10 a side: alone at 5%, about two would be flagged per run; as a family, few runs
    flag any. One series 30% slower is still found."""
    flagged_alone = flagged_family = 0
    for seed in range(20):
        table = compare(*(as_frame(rows) for rows in _family(seed, 41, 1)))
        unchanged = table[table["case"] != "c0"]
        flagged_alone += int((unchanged["p_value"] < 0.05).sum())
        flagged_family += int(unchanged["label"].isin(["regressed", "improved"]).sum())
        assert table.loc[table["case"] == "c0", "label"].item() == "regressed"
        assert (table["p_adjusted"] >= table["p_value"]).all()
    assert flagged_alone >= 10 and flagged_family <= 2


def test_the_change_lies_inside_its_own_interval():
    rng = np.random.default_rng(5)
    for _ in range(30):
        rows_a, rows_b = _family(int(rng.integers(1 << 30)), 1, 0)
        skew = rng.exponential(0.2, 10)
        for row, extra in zip(rows_b, skew, strict=True):
            row["value"] *= 1 + extra  # one skewed side: a ratio of medians can fall outside the HL interval
        row = compare(as_frame(rows_a), as_frame(rows_b)).iloc[0]
        assert row.change_low <= row.change <= row.change_high, row


def test_a_family_too_large_for_its_samples_says_so():
    """n = 6 a side: the smallest p-value is 2 / C(12, 6) = 0.0022; in a family of 41 no series can reach 5%."""
    table = compare(*(as_frame(rows) for rows in _family(3, 41, 1, n=6)))
    assert set(table["label"]) == {"too few samples"}


def _load_rows(run: str, *, rate: float, quota: float, window_syscalls: list[float], by_name: bool) -> pd.DataFrame:
    """A load suite's rows as two runs of one commit write them: a calibrated rate and CPU budget, a count per request
    read over a timed window, and syscalls seen by name (a rare one only in some runs)."""

    def row(case: str, metric: str, value: float, repeat: int, params: dict) -> dict:
        names = dict(run_id=run, suite="http", case=case, implementation="axum", variant="", driver="oha")
        return dict(names, metric=metric, value=value, unit="count", repeat=repeat, client_bound=False, params=params)

    window = {"rate": rate, "cpu_quota": quota, "cpu_quota_auto": quota, "duration_s": 1.0, "connections": 64}
    counted = {"requests": 2000, "connections": 1}
    rows = [row("fixed_rate", "syscalls_per_request", v, r, window) for r, v in enumerate(window_syscalls)]
    rows += [row("counts", "allocations_per_request", 21.9, r, counted) for r in range(2)]
    if by_name:
        rows.append(row("counts", "syscalls_per_request_by_name", 0.01, 0, {**counted, "syscall": "mmap"}))
    return as_frame(rows)


def test_two_runs_of_one_commit_pass_the_count_gate():
    """Calibrated settings do not name a series, a window's count per request is sampled, and a series the gate
    would never judge (a syscall seen by name in one run) does not fail it closed."""
    from polyperf.analyse.gate import gate

    a = _load_rows("A", rate=3100.0, quota=0.281, window_syscalls=[6.0, 6.1, 5.9, 6.05, 6.0, 6.2], by_name=True)
    b = _load_rows("B", rate=400.0, quota=0.375, window_syscalls=[7.6, 7.7, 7.5, 7.8, 7.6, 7.7], by_name=False)
    table = compare(a, b)
    window = table[table["metric"] == "syscalls_per_request"]
    assert len(window) == 1 and window["timed"].item() and not window["gated"].item()
    assert table.loc[table["metric"] == "allocations_per_request", "label"].item() == "equal"
    result = gate(table, 0.0)
    assert not result.failed, result.reason
    # the same count per request over a fixed number of requests is exact: one allocation more fails the gate
    b2 = b.copy()
    b2.loc[b2["metric"] == "allocations_per_request", "value"] = 22.9
    assert gate(compare(a, b2), 0.0).failed


def _two_peaked(tmp_path) -> tuple[str, str]:
    """Each side 20 repeats with two peaks: A 9 near 1.00 and 11 near 1.30, B 11 near 1.28 and 9 near 1.60. The
    medians say faster (1.28 < 1.30); nearly every B repeat is slower than the A repeat it would be matched with."""
    rng = np.random.default_rng(31)
    sides = {"a": [1.00] * 9 + [1.30] * 11, "b": [1.28] * 11 + [1.60] * 9}
    a, b = (_timed_run(tmp_path, name, np.array(c) * np.exp(rng.normal(0, 0.003, 20))) for name, c in sides.items())
    return a, b


def _timed_run(tmp_path, name: str, values) -> str:
    run_dir = new_run_dir(tmp_path / name)
    RowWriter(run_dir).write(
        [Row("io_buffering", "parse", "rust", "buffered", "seconds", float(v), "s", r) for r, v in enumerate(values)]
    )
    return str(run_dir)


def test_the_label_comes_from_the_change_it_prints_on_two_peaked_data(tmp_path, capsys):
    a, b = _two_peaked(tmp_path)
    from polyperf.record import load_run

    row = compare(load_run(a), load_run(b)).iloc[0]
    assert row.change_low > 0.20 and row.label == "regressed", row  # Hodges-Lehmann +24%: slower, never "improved"
    code, _, err = _gate(capsys, a, b, "--fail-on-regression", "10", "--gate-timings")
    assert code == 1 and "parse" in err


def test_regressed_beyond_t_needs_the_whole_interval_above_t(tmp_path, capsys):
    """A clear slowdown whose point passes T while its interval reaches below T is not "beyond T"."""
    rng = np.random.default_rng(4)
    runs = [_timed_run(tmp_path, n, 0.01 * f * np.exp(rng.normal(0, 0.03, 12))) for n, f in (("a", 1), ("b", 1.12))]
    from polyperf.record import load_run

    row = compare(load_run(runs[0]), load_run(runs[1])).iloc[0]
    assert row.label == "regressed" and row.change_low < 0.10 < row.change, row
    code, out, _ = _gate(capsys, *runs, "--fail-on-regression", "10", "--gate-timings")
    assert code == 0 and "no regression beyond 10%" in out
    assert _gate(capsys, *runs, "--fail-on-regression", f"{row.change_low * 100 - 0.5:.2f}", "--gate-timings")[0] == 1


def _server_rows(run: str, targets: list[str], *, cases: tuple[str, ...] = ("fixed_rate", "driver_ceiling")) -> list:
    rows = []
    for case in cases:
        for target in targets if case == "driver_ceiling" else ["axum", "gnet"]:
            for repeat in range(6):
                rows.append(dict(run_id=run, suite="http_frameworks", case=case, implementation=target, variant="",
                                 driver="oha", metric="rps", value=1000.0 + repeat, unit="1/s", repeat=repeat,
                                 client_bound=False, params={}))  # fmt: skip
    return rows


def test_a_series_the_run_chose_does_not_fail_the_gate_and_a_failed_case_is_named():
    """driver_ceiling measures the target a calibration found fastest: axum in A, gnet in B. B measured the case,
    on another series: not produced by chance, not gated. A case whose test failed in B is named as failed."""
    from polyperf.analyse.gate import attribute_missing, gate

    pair = as_frame(_server_rows("A", ["axum"])), as_frame(_server_rows("B", ["gnet"]))
    table = compare(*pair)
    assert (table["label"] == "only in A").sum() == 1 and gate(table, 0.0).failed  # the old answer: fails closed
    table = attribute_missing(table, [])
    row = table[table["label"] == "not produced in B"]
    assert len(row) == 1 and row["implementation"].item() == "axum" and "other series" in row["missing_why"].item()
    result = gate(table, 0.0)
    assert not result.failed and "1 series of A not produced in B" in result.reason
    lost = attribute_missing(compare(*pair), [], {("http_frameworks", "driver_ceiling", "axum", "rps")})
    assert gate(lost, 0.0).failed  # B measured it and every value was invalid: that is no choice of the run

    b = as_frame(_server_rows("B", ["axum"], cases=("driver_ceiling",)))  # fixed_rate cut short by a failed test
    failed = [("http_frameworks", "suites/test_http_frameworks.py::test_fixed_rate")]
    table = attribute_missing(compare(as_frame(_server_rows("A", ["axum"])), b), failed)
    assert set(table.loc[table["case"] == "fixed_rate", "label"]) == {"failed in B"}
    result = gate(table, 0.0)
    assert result.failed and "B lacks 2 series of failed cases" in result.reason and "test_fixed_rate" in result.reason
    assert "failed in B" in to_markdown(table)


def test_a_b_that_ran_another_profile_says_so(tmp_path, capsys):
    a, b = _run(tmp_path, "a"), _run(tmp_path, "b", suite="bson")
    from polyperf.record.env import write_env

    write_env(Path(a), profile="quick")
    write_env(Path(b), profile="smoke")
    code, _, err = _gate(capsys, a, b, "--fail-on-regression", "0")
    assert code == 1 and "A ran profile quick, B smoke" in err and len(_said(err)) == 1
