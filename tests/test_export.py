"""`polyperf export`: the three formats on a small synthetic run written with polyperf's own Recorder, the CLI's
one-line errors, and the real benchstat (golang.org/x/perf, pinned) reading two exported runs: its ~ / +x% / -x%
agree with `polyperf compare`'s labels on the same per-repeat values, or the difference is named and why."""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import mannwhitneyu

from polyperf.analyse.compare import compare, is_per_request_count
from polyperf.common.go_tools import BENCHSTAT_INSTALL, ensure_benchstat
from polyperf.errors import ToolchainMissing
from polyperf.record import Recorder, load_run, new_run_dir
from polyperf.record.run_dir import RowWriter
from polyperf.report.export import benchmark_name, export_text, series_of, to_bmf, to_github_action_benchmark


def _toy_run(out: Path) -> Path:
    run_dir = new_run_dir(out)
    record = Recorder(RowWriter(run_dir), "toy")
    for repeat in range(7):
        for sample in range(3):  # three samples per repeat: the repeat's median is what counts
            value = 0.010 * (1 + repeat / 100) + sample * 0.001
            params = {"size": 1024, "round": sample}
            record("seconds", value, "s", case="parse", implementation="rust", repeat=repeat, params=params)
        record("allocations", 5, "count", case="parse", implementation="rust", repeat=repeat)
        record("rps", 1000 + repeat, "1/s", case="get /x", implementation="axum", driver="oha", repeat=repeat)
        record("server_cpu_share", 0.5, "ratio", case="get /x", implementation="axum", driver="oha", repeat=repeat)
    record("seconds", 1.0, "s", case="few", implementation="go", repeat=0)
    return run_dir


@pytest.fixture
def toy(tmp_path: Path):
    run_dir = _toy_run(tmp_path)
    return run_dir, load_run(run_dir)


def test_names_are_one_field_and_undo_nothing_silently():
    name = benchmark_name("s", "get /x y", "a%b", "", "oha", {"cpus": "0-1", "n": 3, "flag": True})
    assert name == "s/get%20%2Fx%20y/a%25b/driver=oha/cpus=0-1/flag=true/n=3"
    assert benchmark_name("s", "c", "i", "v", "", {}) == "s/c/i/v"


def test_series_summarise_samples_per_repeat(toy):
    _run_dir, table = toy
    by = {(s.benchmark, s.metric): s for s in series_of(table)}
    parse = by[("toy/parse/rust/size=1024", "seconds")]  # `round` names a sample, not the series
    assert parse.values == pytest.approx([0.010 * (1 + r / 100) + 0.001 for r in range(7)])
    assert (parse.better, parse.exact) == ("lower", False)
    assert by[("toy/parse/rust", "allocations")].exact
    table.loc[table["metric"] == "rps", "value"] = [math.nan, math.inf, *range(5)]
    (rps,) = [s for s in series_of(table) if s.metric == "rps"]
    assert rps.values == (0, 1, 2, 3, 4)  # values that are not finite are never exported


def test_bmf_has_bounds_from_six_repeats(toy):
    _run_dir, table = toy
    bmf = to_bmf(series_of(table))
    seconds = bmf["toy/parse/rust/size=1024"]["seconds"]
    values = sorted(0.010 * (1 + r / 100) + 0.001 for r in range(7))
    # n = 7: the 95% order-statistic interval of the median is (x(1), x(7))
    assert seconds == pytest.approx({"value": values[3], "lower_value": values[0], "upper_value": values[6]})
    assert bmf["toy/parse/rust"]["allocations"] == {"value": 5.0, "lower_value": 5.0, "upper_value": 5.0}
    assert bmf["toy/few/go"]["seconds"] == {"value": 1.0}  # one repeat: no interval, no bounds


def test_github_action_benchmark_takes_one_direction(toy):
    _run_dir, table = toy
    series = series_of(table)
    smaller, left = to_github_action_benchmark(series, "customSmallerIsBetter")
    assert {e["name"] for e in smaller} == {
        "toy/parse/rust allocations",
        "toy/parse/rust/size=1024 seconds",
        "toy/few/go seconds",
    }
    assert left == 2  # rps (better higher) and server_cpu_share (no direction)
    bigger, _ = to_github_action_benchmark(series, "customBiggerIsBetter")
    assert bigger == [
        {
            "name": "toy/get%20%2Fx/axum/driver=oha rps",
            "unit": "1/s",
            "value": 1003.0,
            "range": "95% CI of the median 1000 to 1006",
            "extra": "median of 7 independent repeats",
        }
    ]


def test_gobench_lines_and_units(toy):
    _run_dir, table = toy
    text, note = export_text(table, "gobench")
    assert note == ""
    lines = text.splitlines()
    assert "Unit seconds better=lower" in lines and "Unit allocations better=lower assume=exact" in lines
    assert not any(line.startswith("Unit server_cpu_share") for line in lines)  # no direction: none claimed
    parse = [line for line in lines if line.startswith("BenchmarkToy/parse/rust/size=1024 ")]
    assert len(parse) == 7 and all(line.split()[1] == "1" and line.split()[3] == "seconds" for line in parse)
    assert all(len(line.split()) == 4 for line in lines if line.startswith("Benchmark"))


def test_cli_writes_a_file_and_errors_in_one_line(toy, tmp_path):
    run_dir, _table = toy
    out = tmp_path / "bmf.json"
    done = _polyperf("export", str(run_dir), "--format", "bmf", "--out", str(out))
    assert done.returncode == 0 and done.stdout == "", done.stderr
    assert json.loads(out.read_text())["toy/parse/rust"]["allocations"]["value"] == 5.0
    empty = new_run_dir(tmp_path / "empty")
    done = _polyperf("export", str(empty), "--format", "gobench")
    assert done.returncode == 2 and done.stderr.strip() == f"polyperf: error: {empty.resolve()}: no rows to export"
    done = _polyperf("export", str(run_dir), "--format", "csv")
    assert done.returncode == 2 and "invalid choice: 'csv'" in done.stderr


def _polyperf(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "polyperf", *args], capture_output=True, text=True, timeout=120, check=False
    )


# --- the real benchstat against polyperf compare ---------------------------------------------------------------


def _borderline(m: int, n: int, u: int) -> tuple[np.ndarray, np.ndarray]:
    """A (m values) and B (n values), all distinct, B above A in exactly `u` of the m*n pairs."""
    a = np.arange(1, m + 1) * 2.0
    base, extra = divmod(u, n)
    above = [base + (j < extra) for j in range(n)]
    return a, np.array([2.0 * k + 1 + j * 0.001 for j, k in enumerate(above)])


def _ab_runs(tmp_path: Path) -> tuple[Path, Path]:
    """Two runs of one synthetic suite: unchanged, slower, faster, too few, a throughput drop, exact counts equal
    and changed, a count per request within polyperf's tolerance, and a U test right at alpha."""
    rng = np.random.default_rng(2026)
    runs = [new_run_dir(tmp_path / side) for side in "ab"]
    recs = [Recorder(RowWriter(run), "toy") for run in runs]

    def put(case: str, metric: str, unit: str, sides: tuple, per_repeat: int = 1) -> None:
        for record, values in zip(recs, sides, strict=True):
            for repeat, value in enumerate(values):
                for sample in range(per_repeat):  # samples of a repeat sit around its value
                    jitter = (sample - (per_repeat - 1) / 2) * 1e-4 * value
                    record(metric, float(value + jitter), unit, case=case, implementation="rust", repeat=repeat)

    def noisy(center: float, n: int = 8) -> np.ndarray:
        return center * rng.lognormal(0, 0.02, n)

    put("steady", "seconds", "s", (noisy(1.0), noisy(1.0)))
    put("steady2", "seconds", "s", (noisy(3.0), noisy(3.0)))
    put("slower", "seconds", "s", (noisy(1.0), noisy(1.2)))
    put("faster", "seconds", "s", (noisy(2.0), noisy(1.7)), per_repeat=3)
    put("few", "seconds", "s", (noisy(1.0, 3), noisy(1.3, 3)))
    put("load", "rps", "1/s", (noisy(1000.0), noisy(900.0)))
    put("same_allocs", "allocations", "count", ([12] * 6, [12] * 6))
    put("more_allocs", "allocations", "count", ([12] * 6, [13] * 6))
    put("per_request", "syscalls_per_request", "count", ([4.0] * 6, [4.04] * 6))
    put("at_alpha", "seconds", "s", _borderline(9, 12, 82))
    put("family", "seconds", "s", _borderline(8, 8, 55))  # p = 0.0148 alone; not below alpha among 4 or more
    put("widgets", "widgets", "count", (noisy(10.0), noisy(12.0)))  # a metric the catalogue does not know
    return runs[0], runs[1]


def _benchstat_deltas(benchstat: Path, old: Path, new: Path) -> dict[tuple[str, str], str]:
    """(benchmark name without `Benchmark`, unit) -> benchstat's "vs base" cell, from its CSV output."""
    done = subprocess.run(
        [str(benchstat), "-format", "csv", str(old), str(new)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    deltas, unit = {}, None
    for row in csv.reader(io.StringIO(done.stdout)):
        if len(row) >= 7 and row[0] == "" and row[2] == "CI":
            unit = row[1]
        elif len(row) >= 7 and unit and row[0] and row[0] != "geomean":
            deltas[(row[0], unit)] = row[5]
    return deltas


def _agrees(label: str, change: float, delta: str, a: np.ndarray, b: np.ndarray) -> bool:
    """benchstat's cell says what polyperf's label says: no change (~), equal (0.00%), or a change the same way.
    Its percentage is the ratio of the medians of the exported repeats (compare's point estimate may be another
    estimator of the same change, so only its sign is held against it)."""
    if delta == "~":
        return label in ("no change", "too few samples", "equal")
    if delta == "0.00%":
        return label == "equal"
    percent = float(delta.rstrip("%"))
    assert abs(percent - 100 * (np.median(b) / np.median(a) - 1)) < 0.006, (percent, a, b)
    return label in ("improved", "regressed", "changed", "differs") and np.sign(percent) == np.sign(change)


def _why(row, a: np.ndarray, b: np.ndarray, delta: str) -> str:
    """Why polyperf and benchstat label one series differently, or "" when no known reason applies."""
    if row.label == "equal" and is_per_request_count(row.metric, row.unit) and delta.endswith("%"):
        return (
            "count per request: polyperf calls it equal within 2% or half a count; benchstat, told assume=exact, "
            "shows any change"
        )
    reasons = []
    ties = len(np.unique(np.concatenate([a, b]))) < a.size + b.size
    if not ties and max(a.size, b.size) >= 8 and a.size <= 50 and b.size <= 50:
        exact = mannwhitneyu(b, a, alternative="two-sided", method="exact").pvalue
        if (row.p_value < 0.05) != (exact < 0.05) and (exact < 0.05) == (delta != "~"):
            reasons.append(
                f"U test at alpha: polyperf's p = {row.p_value:.4f} (scipy's normal approximation from n = 8), "
                f"benchstat's {exact:.4f} (the exact U distribution up to n = 50)"
            )
    adjusted = getattr(row, "p_adjusted", math.nan)
    if delta != "~" and adjusted >= 0.05 and row.label in ("no change", "too few samples"):
        reasons.append(
            f"family: polyperf Holm-adjusts the run's timed series together (p = {adjusted:.4f}); benchstat tests "
            "each series alone"
        )
    return "; ".join(reasons)


@pytest.mark.slow
def test_benchstat_agrees_with_compare_or_the_difference_is_named(tmp_path):
    if shutil.which("go") is None:
        pytest.skip(f"needs Go for benchstat: install Go, then {BENCHSTAT_INSTALL}")
    try:
        benchstat = ensure_benchstat()
    except ToolchainMissing as exc:
        pytest.skip(f"benchstat could not be built ({exc}); by hand: {BENCHSTAT_INSTALL}")
    run_a, run_b = _ab_runs(tmp_path)
    table_a, table_b = load_run(run_a), load_run(run_b)
    files = []
    for name, table in (("a.txt", table_a), ("b.txt", table_b)):
        files.append(tmp_path / name)
        files[-1].write_text(export_text(table, "gobench")[0])
    deltas = _benchstat_deltas(benchstat, *files)
    values = {
        side: {(s.benchmark, s.metric): np.array(s.values) for s in series_of(table)}
        for side, table in (("a", table_a), ("b", table_b))
    }
    named, unexplained = {}, []
    result = compare(table_a, table_b)
    assert len(result) == 12
    for row in result.itertuples():
        name = benchmark_name(row.suite, row.case, row.implementation, row.variant, row.driver, json.loads(row.params))
        delta = deltas[(name[0].upper() + name[1:], row.metric)]
        a, b = values["a"][(name, row.metric)], values["b"][(name, row.metric)]
        if _agrees(row.label, row.change, delta, a, b):
            continue
        why = _why(row, a, b, delta)
        (named.__setitem__(row.case, why) if why else unexplained.append(f"{row.case}: {row.label} vs {delta}"))
    assert not unexplained, unexplained
    # the differences built in, and no other, each for the reason named: Holm's only where compare adjusts
    family = {"family"} if "p_adjusted" in result else set()
    assert set(named) == {"per_request", "at_alpha", *family}, named
    assert "U test at alpha" in named["at_alpha"]
    labels = dict(zip(result["case"], result["label"], strict=True))
    assert labels["slower"] == "regressed" and labels["load"] == "regressed" and labels["faster"] == "improved"
    assert labels["few"] == "too few samples" and deltas[("Toy/few/rust", "seconds")] == "~"
    assert deltas[("Toy/same_allocs/rust", "allocations")] == "0.00%"
    assert deltas[("Toy/more_allocs/rust", "allocations")] == "+8.33%"
