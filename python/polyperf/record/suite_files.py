"""What a suite folder of the user's own brings besides its tests: claims files beside the suites, kept in the run
folder (`RUN/claims/`, with where each came from), so that the report, `verdicts`, `compare` and the history judge
the run against the claims it was run with, after the folder has moved on or an upgrade replaced polyperf's own
registry. The claims themselves are read and checked by `analyse.user_claims`; this module only finds and keeps files.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from pathlib import Path

from polyperf.common.atomic import write_text_atomic
from polyperf.record.catalogue import MetricInfo, declare

__all__ = ["CLAIMS_DIR", "METRICS", "claims_files_beside", "keep_claims", "keep_metrics", "kept_claims", "kept_metrics"]

CLAIMS_DIR = "claims"
_SOURCES = "sources.json"  # copy's name -> the file it was copied from
METRICS = "metrics.json"  # the metrics the run's suites declared, by name


def claims_files_beside(paths: Iterable[Path]) -> list[Path]:
    """The claims files of the folders `paths` are (or are in): `claims.toml` and `<anything>.claims.toml`, e.g.
    `test_orjson.claims.toml` beside `test_orjson.py`. Each file once, in a stable order."""
    found: dict[Path, None] = {}
    for path in paths:
        folder = Path(path) if Path(path).is_dir() else Path(path).parent
        for candidate in [folder / "claims.toml", *sorted(folder.glob("*.claims.toml"))]:
            if candidate.is_file():
                found.setdefault(candidate.resolve(), None)
    return list(found)


def _sources(folder: Path) -> dict[str, str]:
    try:
        data = json.loads((folder / _SOURCES).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def keep_claims(run_dir: Path, files: Iterable[Path]) -> list[Path]:
    """Copies each claims file into `RUN/claims/` (a file kept before is refreshed in place); returns the copies."""
    folder = Path(run_dir) / CLAIMS_DIR
    sources = _sources(folder)
    by_origin = {origin: name for name, origin in sources.items()}
    copies = []
    for file in files:
        origin = str(Path(file).resolve())
        name = by_origin.get(origin) or f"{len(sources) + 1:02d}-{Path(file).name}"
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(file, folder / name)
        sources[name] = by_origin[origin] = origin
        copies.append(folder / name)
    if copies:
        write_text_atomic(folder / _SOURCES, json.dumps(sources, indent=2, sort_keys=True) + "\n")
    return copies


def kept_claims(run_dir: Path) -> list[tuple[Path, str]]:
    """(copy, the file it came from) of every claims file the run was made with, in the order they were kept."""
    folder = Path(run_dir) / CLAIMS_DIR
    sources = _sources(folder)
    return [(folder / name, sources[name]) for name in sorted(sources) if (folder / name).is_file()]


def keep_metrics(run_dir: Path, infos: Iterable[MetricInfo], where: str) -> None:
    """Declares a suite's own metrics in this process and keeps them in `RUN/metrics.json` (merged with those
    kept before), so that loading the run declares them again; a clash is one ValueError line naming `where`."""
    infos = list(infos)
    declare(infos, where)
    if not infos:
        return
    path = Path(run_dir) / METRICS
    kept = {info.name: info for info in kept_metrics(run_dir, declare_them=False)}
    kept.update({info.name: info for info in infos})
    rows = {name: {k: v for k, v in vars(info).items() if k != "name"} for name, info in sorted(kept.items())}
    write_text_atomic(path, json.dumps(rows, indent=2) + "\n")


def kept_metrics(run_dir: Path, *, declare_them: bool = True) -> list[MetricInfo]:
    """The metrics the run's suites declared (none when the run has no `metrics.json`), declared in this process
    too unless told not to. A file that cannot be read declares nothing: its rows are then of unknown metrics."""
    try:
        data = json.loads((Path(run_dir) / METRICS).read_text(encoding="utf-8"))
        infos = [MetricInfo(name, **fields) for name, fields in data.items()]
    except (OSError, ValueError, TypeError, AttributeError):
        return []
    for info in infos if declare_them else ():
        try:
            declare([info], str(Path(run_dir) / METRICS))
        except ValueError:  # a name polyperf has since declared otherwise: its own declaration stands
            continue
    return infos
