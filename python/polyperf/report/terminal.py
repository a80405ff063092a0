"""The answers of a run for a terminal: one line per claim (its two-part headline, the measured value with its
interval and n), counts by outcome, what was not measured and why, for a machine without a browser (SSH, CI).
`polyperf run` prints it after each suite and at the end, from the verdicts.json it has just written; the report's
verdict table says the same."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from polyperf.analyse.claims import Verdict
from polyperf.report.view import VerdictRow, verdict_counts, verdict_rows

__all__ = ["answers_text"]

_SHORT = {"reproduced": "reproduced", "not reproduced": "NOT reproduced", "inconclusive": "inconclusive"}


def _line(row: VerdictRow, still_open: Mapping[str, str]) -> str:
    """Never cut: a headline cut to the terminal's width is an answer lost (a terminal wraps it)."""
    measured = f"{row.measured} [{row.interval}]" if row.interval else row.measured
    text = f"  {_SHORT.get(row.verdict, row.verdict):<14} {row.id}: {row.verdict_text or row.verdict}"
    detail = f"  {'':<14} measured {measured}, n = {row.n}" if row.measured not in ("", "–") else ""
    if detail and row.family_interval:  # the interval the decision after the family's control agrees with
        detail += f"; {row.family_interval}"
    why = ""
    if row.verdict == "inconclusive" and row.id in still_open:  # the data or the budget: which one left it open
        why = f"  {'':<14} still open: {still_open[row.id]}"
    conditions = f"  {'':<14} {row.conditions}" if row.conditions else ""
    return "\n".join(part for part in (text, detail, conditions, why) if part)


def answers_text(
    verdicts: Iterable[Verdict | Mapping[str, Any]],
    *,
    done: Sequence[str],
    total: int,
    notes: Sequence[str] = (),
    new: Sequence[str] | None = None,
    env: Mapping[str, Any] | None = None,
) -> str:
    """`verdicts`: the records the run wrote (verdicts.json), or verdicts; `done` suites of `total`; `new`: show
    only the claims of these suites (the counts cover every suite done). Claims that were not measured say why; the
    run's notes say what it left out."""
    verdicts = list(verdicts)
    counts = verdict_counts(verdicts)
    said = ", ".join(f"{n} {name}" for name, n in counts.items() if n)
    head = f"polyperf: answers after {len(done)} of {total} suites ({', '.join(done)}): {said or 'no claims yet'}"
    rows = [r for r in verdict_rows(verdicts, env) if new is None or r.suite in new]
    measured = [r for r in rows if r.verdict != "not measured"]
    missing = [r for r in rows if r.verdict == "not measured"]
    top_ups = (env or {}).get("top_ups") or {}
    still_open = top_ups.get("open", {}) if isinstance(top_ups, Mapping) else {}
    lines = [head, *(_line(r, still_open) for r in measured)]
    if top_ups and isinstance(top_ups, Mapping) and top_ups.get("batches"):
        batches = top_ups["batches"]
        spent = sum(float(b.get("seconds", 0)) for b in batches)
        added = sum(sum(b.get("claims", {}).values()) for b in batches)
        lines.append(f"  repeats added where undecided: {added} in {len(batches)} batches, {spent:.0f} s")
    if missing:
        lines.append("  not measured:")
        lines += [f"    {r.id}: {r.reason}" for r in missing]
    if notes:
        lines.append("  left out of this run:")
        lines += [f"    {note}" for note in notes]
    if env and env.get("interrupted"):
        lines.append(f"  the run was interrupted ({env['interrupted']}): these answers hold only what was measured")
    return "\n".join(lines)
