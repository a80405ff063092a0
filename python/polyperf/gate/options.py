"""What one `polyperf ab` session is asked (`ABOptions`, checked in one line per refusal) and what it answers
(`ABOutcome`); the suites it can measure and its default budgets. Read by the session, the CLI and the calibration
(which replays with the gate's own defaults)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from polyperf.build.revisions import AB_CACHE
from polyperf.gate.servers import SERVER_SUITES
from polyperf.gate.worker import CASES
from polyperf.orchestrate.retry import GATE_LIMIT

__all__ = ["AB_SUITES", "DEFAULT_BUDGET_S", "MICRO_SUITES", "ABOptions", "ABOutcome"]

MICRO_SUITES = tuple(CASES)
AB_SUITES = (*MICRO_SUITES, *SERVER_SUITES)
# seconds of pairs by default: a microbenchmark suite decides a 10% change in about a minute, a server suite
# (a fresh process of each server per side and repeat) in a few
DEFAULT_BUDGET_S = {"micro": 170.0, "servers": 540.0}


@dataclass(frozen=True)
class ABOptions:
    base: str
    head: str
    suites: Sequence[str] = ("io_buffering",)
    # the band of "no change that matters": ±2%. The confidence sequence bounds false alarms whatever the band; a
    # wider band only makes a real slowdown wait for a narrower interval (at ±3%, 5% slowdowns often ran out of time)
    threshold: float = 0.02
    alpha: float = 0.05
    min_pairs: int = 10
    max_pairs: int = 200
    budget_s: float | None = None  # None: DEFAULT_BUDGET_S for the suites asked for
    seed: int | None = None
    target_s: float = 0.1  # seconds of timed calls per case and process
    env_b: Mapping[str, str] = field(default_factory=dict)  # test-only: extra environment for B's processes
    out: Path = Path("reports")
    cache: Path = AB_CACHE
    retry_limit: int = GATE_LIMIT  # the same failure this many times in a row ends the session (orchestrate.retry)

    def check(self) -> None:
        """Refuses settings that would switch the gate off or turn it around, in one line each."""
        if not 0 < self.alpha < 1:
            raise ValueError(f"--alpha must lie in (0, 1), got {self.alpha}")
        if not (self.threshold >= 0 and self.threshold < float("inf")):
            raise ValueError(f"the threshold must be finite and >= 0, got {self.threshold}")
        if not (self.budget > 0 and self.max_pairs >= 1 and self.retry_limit >= 1):
            raise ValueError("the budget, the pair limit and the retry limit must be positive")
        unknown = [s for s in self.suites if s not in AB_SUITES]
        if unknown or not self.suites:
            raise ValueError(f"ab measures the suites {', '.join(AB_SUITES)}; got {', '.join(unknown) or 'none'}")

    @property
    def micro(self) -> list[str]:
        return [s for s in self.suites if s in MICRO_SUITES]

    @property
    def servers(self) -> list[str]:
        return [s for s in self.suites if s in SERVER_SUITES]

    @property
    def budget(self) -> float:
        if self.budget_s is not None:
            return self.budget_s
        return DEFAULT_BUDGET_S["servers" if self.servers else "micro"]


@dataclass(frozen=True)
class ABOutcome:
    run_dir: Path
    table: pd.DataFrame
    verdict: str  # "slower", "inconsistent", "decided", "undecided"
    markdown: str
    pairs: int  # measured by this session
    elapsed_s: float
    interrupted: bool = False
    earlier_pairs: int = 0  # stored by earlier sessions of the same experiment, continued here
    retries: int = 0  # failed repeats tried again (each also in env.json's `ab.retries`)
