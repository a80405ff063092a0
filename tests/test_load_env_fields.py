"""Nothing outside `polyperf.orchestrate` changes a LoadEnv's fields: the suites and the other stages go through
its methods (`note_problem`, `add_params`, `measure_also`, `stop_measuring`), which these tests pin down."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from types import SimpleNamespace

from polyperf.orchestrate.load_suite import LoadEnv
from polyperf.record.recorder import Recorder

ROOT = Path(__file__).resolve().parents[1]
# a write to a LoadEnv's state from outside: `env.params[...] =`, `load_env.params.update(`, `env.problems.append(`
_WRITE = re.compile(
    r"\b(?:env|load_env|self\.env)\.(?:params|problems|extra_pids|extra_cpu)"
    r"(?:\[[^\]]*\]\s*=(?!=)|\.(?:update|append|pop|setdefault|clear|extend)\()"
)


def _env() -> LoadEnv:
    fleet = SimpleNamespace(server_cpus=[0], workers=1)
    writer = SimpleNamespace(write=lambda rows: None)
    return LoadEnv(
        fleet, Recorder(writer, "s"), client_cpus=[1], log_dir=Path(tempfile.mkdtemp(prefix="polyperf-fields-")), seed=1
    )


def test_the_methods_change_what_they_say():
    env = _env()
    env.note_problem("a died")
    env.add_params(pool_size=4)
    counter = lambda: 1.0  # noqa: E731
    env.measure_also("db", 42, counter)
    env.measure_also("probe", 43)
    assert env.take_problems() == ["a died"] and env.problems == []
    assert env.params["pool_size"] == 4
    assert env.extra_pids == {"db": 42, "probe": 43} and env.extra_cpu == {"db": counter}
    env.stop_measuring("db")
    env.stop_measuring("never")
    assert env.extra_pids == {"probe": 43} and env.extra_cpu == {}


def test_no_module_outside_orchestrate_writes_a_load_env_field():
    files = [*(ROOT / "suites").glob("*.py"), *(ROOT / "python" / "polyperf").rglob("*.py")]
    outside = [f for f in files if "orchestrate" not in f.parts or f.name in ("db_runs.py", "count_runs.py")]
    found = [
        f"{f.relative_to(ROOT)}:{n}: {line.strip()}"
        for f in outside
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1)
        if _WRITE.search(line)
    ]
    assert found == []
    assert _WRITE.search("    load_env.params.update(database.params)")  # the pattern sees what it looks for
    assert _WRITE.search('env.params["cpu_quota_auto"] = 1') and not _WRITE.search('x = env.params["a"] == 1')
