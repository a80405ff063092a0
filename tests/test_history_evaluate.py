"""`polyperf history evaluate`: detections matched one to one within k points, and the detector scored on the
synthetic annotated sample in tests/data/annotated_history (made by tests/make_annotated_history.py). The detector's
thresholds were set on the noise simulations of test_change_rates.py and its shape rules (excursions, two levels in
turn) on real Perfherder series. The sample's two newest traits model what those series showed, so on them the sample
checks the rules rather than measures them: the real figures are the README's."""

from __future__ import annotations

import json
from pathlib import Path

import make_annotated_history
import numpy as np
import pytest

from polyperf.analyse.change_scores import matched, score
from polyperf.cli import main

SAMPLE = Path(__file__).parent / "data" / "annotated_history" / "perfherder_like.csv"


def test_matching_is_one_to_one_within_k() -> None:
    assert matched([10, 11], [10], 5) == 1  # two detections of one change: one true, one false
    assert matched([16], [10], 5) == 0 and matched([15], [10], 5) == 1
    assert matched([10, 30], [12, 28], 2) == 2
    s = score([([10, 11], [10]), ([], [50]), ([7], [])], k=5)
    assert (s.series, s.truths, s.detections, s.hits) == (3, 2, 3, 1)
    assert s.precision == pytest.approx(1 / 3) and s.recall == pytest.approx(1 / 2) and s.f1 == pytest.approx(0.4)


def test_the_sample_is_what_its_generator_makes(tmp_path: Path) -> None:
    make_annotated_history.main(tmp_path / "sample.csv")
    assert (tmp_path / "sample.csv").read_bytes() == SAMPLE.read_bytes()


def test_on_the_sample_precision_beats_the_alerts_and_recall_is_at_least_08(capsys) -> None:
    assert main(["history", "evaluate", str(SAMPLE), "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    print(figures)
    assert figures["series"] >= 50 and figures["k"] == 5
    assert figures["series_with_invalid_alerts"] > 0 and figures["series_without_alerts"] > 0
    assert figures["precision"] >= figures["alerts_valid_share"] and figures["recall"] >= 0.8
    # the series whose alerting is off hold a step nobody recorded: only the strict figure counts it false
    assert figures["by_push_series"] < figures["series"] and figures["by_push_precision"] >= figures["precision"]


def test_the_text_names_both_precisions(capsys) -> None:
    assert main(["history", "evaluate", str(SAMPLE), "--k", "1"]) == 0
    out = capsys.readouterr().out
    assert "within 1 points of a valid one: precision" in out and "(their precision 0.85)" in out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        ("series,value\na,1\n", "missing column alert"),
        ("series,value,alert\na,1,maybe\n", "alert 'maybe' is not one of: empty, valid, invalid, missed, untriaged"),
        ("series,value,alert\na,1,\na,fast,\n", "line 3: value 'fast' is not a finite number"),
        ("", "not a CSV table"),
    ],
)
def test_bad_tables_are_refused_in_one_line(tmp_path: Path, capsys, content: str | None, message: str) -> None:
    path = tmp_path / "annotated.csv"
    if content is not None:
        path.write_text(content)
    assert main(["history", "evaluate", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and err.startswith("polyperf: ")


def test_a_negative_tolerance_is_refused(capsys) -> None:
    assert main(["history", "evaluate", str(SAMPLE), "--k", "-1"]) == 2
    assert capsys.readouterr().err == "polyperf: --k must be 0 or more points (got -1)\n"


def _perfherder_csv(values: list[float], outcomes: dict[int, str], dismissed: tuple[int, ...] = ()) -> str:
    """A series as REALISE-Performance lays it out: many columns, `value` second, the triage outcome last; the
    alerts at `dismissed` carry their own status 3.0 (invalid)."""
    lines = ["revision,value,push_timestamp,single_alert_status,alert_summary_status_general"]
    for i, v in enumerate(values):
        outcome = outcomes.get(i, "TN")
        alert_status = "" if outcome == "TN" else "3.0" if i in dismissed else "2"
        lines.append(f"{i:040x},{float(v)!r},2023-05-{1 + i // 40:02d} 10:00:00,{alert_status},{outcome}")
    return "\n".join(lines) + "\n"


def test_perfherder_series_are_read_as_the_dataset_lays_them_out(tmp_path: Path, capsys) -> None:
    rng = np.random.default_rng(7)
    step = np.r_[np.full(100, 100.0), np.full(100, 130.0)] * np.exp(rng.normal(0, 0.01, 200))
    flat = 50.0 * np.exp(rng.normal(0, 0.01, 200))
    (tmp_path / "autoland").mkdir()
    (tmp_path / "autoland" / "1_timeseries_data.csv").write_text(_perfherder_csv(list(step), {100: "TP"}))
    (tmp_path / "autoland" / "2_timeseries_data.csv").write_text(_perfherder_csv(list(flat), {60: "FP"}))
    (tmp_path / "3_timeseries_data.csv").write_text(_perfherder_csv(list(step), {101: "FN"}))
    (tmp_path / "notes.csv").write_text("a,b\n1,2\n")  # not a series: left alone
    assert main(["history", "evaluate", str(tmp_path), "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    # FN (a change a sheriff added by hand) is a true change but not one of the alerts whose valid share is printed
    assert (figures["series"], figures["annotated_changes"], figures["alerts_valid"]) == (3, 2, 1)
    assert figures["alerts_invalid"] == 1 and figures["alerts_valid_share"] == 0.5
    assert figures["series_with_invalid_alerts"] == 1 and figures["series_without_alerts"] == 1
    assert figures["matched"] == 2 and figures["detections"] == 2  # both steps found, nothing on the flat one
    one = tmp_path / "autoland" / "2_timeseries_data.csv"
    assert main(["history", "evaluate", str(one), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["series"] == 1


def test_an_unknown_triage_outcome_is_refused_in_one_line(tmp_path: Path, capsys) -> None:
    path = tmp_path / "1_timeseries_data.csv"
    path.write_text(_perfherder_csv([1.0, 2.0], {1: "MAYBE"}))
    assert main(["history", "evaluate", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "triage outcome 'MAYBE' is not one of: TN, TP, FN, FP, SP" in err


def test_a_detection_at_an_alert_still_under_investigation_is_neither_true_nor_false(tmp_path: Path, capsys) -> None:
    rng = np.random.default_rng(8)
    step = np.r_[np.full(100, 100.0), np.full(100, 130.0)] * np.exp(rng.normal(0, 0.01, 200))
    (tmp_path / "1_timeseries_data.csv").write_text(_perfherder_csv(list(step), {100: "SP"}))
    assert main(["history", "evaluate", str(tmp_path), "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert (figures["detections"], figures["annotated_changes"], figures["detections_left_out"]) == (0, 0, 1)
    assert figures["untriaged_alerts"] == 1 and figures["alerts_valid"] + figures["alerts_invalid"] == 0


def test_first_scores_the_first_points_of_each_series_only(tmp_path: Path, capsys) -> None:
    rng = np.random.default_rng(9)
    step = np.r_[np.full(100, 100.0), np.full(100, 130.0)] * np.exp(rng.normal(0, 0.01, 200))
    (tmp_path / "1_timeseries_data.csv").write_text(_perfherder_csv(list(step), {100: "TP"}))
    assert main(["history", "evaluate", str(tmp_path), "--first", "90", "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert (figures["detections"], figures["annotated_changes"]) == (0, 0)
    assert main(["history", "evaluate", str(tmp_path), "--first", "1"]) == 2
    assert capsys.readouterr().err == "polyperf: --first must be 2 points or more (got 1)\n"


def test_a_pending_change_is_not_scored_and_hand_recorded_series_are_apart(tmp_path: Path, capsys) -> None:
    rng = np.random.default_rng(10)
    late = np.r_[np.full(197, 100.0), np.full(3, 130.0)] * np.exp(rng.normal(0, 0.01, 200))
    two_steps = np.r_[np.full(70, 100.0), np.full(70, 120.0), np.full(60, 100.0)] * np.exp(rng.normal(0, 0.01, 200))
    (tmp_path / "1_timeseries_data.csv").write_text(_perfherder_csv(list(late), {}))
    # alerting off: a sheriff recorded the first step by hand, nobody the second
    (tmp_path / "2_timeseries_data.csv").write_text(_perfherder_csv(list(two_steps), {70: "FN"}))
    assert main(["history", "evaluate", str(tmp_path), "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["pending_not_scored"] == 1
    assert (figures["detections"], figures["matched"], figures["annotated_changes"]) == (2, 1, 1)
    assert figures["precision"] == 0.5 and figures["recall"] == 1.0
    assert (figures["by_push_series"], figures["by_push_detections"], figures["by_push_precision"]) == (1, 0, None)
    assert main(["history", "evaluate", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "leaving out 1 series whose alerts were all recorded by hand" in out and "1 change still pending" in out


def test_a_push_people_confirmed_on_one_series_confirms_it_on_all(tmp_path: Path, capsys) -> None:
    rng = np.random.default_rng(11)
    steps = [np.r_[np.full(100, 100.0), np.full(100, 125.0)] * np.exp(rng.normal(0, 0.01, 200)) for _ in range(3)]
    # three series of the same pushes (the revision column is the row number) all step at push 100; sheriffs kept the
    # alert on the first, and the third's alert summary is still under investigation at push 150
    (tmp_path / "1_timeseries_data.csv").write_text(_perfherder_csv(list(steps[0]), {100: "TP"}))
    (tmp_path / "2_timeseries_data.csv").write_text(_perfherder_csv(list(steps[1]), {}))
    later = np.r_[np.full(150, 100.0), np.full(50, 125.0)] * np.exp(rng.normal(0, 0.01, 200))
    (tmp_path / "3_timeseries_data.csv").write_text(_perfherder_csv(list(later), {150: "SP"}))
    (tmp_path / "4_timeseries_data.csv").write_text(_perfherder_csv(list(steps[2]), {150: "SP"}))
    assert main(["history", "evaluate", str(tmp_path), "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    # series by series: the unalerted step of series 2 and 4 is false (series 3's is left out: an alert is open there)
    assert (figures["detections"], figures["matched"], figures["precision"]) == (3, 1, 1 / 3)
    # by push: push 100 was confirmed, so every step at it is true; push 150 is open on every series
    assert (figures["by_push_detections"], figures["by_push_matched"], figures["by_push_precision"]) == (3, 3, 1.0)


def test_an_alert_dismissed_inside_a_summary_people_kept_is_invalid_for_its_series(tmp_path: Path, capsys) -> None:
    rng = np.random.default_rng(12)
    step = np.r_[np.full(100, 100.0), np.full(100, 125.0)] * np.exp(rng.normal(0, 0.01, 200))
    flat = 50.0 * np.exp(rng.normal(0, 0.01, 200))
    (tmp_path / "1_timeseries_data.csv").write_text(_perfherder_csv(list(step), {100: "TP"}))
    # the summary at push 100 was kept, but this series' own alert there was marked invalid
    (tmp_path / "2_timeseries_data.csv").write_text(_perfherder_csv(list(flat), {100: "TP"}, dismissed=(100,)))
    assert main(["history", "evaluate", str(tmp_path), "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert (figures["alerts_valid"], figures["alerts_invalid"], figures["series_with_invalid_alerts"]) == (1, 1, 1)
    assert (figures["annotated_changes"], figures["detections"], figures["matched"]) == (1, 1, 1)


def test_the_reference_perfherder_method_alerts_at_a_clear_step_and_not_on_noise() -> None:
    import perfherder_method

    rng = np.random.default_rng(13)
    step = np.r_[np.full(60, 100.0), np.full(60, 110.0)] * np.exp(rng.normal(0, 0.01, 120))
    assert perfherder_method.alerts(step) == [60]
    assert perfherder_method.alerts(100.0 * np.exp(rng.normal(0, 0.01, 300))) == []
    # under 2% it does not alert, however clear
    assert (
        perfherder_method.alerts(np.r_[np.full(60, 100.0), np.full(60, 101.5)] * np.exp(rng.normal(0, 1e-4, 120))) == []
    )
