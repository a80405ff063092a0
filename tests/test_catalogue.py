"""The metric catalogue knows every metric a run records: the rows of real quick runs (the claims' golden table)
and every metric name written literally where rows are made (a static scan of the harness and the suites)."""

from __future__ import annotations

import ast
import gzip
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from polyperf.analyse import compare as compare_mod
from polyperf.analyse.claims import _is_exact
from polyperf.record.catalogue import CATALOGUE, FAMILIES, MetricInfo, current_metric, metric_info
from polyperf.record.schema import BASE_UNITS
from polyperf.report.flags import unknown_metrics

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "testdata" / "claims_golden.jsonl.gz"


def _name(node: ast.expr) -> str | None:
    """A literal metric name; an f-string's fixed parts with `{}` for each value."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


def recorded_metrics(*roots: Path) -> dict[tuple[str, str], str]:
    """(metric, unit) → where, for every `(name, value, "unit", ...)` tuple or call whose third element is a base
    unit: how `record(...)`, `Row(...)` and the metric lists of `record.many` write a row."""
    found: dict[tuple[str, str], str] = {}
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                elements = node.elts if isinstance(node, ast.Tuple) else node.args if isinstance(node, ast.Call) else []
                for first, second, unit in zip(elements, elements[1:], elements[2:], strict=False):
                    literal_second = isinstance(second, ast.Constant) and isinstance(second.value, str)
                    name = _name(first)
                    if isinstance(unit, ast.Constant) and unit.value in BASE_UNITS and name and not literal_second:
                        found.setdefault((name, unit.value), f"{path.relative_to(root)}:{node.lineno}")
    return found


def _known(name: str, unit: str) -> bool:
    if "{}" not in name:
        info = metric_info(name)
        return info is not None and info.unit == unit
    members = [template.format(part) for template, parts in FAMILIES.items() for part in parts]
    pattern = re.compile(re.escape(name).replace(r"\{\}", ".+"))
    matching = [m for m in members if pattern.fullmatch(m)]
    return bool(matching) and all(CATALOGUE[m].unit == unit for m in matching)


def test_every_metric_the_code_records_is_catalogued():
    found = recorded_metrics(ROOT / "python" / "polyperf", ROOT / "suites")
    assert len(found) > 60  # the scan sees the suites' and the harness's rows (80 names when written)
    missing = sorted(f"{m} ({u}) at {where}" for (m, u), where in found.items() if not _known(m, u))
    assert not missing, "metrics recorded but not in record/catalogue.py:\n" + "\n".join(missing)


def test_every_metric_of_real_quick_runs_is_catalogued():
    with gzip.open(GOLDEN, "rt", encoding="utf-8") as fh:
        pairs = {(row["metric"], row["unit"]) for row in map(json.loads, fh)}
    assert pairs
    assert sorted(p for p in pairs if not _known(*p)) == []


def test_the_scan_sees_a_new_metric(tmp_path):
    (tmp_path / "suite.py").write_text(
        'def test_x(record):\n    record("made_up_widgets", 3, "count", case="c", implementation="i")\n'
        '    rows = [(f"latency_{name}_s", 1.0, "s", {}), ("made_up_rate", 2.0, "1/s", {})]\n',
        encoding="utf-8",
    )
    found = recorded_metrics(tmp_path)
    assert set(found) == {("made_up_widgets", "count"), ("latency_{}_s", "s"), ("made_up_rate", "1/s")}
    assert [k for k in found if not _known(*k)] == [("made_up_widgets", "count"), ("made_up_rate", "1/s")]


def test_entries_are_well_formed():
    for name, info in CATALOGUE.items():
        assert info.name == name and info.unit in BASE_UNITS and info.better in ("higher", "lower", "none")
        assert info.description
    for template, parts in FAMILIES.items():
        assert {template.format(p) for p in parts} <= set(CATALOGUE)
    with pytest.raises(ValueError, match="not a base unit"):
        MetricInfo("x", "ms", "lower", False, True, "x")
    assert metric_info("no_such_metric") is None


def test_diagnostics_are_not_gated_and_exact_counts_are_declared():
    assert not any(CATALOGUE[m].gated for m in ("client_cpu_share", "rss_peak_bytes", "server_cpu_wait_share"))
    assert all(CATALOGUE[m].gated for m in ("seconds", "rps", "cpu_s_per_request", "allocations_per_request"))
    assert all(CATALOGUE[m].exact for m in ("read_syscalls", "allocations", "rows_found", "syscalls_per_request"))
    assert not any(CATALOGUE[m].exact for m in ("seconds", "rps", "server_threads", "errors"))


def test_compare_reads_the_catalogue_not_the_name():
    # a name that looks like a throughput and a unit of time: the old globs would have guessed; now unknown
    assert compare_mod.direction("made_up_rps", "1/s") == compare_mod.UNKNOWN
    assert compare_mod.direction("throughput_seconds", "s") == compare_mod.UNKNOWN
    assert not compare_mod.is_deterministic_name("syscalls_made_up")
    # settings are not better either way, whatever their names say
    assert compare_mod.direction("cpu_quota", "ratio") == compare_mod.UNKNOWN
    assert compare_mod.direction("rows_mismatch", "count") == compare_mod.LOWER
    # a catalogued name in another unit is another quantity
    assert compare_mod.direction("seconds", "bytes") == compare_mod.UNKNOWN
    # v1 rows are read as their upgrade
    assert current_metric("latency_p99_ms", "ms") == ("latency_p99_s", "s")
    assert current_metric("cpu_us_per_request", "us") == ("cpu_s_per_request", "s")
    assert current_metric("seconds", "s") == ("seconds", "s")


def _count_rows(metric: str, values: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"metric": metric, "unit": "count", "value": values})


def test_claims_take_exactness_from_the_catalogue():
    assert _is_exact(_count_rows("allocations_per_request", [1763.9, 1764.1]))
    assert _is_exact(_count_rows("syscalls_per_request_by_name", [0.5]))
    assert not _is_exact(_count_rows("made_up_per_request", [0.5]))  # the name alone no longer decides
    assert not _is_exact(_count_rows("made_up_per_request", [2.0, 3.0]))  # nor do whole numbers


def test_the_report_flags_unknown_metrics():
    table = pd.DataFrame(
        {"suite": ["s", "s", "s"], "metric": ["seconds", "made_up", "latency_p99_ms"], "unit": ["s", "count", "ms"]}
    )
    flags = unknown_metrics(table)
    assert [(f.kind, f.subject, f.suite) for f in flags] == [("unknown metric", "made_up (count)", "s")]
