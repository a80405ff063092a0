"""`Run` owns a run folder from start to finish, env.json has one writer while the run is under way, and env.json
of every version loads as the typed, versioned `RunEnv` (golden files in testdata/env/)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import polyperf
from polyperf.record.env import owned_elsewhere, read_env, write_env
from polyperf.record.env_record import ENV_SCHEMA_VERSION, RunEnv
from polyperf.record.run import Run
from polyperf.record.run_dir import ENV, ENV_ADDITIONS, OWNER, merge_env

TESTDATA = Path(__file__).parent / "testdata" / "env"


def _env(run_dir: Path) -> dict:
    return json.loads((run_dir / ENV).read_text())


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_old_env_files_load_upgraded(version):
    raw = json.loads((TESTDATA / f"{version}_env.json").read_text())
    record = RunEnv.from_json(raw)
    assert record.schema_version == ENV_SCHEMA_VERSION
    assert record.as_json() == json.loads((TESTDATA / "upgraded.json").read_text())[version]
    assert RunEnv.from_json(record.as_json()) == record  # the current version reads back unchanged


def test_the_record_is_typed():
    record = RunEnv.from_json({"schema_version": 2, "cpu_count": "4", "suites": "bson", "url": "http://x"})
    assert record.cpu_count == 4 and record.suites == ("bson",) and record.extra == {"url": "http://x"}
    assert record.interrupted is None and record.notes == ()
    with pytest.raises(TypeError, match="whole number"):
        RunEnv.from_json({"seed": [1]})
    with pytest.raises(ValueError, match="newer polyperf"):
        RunEnv.from_json({"schema_version": ENV_SCHEMA_VERSION + 1})


def test_a_run_from_start_to_finish(tmp_path):
    run = Run.create(tmp_path, run_id="r1", latest=True, profile="smoke", suites=["io_buffering"])
    assert run.run_dir == tmp_path / "runs" / "r1" and (run.run_dir / "results.jsonl").exists()
    assert (tmp_path / "latest").resolve() == run.run_dir.resolve()
    assert (run.run_dir / OWNER).read_text().strip() == str(os.getpid())
    env = run.env
    assert env.profile == "smoke" and env.suites == ("io_buffering",) and env.cpu_count
    run.recorder("io_buffering")("seconds", 1.5, "s", case="c", implementation="i")
    run.write_progress({"nodeid": "a", "index": 0, "total": 1, "pending": ["a"]})
    run.write_durations({"a": 1.0})
    run.add_note("no wrk")
    run.add_note("no wrk")
    table = run.finish()
    assert table["value"].tolist() == [1.5] and (run.run_dir / "results.parquet").exists()
    assert not (run.run_dir / OWNER).exists()  # after the finish, no process holds the record
    assert _env(run.run_dir)["notes"] == ["no wrk"]
    assert json.loads((run.run_dir / "durations.json").read_text()) == {"a": 1.0}
    other = Run.create(tmp_path, run_id="r2")
    other.finish(latest=True)
    assert (tmp_path / "latest").resolve() == other.run_dir.resolve()


def _child(run_dir: Path, code: str) -> None:
    """Runs `code` in another process, attached to `run_dir` as `run` (as the runner's pytest child is)."""
    prelude = f"from polyperf.record.run import Run\nrun = Run.attach({str(run_dir)!r})\n"
    subprocess.run([sys.executable, "-c", prelude + code], check=True, timeout=60)


def test_only_the_owner_writes_env_json_and_merges_the_rest_at_the_finish(tmp_path):
    run = Run.create(tmp_path, run_id="r", profile="quick")
    before = (run.run_dir / ENV).read_text()
    _child(run.run_dir, "run.update_env(seed=7, suite_seconds={'a': 1.0}); run.add_note('no perf')")
    assert (run.run_dir / ENV).read_text() == before  # the child wrote only its additions
    additions = json.loads((run.run_dir / ENV_ADDITIONS).read_text())
    assert additions == {"seed": 7, "suite_seconds": {"a": 1.0}, "notes": ["no perf"]}
    assert polyperf.load_env(run.run_dir)["seed"] == 7  # readers see them before the merge
    run.add_note("owner's note")
    run.finish()
    env = _env(run.run_dir)
    assert env["seed"] == 7 and env["suite_seconds"] == {"a": 1.0} and env["profile"] == "quick"
    assert env["notes"] == ["owner's note", "no perf"]
    assert not (run.run_dir / ENV_ADDITIONS).exists()


def test_an_owner_that_died_hands_the_record_over(tmp_path):
    run = Run.create(tmp_path, run_id="r", profile="quick")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (run.run_dir / OWNER).write_text(f"{dead.pid}\n")
    (run.run_dir / ENV_ADDITIONS).write_text(json.dumps({"seed": 3}))
    assert not owned_elsewhere(run.run_dir)
    _child(run.run_dir, "run.mark_interrupted('SIGTERM'); run.finish()")
    env = _env(run.run_dir)
    assert env["interrupted"] == "SIGTERM" and env["seed"] == 3 and not (run.run_dir / ENV_ADDITIONS).exists()


def test_a_zombie_owner_counts_as_dead(tmp_path):
    run_dir = Run.create(tmp_path, run_id="r").run_dir
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        (run_dir / OWNER).write_text(f"{proc.pid}\n")
        deadline = time.monotonic() + 10
        while owned_elsewhere(run_dir) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not owned_elsewhere(run_dir)  # exited, not yet reaped: it can write nothing more
    finally:
        proc.wait()
    (run_dir / OWNER).write_text(f"{os.getppid()}\n")  # a live process that is not this one
    assert owned_elsewhere(run_dir)
    write_env(run_dir, seed=1)
    assert json.loads((run_dir / ENV_ADDITIONS).read_text()) == {"seed": 1}


def test_the_first_signal_is_recorded_then_handed_on(tmp_path):
    run = Run.create(tmp_path, run_id="r")
    seen = []
    with run.signals_handled(seen.append, (signal.SIGUSR1, signal.SIGUSR2)):
        os.kill(os.getpid(), signal.SIGUSR1)
        os.kill(os.getpid(), signal.SIGUSR2)
    assert seen == [signal.SIGUSR1, signal.SIGUSR2] and run.interrupted == "SIGUSR1"
    assert _env(run.run_dir)["interrupted"] == "SIGUSR1"
    assert signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL  # handlers restored


def test_merge_keeps_the_first_signal_and_every_note_once():
    env = {"interrupted": "SIGHUP", "notes": ["a"], "suite_seconds": {"x": 1.0}, "seed": 1}
    got = merge_env(env, {"interrupted": "SIGTERM", "notes": ["a", "b"], "suite_seconds": {"y": 2.0}, "seed": 2})
    assert got == {"interrupted": "SIGHUP", "notes": ["a", "b"], "suite_seconds": {"x": 1.0, "y": 2.0}, "seed": 2}
    assert merge_env({"interrupted": None}, {"interrupted": "SIGINT"})["interrupted"] == "SIGINT"


def test_read_env_of_a_run_without_a_record(tmp_path):
    run = Run.attach(tmp_path / "given")
    assert read_env(run.run_dir) == RunEnv()


def test_a_command_run_is_finished_and_marked_on_the_way_out(tmp_path):
    before = signal.getsignal(signal.SIGTERM)
    with Run.create(tmp_path, run_id="ok") as run:
        run.recorder("build")("build_seconds", 1.0, "s", case="build", implementation="a")
        run.finish(latest=True)
    assert (tmp_path / "latest").resolve() == run.run_dir.resolve() and run.interrupted is None
    with pytest.raises(KeyboardInterrupt), Run.create(tmp_path, run_id="stopped") as stopped:
        stopped.recorder("build")("build_seconds", 2.0, "s", case="build", implementation="a")
        os.kill(os.getpid(), signal.SIGTERM)  # stops the command the way Ctrl-C does
    assert _env(stopped.run_dir)["interrupted"] == "SIGTERM" and stopped.finished
    assert (stopped.run_dir / "results.parquet").exists()  # the rows measured are kept
    assert (tmp_path / "latest").resolve() == run.run_dir.resolve()  # an unfinished command moves no link
    with pytest.raises(KeyboardInterrupt), Run.create(tmp_path, run_id="ctrl-c") as ctrl_c:
        raise KeyboardInterrupt
    assert _env(ctrl_c.run_dir)["interrupted"] == "SIGINT"
    assert signal.getsignal(signal.SIGTERM) is before  # the command's handlers are put back
