"""`polyperf verdicts` on a run made here, with a user's claims file; the CI gate of `polyperf compare` on two
smoke runs of io_buffering, one with a case's times tripled."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import polyperf
from polyperf.analyse.anytime import min_repeats
from polyperf.record import Row
from polyperf.record.run_dir import RowWriter, new_run_dir

# Claims spelled out as TOML (as in tests/test_claims.py): a test's input reads best as the file a user writes.
CLAIMS = """
[[claims]]
id = "toy.double"
suite = "toy"
source = "a test"
statement = "a is twice b"
published = 2.0
unit = "x"
measure = "ratio"
metric = "seconds"
select = { case = "c" }
numerator = { variant = "a" }
denominator = { variant = "b" }
paired = true
rule = { kind = "within_factor", factor = 1.2 }

[[claims]]
id = "toy.median"
kind = "check"
suite = "toy"
source = "a test"
statement = "b takes about a second"
unit = "s"
measure = "value"
metric = "seconds"
select = { case = "c", variant = "b" }
rule = { kind = "within_factor", center = 1.0, factor = 3.0 }

[[claims]]
id = "toy.absent"
suite = "toy"
source = "a test"
statement = "a case this run does not have"
unit = "x"
measure = "value"
metric = "seconds"
select = { case = "renamed" }
rule = { kind = "greater_than", threshold = 1.0 }
"""


def _verdicts(run_dir: Path, claims: Path) -> list[dict]:
    done = subprocess.run(
        [sys.executable, "-m", "polyperf", "verdicts", str(run_dir), "--claims", str(claims), "--json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return json.loads(done.stdout)


@pytest.mark.parametrize(("repeats", "decided"), [(2, False), (10, True)])
def test_verdicts_json_of_a_users_claims_file(tmp_path, repeats, decided):
    run_dir = new_run_dir(tmp_path)
    rng = np.random.default_rng(repeats)
    rows = []
    for r in range(repeats):
        drift = rng.lognormal(0, 0.2)
        for variant, base in (("a", 2.0), ("b", 1.0)):
            value = base * drift * rng.lognormal(0, 0.05)
            rows.append(Row("toy", "c", "x", variant, "seconds", value, "s", r))
    RowWriter(run_dir).write(rows)
    claims = tmp_path / "mine.toml"
    claims.write_text(CLAIMS)
    by_id = {v["claim"]: v for v in _verdicts(run_dir, claims)}
    assert set(by_id) == {"toy.double", "toy.median", "toy.absent"}
    double = by_id["toy.double"]
    for key in ("suite", "kind", "verdict", "reason", "measured", "ci_low", "ci_high", "n", "noise_floor"):
        assert key in double
    assert double["n"] == repeats and double["kind"] == "claim" and by_id["toy.median"]["kind"] == "check"
    if decided:
        assert double["verdict"] == "reproduced" and double["ci_low"] <= 2.0 <= double["ci_high"]
        assert 0 < double["noise_floor"] < 0.2
    else:
        assert double["verdict"] == "inconclusive" and double["ci_low"] is None
        assert double["reason"] == f"too few samples (n = 2; needs ≥ {min_repeats()})"
    absent = by_id["toy.absent"]
    assert absent["verdict"] == "not measured" and "case = 'renamed'" in absent["reason"]


def _triple(run_dir: Path, case: str, variant: str) -> None:
    lines = []
    for line in (run_dir / "results.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if (rec["case"], rec["variant"], rec["metric"]) == (case, variant, "seconds"):
            rec["value"] *= 3
        rec["run_id"] = run_dir.name
        lines.append(json.dumps(rec))
    (run_dir / "results.jsonl").write_text("\n".join(lines) + "\n")
    (run_dir / "results.parquet").unlink(missing_ok=True)


@pytest.mark.slow
def test_compare_gates_a_tripled_case_between_two_smoke_runs(tmp_path):
    outcome = polyperf.run(["io_buffering"], profile="smoke", out=tmp_path / "a", quiet=True)
    assert outcome.ok, (outcome.run_dir / "logs" / "pytest.log").read_text()[-3000:]
    run_a = outcome.run_dir
    run_b = tmp_path / "b" / (run_a.name + "-tripled")
    shutil.copytree(run_a, run_b)
    _triple(run_b, "parse", "buffered")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "polyperf",
            "compare",
            str(run_a),
            str(run_b),
            "--fail-on-regression",
            "10",
            "--gate-timings",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    rows = [line for line in done.stdout.splitlines() if "**regressed**" in line]
    assert rows and all("parse" in row and "buffered" in row for row in rows), done.stdout
    assert "too few samples" not in " ".join(line for line in done.stdout.splitlines() if "/ parse /" in line)
