"""The change-point literature's scores and layout: F1 with a margin and Cover on hand-made series whose answers are
worked out by hand, the reader of the Turing change-point dataset's layout (JSON series and annotations), the
reference detectors, and `polyperf history evaluate` on a small synthetic collection in that layout."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from polyperf.analyse.change_scores import cover, f1_margin
from polyperf.analyse.reference_detectors import binseg_default, pelt_default, zero
from polyperf.cli import main
from polyperf.report.tcpd_eval import evaluate_collection, read_tcpd


def test_f1_counts_the_start_of_the_series_as_a_change_both_sides() -> None:
    # nothing found, one change marked: precision 1/1 (the start), recall 1/2, F1 2/3
    assert f1_margin([[10]], []) == pytest.approx(2 / 3)
    assert f1_margin([[]], []) == 1.0  # nothing marked, nothing found
    assert f1_margin([[10]], [15]) == 1.0 and f1_margin([[10]], [16]) == pytest.approx(0.5)
    assert f1_margin([[10]], [16], margin=6) == 1.0


def test_f1_takes_precision_over_the_union_and_recall_per_annotator() -> None:
    # found {0, 10} against {0, 10} and {0, 30}: precision 2/2, recall (1 + 1/2) / 2
    assert f1_margin([[10], [30]], [10]) == pytest.approx(2 * 0.75 / 1.75)
    # two detections of one change: one is false
    assert f1_margin([[10]], [10, 11]) == pytest.approx(2 * (2 / 3) / (5 / 3))
    with pytest.raises(ValueError, match="at least one annotator"):
        f1_margin([], [3])


def test_cover_weights_each_marked_segment_by_its_best_overlap() -> None:
    assert cover([[50]], [], 100) == pytest.approx(0.5)
    assert cover([[50]], [50], 100) == 1.0 and cover([[]], [], 100) == 1.0
    # [0, 50) is best covered by [0, 40): 40/50; [50, 100) by [40, 100): 50/60
    assert cover([[50]], [40], 100) == pytest.approx((50 * 0.8 + 50 * 50 / 60) / 100)
    assert cover([[50], []], [50], 100) == pytest.approx((1.0 + 0.5) / 2)


def _series(rng: np.random.Generator, at: int, n: int = 80) -> list[float]:
    return [round(float(v), 4) for v in np.where(np.arange(n) >= at, 130.0, 100.0) * rng.lognormal(0, 0.01, n)]


def _collection(folder: Path) -> Path:
    """Two univariate series with a 30% step, one bivariate, in TCPD's layout (synthetic)."""
    rng = np.random.default_rng(8)
    for name, at in (("first", 40), ("second", 25)):
        values: list[float | None] = list(_series(rng, at))
        if name == "second":
            values[60] = None  # a missing value, filled between its neighbours
        (folder / name).mkdir(parents=True)
        data = {"name": name, "n_obs": 80, "n_dim": 1, "series": [{"label": "V1", "type": "float", "raw": values}]}
        (folder / name / f"{name}.json").write_text(json.dumps(data))
    both = [{"label": f"V{d}", "type": "float", "raw": _series(rng, 30)} for d in (1, 2)]
    (folder / "pair.json").write_text(json.dumps({"name": "pair", "n_obs": 80, "n_dim": 2, "series": both}))
    marks = {"first": {"1": [40], "2": [41]}, "second": {"1": [25], "2": []}, "pair": {"1": [30]}}
    (folder / "annotations.json").write_text(json.dumps(marks))
    return folder


def test_the_reader_takes_univariate_series_and_their_annotators(tmp_path: Path) -> None:
    collection = read_tcpd(_collection(tmp_path))
    assert [s.name for s in collection.series] == ["first", "second"] and collection.multivariate == ["pair"]
    first, second = collection.series
    assert first.annotations == [[40], [41]] and second.annotations == [[25], []]
    assert np.isfinite(second.values).all() and second.values[60] == pytest.approx(
        (second.values[59] + second.values[61]) / 2
    )


def test_every_detector_is_scored_on_the_same_series(tmp_path: Path) -> None:
    result = evaluate_collection(read_tcpd(_collection(tmp_path)))
    assert set(result) == {"polyperf", "binseg", "pelt", "zero"}
    assert [r["detections"] for r in result["polyperf"]["series"]] == [[40], [25]]
    # the second series: one annotator marked nothing, so the step found is half right for recall
    assert result["polyperf"]["f1"] == pytest.approx((1.0 + f1_margin([[25], []], [25])) / 2)
    assert result["zero"]["f1"] == pytest.approx((2 / 3 + f1_margin([[25], []], [])) / 2)


def test_the_reference_detectors_find_a_clear_step() -> None:
    values = np.r_[np.zeros(60), np.full(40, 3.0)] + np.random.default_rng(2).normal(0, 1, 100)
    assert binseg_default(values) == [60] and pelt_default(values) == [60] and zero(values) == []
    assert binseg_default([1.0] * 10) == [] and pelt_default([5.0]) == []


def test_evaluate_reads_the_layout_from_the_command_line(tmp_path: Path, capsys) -> None:
    folder = _collection(tmp_path / "tcpd")
    assert main(["history", "evaluate", str(folder), "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["margin"] == 5 and figures["left_out_multivariate"] == ["pair"]
    assert figures["polyperf"]["f1"] >= figures["zero"]["f1"]
    assert (
        main(
            [
                "history",
                "evaluate",
                str(folder / "first" / "first.json"),
                "--annotations",
                str(folder / "annotations.json"),
            ]
        )
        == 0
    )
    # the second annotator's change sits one point later: [0, 41) and [41, 80) against [0, 40) and [40, 80)
    second = (41 * 40 / 41 + 39 * 39 / 40) / 80
    assert f"polyperf  F1 1.000  Cover {(1 + second) / 2:.3f}" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("marks", "message"),
    [
        ({"first": {"1": [80]}}, "'first', annotator 1: change points must be indices 0 to 79"),
        ({"first": []}, "'first' must map each annotator to a list of change points"),
        ({}, "no univariate series with annotations"),
    ],
)
def test_bad_annotations_get_one_line(tmp_path: Path, capsys, marks: dict, message: str) -> None:
    folder = _collection(tmp_path)
    (folder / "annotations.json").write_text(json.dumps(marks))
    assert main(["history", "evaluate", str(folder)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_missing_annotations_file_is_named(tmp_path: Path, capsys) -> None:
    series = _collection(tmp_path) / "first" / "first.json"
    assert main(["history", "evaluate", str(series)]) == 2
    assert "annotations.json: no such file" in capsys.readouterr().err
