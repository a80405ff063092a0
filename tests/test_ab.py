"""`polyperf ab`: pairs joined by repeat, the family's level, the verdicts and the Markdown (pure); the revisions'
worktree keys; and one real session with the installed extension on both sides and a slowdown injected into B."""

from __future__ import annotations

import math
import os
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import polyperf
from polyperf.analyse.ab import evaluate_pairs, overall, to_markdown
from polyperf.build import revisions
from polyperf.build.revisions import Revision, RevisionError
from polyperf.cli import main
from polyperf.gate import session as ab_mod
from polyperf.gate.options import DEFAULT_BUDGET_S, ABOptions
from polyperf.gate.session import run_ab

INSTALLED = Path(polyperf.__file__).resolve().parents[1]  # python/, holding polyperf/_native<suffix>
NATIVE = "polyperf._native"  # the microbenchmarks' rows name the extension as their implementation


def _rows(ratios: dict[str, list[float]], drop: tuple[str, int] | None = None) -> pd.DataFrame:
    rows = []
    for case, values in ratios.items():
        for repeat, r in enumerate(values):
            for side, value in (("A", 1e-3), ("B", 1e-3 * r)):
                if drop != (side, repeat):
                    rows.append(dict(suite="s", case=case, metric="cpu_seconds", unit="s", variant=side,
                                     implementation=NATIVE, repeat=repeat, value=value))  # fmt: skip
                rows.append(dict(suite="s", case=case, metric="seconds", unit="s", variant=side,
                                 implementation=NATIVE, repeat=repeat, value=value * 50))  # fmt: skip
    return pd.DataFrame(rows)


def test_a_clear_slowdown_is_decided_and_the_family_shares_alpha():
    rng = np.random.default_rng(3)
    table = evaluate_pairs(
        _rows({"slow": list(1.2 * np.exp(rng.normal(0, 0.01, 30))), "same": list(np.exp(rng.normal(0, 0.002, 30)))}),
        alpha=0.05,
        threshold=0.03,
    )
    verdicts = dict(zip(table["case"], table["verdict"], strict=True))
    assert verdicts == {"slow": "slower", "same": "no change"}
    assert table.attrs["level_each"] == pytest.approx(0.025)  # two gated series; wall time is not gated
    assert overall(table) == "slower"
    row = table.set_index("case").loc["slow"]
    assert row.low <= row.ratio <= row.high and row.low > 1.03


def test_a_repeat_missing_one_side_drops_its_partner():
    table = evaluate_pairs(_rows({"x": [1.0] * 12}, drop=("B", 4)), alpha=0.05, threshold=0.03)
    assert table["pairs"].tolist() == [11]


def test_too_few_pairs_is_undecided_never_a_guess():
    table = evaluate_pairs(_rows({"x": [2.0] * 5}), alpha=0.05, threshold=0.03)
    assert table["verdict"].tolist() == ["undecided"] and math.isnan(table["low"].item())
    assert overall(table) == "undecided"


def test_the_markdown_names_the_method_the_family_and_the_stop():
    table = evaluate_pairs(_rows({"x": [1.5] * 20}), alpha=0.05, threshold=0.03)
    header = dict(base="`main` abc", head="`HEAD` def", seed=7, pairs=20, elapsed_s=12.0, stopped="budget",
                  summary="regression")  # fmt: skip
    text = to_markdown(table, header)
    assert "| s / x | 1 ms | 1.5 ms | +50.0% |" in text and "**slower**" in text
    assert "Howard et al. 2021" in text and "Bonferroni" in text and "seed 7" in text and "±3.0%" in text


def test_a_revision_that_does_not_exist_is_one_line(tmp_path):
    with pytest.raises(RevisionError, match="unknown revision"):
        revisions.resolve("no-such-branch-xyz")
    with pytest.raises(RevisionError, match="not a revision"):
        revisions.resolve("--output=x")


def test_commits_with_the_same_extension_sources_share_a_build():
    head = revisions.resolve("HEAD")
    assert revisions._source_key(head, revisions.REPO_ROOT) == revisions._source_key("HEAD", revisions.REPO_ROOT)
    assert len(revisions._source_key(head, revisions.REPO_ROOT)) == 16


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--alpha", "0"], "--alpha must lie in (0, 1)"),
        (["--alpha", "1.5"], "--alpha must lie in (0, 1)"),
        (["--threshold", "nan"], "--threshold must be finite"),
        (["--threshold", "-5"], "--threshold must be finite"),
        (["scheduler"], "ab measures the suites"),
    ],
)
def test_settings_that_would_switch_the_gate_off_are_refused(argv, message, capsys):
    assert main(["ab", "HEAD", "HEAD", *argv]) == 2
    assert message in capsys.readouterr().err


def _installed(name: str, **_builds) -> Revision:
    return Revision(name, revisions.resolve(name), INSTALLED)


@pytest.mark.slow
def test_a_session_catches_a_slowdown_injected_into_b_only(tmp_path, monkeypatch):
    """Both sides run the installed extension; B's processes get the test knob: parse_json_file twice as slow."""
    monkeypatch.setattr(ab_mod, "prepare", _installed)
    options = ABOptions(
        "HEAD",
        "HEAD",
        threshold=0.03,
        max_pairs=40,
        budget_s=120,
        seed=5,
        target_s=0.01,
        env_b={"POLYPERF_TEST_SLOWDOWN_PCT": "100"},
        out=tmp_path,
    )
    outcome = run_ab(options)
    verdicts = dict(zip(outcome.table["case"], outcome.table["verdict"], strict=True))
    slower = {case for case, verdict in verdicts.items() if verdict == "slower"}
    assert outcome.verdict == "slower"  # the session stops at the first series decided slower
    assert slower and slower <= {"parse_buffered", "parse_read_all", "parse_unbuffered"}  # the knob is in the parser
    rows = polyperf.load_run(outcome.run_dir)
    assert set(rows["variant"]) == {"A", "B"} and rows["repeat"].nunique() == outcome.pairs
    slots = rows.groupby("repeat")["params"].apply(lambda p: sorted({x["slot"] for x in p}))
    assert all(s == [0, 1] for s in slots)
    assert (outcome.run_dir / "ab.md").read_text(encoding="utf-8") == outcome.markdown


def _fake_worker(factor: float, interrupt_after: int | None = None):
    """A stand-in for the worker processes: one case, B `factor` times A, a little seeded noise."""
    rng = np.random.default_rng(9)
    calls = {"n": 0}

    def worker(rev, spec, env, log):
        calls["n"] += 1
        if interrupt_after is not None and calls["n"] > interrupt_after:
            raise KeyboardInterrupt
        if spec.get("make_inputs"):
            return {}
        scale = factor if env else 1.0  # B's processes are the ones given an environment here
        value = 1e-3 * scale * float(rng.lognormal(0, 0.01))
        return {"io_buffering": {"parse_buffered": {"cpu_seconds": value, "seconds": value, "calls": 5}}}

    return worker


def _options(tmp_path, **kw) -> ABOptions:
    settings = dict(max_pairs=60, budget_s=60, seed=1, env_b={"X": "1"}, out=tmp_path) | kw
    return ABOptions("HEAD", "HEAD", **settings)


def test_the_session_stops_as_soon_as_a_regression_is_decided(tmp_path, monkeypatch):
    monkeypatch.setattr(ab_mod, "prepare", _installed)
    monkeypatch.setattr(ab_mod, "run_worker", _fake_worker(1.2))
    outcome = run_ab(_options(tmp_path))
    assert outcome.verdict == "slower" and not outcome.interrupted
    assert outcome.pairs == 10  # one series at 5%: the first n at which the sequence has an interval
    assert "stopped: regression decided" in outcome.markdown


def test_an_interrupted_session_keeps_and_judges_its_whole_pairs(tmp_path, monkeypatch):
    monkeypatch.setattr(ab_mod, "prepare", _installed)
    monkeypatch.setattr(ab_mod, "run_worker", _fake_worker(1.0, interrupt_after=2 + 2 * 5 + 1))
    outcome = run_ab(_options(tmp_path))
    assert outcome.interrupted and outcome.pairs == 5 and outcome.verdict == "undecided"
    rows = polyperf.load_run(outcome.run_dir)
    assert len(rows) == 5 * 2 * 2  # five whole pairs, two metrics a side; the half pair is not kept


def test_a_revision_whose_worker_fails_stops_the_session_in_one_line(tmp_path, monkeypatch, capsys):
    """A revision that cannot be measured (here: no extension where one should be) is bad input, never a pass."""
    monkeypatch.setattr(ab_mod, "prepare", lambda name, **_builds: Revision(name, "0" * 40, tmp_path / "none"))
    assert main(["ab", "HEAD", "HEAD", "--out", str(tmp_path / "out"), "--budget", "5"]) == 2
    err = capsys.readouterr().err
    assert "the worker of HEAD (000000000000) failed" in err and "no built extension" in err
    assert len(err.strip().splitlines()) == 1


def test_server_suites_name_the_apps_whose_binaries_each_revision_needs():
    from polyperf.gate.servers import apps_of

    assert apps_of(["io_buffering", "http_frameworks"]) == ["gnet_devices", "axum_devices", "nethttp_devices",
                                                            "hyper_hello"]  # fmt: skip
    assert apps_of(["bson"]) == []
    assert ABOptions("a", "b", suites=("http_frameworks",)).budget == DEFAULT_BUDGET_S["servers"]
    assert ABOptions("a", "b", suites=("bson",), budget_s=30).budget == 30


@pytest.mark.slow
def test_a_revision_is_built_in_a_worktree_that_does_not_outlive_the_build(tmp_path):
    rev = revisions.prepare("HEAD", extension=False, apps=["nethttp_devices"], cache=tmp_path)
    binary = rev.binaries["nethttp_devices"]
    assert binary.is_file() and os.access(binary, os.X_OK) and rev.extension is None
    assert not list((tmp_path / "worktrees").iterdir())  # the checkout is gone, the build is kept
    worktrees = subprocess.run(["git", "-C", str(revisions.REPO_ROOT), "worktree", "list"], capture_output=True,
                               text=True, check=True).stdout  # fmt: skip
    assert str(tmp_path) not in worktrees
    stamp = binary.stat().st_mtime_ns
    assert revisions.prepare("HEAD", extension=False, apps=["nethttp_devices"], cache=tmp_path).binaries == rev.binaries
    assert binary.stat().st_mtime_ns == stamp  # same sources, same build: not rebuilt


@pytest.mark.slow
def test_a_server_session_catches_a_slowdown_injected_into_b_only(tmp_path, monkeypatch):
    """Both sides start the registry's release builds of net/http and hyper; B's servers get the test knob (twice
    the CPU per request in net/http's handler). Real servers, oha, pinning and cgroups."""
    from polyperf.build import build
    from polyperf.gate import servers as ab_servers
    from polyperf.serve.suite_targets import HTTP_FRAMEWORKS

    chosen = tuple(t for t in HTTP_FRAMEWORKS if t.name == "nethttp_devices" or t.variant == "multi")
    binaries = {t.name: build(t.app).binary for t in chosen}
    monkeypatch.setitem(ab_servers.SERVER_SUITES, "http_frameworks", chosen)
    monkeypatch.setattr(ab_mod, "prepare", lambda name, **_b: Revision(name, revisions.resolve(name), None, binaries))
    options = ABOptions("HEAD", "HEAD", suites=("http_frameworks",), max_pairs=30, budget_s=150, seed=3,
                        env_b={"POLYPERF_TEST_SLOWDOWN_PCT": "100"}, out=tmp_path)  # fmt: skip
    outcome = run_ab(options)
    verdicts = dict(zip(outcome.table["implementation"], outcome.table["verdict"], strict=True))
    assert outcome.verdict == "slower" and verdicts["nethttp_devices"] == "slower", outcome.markdown
    assert verdicts["hyper_hello/multi"] != "slower"  # the knob is in net/http alone
    rows = polyperf.load_run(outcome.run_dir)
    gated = rows[rows["metric"] == "cpu_s_per_request"]
    assert set(gated["variant"]) == {"A", "B"} and gated["repeat"].nunique() == outcome.pairs
    assert len(gated) == 2 * 2 * outcome.pairs  # two servers a side, every pair whole
    assert all(sorted({p["slot"] for p in g}) == [0, 1] for _r, g in gated.groupby("repeat")["params"])
    assert "Servers: the server's CPU per request" in outcome.markdown and "a duet" in outcome.markdown


def _drifting_worker():
    """Two cases. parse_buffered: B as fast as A for 15 pairs (decided "no change"), then 30% slower: its pairs
    share no median. other: B noisy (sd 5%), undecided for long, so that the session goes on."""
    rng = np.random.default_rng(4)
    calls = {"n": 0}

    def worker(rev, spec, env, log):
        calls["n"] += 1
        if spec.get("make_inputs"):
            return {}
        step = 1.3 if env and calls["n"] > 2 + 2 * 15 else 1.0
        value = 1e-3 * step * float(rng.lognormal(0, 0.002))
        other = 1e-3 * float(rng.lognormal(0, 0.05 if env else 0.002))
        cases = {"parse_buffered": value, "other": other}
        return {"io_buffering": {c: {"cpu_seconds": v, "seconds": v, "calls": 5} for c, v in cases.items()}}

    return worker


def test_pairs_that_share_no_median_are_inconsistent_never_a_verdict():
    drift = list(np.linspace(1.0, 1.3, 60) * np.exp(np.random.default_rng(2).normal(0, 0.002, 60)))
    table = evaluate_pairs(_rows({"drift": drift, "same": [1.0] * 60}), alpha=0.05, threshold=0.03)
    verdicts = dict(zip(table["case"], table["verdict"], strict=True))
    assert verdicts["drift"] == "inconsistent" and overall(table) == "inconsistent"
    assert math.isnan(table.set_index("case").loc["drift", "low"])  # no interval is printed for it
    slow = evaluate_pairs(_rows({"drift": drift, "slow": [1.5] * 60}), alpha=0.05, threshold=0.03)
    assert overall(slow) == "slower"  # a decided regression outranks it
    text = to_markdown(table, dict(base="a", head="b", seed=1, pairs=60, elapsed_s=1.0, stopped="x", summary="s"))
    assert "| s / drift | 1 ms | 1.15 ms |  |  | 60 | **inconsistent** |" in text  # no one change, no interval


def _pinned(monkeypatch) -> None:
    """Both revisions and the harness held at one commit, whatever is committed while the test runs."""
    head, experiment = revisions.resolve("HEAD"), ab_mod._experiment
    monkeypatch.setattr(ab_mod, "prepare", lambda name, **_builds: Revision(name, head, INSTALLED))
    monkeypatch.setattr(ab_mod, "_experiment", lambda *args: {**experiment(*args), "harness": head})


def test_a_rerun_continues_the_stored_sequence(tmp_path, monkeypatch):
    """Six pairs cannot decide (the sequence needs ten); the rerun of the same revisions on the same machine adds
    its pairs to those six and decides at ten in all, after four of its own. Another alpha is another experiment."""
    _pinned(monkeypatch)
    monkeypatch.setattr(ab_mod, "run_worker", _fake_worker(1.2))
    first = run_ab(_options(tmp_path, max_pairs=6))
    assert first.verdict == "undecided" and first.pairs == 6 and first.earlier_pairs == 0
    monkeypatch.setattr(ab_mod, "run_worker", _fake_worker(1.2))
    rerun = run_ab(_options(tmp_path))
    assert rerun.earlier_pairs == 6 and rerun.pairs == 4 and rerun.verdict == "slower"
    assert rerun.table["pairs"].tolist() == [10]
    assert "6 pairs from earlier sessions and 4 from this one" in rerun.markdown
    stored = pd.read_csv(next((tmp_path / "ab-sequences").glob("*.csv")))
    assert sorted(stored["repeat"].unique()) == list(range(10)) and set(stored["metric"]) == {"cpu_seconds"}
    assert len(polyperf.load_run(rerun.run_dir)) == 4 * 2 * 2  # the run folder holds this session's own pairs
    other = run_ab(_options(tmp_path, alpha=0.1))
    assert other.earlier_pairs == 0


def test_an_inconsistent_stored_sequence_is_set_aside(tmp_path, monkeypatch):
    _pinned(monkeypatch)
    monkeypatch.setattr(ab_mod, "run_worker", _drifting_worker())
    first = run_ab(_options(tmp_path, max_pairs=80))
    assert first.verdict == "inconsistent" and "stopped: a series inconsistent" in first.markdown, first.markdown
    row = first.table.set_index("case").loc["parse_buffered"]
    assert row.verdict == "inconsistent" and 10 <= row.decided_at <= 15  # decided "no change" first, then emptied
    monkeypatch.setattr(ab_mod, "run_worker", _fake_worker(1.0))
    rerun = run_ab(_options(tmp_path, max_pairs=3))
    assert rerun.earlier_pairs == 0 and "was inconsistent: it was set aside" in rerun.markdown
    assert len(list((tmp_path / "ab-sequences").glob("*.inconsistent-*.csv"))) == 1


@pytest.mark.parametrize(
    ("worker", "flags", "code", "said"),
    [
        (_drifting_worker, [], 3, "inconsistent"),
        (lambda: _fake_worker(1.0), [], 0, "undecided within budget"),
        (lambda: _fake_worker(1.0), ["--fail-on-undecided"], 4, "--fail-on-undecided"),
    ],
)
def test_what_ab_exits_on_inconsistent_and_undecided(tmp_path, monkeypatch, capsys, worker, flags, code, said):
    monkeypatch.setattr(ab_mod, "prepare", _installed)
    monkeypatch.setattr(ab_mod, "run_worker", worker())
    max_pairs = ["--max-pairs", "80" if code == 3 else "5"]
    argv = ["ab", "HEAD", "HEAD", "--out", str(tmp_path), "--seed", "1", "--test-env-b", "X=1", *max_pairs, *flags]
    assert main(argv) == code
    assert said in capsys.readouterr().err


def test_a_sequence_held_by_another_session_is_refused_in_one_line(tmp_path):
    from polyperf.gate.sequences import SequenceBusy, StoredSequence

    with StoredSequence.open(tmp_path, {"base": "a"}), pytest.raises(SequenceBusy, match="another ab session"):
        StoredSequence.open(tmp_path, {"base": "a"})
    with StoredSequence.open(tmp_path, {"base": "a"}) as stored:  # released with its session
        assert stored.offset == 0
