"""reports/analysis.ipynb cannot rot: executed headless (nbclient + ipykernel) against two small runs, it finds
the latest one through POLYPERF_RUN or by walking up from where it starts, draws two figures with the package's
own code and compares the run with the one before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polyperf.common.paths import REPO_ROOT
from polyperf.record import Row
from polyperf.record.run_dir import RowWriter, finalize_run, new_run_dir, point_latest

pytestmark = pytest.mark.slow

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOK = REPO_ROOT / "reports" / "analysis.ipynb"


def _run(out: Path, run_id: str, slowdown: float) -> Path:
    """A run shaped like a smoke run of io_buffering (the suite's own figures and the real claims apply)."""
    run_dir = new_run_dir(out, run_id)
    rows = []
    for repeat in range(5):
        for variant, seconds, reads in (("unbuffered", 0.120, 2009108), ("buffered", 0.011, 247)):
            common = {"suite": "io_buffering", "implementation": "serde_json", "variant": variant, "repeat": repeat}
            value = seconds * slowdown * (1 + repeat / 100)
            rows.append(Row(case="parse", metric="seconds", value=value, unit="s", params={"bytes": 2009108}, **common))
            rows.append(
                Row(
                    case="parse_syscalls",
                    metric="read_syscalls",
                    value=reads,
                    unit="count",
                    **common,
                    params={"bytes": 2009108, "capacity": 8192},
                )
            )
    RowWriter(run_dir).write(rows)
    (run_dir / "env.json").write_text(json.dumps({"profile": "smoke", "cpu_count": 2, "suites": ["io_buffering"]}))
    finalize_run(run_dir)
    point_latest(run_dir)
    return run_dir


def _execute(cwd: Path) -> list:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(cwd)}})
    client.execute()
    return [cell for cell in nb.cells if cell.cell_type == "code"]


def _text(cells: list) -> str:
    return "\n".join(
        out.get("text", "") + out.get("data", {}).get("text/markdown", "") for cell in cells for out in cell.outputs
    )


def _images(cell) -> int:
    return sum("image/png" in out.get("data", {}) for out in cell.outputs)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("reports")
    before = _run(out, "20260101-000000-aaaa", 1.0)
    after = _run(out, "20260102-000000-bbbb", 3.0)  # every parse three times slower
    return out, before, after


def test_notebook_runs_against_the_run_it_is_given(runs, tmp_path, monkeypatch):
    _out, before, after = runs
    monkeypatch.setenv("POLYPERF_RUN", str(after))
    cells = _execute(tmp_path)  # started far from any reports/ directory
    text = _text(cells)
    assert f"run {after.name}" in text
    assert f"A = {before.name}, B = {after.name}" in text
    assert "regressed" in text  # the tripled parse times
    figure_cells = [c for c in cells if "suite_figures(suite)" in c.source]
    assert _images(figure_cells[0]) == 2
    assert sum(_images(c) for c in cells) == 3  # two figures and the comparison's


def test_notebook_finds_the_latest_run_walking_up(runs, monkeypatch):
    _out, _before, after = runs
    monkeypatch.delenv("POLYPERF_RUN", raising=False)
    cells = _execute(after / "logs")  # inside a run directory: <out>/latest is found above
    assert f"run {after.name}" in _text(cells)


def test_notebook_shows_the_history_when_a_store_holds_the_runs(runs, tmp_path, monkeypatch):
    from polyperf.store import add_runs, open_store

    _out, before, after = runs
    store = tmp_path / "history.duckdb"
    add_runs(open_store(store), [before, after])
    monkeypatch.setenv("POLYPERF_RUN", str(after))
    monkeypatch.setenv("POLYPERF_STORE", str(store))
    cells = _execute(tmp_path)
    assert "history: 2 runs, 4 series" in _text(cells)
    history_cells = [c for c in cells if "ax.errorbar" in c.source]
    assert _images(history_cells[0]) == 1
