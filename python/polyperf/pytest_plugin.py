"""pytest glue for the suites: one run directory per session, a `record` fixture for measured facts,
and pytest-benchmark timings folded into the same tidy table when the session ends.

Loaded by `suites/conftest.py`, so plain `pytest suites/...` and `polyperf run` behave the same.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from polyperf.envinfo import write_env
from polyperf.profiles import PROFILES, Profile, get_profile
from polyperf.results import Row, RowWriter, finalize_run, new_run_dir, point_latest

__all__ = ["describe_benchmark", "suite_of"]

_EXTRA_KEY = "polyperf"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("polyperf")
    group.addoption(
        "--polyperf-profile",
        choices=PROFILES,
        default=os.environ.get("POLYPERF_PROFILE", "quick"),
        help="how much work the suites do: smoke (seconds), quick (default, minutes), full",
    )
    group.addoption(
        "--polyperf-out",
        default=os.environ.get("POLYPERF_OUT", "reports"),
        help="output directory; the run lands in OUT/runs/<run-id>/ and OUT/latest points at it",
    )
    group.addoption(
        "--polyperf-run-dir",
        default=None,
        help="write into this existing run directory instead of creating one (used by `polyperf run`)",
    )


def suite_of(nodeid_or_path: str) -> str:
    """`suites/test_io_buffering.py::test_x[a]` -> `io_buffering`."""
    stem = Path(nodeid_or_path.split("::", 1)[0]).stem
    return stem.removeprefix("test_")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if config.option.collectonly or hasattr(config, "workerinput"):
        return
    given = config.getoption("--polyperf-run-dir")
    profile = get_profile(config.getoption("--polyperf-profile"))
    if given:
        run_dir = Path(given)
        (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    else:
        run_dir = new_run_dir(Path(config.rootpath) / config.getoption("--polyperf-out"))
        write_env(run_dir, profile=profile.name)
    config.stash[_RUN_DIR] = run_dir
    config.stash[_WRITER] = RowWriter(run_dir)
    config.stash[_OWNS_RUN] = not given
    # pytest-benchmark writes its raw JSON where the run lives, unless the user chose a file.
    if config.pluginmanager.hasplugin("benchmark") and not config.getoption("benchmark_json", None):
        config.option.benchmark_json = str(run_dir / "benchmark.json")


_RUN_DIR = pytest.StashKey[Path]()
_WRITER = pytest.StashKey[RowWriter]()
_OWNS_RUN = pytest.StashKey[bool]()


def pytest_report_header(config: pytest.Config) -> str | None:
    run_dir = config.stash.get(_RUN_DIR, None)
    if run_dir is None:
        return None
    return f"polyperf: profile={config.getoption('--polyperf-profile')} run_dir={run_dir}"


@pytest.fixture(scope="session")
def profile(pytestconfig: pytest.Config) -> Profile:
    """The run profile (smoke / quick / full); `profile.pick(smoke=..., quick=..., full=...)`."""
    return get_profile(pytestconfig.getoption("--polyperf-profile"))


@pytest.fixture(scope="session")
def run_dir(pytestconfig: pytest.Config) -> Path:
    """This session's run directory (logs go in `run_dir / "logs"`)."""
    return pytestconfig.stash[_RUN_DIR]


Recorder = Callable[..., None]


@pytest.fixture
def record(request: pytest.FixtureRequest, pytestconfig: pytest.Config) -> Recorder:
    """`record(metric, value, unit, case=..., implementation=..., variant=..., params=..., repeat=0)`
    appends one row to the run's table at once (so it survives a later crash)."""
    writer = pytestconfig.stash[_WRITER]
    suite = suite_of(request.node.nodeid)

    def _record(
        metric: str,
        value: float,
        unit: str,
        *,
        case: str,
        implementation: str,
        variant: str,
        params: Mapping[str, Any] | None = None,
        repeat: int = 0,
    ) -> None:
        row = Row(suite, case, implementation, variant, metric, value, unit, repeat, dict(params or {}))
        writer.write([row])

    return _record


def describe_benchmark(
    benchmark: Any,
    *,
    case: str,
    implementation: str,
    variant: str,
    params: Mapping[str, Any] | None = None,
    bytes_per_round: int | None = None,
) -> None:
    """Labels a pytest-benchmark measurement for the tidy table: each round becomes a `seconds` row
    (and an `mb_per_s` row when `bytes_per_round` is given; MB = 10^6 bytes)."""
    benchmark.extra_info[_EXTRA_KEY] = {
        "case": case,
        "implementation": implementation,
        "variant": variant,
        "params": dict(params or {}),
        "bytes_per_round": bytes_per_round,
    }


def _benchmark_rows(bench: Any) -> list[Row]:
    label = bench.extra_info.get(_EXTRA_KEY)
    stats = getattr(bench, "stats", None)
    if not label or stats is None:
        return []
    iterations = max(int(getattr(bench, "iterations", 1) or 1), 1)
    suite = suite_of(bench.fullname)
    rows = []
    nbytes = label.get("bytes_per_round")
    params = {**label["params"], "iterations": iterations}
    for repeat, seconds in enumerate(stats.data):  # already per iteration (pytest-benchmark divides)
        common = (suite, label["case"], label["implementation"], label["variant"])
        rows.append(Row(*common, "seconds", seconds, "s", repeat, params))
        if nbytes and seconds > 0:
            rows.append(Row(*common, "mb_per_s", nbytes / seconds / 1e6, "MB/s", repeat, params))
    return rows


def pytest_unconfigure(config: pytest.Config) -> None:
    run_dir = config.stash.get(_RUN_DIR, None)
    if run_dir is None:
        return
    session = getattr(config, "_benchmarksession", None)
    if session is not None:
        writer = config.stash[_WRITER]
        for bench in session.benchmarks:
            writer.write(_benchmark_rows(bench))
    finalize_run(run_dir)
    if config.stash[_OWNS_RUN]:
        point_latest(run_dir)
        print(f"\npolyperf: results in {run_dir} (render with `polyperf report {run_dir}`)")
