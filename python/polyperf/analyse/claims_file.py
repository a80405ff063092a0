"""Strict reading of a claims file (TOML, `[[claims]]` tables): every key must be known and every value of the
right type and range, and each error names the file, the entry id and the field. `claims.load_claims` builds its
entries from what `read_claims_file` returns (`load_claims`, here).

The allowed keys live here, in one place each: an entry's fields in `ENTRY_FIELDS`, a rule's keys in `RULE_KEYS`,
a selection's columns in `SELECT_KEYS`. A field `claims.Claim` has but `ENTRY_FIELDS` does not yet describe is
accepted unchecked (`known=`), so a new field works before its checks are written here.
"""

from __future__ import annotations

import difflib
import math
import tomllib
from collections.abc import Callable, Collection, Mapping
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

from polyperf.analyse.entries import CLAIMS_FILE, KINDS, RULES, Claim
from polyperf.record.schema import COLUMNS

__all__ = [
    "CONDITIONS",
    "ENTRY_FIELDS",
    "RULE_KEYS",
    "SELECT_KEYS",
    "check_claims_data",
    "load_claims",
    "read_claims_file",
]

Check = Callable[[Any, Mapping[str, Any]], str]  # (value, the whole entry) -> "" or what is wrong


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _text(nonempty: bool = False, choices: Collection[str] = ()) -> Check:
    def check(value: Any, _entry: Mapping[str, Any]) -> str:
        if not isinstance(value, str):
            return f"must be text, found {_shown(value)}"
        if nonempty and not value.strip():
            return "must not be empty"
        if choices and value not in choices:
            return f"must be one of {', '.join(choices)}, not {value!r}"
        return ""

    return check


def _number(low: float | None = None, *, above: bool = False, positive_for_ratio: bool = False) -> Check:
    """A finite number; at least `low` (strictly above it with `above`); > 0 when the entry is a ratio."""

    def check(value: Any, entry: Mapping[str, Any]) -> str:
        if not _is_number(value):
            return f"must be a number, found {_shown(value)}"
        if not math.isfinite(value):
            return f"must be finite, not {value}"
        if low is not None and (value <= low if above else value < low):
            return f"must be {'above' if above else 'at least'} {low:g}, not {value:g}"
        if positive_for_ratio and entry.get("measure") == "ratio" and value <= 0:
            return f"must be above 0 for a ratio, not {value:g}"
        return ""

    return check


def _kind(value: Any, entry: Mapping[str, Any]) -> str:
    return _text(choices=KINDS)(value, entry)


def _boolean(value: Any, _entry: Mapping[str, Any]) -> str:
    return "" if isinstance(value, bool) else f"must be true or false, found {_shown(value)}"


def _table(value: Any, _entry: Mapping[str, Any]) -> str:
    return "" if isinstance(value, dict) else f"must be a table ({{ key = value, ... }}), found {_shown(value)}"


# an entry's `conditions`: what the article measured on, and what the suite measures on instead
CONDITIONS = {
    "input": "the article's input (a file, a document, a request)",
    "machine": "the article's machine",
    "versions": "the versions the article used",
    "measured_on": "what this suite measures on, where it differs (e.g. a generated document like the article's)",
}


def _conditions(value: Any, _entry: Mapping[str, Any]) -> str:
    if not isinstance(value, dict):
        return f'must be a table ({{ input = "...", ... }}), found {_shown(value)}'
    unknown = _unknown(value, CONDITIONS, "", "key")
    if unknown:
        return unknown[0]
    wrong = [k for k, v in value.items() if not isinstance(v, str) or not v.strip()]
    return f"{wrong[0]}: must be text, found {_shown(value[wrong[0]])}" if wrong else ""


def _shown(value: Any) -> str:
    kind = {str: "text", bool: "a boolean", int: "a number", float: "a number", list: "an array", dict: "a table"}
    return f"{kind.get(type(value), type(value).__name__)} {value!r:.40}"


ENTRY_FIELDS: dict[str, tuple[bool, Check]] = {  # field -> (required, check)
    "id": (True, _text(nonempty=True)),
    "suite": (True, _text(nonempty=True)),
    "source": (True, _text()),
    "statement": (True, _text()),
    "unit": (True, _text()),
    "measure": (True, _text(choices=("ratio", "value"))),
    "metric": (True, _text(nonempty=True)),
    "select": (True, _table),  # its keys: `_check_selection`
    "rule": (True, _table),  # its keys: `_check_rule`
    "published": (False, _number(positive_for_ratio=True)),
    "numerator": (False, _table),
    "denominator": (False, _table),
    "paired": (False, _boolean),
    "note": (False, _text()),
    "kind": (False, _kind),
    "min_effect": (False, _number(0)),
    "requires": (False, _text()),
    "margin": (False, _number(1, above=True)),
    "margin_abs": (False, _number(0)),
    "conditions": (False, _conditions),
}
# rule.kind -> its own keys (besides `kind` and `why`); the first one is required
RULE_KEYS: dict[str, dict[str, Check]] = {
    "within_factor": {"factor": _number(1, above=True), "center": _number(0, above=True)},
    "within_abs": {"tolerance": _number(0), "center": _number()},
    "less_than": {"threshold": _number()},
    "greater_than": {"threshold": _number()},
}
_RULE_NEEDS = {
    "within_factor": "factor",
    "within_abs": "tolerance",
    "less_than": "threshold",
    "greater_than": "threshold",
}
# the table's columns a selection may name (its value is what is measured, never selected on)
SELECT_KEYS: dict[str, tuple[type, ...]] = {
    **{column: (str,) for column in COLUMNS if column not in ("value", "repeat", "client_bound", "params")},
    "repeat": (int,),
    "client_bound": (bool,),
    "params": (dict,),
}
_PARAM_VALUE = (str, int, float, bool, list)


def _unknown(keys: Collection[str], known: Collection[str], what: str, noun: str = "field") -> list[str]:
    problems = []
    for key in sorted(set(keys) - set(known)):
        near = difflib.get_close_matches(key, list(known), n=1)
        hint = f" (did you mean {near[0]}?)" if near else f" (known: {', '.join(sorted(known))})"
        problems.append(f"{what}{key}: unknown {noun}{hint}")
    return problems


def _check_selection(name: str, spec: Mapping[str, Any]) -> list[str]:
    problems = _unknown(spec, SELECT_KEYS, f"{name}.", "column")
    for key, value in spec.items():
        types = SELECT_KEYS.get(key)
        if types is None:
            continue
        if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
            problems.append(
                f"{name}.{key}: must be {'a table' if dict in types else types[0].__name__}, found {_shown(value)}"
            )
        elif key == "params":
            problems += [
                f"{name}.params.{k}: must be text, a number, a boolean or an array, found {_shown(v)}"
                for k, v in value.items()
                if not isinstance(v, _PARAM_VALUE) or (isinstance(v, float) and not math.isfinite(v))
            ]
    return problems


def _check_rule(rule: Mapping[str, Any], entry: Mapping[str, Any]) -> list[str]:
    kind = rule.get("kind")
    if not isinstance(kind, str) or kind not in RULE_KEYS:
        return [f"rule.kind: must be one of {', '.join(RULE_KEYS)}, found {_shown(kind)}"]
    own = RULE_KEYS[kind]
    needed = next(iter(own))
    problems = [] if needed in rule else [f"rule: a {kind} rule needs rule.{needed}"]
    problems += _unknown(rule, {"kind", "why", *own}, "rule.", f"key of a {kind} rule")
    if "why" in rule and not isinstance(rule["why"], str):
        problems.append(f"rule.why: must be text, found {_shown(rule['why'])}")
    problems += [f"rule.{key}: {why}" for key, check in own.items() if key in rule and (why := check(rule[key], entry))]
    if kind.startswith("within_") and "center" not in rule and "published" not in entry:
        problems.append(f"rule: a {kind} rule needs `published` or `rule.center` (its centre)")
    published = entry.get("published")
    ratio = entry.get("measure") == "ratio"  # a ratio's published figure is checked above 0 by itself
    if kind == "within_factor" and "center" not in rule and _is_number(published) and published <= 0 and not ratio:
        problems.append(f"published: a within_factor rule needs it above 0, not {entry['published']:g}")
    return problems


def _check_entry(entry: Mapping[str, Any], extra: Collection[str]) -> list[str]:
    problems = _unknown(entry, {*ENTRY_FIELDS, *extra}, "")
    problems += [
        f"{f}: missing (required)" for f, (required, _c) in ENTRY_FIELDS.items() if required and f not in entry
    ]
    for key, value in entry.items():
        if key in ENTRY_FIELDS and (why := ENTRY_FIELDS[key][1](value, entry)):
            problems.append(f"{key}: {why}")
    ratio, value = entry.get("measure") == "ratio", entry.get("measure") == "value"
    for side in ("numerator", "denominator"):
        if ratio and side not in entry:
            problems.append(f"{side}: a ratio needs it")
        if value and side in entry:
            problems.append(f'{side}: only a measure = "ratio" entry has one')
    if value and entry.get("paired") is True:
        problems.append('paired: only a measure = "ratio" entry is paired')
    for side in ("select", "numerator", "denominator"):
        if isinstance(entry.get(side), dict):
            problems += _check_selection(side, entry[side])
    if isinstance(entry.get("rule"), dict):
        problems += _check_rule(entry["rule"], entry)
    return problems


def _one_line(where: str, problems: list[str], shown: int = 3) -> str:
    more = f" (and {len(problems) - shown} more)" if len(problems) > shown else ""
    return f"{where}: " + "; ".join(problems[:shown]) + more


def check_claims_data(data: Mapping[str, Any], where: str, known: Collection[str] = ()) -> list[dict[str, Any]]:
    """The entries of a parsed claims file, each checked; raises ValueError naming `where`, the entry and the
    field. `known`: further entry fields to accept unchecked (those of `claims.Claim`)."""
    top = _unknown(data, {"claims"}, "", "table")
    if top:
        raise ValueError(_one_line(where, [f"{p}; the entries go in [[claims]] tables" for p in top]))
    entries = data.get("claims", [])  # an empty file has no entries; `claims = 5` is an error
    if not isinstance(entries, list):
        raise ValueError(f"{where}: claims must be [[claims]] tables, found {_shown(entries)}")
    checked = []
    for number, entry in enumerate(entries, start=1):
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: entry #{number}: must be a [[claims]] table, found {_shown(entry)}")
        name = f"entry {entry['id']!r}" if isinstance(entry.get("id"), str) else f"entry #{number} (no id)"
        problems = _check_entry(entry, set(known) - set(ENTRY_FIELDS))
        if problems:
            raise ValueError(_one_line(f"{where}: {name}", problems))
        checked.append(entry)
    return checked


def read_claims_file(path: Path, known: Collection[str] = ()) -> list[dict[str, Any]]:
    """The checked entries of the claims file at `path`; any problem is a ValueError of one line that names
    the file (and the entry and field)."""
    where = f"claims file {path}"
    if path.is_dir():
        raise ValueError(f"{where}: is a folder, not a file")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"{where}: no such file") from None
    except UnicodeDecodeError:
        raise ValueError(f"{where}: not UTF-8 text") from None
    except OSError as exc:
        raise ValueError(f"{where}: cannot be read ({exc.strerror})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{where}: not valid TOML: {exc}") from None
    return check_claims_data(data, where, known)


_FIELDS = {f.name for f in fields(Claim)}
_REQUIRED = {f.name for f in fields(Claim) if f.default is MISSING and f.default_factory is MISSING}


def _claim(entry: Mapping[str, Any], where: str) -> Claim:
    name = f"{where}: entry {entry.get('id', '?')!r}"
    unknown = sorted(set(entry) - _FIELDS)
    if unknown:
        raise ValueError(f"{name}: unknown field(s) {', '.join(unknown)} (known: {', '.join(sorted(_FIELDS))})")
    missing = sorted(_REQUIRED - set(entry))
    if missing:
        raise ValueError(f"{name}: missing field(s) {', '.join(missing)}")
    claim = Claim(**entry)
    if claim.kind not in KINDS:
        raise ValueError(f"{name}: kind must be one of {', '.join(KINDS)}, not {claim.kind!r}")
    if claim.measure not in ("ratio", "value"):
        raise ValueError(f"{name}: measure must be 'ratio' or 'value', not {claim.measure!r}")
    if claim.measure == "ratio" and (claim.numerator is None or claim.denominator is None):
        raise ValueError(f"{name}: a ratio needs numerator and denominator")
    kind = claim.rule.get("kind")
    if kind not in RULES:
        raise ValueError(f"{name}: rule.kind must be one of {', '.join(RULES)}, not {kind!r}")
    if kind in ("within_factor", "within_abs") and claim.center is None:
        raise ValueError(f"{name}: a {kind} rule needs `published` or `rule.center`")
    needs = {"within_factor": "factor", "within_abs": "tolerance"}.get(kind, "threshold")
    if needs not in claim.rule:
        raise ValueError(f"{name}: a {kind} rule needs rule.{needs}")
    _check_margin(claim, name)
    return claim


def _check_margin(claim: Claim, name: str) -> None:
    if claim.margin is not None and claim.margin_abs is not None:
        raise ValueError(f"{name}: give `margin` (a factor) or `margin_abs` (in the entry's unit), not both")
    if claim.margin is not None and not claim.margin > 1:
        raise ValueError(f"{name}: margin is a factor above 1 (1.25 = within 25% of the published figure)")
    if claim.margin_abs is not None and not claim.margin_abs >= 0:
        raise ValueError(f"{name}: margin_abs must be 0 or more")
    # a published figure without a margin (files written before sizes were judged) still loads: its size is not
    # judged; every built-in entry with a published figure has one (tests/test_claims.py)


def load_claims(path: Path | str = CLAIMS_FILE) -> list[Claim]:
    """Entries of a claims file (`[[claims]]` tables); a user's file has the same format as the built-in one."""
    path = Path(path)
    entries = read_claims_file(path, known=_FIELDS)
    claims = [_claim(entry, f"claims file {path}") for entry in entries]
    ids = [c.id for c in claims]
    doubled = sorted({i for i in ids if ids.count(i) > 1})
    if doubled:
        raise ValueError(f"claims file {path}: ids used twice: {', '.join(doubled)}")
    return claims
