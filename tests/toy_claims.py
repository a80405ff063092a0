"""A toy ratio claim the verdict tests share: `slow` over `fast` in suite `io`, paired, judged against 1."""

from __future__ import annotations

from polyperf.analyse.claims import Claim


def ratio_claim(case: str = "parse", **kw) -> Claim:
    """The claim that `slow` is slower than `fast` in `case`; keyword arguments replace any field."""
    base = dict(
        id=case,
        suite="io",
        source="s",
        statement="t",
        unit="x",
        measure="ratio",
        metric="seconds",
        select={"case": case},
        numerator={"variant": "slow"},
        denominator={"variant": "fast"},
        paired=True,
        rule={"kind": "greater_than", "threshold": 1.0},
    )
    return Claim(**{**base, **kw})
