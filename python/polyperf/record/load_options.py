"""The load suites' options from the command line (`--server-cpus`, `--client-cpus`, `--server-cpu-quota`, ...), as
one typed record the pytest plugin's `load_options` fixture hands to the suites."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

__all__ = ["LoadOptions", "parse_quota"]


@dataclass(frozen=True)
class LoadOptions:
    server_cpus: list[int]
    client_cpus: list[int]
    flamegraph: bool
    cpu_quota: float | None = None  # CPUs of quota per server; 1.0 while `auto` is still calibrating
    auto_quota: bool = False
    quota_period_s: float = 0.010
    quota_refused: bool = False  # `--server-cpu-quota none`: never a budget, not even a suite's default
    seed: int | None = None  # of the random orders (`LoadEnv.interleave`); recorded in env.json

    def budget_by_default(self) -> LoadOptions:
        """For suites whose claims compare servers: `auto` when no budget was asked for (nor refused), the
        client has no more cores than the server, and CPU budgets work here — else these options unchanged.
        One client core cannot outpace one server core, so without a budget such a machine measures the client."""
        if self.cpu_quota is not None or self.quota_refused or len(self.client_cpus) > len(self.server_cpus):
            return self
        from polyperf.serve.cpu_budget import cpu_budget_support

        if cpu_budget_support() is not None:
            return self
        return dataclasses.replace(self, cpu_quota=1.0, auto_quota=True)

    @property
    def fleet(self) -> dict[str, Any]:
        """The keyword arguments a suite's `Fleet` takes from the command line: CPUs and CPU budget."""
        return {"server_cpus": self.server_cpus, "cpu_quota": self.cpu_quota, "quota_period_s": self.quota_period_s}


def parse_quota(text: str | None) -> tuple[float | None, bool]:
    """--server-cpu-quota: (CPUs of quota or None, whether `auto`); ValueError naming the option on bad text."""
    if not text or text == "none":
        return None, False
    if text == "auto":
        return 1.0, True
    try:
        fraction = float(text)
    except ValueError:
        raise ValueError(f"--server-cpu-quota takes a number of CPUs (e.g. 0.5) or auto, not {text!r}") from None
    if not fraction > 0:
        raise ValueError(f"--server-cpu-quota must be above 0, not {text!r}")
    return fraction, False
