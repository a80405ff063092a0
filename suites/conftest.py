"""Fixtures shared by every suite: the run directory, `record`, `profile` (polyperf.pytest_plugin), and
for the load suites the CPU split and load tools (`options`, `cpus`)."""

import pytest

from polyperf.flamegraph import ensure_inferno
from polyperf.load import ensure_oha
from polyperf.load.bench import suite_options

pytest_plugins = ["polyperf.pytest_plugin", "polyperf.load.pytest_options"]


@pytest.fixture(scope="module")
def options(pytestconfig):
    """(server CPUs, client CPUs, flamegraph?): --server-cpus/--client-cpus/--flamegraph or POLYPERF_* env."""
    options = suite_options(pytestconfig)
    ensure_oha()
    if options[2]:
        ensure_inferno()
    return options


@pytest.fixture(scope="module")
def cpus(options):
    return options[0], options[1]
