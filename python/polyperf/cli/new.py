"""`polyperf new suite NAME --kind micro|load|go [--dir DIR]`: a suite of your own and a claim stub beside it, both
ready to edit, in a folder outside polyperf. Its first `polyperf run --suites-dir DIR NAME --profile smoke` gives a
verdict line (inconclusive, most likely, until the sides are the article's)."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

__all__ = ["KINDS", "write_suite"]

KINDS = ("micro", "load", "go")
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")

_MICRO = '''"""{name}: EDIT one line on the published figure this suite re-measures, and where it was published.

Every repeat is a fresh Python worker process timing both sides, warmed up alike and in an order drawn anew from
the run's seed (polyperf.orchestrate.workers), so the sides pair by process and n counts processes, not loops.
Run it: polyperf run --suites-dir {folder} {name} --profile smoke
"""

from __future__ import annotations

import json

import pytest

from polyperf.orchestrate.workers import Plan, Side, run_workers
from polyperf.record.pytest_plugin import benchmark_from_workers


def make_input(items: int) -> bytes:
    """EDIT: the input the article measured on, or one like it (say which in the claim's `conditions`)."""
    rows = [{{"id": i, "name": f"item {{i}}", "tags": ["a", "b"], "x": i / 7}} for i in range(items)]
    return json.dumps(rows).encode()


# EDIT: the two things the article compares. Module-level functions: each worker imports them by name.
def baseline(document: bytes) -> object:
    return json.loads(document)


def contender(document: bytes) -> object:
    return json.loads(document.decode())


SIDES = {{"baseline": baseline, "contender": contender}}

# Metrics of your own (recorded with the `record` fixture) join polyperf's catalogue from here, for compare's gate:
# from polyperf.record.catalogue import metric
# POLYPERF_METRICS = [metric("documents_per_s", "1/s", "higher", "documents parsed per second")]


@pytest.fixture(scope="module")
def document(profile):
    return make_input(profile.pick(smoke=2_000, quick=20_000, full=100_000))


@pytest.fixture(scope="module")
def timings(document, profile, load_options, run_dir):
    # 6 processes is the least n with a 95% interval; 12 lets a paired sign test reach p = 0.0005
    plan = Plan(
        processes=profile.pick(smoke=6, quick=12, full=20),
        rounds=profile.pick(smoke=1, quick=3, full=5),
        warmup=1,
        min_round_s=0.01,
        seed=load_options.seed,
    )
    sides = [Side(name, call, (document,)) for name, call in SIDES.items()]
    samples = run_workers(sides, plan, log_path=run_dir / "logs" / "workers-{name}.log")
    return {{name: [s for s in samples if s.side == name] for name in SIDES}}


def test_same_result(document):
    assert baseline(document) == contender(document)  # the sides must do the same work


@pytest.mark.parametrize("side", list(SIDES))
def test_time(benchmark, side, timings, document):
    benchmark_from_workers(
        benchmark, timings[side], case="parse", implementation=side, bytes_per_round=len(document)
    )
'''

_LOAD = '''"""{name}: EDIT one line on the published figure this suite re-measures, and where it was published.

Servers from polyperf's registry (`polyperf apps`), each run under load in an order drawn anew every repeat
(`env.interleave`), a fresh server process per repeat, so drift of the machine hits every server alike.
Run it: polyperf run --suites-dir {folder} {name} --profile smoke
"""

from __future__ import annotations

import pytest

from polyperf.serve.fleet import Fleet, Target

# EDIT: the servers the article compares (`polyperf apps` lists them) and the path the load generator requests
TARGETS = [
    Target("hyper_hello", "/", "multi", ("--runtime", "multi"), {{"runtime": "multi"}}),
    Target("hyper_hello", "/", "current", ("--runtime", "current"), {{"runtime": "current"}}),
]


@pytest.fixture(scope="module")
def plan(profile):
    return {{
        "repeats": profile.pick(smoke=6, quick=12, full=20),
        "seconds": profile.pick(smoke=1.0, quick=3.0, full=10.0),
    }}


@pytest.fixture(scope="module")
def fleet(load_options, run_dir):
    with Fleet(TARGETS, log_dir=run_dir / "logs", **load_options.fleet) as fleet:
        yield fleet


def test_ceiling(env, plan):
    for repeat, target in env.interleave(plan["repeats"], processes=plan["repeats"]):
        env.oha(target, case="ceiling", repeat=repeat, duration=plan["seconds"], connections=32)
'''

_GO_MOD = "module example.com/{name}\n\ngo 1.21\n"
_GO = """package {name}

// EDIT: the two things the article compares, one Benchmark function each. polyperf runs every Benchmark function
// in a fresh process per repeat, in an order drawn anew each repeat, and reads go test's own benchmark format.
// Rows: case = the package ("{name}"), implementation = the name after "Benchmark" (Baseline, Contender).

import (
	"strconv"
	"strings"
	"testing"
)

func BenchmarkBaseline(b *testing.B) {{
	for i := 0; i < b.N; i++ {{
		s := ""
		for j := 0; j < 64; j++ {{
			s += strconv.Itoa(j)
		}}
		_ = s
	}}
}}

func BenchmarkContender(b *testing.B) {{
	for i := 0; i < b.N; i++ {{
		var sb strings.Builder
		for j := 0; j < 64; j++ {{
			sb.WriteString(strconv.Itoa(j))
		}}
		_ = sb.String()
	}}
}}
"""

_CLAIM = """# The claim {name} re-measures: polyperf reads this file beside the suite (no file of polyperf's to edit).
# Every field is described in `polyperf verdicts --help`; the margin rule in docs/your-own-claim.md.
[[claims]]
id = "{name}.contender_vs_baseline"
suite = "{name}"
kind = "claim"
source = "EDIT: where the figure was published (title, URL, date)"
statement = "EDIT: the contender is 2x faster than the baseline"
unit = "x"
measure = "ratio"
metric = "{metric}"
select = {{ case = "{case}" }}
numerator = {numerator}
denominator = {denominator}
paired = true
published = 2.0
rule = {{ kind = "greater_than", threshold = 1.0, why = "{why}" }}
# no `margin`: derived from the published figure's precision (2.0: ±0.05) and the spread of timings (x 1.25)

[claims.conditions]
input = "EDIT: what the article measured on"
measured_on = "EDIT: what this suite measures on"
"""


def _sides(case: str, metric: str, numerator: tuple[str, str], denominator: tuple[str, str], why: str) -> dict:
    def table(side: tuple[str, str]) -> str:
        return f'{{ {side[0]} = "{side[1]}" }}'

    return {
        "case": case,
        "metric": metric,
        "numerator": table(numerator),
        "denominator": table(denominator),
        "why": why,
    }


def write_suite(name: str, kind: str, folder: Path) -> list[Path]:
    """Writes the suite and its claims file into `folder` (made if missing); refuses to overwrite a file."""
    if not _NAME.match(name):
        raise ValueError(f"suite name {name!r}: lowercase letters, digits and _ only, starting with a letter")
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r}: one of {', '.join(KINDS)}")
    folder = Path(folder).resolve()
    files: dict[Path, str] = {}
    fields = {"name": name, "folder": folder}
    faster = "faster: the baseline's time over the contender's is above 1"
    if kind == "go":
        package = folder / name
        files[package / "go.mod"] = _GO_MOD.format(**fields)
        files[package / f"{name}_test.go"] = _GO.format(**fields)
        claim = _sides(name, "seconds", ("implementation", "Baseline"), ("implementation", "Contender"), faster)
        files[package / "claims.toml"] = _CLAIM.format(**fields, **claim)
    else:
        files[folder / f"test_{name}.py"] = (_MICRO if kind == "micro" else _LOAD).format(**fields)
        claim = (
            _sides("parse", "seconds", ("implementation", "baseline"), ("implementation", "contender"), faster)
            if kind == "micro"
            else _sides(
                "ceiling",
                "rps",
                ("variant", "multi"),
                ("variant", "current"),
                "more requests per second: multi over current",
            )
        )
        files[folder / f"{name}.claims.toml"] = _CLAIM.format(**fields, **claim)
    clash = [str(p) for p in files if p.exists()]
    if clash:
        raise ValueError(f"not overwriting {', '.join(clash)}")
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return list(files)


def _cmd_new(args: argparse.Namespace) -> int:
    folder = Path(args.dir)
    written = write_suite(args.name, args.kind, folder)
    print("\n".join(f"wrote {p}" for p in written))
    print(
        f"next: edit them, then `polyperf run --suites-dir {folder} {args.name} --profile smoke` "
        "(its verdict line comes at the end)",
        file=sys.stderr,
    )
    return 0


# The same add_parsers shape as export, remote, runs, tools and verdicts: each sub-command owns its flags.
def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "new",
        help="write a suite of your own and a claim stub, ready to edit",
        description="`polyperf new suite NAME --kind micro|load|go`: micro, a Python microbenchmark timed in fresh "
        "worker processes; load, servers under load interleaved repeat by repeat; go, a Go package with Benchmark "
        "functions run as they are. Each comes with a claims file beside it, read by `polyperf run`.",
    )
    p.add_argument("what", choices=["suite"], help="what to write (a suite)")
    p.add_argument("name", metavar="NAME", help="the suite's name (lowercase, digits, _)")
    p.add_argument("--kind", choices=KINDS, default="micro", help="micro (default), load or go")
    p.add_argument("--dir", default="suites", help="the folder to write into (default: ./suites)")
    p.set_defaults(func=_cmd_new)
