"""Fixtures shared by every suite: the run directory, `record`, `profile` and `load_options` come from the
polyperf pytest plugin; the load suites get `load_env`, a `LoadEnv` over their module's `fleet`."""

import pytest

from polyperf.load import ensure_bombardier, ensure_oha
from polyperf.measure.flamegraph import ensure_inferno
from polyperf.orchestrate.load_suite import LoadEnv

pytest_plugins = ["polyperf.record.pytest_plugin"]


@pytest.fixture(scope="module")
def load_env(fleet, record, load_options, run_dir):
    """Measured, recorded load runs against the module's `fleet` (a module-level fixture of the suite)."""
    ensure_oha()
    ensure_bombardier()
    if load_options.flamegraph:
        ensure_inferno()
    env = LoadEnv(
        fleet,
        record,
        client_cpus=load_options.client_cpus,
        log_dir=run_dir / "logs",
        flamegraph_dir=run_dir / "flamegraphs" if load_options.flamegraph else None,
        seed=load_options.seed,
    )
    if load_options.auto_quota and fleet.budgets:
        env.add_params(cpu_quota_auto=env.calibrate_cpu_quota())
    return env


@pytest.fixture
def env(load_env):
    """`load_env` for one test: the test fails, with every problem on its own line, if a server died or a
    driver failed during it (the other targets still ran)."""
    yield load_env
    problems = load_env.take_problems()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)
