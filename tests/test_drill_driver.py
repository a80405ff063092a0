"""Drill's plan writer and its `--stats` parser, on output captured from drill 0.9.1 runs against
actix_matrix (tests/testdata/drill/): counts, units and the per-request blocks before the global summary.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polyperf.load.drill_driver import DrillStats, drill_plan, parse_drill_stats

DATA = Path(__file__).parent / "testdata" / "drill"


def test_plan_repeats_one_json_post() -> None:
    plan = drill_plan("http://127.0.0.1:8080/", "/matrix-multiplication", {"n": 120}, concurrency=500, requests=50_000)
    lines = plan.splitlines()
    assert "concurrency: 500" in lines and "iterations: 50000" in lines and "rampup: 0" in lines
    assert 'base: "http://127.0.0.1:8080"' in lines
    assert '      url: "/matrix-multiplication"' in lines and "      method: POST" in lines
    # the body is a YAML double-quoted scalar holding compact JSON
    body = next(line for line in lines if line.startswith("      body: "))
    assert json.loads(json.loads(body.removeprefix("      body: "))) == {"n": 120}
    assert '        Content-Type: "application/json"' in lines


def test_plan_without_body_is_a_plain_get() -> None:
    plan = drill_plan("http://127.0.0.1:1", "/healthz", None, concurrency=1, requests=1, method="get")
    assert "      method: GET" in plan.splitlines()
    assert "body" not in plan and "headers" not in plan


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"concurrency": 10, "requests": 5}, "concurrency <= requests"),
        ({"concurrency": 0, "requests": 5}, "concurrency <= requests"),
    ],
)
def test_plan_rejects_what_drill_would_panic_on(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        drill_plan("http://127.0.0.1:1", "/x", None, **kwargs)


def test_plan_rejects_interpolation_in_body_and_relative_path() -> None:
    with pytest.raises(ValueError, match="interpolate"):
        drill_plan("http://127.0.0.1:1", "/x", '{"a": "{{ b }}"}', concurrency=1, requests=1)
    with pytest.raises(ValueError, match="must start with"):
        drill_plan("http://127.0.0.1:1", "x", None, concurrency=1, requests=1)


def test_parse_nanosecond_summary() -> None:
    stats = parse_drill_stats((DATA / "release_c500_nanosec.txt").read_text())
    assert isinstance(stats, DrillStats)
    assert (stats.concurrency, stats.iterations) == (500, stats.requests)
    assert stats.requests == stats.successes > 0 and stats.failures == 0
    # latencies were printed in whole ns: parsed into seconds, ordered
    lat = stats.latency
    assert 0 < lat[0.5] <= lat[0.99] <= lat[0.995] <= lat[0.999] <= lat[1.0] < 60
    assert stats.mean > 0 and stats.stdev >= 0
    # the duration recovered from req/s agrees with the printed 0.1 s figure
    assert stats.duration == pytest.approx(stats.seconds, abs=0.06)


def test_parse_millisecond_summary_with_per_request_blocks_and_failures() -> None:
    stats = parse_drill_stats((DATA / "bad_request_ms.txt").read_text())
    assert stats.failures == stats.requests > 0 and stats.successes == 0
    # whole milliseconds without --nanosec
    assert all(round(v * 1e3, 9).is_integer() for v in stats.latency.values())


def test_parse_ignores_colour_codes() -> None:
    plain = (DATA / "release_c500_nanosec.txt").read_text()
    coloured = "\n".join(f"\x1b[33m{line}\x1b[0m" for line in plain.splitlines())
    assert parse_drill_stats(coloured) == parse_drill_stats(plain)


def test_parse_rejects_output_without_stats_or_inconsistent_counts() -> None:
    with pytest.raises(ValueError, match="--stats"):
        parse_drill_stats("Concurrency 4\nIterations 8\n")
    text = (DATA / "release_c500_nanosec.txt").read_text()
    broken = "\n".join(
        line.replace("Failed requests", "Failed requests 7 #") if line.startswith("Failed") else line
        for line in text.splitlines()
    )
    with pytest.raises(ValueError, match="!="):
        parse_drill_stats(broken)


def test_parse_connection_errors_as_failures() -> None:
    # drill counts a request that got no response as status 520: failed, with its time to the error
    stats = parse_drill_stats((DATA / "refused_nanosec.txt").read_text())
    assert stats.requests == stats.failures == 6 and stats.successes == 0
    assert stats.max >= stats.median > 0
