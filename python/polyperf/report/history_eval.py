"""`polyperf history evaluate`: change detection scored against an annotated history (a table of series whose points
carry the alerts people triaged), beside the alerts' own valid share, so the two read on one sample.

The annotated table: columns `series`, `value` and `alert`, rows in commit order within each series; `alert` is empty,
`valid` (an alert people confirmed: a true change), `invalid` (an alert people dismissed as noise), `missed` (a true
change no alert raised) or `untriaged`; an optional `revision` column names each point's push. Other columns are
ignored. Or Perfherder series as Mozilla's REALISE-Performance dataset lays them out (one CSV per series, rows in
commit order, `revision`, `value` and the triage outcome `alert_summary_status_general`), a file or a folder of them:
an alert people kept (TP) is `valid`; one they dismissed (FP, or an alert whose own status is invalid inside a summary
they kept) `invalid`; a change a sheriff recorded by hand where the alerts missed it (FN) `missed` (a true change, but
not one of the alerts whose valid share is printed beside); and an alert whose summary was still under investigation
(SP) `untriaged`: no truth either way, so a detection within k points of one only is left out of the score rather
than counted true or false. Scoring is `analyse.change_scores`; detection is `analyse.changepoints.find_changes` as
`polyperf history` calls it. Confirmed changes are scored; a change still pending at the end of a series is not yet
an answer (no gate acts on it), so it is counted apart.

Precision is printed twice. Strictly, series by series: a detection near no annotated change of its own series is
false. And as Perfherder's own alerts are judged, by alert summary: sheriffs triage a push (one summary holds its
alerts on many series), so where the table has revisions a detection within k points of a push they confirmed on any
series counts true, and one near only a push still under investigation is left out; a series whose only annotations
are changes people recorded by hand (FN: the alerts raised nothing there, as on a series whose alerting is switched
off) judged nothing else, so its detections are left out of this figure (its changes still count for recall).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from polyperf.analyse.change_scores import Score, score
from polyperf.analyse.changepoints import find_changes

__all__ = ["ALERTS", "Evaluation", "evaluate_annotated", "read_annotated"]

ALERTS = ("", "valid", "invalid", "missed", "untriaged")
# REALISE-Performance's triage outcome per point → the alert column (its data README: TP an alert sheriffs kept, FP
# one they marked invalid, FN an alert a sheriff created by hand, TN no alert)
PERFHERDER_OUTCOMES = {"TN": "", "TP": "valid", "FN": "missed", "FP": "invalid", "SP": "untriaged"}
# the summary-level triage outcome; older versions of the dataset name it alert_status_general
OUTCOME_COLUMNS = ("alert_summary_status_general", "alert_status_general")
# the alert's own status (older versions: test_status), where 3 is "invalid": a sheriff can dismiss one series' alert
# inside a summary they kept for the others, and for that series the alert's own word is the one that holds
ALERT_STATUS_COLUMNS = ("single_alert_status", "test_status")
INVALID_ALERT_STATUS = 3


@dataclass(frozen=True)
class Evaluation:
    detector: Score  # polyperf's detections against the valid alerts
    valid_alerts: int
    invalid_alerts: int
    series_with_invalid: int
    series_without_alerts: int
    untriaged_alerts: int = 0
    detections_left_out: int = 0  # within k of an untriaged alert only: neither true nor false
    pending: int = 0  # changes still pending at the end of a series: not scored
    by_push: Score | None = None  # judged as alert summaries are: by push, on series whose alerts were not all by hand

    @property
    def alerts_valid_share(self) -> float:
        """The annotated alerts' own precision: valid over all triaged alerts."""
        alerts = self.valid_alerts + self.invalid_alerts
        return self.valid_alerts / alerts if alerts else math.nan


def read_annotated(path: Path) -> pd.DataFrame:
    """The table, checked: ValueError with one line naming the file and what is wrong. A folder: every Perfherder
    series CSV below it (sorted by path; a series is named by its path inside the folder)."""
    if path.is_dir():
        files = sorted(p for p in path.rglob("*.csv") if _is_perfherder(p))
        if not files:
            raise ValueError(f"{path}: no Perfherder series CSV (columns value and {OUTCOME_COLUMNS[0]}) in it")
        return pd.concat([_read_perfherder(p, p.relative_to(path).with_suffix("").as_posix()) for p in files])
    if _is_perfherder(path):
        return _read_perfherder(path, path.stem)
    return _read_table(path)


def _header(path: Path) -> list[str]:
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            return f.readline().strip().split(",")
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        return []


def _outcome_column(path: Path) -> str | None:
    header = _header(path) if path.is_file() else []
    return next((c for c in OUTCOME_COLUMNS if c in header), None) if "value" in header else None


def _is_perfherder(path: Path) -> bool:
    return _outcome_column(path) is not None


def _read_perfherder(path: Path, name: str) -> pd.DataFrame:
    column = _outcome_column(path)
    header = _header(path)
    status_column = next((c for c in ALERT_STATUS_COLUMNS if c in header), None)
    wanted = ["value", column, *(c for c in ("revision", status_column) if c is not None and c in header)]
    try:
        raw = pd.read_csv(path, usecols=wanted, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{path}: not a Perfherder series CSV ({str(exc).splitlines()[0]})") from None
    outcomes = raw[column].str.strip()
    unknown = sorted(set(outcomes) - set(PERFHERDER_OUTCOMES))
    if unknown:
        raise ValueError(f"{path}: triage outcome {unknown[0]!r} is not one of: {', '.join(PERFHERDER_OUTCOMES)}")
    alerts = outcomes.map(PERFHERDER_OUTCOMES)
    if status_column is not None:
        dismissed = pd.to_numeric(raw[status_column], errors="coerce") == INVALID_ALERT_STATUS
        alerts = alerts.mask(dismissed & alerts.isin(("valid", "untriaged")), "invalid")
    table = pd.DataFrame({"series": name, "value": raw["value"], "alert": alerts})
    if "revision" in raw:
        table["revision"] = raw["revision"].str.strip()
    return _checked(table, path)


def _read_table(path: Path) -> pd.DataFrame:
    try:
        frame = pd.read_csv(path, dtype={"series": str, "alert": str, "revision": str}, keep_default_na=False)
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not a CSV table ({str(exc).splitlines()[0]})") from None
    missing = [c for c in ("series", "value", "alert") if c not in frame]
    if missing:
        raise ValueError(f"{path}: missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
    return _checked(frame, path)


def _checked(frame: pd.DataFrame, path: Path) -> pd.DataFrame:
    frame = frame.reset_index(drop=True)
    values = pd.to_numeric(frame["value"], errors="coerce")
    if values.isna().any() or not np.isfinite(values).all():
        row = int(np.flatnonzero(~np.isfinite(values.fillna(np.inf)))[0]) + 2
        raise ValueError(f"{path}: line {row}: value {frame['value'].iloc[row - 2]!r} is not a finite number")
    unknown = sorted(set(frame["alert"]) - set(ALERTS))
    if unknown:
        raise ValueError(f"{path}: alert {unknown[0]!r} is not one of: empty, {', '.join(ALERTS[1:])}")
    return frame.assign(value=values.astype(float))


def evaluate_annotated(frame: pd.DataFrame, k: int) -> Evaluation:
    frame = frame.reset_index(drop=True)
    pairs, push_pairs = [], []
    with_invalid = without = left_out = pending = 0
    # a push's outcome holds for every series that has the push (Perfherder's triage is of alert summaries: one
    # push, its alerts on many series); without revisions each series stands alone
    pushes = frame["revision"] if "revision" in frame else pd.Series("", index=frame.index)
    confirmed = set(pushes[frame["alert"].isin(("valid", "missed"))]) - {""}
    open_pushes = set(pushes[frame["alert"] == "untriaged"]) - {""}
    for _, rows in frame.groupby("series", sort=False):
        alerts = rows["alert"].to_numpy()
        changes = find_changes(rows["value"].to_numpy(dtype=float))
        pending += sum(c.state == "pending" for c in changes)
        detected = [c.index for c in changes if c.state == "confirmed"]
        truths = np.flatnonzero((alerts == "valid") | (alerts == "missed"))
        open_ = np.flatnonzero(alerts == "untriaged")
        unscored = [d for d in detected if _near(d, open_, k) and not _near(d, truths, k)]
        pairs.append(([d for d in detected if d not in unscored], list(truths)))
        by_hand_only = bool((alerts == "missed").any()) and not np.isin(alerts, ("valid", "invalid", "untriaged")).any()
        if not by_hand_only:
            series_pushes = pushes.loc[rows.index].to_numpy()
            push_truths = np.flatnonzero(
                np.isin(series_pushes, list(confirmed)) | (alerts == "valid") | (alerts == "missed")
            )
            push_open = np.flatnonzero(np.isin(series_pushes, list(open_pushes)) | (alerts == "untriaged"))
            kept = [d for d in detected if _near(d, push_truths, k) or not _near(d, push_open, k)]
            push_pairs.append((kept, list(push_truths)))
        left_out += len(unscored)
        with_invalid += bool((alerts == "invalid").any())
        without += not np.isin(alerts, ("valid", "invalid")).any()
    return Evaluation(
        score(pairs, k),
        int((frame["alert"] == "valid").sum()),
        int((frame["alert"] == "invalid").sum()),
        with_invalid,
        without,
        int((frame["alert"] == "untriaged").sum()),
        left_out,
        pending,
        score(push_pairs, k),
    )


def _near_any(mask: np.ndarray, k: int) -> np.ndarray:
    """Whether each point lies within k points of a point where `mask` holds."""
    points = np.flatnonzero(mask)
    if not len(points):
        return np.zeros(mask.size, dtype=bool)
    return np.abs(np.arange(mask.size)[:, None] - points[None, :]).min(axis=1) <= k


def _near(index: int, points: np.ndarray, k: int) -> bool:
    return bool(len(points)) and bool(np.abs(points - index).min() <= k)
