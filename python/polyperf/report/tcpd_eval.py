"""`polyperf history evaluate` on the change-point literature's layout: series as the Turing change-point dataset
(TCPD, van den Burg and Williams 2020) lays them out — one JSON file per series (`name`, `n_obs`, `n_dim`, `series`: a
list of dimensions, each with its values in `raw`) — and one `annotations.json` that maps each series' name to each
annotator's change points (0-based indices). Scores are the literature's F1 with a margin and Cover
(`analyse.change_scores`), for polyperf's detector and for the reference detectors at their published defaults
(`analyse.reference_detectors`), each run here on the same series.

polyperf's detector is univariate: series with more than one dimension are left out and counted. A missing value
(JSON null) is filled by linear interpolation between its neighbours, so indices keep their meaning.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from polyperf.analyse.change_scores import cover, f1_margin
from polyperf.analyse.changepoints import find_changes
from polyperf.analyse.reference_detectors import REFERENCES

__all__ = ["AnnotatedSeries", "Collection", "detect", "evaluate_collection", "is_tcpd", "read_tcpd"]


@dataclass(frozen=True)
class AnnotatedSeries:
    name: str
    values: np.ndarray
    annotations: list[list[int]]  # one list of change points per annotator


@dataclass(frozen=True)
class Collection:
    series: list[AnnotatedSeries]
    multivariate: list[str] = field(default_factory=list)  # left out: polyperf's detector takes one dimension
    unannotated: list[str] = field(default_factory=list)  # series files with no entry in the annotations


def detect(values: Sequence[float]) -> list[int]:
    """polyperf's answer on a finished series: its confirmed changes; a slope counts by its two ends (where the level
    starts and stops moving). A pending change (too few points after it to be judged) is no answer, as in
    `polyperf history evaluate` on Perfherder series: on the noise family of tests/changepoint_families.py it was the
    only false detection (at the newest two points)."""
    changes = [c for c in find_changes(values) if c.state == "confirmed"]
    return sorted({c.index for c in changes} | {c.stop for c in changes if c.stop is not None})


def _load_json(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None


def _is_series(data: object) -> bool:
    return isinstance(data, dict) and "series" in data and "n_obs" in data


def is_tcpd(path: Path) -> bool:
    """A JSON series file, or a folder that holds an annotations.json."""
    if path.is_dir():
        return (path / "annotations.json").is_file()
    return path.suffix == ".json"


def _values(data: dict, path: Path) -> np.ndarray:
    raw = data["series"][0].get("raw") if data["series"] and isinstance(data["series"][0], dict) else None
    if not isinstance(raw, list) or len(raw) != data["n_obs"]:
        raise ValueError(f"{path}: series[0].raw must be a list of n_obs = {data['n_obs']} values")
    try:
        values = np.array([math.nan if v is None else float(v) for v in raw], dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{path}: series[0].raw holds a value that is not a number") from None
    known = np.isfinite(values)
    if not known.any():
        raise ValueError(f"{path}: series[0].raw has no value")
    if not known.all():
        index = np.arange(values.size)
        values = np.interp(index, index[known], values[known])
    return values


def _annotations(entry: object, name: str, n: int, path: Path) -> list[list[int]]:
    if not isinstance(entry, dict) or not entry:
        raise ValueError(f"{path}: {name!r} must map each annotator to a list of change points")
    out = []
    for annotator, points in entry.items():
        if not isinstance(points, list) or not all(isinstance(p, int) and 0 <= p < n for p in points):
            raise ValueError(f"{path}: {name!r}, annotator {annotator}: change points must be indices 0 to {n - 1}")
        out.append(sorted(set(points)))
    return out


def read_tcpd(path: Path, annotations: Path | None = None) -> Collection:
    """Series files (one JSON file, or every one below a folder) and their annotations (default: annotations.json in
    the folder, or beside the file). ValueError with one line naming the file and what is wrong."""
    if annotations is None:
        annotations = (path if path.is_dir() else path.parent) / "annotations.json"
    marks = _load_json(annotations)
    if not isinstance(marks, dict):
        raise ValueError(f"{annotations}: must map each series' name to its annotators' change points")
    files = sorted(path.rglob("*.json")) if path.is_dir() else [path]
    series, multivariate, unannotated = [], [], []
    for file in files:
        if file.resolve() == annotations.resolve():
            continue
        data = _load_json(file)
        if not _is_series(data):
            if path.is_dir():
                continue  # a folder may hold other JSON (metadata, checksums)
            raise ValueError(f"{file}: not a series in the TCPD layout (needs n_obs and series)")
        name = str(data.get("name", file.stem))
        if data.get("n_dim", 1) != 1 or len(data["series"]) != 1:
            multivariate.append(name)
            continue
        if name not in marks:
            unannotated.append(name)
            continue
        values = _values(data, file)
        series.append(AnnotatedSeries(name, values, _annotations(marks[name], name, values.size, annotations)))
    if not series:
        raise ValueError(f"{path}: no univariate series with annotations in {annotations.name}")
    return Collection(series, multivariate, unannotated)


def evaluate_collection(
    collection: Collection,
    margin: int = 5,
    detectors: dict[str, Callable[[Sequence[float]], list[int]]] | None = None,
) -> dict[str, dict[str, object]]:
    """Per detector: mean F1 and mean Cover over the series, and each series' figures and detections."""
    detectors = detectors if detectors is not None else {"polyperf": detect, **REFERENCES}
    out: dict[str, dict[str, object]] = {}
    for label, find in detectors.items():
        rows = []
        for s in collection.series:
            found = [int(i) for i in find(s.values)]
            rows.append(
                {
                    "series": s.name,
                    "points": int(s.values.size),
                    "detections": found,
                    "f1": f1_margin(s.annotations, found, margin),
                    "cover": cover(s.annotations, found, s.values.size),
                }
            )
        out[label] = {
            "f1": float(np.mean([r["f1"] for r in rows])),
            "cover": float(np.mean([r["cover"] for r in rows])),
            "series": rows,
        }
    return out
