"""A failed repeat costs a repeat, not the answer: a `polyperf ab` session tries a repeat that failed for a reason of
the moment again, counts it in its output and env.json, and stops only when the same failure comes again and again
(with the pairs so far judged and kept). Stand-in workers; the rule itself is in tests/test_retry.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import polyperf
from polyperf.build import revisions
from polyperf.build.revisions import Revision
from polyperf.cli import main
from polyperf.gate import session as ab_mod
from polyperf.gate.options import ABOptions
from polyperf.gate.session import run_ab
from polyperf.orchestrate.retry import RepeatFailed, RetriesExhausted

INSTALLED = Path(polyperf.__file__).resolve().parents[1]


def _installed(name: str, **_builds) -> Revision:
    return Revision(name, revisions.resolve(name), INSTALLED)


def _worker(factor: float, failing: set[int], where=lambda n: "worker of HEAD"):
    """B `factor` times A; the calls numbered in `failing` (1: the inputs, 2: the untimed one, then two per pair)
    fail as a worker that did not finish would, at `where(call)`."""
    rng = np.random.default_rng(9)
    calls = {"n": 0}

    def worker(rev, spec, env, log):
        calls["n"] += 1
        if calls["n"] in failing:
            raise RepeatFailed("had not finished after 120 s", kind="worker did not finish", where=where(calls["n"]))
        if spec.get("make_inputs"):
            return {}
        value = 1e-3 * (factor if env else 1.0) * float(rng.lognormal(0, 0.01))
        return {"io_buffering": {"parse_buffered": {"cpu_seconds": value, "seconds": value, "calls": 5}}}

    return worker


def _options(tmp_path, **kw) -> ABOptions:
    return ABOptions("HEAD", "HEAD", **(dict(max_pairs=60, budget_s=60, seed=1, env_b={"X": "1"}, out=tmp_path) | kw))


def test_failed_repeats_are_retried_counted_and_the_session_still_decides(tmp_path, monkeypatch):
    monkeypatch.setattr(ab_mod, "prepare", _installed)
    monkeypatch.setattr(ab_mod, "run_worker", _worker(1.2, failing={5, 6, 12}))
    outcome = run_ab(_options(tmp_path))
    assert outcome.verdict == "slower" and outcome.pairs == 10 and outcome.retries == 3
    assert "Retried: 3 failed repeats retried (3 retries;" in outcome.markdown
    rows = polyperf.load_run(outcome.run_dir)
    assert sorted(rows["repeat"].unique()) == list(range(10)) and len(rows) == 10 * 2 * 2  # whole pairs only
    record = polyperf.load_env(outcome.run_dir)["ab"]
    assert record["retries"]["retries"] == 3 and record["retries"]["limit"] == 10
    assert record["retries"]["last"] == ["had not finished after 120 s"] * 3


def test_the_same_failure_again_and_again_stops_with_the_pairs_kept(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(ab_mod, "prepare", _installed)
    monkeypatch.setattr(ab_mod, "run_worker", _worker(1.0, failing=set(range(9, 100))))  # from the fourth pair on
    argv = ["ab", "HEAD", "HEAD", "--out", str(tmp_path), "--seed", "1", "--test-env-b", "X=1", "--budget", "60"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "10 times in a row" in err[0] and "had not finished" in err[0]
    run_dir = (tmp_path / "latest").resolve()
    record = polyperf.load_env(run_dir)["ab"]
    assert record["pairs"] == 3 and record["stopped"].startswith("a failure repeated")
    assert record["retries"]["retries"] == 9 and record["retries"]["failed"] == 10
    assert len(polyperf.load_run(run_dir)) == 3 * 2 * 2 and (run_dir / "ab.md").exists()
    assert not (run_dir / "owner.pid").exists()  # the run was finished


def test_failures_that_differ_do_not_stop_the_session(tmp_path, monkeypatch):
    monkeypatch.setattr(ab_mod, "prepare", _installed)
    where = lambda n: f"worker {n % 2}"  # noqa: E731 - alternating: never the same failure twice in a row
    monkeypatch.setattr(ab_mod, "run_worker", _worker(1.2, failing={5, 6, 7}, where=where))
    outcome = run_ab(_options(tmp_path, retry_limit=2))
    assert outcome.verdict == "slower" and outcome.retries == 3
    with pytest.raises(RetriesExhausted, match="2 times in a row"):  # the same failure twice: the limit of 2
        monkeypatch.setattr(ab_mod, "run_worker", _worker(1.2, failing={5, 6}))
        run_ab(_options(tmp_path / "again", retry_limit=2))
