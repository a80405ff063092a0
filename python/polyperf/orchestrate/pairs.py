"""The order of paired microbenchmark runs in a round: each case's sides back to back, so that a pair is measured
seconds apart, not minutes, and a busy spell of a shared machine hits both sides of it alike. Pure.

The order is fixed, not drawn: the cases rotate by one place each round and the side that goes first alternates
from one round to the next (and from one case to the next), so over an even number of rounds each side of each case
goes first equally often, and no case always follows the same one.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["paired_order"]


def paired_order(round_index: int, cases: Sequence[str], sides: Sequence[str]) -> list[tuple[str, str]]:
    """(case, side) in the order to run them in round `round_index` (0-based): all of a case's sides adjacent."""
    if not cases or not sides:
        raise ValueError("paired_order needs at least one case and one side")
    n, k = len(cases), len(sides)
    shift = round_index % n
    order: list[tuple[str, str]] = []
    for case in [*cases[shift:], *cases[:shift]]:
        first = (round_index + list(cases).index(case)) % k
        order.extend((case, side) for side in [*sides[first:], *sides[:first]])
    return order
