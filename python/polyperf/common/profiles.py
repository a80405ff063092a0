"""Run profiles: how much work a suite does. `smoke` proves the pipeline in seconds (CI), `quick` is
the default main job (minutes), `full` sweeps the article-sized inputs and beyond."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

__all__ = ["PROFILES", "Profile", "get_profile"]

T = TypeVar("T")
PROFILES = ("smoke", "quick", "full")


# Each profile's default budget for a whole `polyperf run` (seconds from its start): what is left after the suites'
# first batch goes to repeats of the entries still undecided (`polyperf.topups`). quick keeps the main job within
# 10 minutes on 2 cores, builds cached; smoke proves the pipeline and adds nothing.
BUDGET_S = {"smoke": 0.0, "quick": 555.0, "full": 3600.0}


@dataclass(frozen=True)
class Profile:
    name: str

    @property
    def budget_s(self) -> float:
        return BUDGET_S[self.name]

    def pick(self, *, smoke: T, quick: T, full: T) -> T:
        """The value for this profile; suites keep their sizes next to the code that uses them."""
        return {"smoke": smoke, "quick": quick, "full": full}[self.name]


def get_profile(name: str) -> Profile:
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}: choose one of {', '.join(PROFILES)}")
    return Profile(name)
