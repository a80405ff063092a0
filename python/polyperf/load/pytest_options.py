"""The load suites' pytest options: `--server-cpus`, `--client-cpus`, `--flamegraph`. A pytest plugin
(listed in suites/conftest.py next to polyperf.pytest_plugin); the suites read the same settings from
`POLYPERF_SERVER_CPUS` / `POLYPERF_CLIENT_CPUS` / `POLYPERF_FLAMEGRAPH=1` when it is not loaded."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("polyperf load")
    group.addoption("--server-cpus", default=None,
                    help="CPUs the servers are pinned to, e.g. 0 or 0-1 (default: the first half)")
    group.addoption("--client-cpus", default=None,
                    help="CPUs the load generators are pinned to (default: the CPUs the servers do not get)")
    group.addoption("--flamegraph", action="store_true", default=False,
                    help="also record a perf flamegraph (SVG) of each server during an extra ceiling run")
