"""`verdicts.json`: a run's verdicts, written once where the run's answers are produced, and read back by the report,
`store`, `compare` and `history` so that a run is judged once. A typed, versioned record like env.json: it names the
claims file or files used (path and SHA-256 of their content) and holds one record per entry, the fields of
`analyse.claims.Verdict.as_record` and a few the report needs (`analyse.verdict_records`).

Pure data and files: this stage does not judge. A run without the file (written before runs kept their verdicts) reads
as None; the caller judges it now and says so (`RunVerdicts.judged_now`). Re-judging a run is an explicit command
(`polyperf verdicts RUN --claims FILE --write`).

History: v1 (polyperf 0.2) is the first version; `tests/testdata/verdicts/` freezes it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from polyperf.common.atomic import write_text_atomic

__all__ = [
    "JUDGED_NOW",
    "VERDICTS_FILE",
    "VERDICTS_SCHEMA_VERSION",
    "WRITTEN",
    "ClaimsSource",
    "RunVerdicts",
    "VerdictsFileError",
    "claims_source",
    "read_verdicts",
    "write_verdicts",
]

VERDICTS_FILE = "verdicts.json"
VERDICTS_SCHEMA_VERSION = 1
WRITTEN, JUDGED_NOW = "written", "judged now"  # where a RunVerdicts came from: the run's file, or a fallback
# every record has these, as text; the rest is kept as written (a later version may add fields)
_TEXT_FIELDS = ("claim", "suite", "kind", "verdict")
_NUMBER_FIELDS = ("measured", "ci_low", "ci_high", "family_ci_low", "family_ci_high", "published", "n")


class VerdictsFileError(ValueError):
    """verdicts.json cannot be read as a verdicts file; `str(exc)` is one line naming the file and the field."""


@dataclass(frozen=True)
class ClaimsSource:
    """A claims file a run was judged against: its path as given and the SHA-256 of its content then."""

    path: str
    sha256: str

    def changed(self) -> bool | None:
        """Whether the file's content differs now (True), is the same (False), or cannot be read (None)."""
        try:
            return _digest(Path(self.path)) != self.sha256
        except OSError:
            return None

    def as_json(self) -> dict[str, str]:
        return {"path": self.path, "sha256": self.sha256}


@dataclass(frozen=True)
class RunVerdicts:
    """A run's verdicts: `records` (one dict per entry, in the order judged) and the claims files they came from.
    `origin` is `WRITTEN` (read from the run's verdicts.json) or `JUDGED_NOW` (an older run without the file, judged
    by the reader), and `note` says so in one line."""

    records: tuple[Mapping[str, Any], ...]
    claims_files: tuple[ClaimsSource, ...]
    origin: str = WRITTEN
    note: str = ""
    written_by: str = ""
    family: str = ""  # how the run's tests were controlled together, in words
    schema_version: int = VERDICTS_SCHEMA_VERSION
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def judged_now(
        cls, records: Iterable[Mapping[str, Any]], claims_files: Sequence[str | os.PathLike[str]], family: str = ""
    ) -> RunVerdicts:
        """The fallback for a run without verdicts.json: judged by the reader against `claims_files`, and saying so."""
        sources = tuple(claims_source(p) for p in claims_files)
        names = ", ".join(s.path for s in sources) or "no claims file"
        note = (
            f"this run has no {VERDICTS_FILE} (written before runs kept their verdicts): judged now against {names}, "
            "which may differ from what the run printed"
        )
        return cls(tuple(records), sources, JUDGED_NOW, note, "judged when read", family)

    def as_json(self) -> dict[str, Any]:
        return {
            **self.extra,
            "schema_version": VERDICTS_SCHEMA_VERSION,
            "written_by": self.written_by,
            "family": self.family,
            "claims_files": [s.as_json() for s in self.claims_files],
            "verdicts": [_plain(dict(r)) for r in self.records],
        }


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def claims_source(path: str | os.PathLike[str]) -> ClaimsSource:
    """The path as given (absolute) and the SHA-256 of the file's content now."""
    resolved = Path(path).resolve()
    return ClaimsSource(str(resolved), _digest(resolved))


def _plain(value: Any) -> Any:
    """JSON without NaN or infinity (not JSON): a bound that is not finite is no bound, null."""
    if type(value).__module__ == "numpy" and hasattr(value, "item"):  # a numpy scalar: its Python number
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def write_verdicts(
    run_dir: str | os.PathLike[str],
    records: Iterable[Mapping[str, Any]],
    claims_files: Sequence[str | os.PathLike[str]],
    *,
    written_by: str,
    family: str = "",
) -> RunVerdicts:
    """Writes `run_dir/verdicts.json` (atomically: a reader sees the old file or the new one) and returns what it
    holds. `claims_files`: the files the records were judged against, hashed now."""
    plain = tuple(_plain(dict(r)) for r in records)
    sources = tuple(claims_source(p) for p in claims_files)
    verdicts = RunVerdicts(plain, sources, written_by=written_by, family=family)
    for i, record in enumerate(verdicts.records):
        _check_record(record, f"{VERDICTS_FILE} being written: verdict {i}")
    text = json.dumps(verdicts.as_json(), indent=1, ensure_ascii=False, allow_nan=False, default=str)
    write_text_atomic(Path(run_dir) / VERDICTS_FILE, text + "\n")
    return verdicts


def read_verdicts(run_dir: str | os.PathLike[str]) -> RunVerdicts | None:
    """The verdicts the run wrote, upgraded to the current version; None when the run has no verdicts.json (the
    caller judges it now, `RunVerdicts.judged_now`, and says so). VerdictsFileError for a file that is not one."""
    path = Path(run_dir) / VERDICTS_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise VerdictsFileError(f"{path}: cannot be read ({exc})") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise VerdictsFileError(f"{path}: not JSON ({exc})") from None
    return parse_verdicts(data, str(path))


def parse_verdicts(data: Any, where: str) -> RunVerdicts:
    """A verdicts file's JSON object, checked and upgraded; `where` names it in errors."""
    if not isinstance(data, dict):
        raise VerdictsFileError(f"{where}: expected a JSON object, found {type(data).__name__}")
    version = data.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise VerdictsFileError(f"{where}: schema_version must be a whole number, found {version!r}")
    if version > VERDICTS_SCHEMA_VERSION:
        raise VerdictsFileError(
            f"{where}: schema_version {version} is newer than this polyperf reads ({VERDICTS_SCHEMA_VERSION}): upgrade"
        )
    if version < 1:
        raise VerdictsFileError(f"{where}: schema_version {version} was never written")
    # version 1 is current: an upgrade from an older version goes here, step by step, as env.json's does
    sources = data.get("claims_files")
    if not isinstance(sources, list):
        raise VerdictsFileError(f"{where}: claims_files must be a list")
    claims_files = []
    for i, s in enumerate(sources):
        if not (isinstance(s, dict) and isinstance(s.get("path"), str) and isinstance(s.get("sha256"), str)):
            raise VerdictsFileError(f"{where}: claims_files[{i}] must be an object with text path and sha256")
        claims_files.append(ClaimsSource(s["path"], s["sha256"]))
    records = data.get("verdicts")
    if not isinstance(records, list):
        raise VerdictsFileError(f"{where}: verdicts must be a list")
    for i, record in enumerate(records):
        _check_record(record, f"{where}: verdicts[{i}]")
    known = {"schema_version", "written_by", "family", "claims_files", "verdicts"}
    extra = {k: v for k, v in data.items() if k not in known}
    written_by, family = str(data.get("written_by") or ""), str(data.get("family") or "")
    return RunVerdicts(tuple(records), tuple(claims_files), WRITTEN, "", written_by, family, version, extra)


def _check_record(record: Any, where: str) -> None:
    if not isinstance(record, Mapping):
        raise VerdictsFileError(f"{where}: expected an object, found {type(record).__name__}")
    for name in _TEXT_FIELDS:
        if not isinstance(record.get(name), str):
            raise VerdictsFileError(f"{where}: {name} must be text, found {record.get(name)!r}")
    for name in _NUMBER_FIELDS:
        value = record.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise VerdictsFileError(f"{where} ({record['claim']}): {name} must be a number or null, found {value!r}")
