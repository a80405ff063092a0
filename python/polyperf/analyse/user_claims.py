"""polyperf's own claims merged with the user's: the files beside the suites a run ran (kept in the run folder,
`record.suite_files`) and those named with `--claims`. One registry per run, ids unique across all of them. Every
reader of verdicts (the run's answers, the report, `verdicts`, `compare`, the history) loads claims through here.

The size margin when an entry gives none (`margin`, `margin_abs`), derived from what the article states:

    margin = (1 + h / |published|) × spread

- h, the published figure's stated precision: half a unit of its last written digit (`6` → 0.5, `3.73` → 0.005;
  a TOML integer is read as stated to the unit, so write `6.0` for "six, to one decimal").
- spread, how far polyperf measures that kind of quantity to move between runs on one machine: 1 for an exact count
  (the metric catalogue's `exact`: syscalls, allocations, rows), 1.25 for anything timed or sampled, where times
  move by ±20% between runs of one commit (the README's count gate, measured on the 2-core VM) and ÷/× 1.25 holds
  that. The article measured on another machine: where that matters, give `margin` and say why in `note`.

So "6x" reads "as published" from 6 / 1.35 = 4.4 to 6 × 1.35 = 8.1; "257 syscalls", exact, from 256.5 to 257.5.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

from polyperf.analyse.claims import CLAIMS_FILE, Claim, load_claims
from polyperf.record.catalogue import metric_info
from polyperf.record.suite_files import kept_claims

__all__ = ["SAMPLED_SPREAD", "claims_of_run", "derived_margin", "merged_claims", "stated_precision"]

SAMPLED_SPREAD = 1.25  # times move by ±20% between runs of one commit on one machine (README, the count gate)


def stated_precision(published: float) -> float:
    """Half a unit of the last digit written: 6 → 0.5, 6.0 → 0.05, 3.73 → 0.005, 1.5e-05 → 5e-07."""
    if isinstance(published, int) and not isinstance(published, bool):
        return 0.5
    exponent = Decimal(repr(float(published))).as_tuple().exponent  # 6.0 keeps its written decimal: -1
    return 0.5 * 10.0 ** int(exponent)


def derived_margin(claim: Claim) -> float | None:
    """The margin the rule above gives `claim`; None without a published figure, or when it states one of its own
    (or a within_* rule, which is its own margin). `published` is as TOML wrote it: an integer stays one."""
    published = claim.published
    if published is None or claim.margin is not None or claim.margin_abs is not None:
        return None
    if claim.rule.get("kind", "").startswith("within_") or published == 0:
        return None
    info = metric_info(claim.metric)
    spread = 1.0 if info is not None and info.exact else SAMPLED_SPREAD
    return round((1 + stated_precision(published) / abs(float(published))) * spread, 6)


def _with_rule(claims: Sequence[Claim]) -> list[Claim]:
    return [claim if (margin := derived_margin(claim)) is None else replace(claim, margin=margin) for claim in claims]


def _load(path: Path, shown: str) -> list[Claim]:
    try:
        claims = load_claims(path)
    except ValueError as exc:
        raise ValueError(str(exc).replace(str(path), shown)) from None
    return _with_rule(claims)


def merged_claims(files: Iterable[Path | tuple[Path, str]] = (), *, builtin: Path | None = CLAIMS_FILE) -> list[Claim]:
    """polyperf's claims, then each file's (a (copy, origin) pair is read from the copy and named by its origin). A
    file named twice counts once; an id in two files is one error line naming both."""
    sources: list[tuple[Path, str]] = [(builtin, "polyperf's own claims")] if builtin is not None else []
    for item in files:
        path, origin = item if isinstance(item, tuple) else (Path(item), str(item))
        sources.append((Path(path), f"claims file {origin}"))
    claims: list[Claim] = []
    owner: dict[str, str] = {}
    seen: set[str] = set()
    for path, shown in sources:
        origin = shown.removeprefix("claims file ")
        key = str(Path(origin).resolve()) if shown.startswith("claims file ") else shown
        if key in seen:
            continue
        seen.add(key)
        for claim in _load(path, origin if shown.startswith("claims file ") else str(path)):
            if claim.id in owner:
                raise ValueError(
                    f"{shown}: id {claim.id!r} is already used by {owner[claim.id]}; ids are unique across "
                    "polyperf's claims and yours: rename it"
                )
            owner[claim.id] = shown
            claims.append(claim)
    return claims


def claims_of_run(run_dir: Path, extra: Iterable[Path] = (), *, builtin: Path | None = CLAIMS_FILE) -> list[Claim]:
    """The claims a run is judged against: polyperf's, the files kept in the run, and `extra` files."""
    return merged_claims([*kept_claims(Path(run_dir)), *extra], builtin=builtin)
