"""pytest glue for the suites, and the only place that reads pytest options and POLYPERF_* variables: one
run directory per session, the `record` fixture, the load suites' CPU split, and pytest-benchmark timings
folded into the same tidy table through its public `pytest_benchmark_update_json` hook.

Registered wherever polyperf is installed (the `pytest11` entry point, under this module's own name, so that
`suites/conftest.py` listing it too registers it once), and inert until a session asks for it: a `--polyperf-*`
option, `-p polyperf.record.pytest_plugin`, or a conftest listing it in `pytest_plugins`. So `pytest my_suites/
--polyperf-profile=quick` records a run in any repository, and a project's own tests make no run directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from polyperf.common import steps
from polyperf.common.cpus import split_cpus
from polyperf.common.paths import suite_of
from polyperf.common.profiles import PROFILES, Profile, get_profile
from polyperf.common.repeats import top_up
from polyperf.record.benchmark_rows import benchmark_from_workers, benchmark_rows, describe_benchmark
from polyperf.record.env import owned_elsewhere, suite_seconds
from polyperf.record.load_options import LoadOptions, parse_quota
from polyperf.record.recorder import Recorder
from polyperf.record.run import Run
from polyperf.record.run_dir import ENV, RowWriter
from polyperf.record.suite_files import claims_files_beside, keep_claims, keep_metrics

__all__ = ["PLUGIN", "LoadOptions", "benchmark_from_workers", "describe_benchmark", "run_of", "suite_of", "wanted"]

PLUGIN = __name__  # the entry point's name too: pytest registers a plugin once per name
# the experiments' fixtures and collectors (`load_env`, `env`, Go and Cargo benchmark folders), a later stage's
# plugin: registered by name when a session is wanted, so that no other pytest session gets a fixture named `env`
SUITES_PLUGIN = "polyperf.orchestrate.pytest_suites"


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
    group.addoption(
        "--server-cpus",
        default=os.environ.get("POLYPERF_SERVER_CPUS"),
        help="CPUs the servers are pinned to, e.g. 0 or 0-1 (default: the first half)",
    )
    group.addoption(
        "--client-cpus",
        default=os.environ.get("POLYPERF_CLIENT_CPUS"),
        help="CPUs the load generators are pinned to (default: the CPUs the servers do not get)",
    )
    group.addoption(
        "--server-cpu-quota",
        default=os.environ.get("POLYPERF_SERVER_CPU_QUOTA"),
        metavar="FRACTION|auto|none",
        help="run each server inside a CPU cgroup with this many CPUs of quota (e.g. 0.5), so that one client "
        "core can saturate it; `auto`: the largest budget at which the client is no longer the limit; `none`: "
        "never (http_frameworks otherwise budgets by itself where the client has no more cores than the server)",
    )
    group.addoption(
        "--cpu-quota-period-ms",
        type=float,
        default=float(os.environ.get("POLYPERF_CPU_QUOTA_PERIOD_MS", "10")),
        help="the CFS period of the CPU budget in ms (default 10: the quota is used fully and capacity scales "
        "with it; 100 behaves like a container runtime's default and stalls requests for up to 75 ms)",
    )
    group.addoption(
        "--database-url",
        default=os.environ.get("POLYPERF_DATABASE_URL"),
        metavar="URL",
        help="a PostgreSQL server of yours for the database suites (tables named per run, never dropped); "
        "default: a throwaway cluster per run",
    )
    group.addoption(
        "--flamegraph",
        action="store_true",
        default=os.environ.get("POLYPERF_FLAMEGRAPH") == "1",
        help="also record a perf flamegraph (SVG) of each server during an extra ceiling run",
    )
    group.addoption(
        "--seed",
        type=int,
        default=int(os.environ["POLYPERF_SEED"]) if os.environ.get("POLYPERF_SEED") else None,
        help="seed of the random order of servers and generators in each repeat (default: drawn; env.json has it)",
    )


_RUN = pytest.StashKey[Run]()
_RUN_DIR = pytest.StashKey[Path]()
_WRITER = pytest.StashKey[RowWriter]()
_OWNS_RUN = pytest.StashKey[bool]()
_SIGNAL = pytest.StashKey[str]()
_ORDER = pytest.StashKey[list[str]]()
_DURATIONS = pytest.StashKey[dict[str, float]]()
_WRITTEN = pytest.StashKey[set[int]]()  # pytest-benchmark results whose rows are already in the table
_CONFIG: dict[str, pytest.Config] = {}  # hooks without a config argument find it here


def wanted(config: pytest.Config) -> bool:
    """Whether this session records a run: a `--polyperf-*` option on the command line (or in `addopts`),
    `-p polyperf.record.pytest_plugin`, or a conftest that lists the plugin in `pytest_plugins`. Installed, the
    plugin is loaded into every pytest session of the environment, and most of those are not benchmarks."""
    args = [*config.invocation_params.args, *config.getini("addopts")]
    if any(str(a).startswith("--polyperf-") for a in args):
        return True
    if PLUGIN in (getattr(config.option, "plugins", None) or []):
        return True
    for plugin in config.pluginmanager.get_plugins():
        listed = getattr(plugin, "pytest_plugins", ())
        if PLUGIN in ([listed] if isinstance(listed, str) else listed):
            return True
    return False


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if config.option.collectonly or hasattr(config, "workerinput") or not wanted(config):
        return
    config.pluginmanager.import_plugin(SUITES_PLUGIN)
    try:  # overlapping CPU sets are refused before anything starts
        split_cpus(config.getoption("--server-cpus"), config.getoption("--client-cpus"))
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    given = config.getoption("--polyperf-run-dir")
    profile = get_profile(config.getoption("--polyperf-profile"))
    # a given directory (`polyperf run` made it) is a run from now on, even if nothing is recorded
    run = (
        Run.attach(given)
        if given
        else Run.create(Path(config.rootpath) / config.getoption("--polyperf-out"), profile=profile.name)
    )
    run_dir = run.run_dir
    config.stash[_RUN] = run
    config.stash[_RUN_DIR] = run_dir
    config.stash[_WRITER] = run.writer
    config.stash[_OWNS_RUN] = not given
    _CONFIG["config"] = config
    _stop_on_signals(config)
    steps.set_sink(live_line_sink(config))
    # pytest-benchmark writes its raw JSON where the run lives, unless the user chose a file.
    if config.pluginmanager.hasplugin("benchmark") and not config.getoption("benchmark_json", None):
        config.option.benchmark_json = str(run_dir / "benchmark.json")


def _run(config: pytest.Config) -> Run:
    """The session's `Run` (made by `pytest_configure`; a stand-in config names only the directory)."""
    run = config.stash.get(_RUN, None)
    return run if run is not None else Run(config.stash[_RUN_DIR])


_OFF = (
    "polyperf records nothing in this session: pass --polyperf-profile=smoke|quick|full (or -p {plugin}, or list "
    "it in a conftest's pytest_plugins)"
)


def run_of(config: pytest.Config) -> Run:
    """The session's run, for fixtures and collectors of later stages; a clear usage error where the plugin is off."""
    if _RUN_DIR not in config.stash:
        raise pytest.UsageError(_OFF.format(plugin=PLUGIN))
    return _run(config)


def _mark_interrupted(run_dir: Path, name: str) -> None:
    """`interrupted` in the run's record; a failure goes to the run's log, never in the way of the orderly stop
    (the runner SIGKILLs a pytest that has not stopped in time: no teardown then)."""
    Run(run_dir).mark_interrupted(name)


def _stop_on_signals(config: pytest.Config) -> None:
    """SIGTERM and SIGHUP (a CI time-out, a closed terminal, `polyperf run` passing them on or dying) stop
    the session the way Ctrl-C does: fixtures tear their servers down and the rows are finalized. The run
    records the first signal at once: the teardown that follows may itself be cut short."""

    def interrupt(signum: int) -> None:
        config.stash.setdefault(_SIGNAL, signal.Signals(signum).name)
        raise KeyboardInterrupt

    _run(config).install_signal_handlers(interrupt, (signal.SIGTERM, signal.SIGHUP))


def live_line_sink(config: pytest.Config) -> Callable[[str], None]:
    """Where long steps (builds, tool installs) announce themselves during a session: past pytest's capture, as
    its live logging does, so the line shows while the step runs."""

    def write(line: str) -> None:
        capman = config.pluginmanager.getplugin("capturemanager")
        reporter = config.pluginmanager.getplugin("terminalreporter")
        with capman.global_and_fixture_disabled() if capman else contextlib.nullcontext():
            if reporter is None:
                print(line, file=sys.stderr, flush=True)
            else:
                reporter.write_line(line)
                reporter.flush()

    return write


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    config.stash[_ORDER] = [item.nodeid for item in items]
    run_dir = config.stash.get(_RUN_DIR, None)
    if run_dir is None:
        return
    # the claims beside the suites, judged with the run wherever it is reported; the metrics the suites declare
    keep_claims(run_dir, claims_files_beside({Path(item.path) for item in items}))
    modules = {id(m): m for item in items if (m := getattr(item, "module", None)) is not None}
    for module in modules.values():
        declared = getattr(module, "POLYPERF_METRICS", ())
        try:
            keep_metrics(run_dir, declared, f"{module.__file__}: POLYPERF_METRICS")
        except (ValueError, TypeError) as exc:  # one line, before any measurement
            pytest.exit(f"polyperf: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)


def pytest_runtest_logstart(nodeid: str, location: tuple) -> None:
    """`progress.json`: the test under way and those still to come, for `polyperf run`'s status line."""
    config = _CONFIG.get("config")
    if config is None or _RUN_DIR not in config.stash:
        return
    order = config.stash.get(_ORDER, [nodeid])
    writer = config.stash.get(_WRITER, None)
    if writer is not None:
        writer.producer = nodeid  # rows written from now on belong to this test (`producers.json`)
    index = order.index(nodeid) if nodeid in order else 0
    _run(config).write_progress({"nodeid": nodeid, "index": index, "total": len(order), "pending": order[index:]})


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    config = _CONFIG.get("config")
    if config is not None:
        durations = config.stash.setdefault(_DURATIONS, {})
        durations[report.nodeid] = durations.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    run_dir = config.stash.get(_RUN_DIR, None)
    if run_dir is None:
        return
    run = _run(config)
    if exitstatus != pytest.ExitCode.INTERRUPTED and _SIGNAL not in config.stash:
        # the next run's estimate of what remains (setup + call + teardown of each test)
        durations = config.stash.get(_DURATIONS, {})
        writer = config.stash.get(_WRITER, None)
        if writer is not None and writer.produced:
            added = durations if top_up() is not None else None
            run.write_producers(writer.produced, narrowing=writer.narrowing, top_up_s=added)
        if top_up() is not None:  # a top-up's time is the runner's to record, beside the suites' first batches
            return
        run.write_durations(durations)
        # a directory someone gave without a run record (neither made by a `Run` nor holding env.json) gets none
        if config.stash.get(_OWNS_RUN, False) or owned_elsewhere(run_dir) or (run_dir / ENV).exists():
            run.update_env(suite_seconds=suite_seconds(durations))
    else:
        run.mark_interrupted(config.stash.get(_SIGNAL, "SIGINT"))


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
    return run_of(pytestconfig).run_dir


@pytest.fixture(scope="module")
def record(request: pytest.FixtureRequest, pytestconfig: pytest.Config) -> Recorder:
    """`record(metric, value, unit, case=..., implementation=..., variant=..., params=..., repeat=0)`
    appends one row (base units only) to the run's table at once, so it survives a later crash."""
    run_of(pytestconfig)  # the plugin is on
    return Recorder(pytestconfig.stash[_WRITER], suite_of(request.node.nodeid))


@pytest.fixture(scope="session")
def database_url(pytestconfig: pytest.Config) -> str | None:
    """--database-url / POLYPERF_DATABASE_URL: the user's PostgreSQL, or None for a throwaway cluster."""
    return pytestconfig.getoption("--database-url") or None


@pytest.fixture(scope="session")
def load_options(pytestconfig: pytest.Config) -> LoadOptions:
    """The CPU split, CPU budget and extras of the load suites (--server-cpus, --client-cpus,
    --server-cpu-quota, --cpu-quota-period-ms, --flamegraph)."""
    server_cpus, client_cpus = split_cpus(
        pytestconfig.getoption("--server-cpus"), pytestconfig.getoption("--client-cpus")
    )
    try:
        quota, auto = parse_quota(pytestconfig.getoption("--server-cpu-quota"))
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    if quota is not None:
        from polyperf.serve.cpu_budget import cpu_budget_support

        why = cpu_budget_support()
        if why is not None:
            raise pytest.UsageError(f"--server-cpu-quota: CPU budgets are not available here: {why}")
    period = pytestconfig.getoption("--cpu-quota-period-ms") / 1e3
    refused = pytestconfig.getoption("--server-cpu-quota") == "none"
    flamegraph = bool(pytestconfig.getoption("--flamegraph"))
    given = pytestconfig.getoption("--seed")
    seed = secrets.randbelow(2**32) if given is None else given
    run_of(pytestconfig).update_env(seed=seed)
    return LoadOptions(server_cpus, client_cpus, flamegraph, quota, auto, period, refused, seed)


def _write_benchmark(config: pytest.Config, bench: Any) -> None:
    """Appends the rows of one pytest-benchmark result, once."""
    writer, written = config.stash.get(_WRITER, None), config.stash.setdefault(_WRITTEN, set())
    if writer is None or bench is None or id(bench) in written:
        return
    written.add(id(bench))  # results live until the session ends (pytest-benchmark keeps them): ids stay unique
    writer.write(benchmark_rows(bench))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """A benchmark's rounds go into the table as soon as its test has run, so a killed run keeps them."""
    try:
        return (yield)
    finally:
        fixture = (getattr(item, "funcargs", None) or {}).get("benchmark")
        _write_benchmark(item.config, getattr(fixture, "stats", None))


def pytest_benchmark_update_json(config: pytest.Config, benchmarks: list[Any], output_json: dict) -> None:
    for bench in benchmarks:  # any result not yet written after its test (none, normally)
        _write_benchmark(config, bench)
    _keep_earlier_benchmarks(config, output_json)


def _keep_earlier_benchmarks(config: pytest.Config, output_json: dict) -> None:
    """`polyperf run` runs one pytest session per suite into one run: each session's benchmark.json holds the
    benchmarks of the sessions before it too (a benchmark of this session replaces its namesake)."""
    run_dir = config.stash.get(_RUN_DIR, None)
    if run_dir is None or config.option.benchmark_json != str(run_dir / "benchmark.json"):
        return
    try:
        earlier = json.loads((run_dir / "benchmark.json").read_text(encoding="utf-8")).get("benchmarks", [])
    except (OSError, ValueError, AttributeError):
        return
    mine = {b.get("fullname") for b in output_json.get("benchmarks", [])}
    kept = [b for b in earlier if isinstance(b, dict) and b.get("fullname") not in mine]
    output_json["benchmarks"] = [*kept, *output_json.get("benchmarks", [])]


def pytest_unconfigure(config: pytest.Config) -> None:
    run_dir = config.stash.get(_RUN_DIR, None)
    if run_dir is None:
        return
    steps.set_sink(None)
    _run(config).finish(latest=config.stash[_OWNS_RUN])
    if config.stash[_OWNS_RUN]:
        print(f"\npolyperf: results in {run_dir} (render with `polyperf report {run_dir}`)")
