"""`RunEnv`: env.json as a typed, versioned record (pyperf's small frozen model). Known fields are typed; what a
command adds of its own (a URL, the apps built, an A/B's sides) and a collector's error stay in `extra`.
`RunEnv.from_json` reads any version (upgrading older ones), `as_json` gives the file's flat layout, which
`load_env`'s readers (the report, the history, notebooks) keep reading as a dict.

History: v1 (polyperf 0.1) wrote the profile, the version and some machine facts, with no `interrupted`; v2
(0.2) adds the toolchains, git state, suites, seed, suite times, notes and `interrupted`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

__all__ = ["COMMIT", "ENV_SCHEMA_VERSION", "BadField", "RunEnv", "is_commit"]

ENV_SCHEMA_VERSION = 2


COMMIT = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")  # a SHA-1 object id (or SHA-256, in such a repository)


class BadField(ValueError, TypeError):
    """A known field of env.json holds a value of the wrong type or form; the message names the field."""


def is_commit(value: object) -> bool:
    """A full commit id: 40 hexadecimal characters (64 in a SHA-256 repository), nothing else."""
    return isinstance(value, str) and COMMIT.fullmatch(value) is not None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str | int | float):
        raise TypeError(f"expected text, found {type(value).__name__}")
    return str(value)


def _commit(value: Any) -> str | None:
    if value is None:
        return None
    if not is_commit(value):
        raise ValueError(f"expected a commit id of 40 hexadecimal characters, found {str(value)[:60]!r}")
    return str(value)


def _int(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise TypeError(f"expected a whole number, found {type(value).__name__}")
    try:
        number = float(value) if isinstance(value, float) else int(value)
    except ValueError:
        raise ValueError(f"expected a whole number, found {str(value)[:60]!r}") from None
    if isinstance(number, float) and not number.is_integer():  # also NaN and infinity
        raise ValueError(f"expected a whole number, found {value!r}")
    return int(number)


def _int_within(low: int, high: int) -> Callable[[Any], int | None]:
    """A whole number within [low, high]: a count a machine can have, which every store column can hold."""

    def convert(value: Any) -> int | None:
        number = _int(value)
        if number is not None and not low <= number <= high:
            raise ValueError(f"expected a whole number from {low:,} to {high:,}, found {number:,}")
        return number

    return convert


def _bool(value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise TypeError(f"expected true or false, found {type(value).__name__}")


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list | tuple):
        raise TypeError(f"expected a list, found {type(value).__name__}")
    return list(value)


def _ints(value: Any) -> tuple[int, ...] | None:
    return None if value is None else tuple(_int(v) for v in _list(value))


def _texts(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    return (str(value),) if isinstance(value, str) else tuple(_text(v) for v in _list(value))


def _seconds(value: Any) -> Mapping[str, float]:
    if value is None:
        return MappingProxyType({})
    if not isinstance(value, dict):
        raise TypeError(f"expected an object of seconds, found {type(value).__name__}")
    out = {}
    for key, seconds in value.items():
        if isinstance(seconds, bool) or not isinstance(seconds, int | float):
            raise TypeError(f"{key}: expected seconds, found {type(seconds).__name__}")
        out[str(key)] = float(seconds)
    return MappingProxyType(out)


@dataclass(frozen=True)
class RunEnv:
    """What a run measured on and how it was run. None: not known (a tool missing, a /proc file unreadable)."""

    schema_version: int = ENV_SCHEMA_VERSION
    # One optional field per collected fact: a frozen dataclass spelled out is the record's schema.
    # the machine and its toolchains (record/env.py's collectors)
    cpu_model: str | None = None
    cpu_count: int | None = None
    cpu_affinity: tuple[int, ...] | None = None
    memory_bytes: int | None = None
    kernel: str | None = None
    os: str | None = None
    machine: str | None = None
    python: str | None = None
    rustc: str | None = None
    cargo: str | None = None
    go: str | None = None
    git_commit: str | None = None
    git_dirty: bool | None = None
    polyperf_version: str | None = None
    # the run
    profile: str | None = None
    suites: tuple[str, ...] = ()
    command: str | None = None  # `build`, `load`: a CLI command's run; None for a suites run
    seed: int | None = None  # of the random orders of servers and generators
    suite_seconds: Mapping[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()  # what was not measured and why
    interrupted: str | None = None  # the signal that stopped the run, e.g. "SIGTERM"
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> RunEnv:
        """Any version's env.json → the current record. Raises ValueError for a newer version than this polyperf
        knows or a known field of the wrong type (one line, naming the field)."""
        data = dict(raw)
        try:
            version = _int(data.get("schema_version")) or 1
        except (TypeError, ValueError) as exc:
            raise BadField(f"field schema_version: {exc}") from None
        if version < 1:
            raise ValueError(f"field schema_version: {version} is no version of env.json")
        if version > ENV_SCHEMA_VERSION:
            raise ValueError(f"env.json written by a newer polyperf (version {version} > {ENV_SCHEMA_VERSION})")
        while version < ENV_SCHEMA_VERSION:
            data = _UPGRADES[version](data)
            version += 1
        known = {f.name for f in fields(cls)} - {"extra"}
        typed = {}
        for name in sorted(known & data.keys()):
            try:
                typed[name] = _CONVERT.get(name, _text)(data[name])
            except (TypeError, ValueError, OverflowError) as exc:
                raise BadField(f"field {name}: {exc}") from None
        typed["schema_version"] = ENV_SCHEMA_VERSION
        extra = MappingProxyType({k: v for k, v in data.items() if k not in known})
        return cls(**typed, extra=extra)

    def as_json(self) -> dict[str, Any]:
        """The flat layout of env.json: known fields (a run field only when set), then `extra`'s keys."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "extra" or (f.name in _OMITTED_WHEN_EMPTY and value in (None, (), {})):
                continue
            out[f.name] = (
                list(value) if isinstance(value, tuple) else dict(value) if isinstance(value, Mapping) else value
            )
        return {**dict(self.extra), **out}

    def replace(self, **changes: Any) -> RunEnv:
        return dataclasses.replace(self, **changes)


# run fields a file leaves out until they are set (as env.json always did); `interrupted` is always written
_OMITTED_WHEN_EMPTY = frozenset({"profile", "suites", "command", "seed", "suite_seconds", "notes"})
_CONVERT: dict[str, Callable[[Any], Any]] = {
    "schema_version": _int,
    "git_commit": _commit,
    "cpu_count": _int_within(1, 2**20),
    "memory_bytes": _int_within(0, 2**62),
    "seed": _int,
    "cpu_affinity": _ints,
    "git_dirty": _bool,
    "suites": _texts,
    "notes": _texts,
    "suite_seconds": _seconds,
}


def _v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """v1 had no `interrupted` (a v1 run that was stopped did not say so) and may name one suite as text."""
    return {**data, "interrupted": data.get("interrupted"), "schema_version": 2}


_UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _v1_to_v2}
