"""The suites' fixtures that drive experiments (`load_env`, `env`), as a pytest plugin of their own beside
`record/pytest_plugin.py` (the recording stage cannot import the experiments): that plugin registers this one when a
session records a run, so a suite folder outside the checkout needs no conftest. It also makes a Go package with
`Benchmark…` functions, or a Cargo crate with criterion benches, a suite (`orchestrate.native_bench`): the folder is
collected as one test that builds and measures it."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from polyperf.common.profiles import get_profile
from polyperf.orchestrate.load_suite import LoadEnv
from polyperf.orchestrate.native_bench import NativePlan, native_kind, run_native_suite
from polyperf.record.pytest_plugin import LoadOptions, run_of
from polyperf.record.recorder import Recorder

__all__ = ["NativeBenches", "NativeSuite", "env", "load_env"]


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


def pytest_collect_directory(path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """A Go package or a Cargo crate with benches is one suite, named after its folder."""
    if native_kind(path) is None:
        return None
    return NativeBenches.from_parent(parent, path=path)


class NativeBenches(pytest.Directory):
    def collect(self) -> Iterator[pytest.Item]:
        yield NativeSuite.from_parent(self, name=f"{native_kind(self.path)}_benchmarks")


class NativeSuite(pytest.Item):
    """Builds the folder's benchmarks and measures them, repeat by repeat (`native_bench.run_native_suite`)."""

    def runtest(self) -> None:
        run = run_of(self.config)
        profile = get_profile(self.config.getoption("--polyperf-profile"))
        seed = self.config.getoption("--seed")  # `polyperf run` draws one for every suite (POLYPERF_SEED)
        if seed is None:
            seed = secrets.randbelow(2**32)
            run.update_env(seed=seed)
        plan = NativePlan(
            # 6 repeats: the least n with a 95% interval; 12: a paired sign test can reach p = 0.0005
            repeats=profile.pick(smoke=6, quick=12, full=20),
            seed=seed,
            go_benchtime=profile.pick(smoke="50ms", quick="200ms", full="1s"),
            criterion_args=profile.pick(
                smoke=("--warm-up-time", "0.1", "--measurement-time", "0.3", "--sample-size", "10"),
                quick=("--warm-up-time", "0.3", "--measurement-time", "1", "--sample-size", "20"),
                full=("--warm-up-time", "3", "--measurement-time", "10", "--sample-size", "50"),
            ),
        )
        suite = self.path.name
        run_native_suite(self.path, suite, run.recorder(suite), plan, run.run_dir)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"{native_kind(self.path)} benchmarks of {self.path.name}"
