"""The suites' fixtures that drive experiments (`load_env`, `env`), as a pytest plugin of their own beside
`record/pytest_plugin.py` (the recording stage cannot import the experiments): that plugin registers this one when a
session records a run, so a suite folder outside the checkout needs no conftest."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from polyperf.orchestrate.load_suite import LoadEnv
from polyperf.record.pytest_plugin import LoadOptions
from polyperf.record.recorder import Recorder

__all__ = ["env", "load_env"]


@pytest.fixture(scope="module")
def load_env(fleet: Any, record: Recorder, load_options: LoadOptions, run_dir: Path) -> LoadEnv:
    """Measured, recorded load runs against the module's `fleet` (a module-level fixture of the suite)."""
    from polyperf.load import ensure_bombardier, ensure_oha
    from polyperf.measure.flamegraph import ensure_inferno

    ensure_oha()
    ensure_bombardier()
    if load_options.flamegraph:
        ensure_inferno()
    load = LoadEnv(
        fleet,
        record,
        client_cpus=load_options.client_cpus,
        log_dir=run_dir / "logs",
        flamegraph_dir=run_dir / "flamegraphs" if load_options.flamegraph else None,
        seed=load_options.seed,
    )
    if load_options.auto_quota and fleet.budgets:
        load.add_params(cpu_quota_auto=load.calibrate_cpu_quota())
    return load


@pytest.fixture
def env(load_env: LoadEnv) -> Iterator[LoadEnv]:
    """`load_env` for one test: the test fails, with every problem on its own line, if a server died or a
    driver failed during it (the other targets still ran)."""
    yield load_env
    problems = load_env.take_problems()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)
