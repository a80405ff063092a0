"""One side of one `polyperf ab` repeat, in a fresh process: load a revision's built extension as
`polyperf._native`, time the suite's cases through it and print one JSON line. HEAD's harness, one
revision's code under test. Kept free of pandas and the rest of the harness: it starts in well under a second.

Each case yields one value per process: calls inside one process share its state, so the process, not the call,
is the repeat. The gated value is the least CPU time of this thread over the process's calls: other processes on a
shared machine only ever add to a call's time (caches, frequency, a sibling core), and on this 2-core machine at a
load of 7-9 the least varied less between processes than the median did (median absolute deviation of the paired
log-ratio 0.5-4% against 1-4.5%, 14 pairs per case). The median wall time is recorded too, and not gated.
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["CASES", "load_extension", "main"]

# inputs of the io_buffering cases (bytes of GeoJSON; lines x bytes written), small enough for many calls
PARSE_BYTES, UNBUFFERED_BYTES, WRITE_LINES, LINE_LEN = 200_000, 20_000, 20_000, 64
BSON_DOCUMENTS = 1_000


def load_extension(folder: str) -> ModuleType:
    """Loads `folder/polyperf/_native<suffix>` under the name `polyperf._native`, before anything imports it."""
    path = Path(folder) / "polyperf" / f"_native{sysconfig.get_config_var('EXT_SUFFIX')}"
    spec = importlib.util.spec_from_file_location("polyperf._native", path)
    if spec is None or spec.loader is None or not path.exists():
        raise FileNotFoundError(f"no built extension at {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["polyperf._native"] = module
    spec.loader.exec_module(module)
    if (package := sys.modules.get("polyperf")) is not None:  # `python -m` imported the package first
        package._native = module  # type: ignore[attr-defined]
    return module


def _io_cases(native: ModuleType, inputs: Path) -> dict[str, Callable[[], object]]:
    parse, small, out = inputs / "parse.json", inputs / "small.json", inputs / f"write-{time.monotonic_ns()}.txt"
    return {
        "parse_buffered": lambda: native.parse_json_file(parse, "buffered", 8192),
        "parse_read_all": lambda: native.parse_json_file(parse, "read_all", 8192),
        "parse_unbuffered": lambda: native.parse_json_file(small, "unbuffered", 8192),
        "write_buffered": lambda: native.write_lines(out, WRITE_LINES, LINE_LEN, "buffered", 8192),
    }


def _bson_cases(native: ModuleType, inputs: Path) -> dict[str, Callable[[], object]]:
    reply, stream = (inputs / "reply.bson").read_bytes(), (inputs / "documents.bson").read_bytes()
    cases: dict[str, Callable[[], object]] = {
        f"deserialize_{path}": (lambda p=path: native.deserialize_reply(reply, p)) for path in native.DESERIALIZE_PATHS
    }
    cases["decode_all"] = lambda: native.bson_decode_all(stream)
    return cases


CASES: dict[str, Callable[[ModuleType, Path], dict[str, Callable[[], object]]]] = {
    "io_buffering": _io_cases,
    "bson": _bson_cases,
}


def make_inputs(suite: str, folder: Path, native: ModuleType) -> None:
    """The files both revisions read, written once per session by HEAD's harness."""
    folder.mkdir(parents=True, exist_ok=True)
    if suite == "io_buffering":
        from polyperf.data.geojson import write_geojson

        write_geojson(folder / "parse.json", PARSE_BYTES)
        write_geojson(folder / "small.json", UNBUFFERED_BYTES)
    elif suite == "bson":
        (folder / "reply.bson").write_bytes(native.bson_reply(BSON_DOCUMENTS, "find"))
        (folder / "documents.bson").write_bytes(native.bson_documents(BSON_DOCUMENTS, "find"))


def _time(call: Callable[[], object], calls: int) -> tuple[float, float]:
    """(the least CPU time of a call, the median wall time of a call) over `calls` calls."""
    cpu, wall = [], []
    for _ in range(calls):
        c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
        call()
        cpu.append((time.thread_time_ns() - c0) / 1e9)
        wall.append((time.perf_counter_ns() - w0) / 1e9)
    return min(cpu), statistics.median(wall)


def _suite(native: ModuleType, suite: str, inputs: Path, spec: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, call in CASES[suite](native, inputs).items():
        warm = []
        for _ in range(3):  # untimed; the quickest says what one call costs
            started = time.perf_counter()
            call()
            warm.append(time.perf_counter() - started)
        per_call = max(min(warm), 1e-7)
        calls = spec.get("calls", {}).get(f"{suite}/{name}")
        calls = calls or max(3, min(2_000, round(spec.get("target_s", 0.1) / per_call)))
        cpu, wall = _time(call, calls)
        out[name] = {"cpu_seconds": cpu, "seconds": wall, "calls": calls}
    return out


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    """Runs every case of each suite in `spec["suites"]`: `spec["calls"]["suite/case"]` timed calls after three
    untimed ones, or, without that, as many as fill `spec["target_s"]` seconds (the count chosen is returned, for
    the other processes). With `spec["make_inputs"]` it writes the shared inputs instead."""
    native = load_extension(spec["extension"])
    inputs = Path(spec["inputs"])
    if spec.get("make_inputs"):
        for suite in spec["suites"]:
            make_inputs(suite, inputs / suite, native)
        return {}
    try:
        return {suite: _suite(native, suite, inputs / suite, spec) for suite in spec["suites"]}
    finally:
        for leftover in inputs.glob("*/write-*.txt"):
            leftover.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    """The spec is one JSON argument; the result goes to `spec["result"]` (written whole, then renamed) or stdout."""
    spec = json.loads((argv or sys.argv[1:])[0])
    text = json.dumps(measure(spec))
    if spec.get("result"):
        partial = Path(spec["result"] + ".partial")
        partial.write_text(text, encoding="utf-8")
        partial.replace(spec["result"])
    else:
        print(text, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
