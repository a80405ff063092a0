"""Fixtures shared by every suite: the run directory, `record`, `profile` (polyperf.pytest_plugin), and
for the load suites the CPU split, load tools and the measuring `campaign` over a module's `fleet`."""

import pytest

from polyperf.flamegraph import ensure_inferno
from polyperf.load import ensure_oha
from polyperf.load.bench import Campaign, cpu_label, suite_options

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


@pytest.fixture(scope="module")
def ceilings():
    """target key -> rps of every ceiling run (read by the later cases of the same module)."""
    return {}


@pytest.fixture
def campaign(fleet, record, options, run_dir):
    """Runs load against the module's `fleet` and records rows; needs a module-level `fleet` fixture."""
    server_cpus, client_cpus, flamegraph = options
    params = {"server_cpus": cpu_label(server_cpus), "client_cpus": cpu_label(client_cpus),
              "server_workers": len(server_cpus)}
    return Campaign(fleet, record, client_cpus=client_cpus, params=params,
                    flamegraph_dir=run_dir / "flamegraphs" if flamegraph else None)
