"""bombardier (Go, fasthttp client): the second native load generator, installed by the project itself, so
the "is oha's ceiling the driver's or the server's?" cross-check runs where Debian's wrk is missing.

Why bombardier 1.2.6: it builds from the Go module proxy with the Go toolchain the project already needs;
it bounds a run by request count (`-n`) and stops cleanly on SIGINT, reporting what completed (so the
duration bound works as for oha); its output is a user-given Go text/template (`-o path:FILE`), so it
writes JSON with exactly our percentiles (p50/p90/p99/p99.9 of an exact microsecond histogram), its
status classes and its errors by message. 1.2.6 is its newest release the proxy serves: the v2.0.x tags
keep the v1 module path, so Go cannot resolve them. rewrk 0.3.2 (crates.io) was rejected: its JSON has
no percentiles, status codes or errors, and it has no request-count bound; hey prints CSV, not JSON.

Redirects and TLS: bombardier's fasthttp client (`--fasthttp`, always passed) never follows a redirect, so a 3xx
is counted in its 3xx class, a failure; it verifies certificates unless told `--insecure`, which polyperf never
passes.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from polyperf.common.go_tools import go_build_pinned
from polyperf.common.paths import TOOLS_DIR
from polyperf.errors import ToolchainMissing
from polyperf.load.native_driver import driver_window, run_child
from polyperf.load.result import Bounds, LoadFailed, LoadResult, OnSpawn, require_loopback

__all__ = [
    "BOMBARDIER_VERSION",
    "bombardier_counts",
    "ensure_bombardier",
    "read_report",
    "run_bombardier",
    "to_load_result",
]

BOMBARDIER_VERSION = "1.2.6"
BOMBARDIER_MODULE = "github.com/codesenberg/bombardier"
_FORMAT = "polyperf-bombardier/1"  # marks our template's line in the log and names its keys' version
_PERCENTILES = {0.5: "p50", 0.9: "p90", 0.99: "p99", 0.999: "p99.9"}

# Go text/template over bombardier's result (its `internal.TestInfo`); one JSON line on stdout. Latencies
# are whole microseconds; every request lands in exactly one of req1xx..req5xx/others (a transport
# error has code -1, so it is in `others`, and its message is in `errors`).
_TEMPLATE = "".join(
    (
        '{{- with .Result -}}{"format":"',
        _FORMAT,
        '","timeTakenSeconds":{{ .TimeTaken.Seconds }}',
        ',"req1xx":{{ .Req1XX }},"req2xx":{{ .Req2XX }},"req3xx":{{ .Req3XX }},"req4xx":{{ .Req4XX }}',
        ',"req5xx":{{ .Req5XX }},"others":{{ .Others }},"bytesRead":{{ .BytesRead }}',
        ',"bytesWritten":{{ .BytesWritten }},"errors":[{{ range $i, $e := .Errors }}{{ if $i }},{{ end }}',
        '{"description":{{ printf "%q" .Error }},"count":{{ .Count }}}{{ end }}]',
        '{{ with .LatenciesStats (FloatsToArray 0.5 0.9 0.99 0.999) }},"latencyUs":{"mean":{{ .Mean }}',
        ',"max":{{ .Max }},"p50":{{ index .Percentiles 0.5 }},"p90":{{ index .Percentiles 0.9 }}',
        ',"p99":{{ index .Percentiles 0.99 }},"p99.9":{{ index .Percentiles 0.999 }}}{{ end }}}\n{{ end -}}',
    )
)


def ensure_bombardier(*, root: Path = TOOLS_DIR, install: bool = True) -> Path:
    """`<root>/bin/bombardier` at BOMBARDIER_VERSION, built from the Go module proxy if missing.

    Not `go install MODULE@VERSION`: that also reads the module's version list (for deprecation notices),
    which a proxy may refuse while serving the version itself, as here. A throwaway module that
    `go get`s the pinned version selects the same dependencies (bombardier's go.mod), checked by go.sum.
    """
    binary, stamp = root / "bin" / "bombardier", root / "bombardier.version"
    wanted = f"{BOMBARDIER_MODULE} v{BOMBARDIER_VERSION}"
    if not install and not (binary.exists() and stamp.exists() and stamp.read_text().strip() == wanted):
        raise ToolchainMissing(
            f"bombardier {BOMBARDIER_VERSION} not installed in {root} "
            "(run polyperf.load.bombardier_driver.ensure_bombardier())"
        )
    return go_build_pinned(BOMBARDIER_MODULE, f"v{BOMBARDIER_VERSION}", BOMBARDIER_MODULE, "bombardier", root=root)


def read_report(text: str) -> dict:
    """The JSON our template printed, from the run's log (the last line carrying our format tag; pure)."""
    for line in reversed(text.splitlines()):
        if line.startswith("{") and f'"format":"{_FORMAT}"' in line:
            try:
                return json.loads(line)
            except ValueError as exc:
                raise LoadFailed(f"bombardier's report is not valid JSON ({exc}): {line[:200]}") from None
    raise LoadFailed(f"no bombardier report ({_FORMAT}) in its output: {' | '.join(text.splitlines()[-5:])}")


def bombardier_counts(data: Mapping) -> tuple[int, int, dict[int, int], dict[str, int]]:
    """(requests, successes, status counts, errors) from our report (pure).

    bombardier counts status classes only: each class is keyed by its x00 code (a 503 counts under 500).
    Requests with no HTTP status are errors, by message; any rest of `others` (a status outside
    100-599) is counted as "status outside 1xx-5xx".
    """
    status = {100 * k: int(data[f"req{k}xx"]) for k in range(1, 6) if int(data[f"req{k}xx"])}
    errors: dict[str, int] = {}
    for entry in data.get("errors", []):
        errors[entry["description"]] = errors.get(entry["description"], 0) + int(entry["count"])
    rest = int(data["others"]) - sum(errors.values())
    if rest > 0:
        errors["status outside 1xx-5xx"] = rest
    requests = sum(status.values()) + int(data["others"])
    return requests, status.get(200, 0), status, errors


def run_bombardier(
    url: str,
    *,
    bounds: Bounds,
    client_cpus: Sequence[int],
    log_dir: Path,
    connections: int = 64,
    on_spawn: OnSpawn | None = None,
    alive: Callable[[], None] | None = None,
) -> LoadResult:
    """bombardier against `url` (loopback only), closed model with `connections`: stops after
    `bounds.max_requests` requests (`-n`) or, on SIGINT, at `bounds.duration`, whichever comes first."""
    url = require_loopback(url)  # the canonical URL: bombardier reads it as every other generator does
    bombardier = ensure_bombardier(install=False)
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    tag = f"bombardier-{time.time_ns()}"
    template = log_dir / f"{tag}.tmpl"
    template.write_text(_TEMPLATE)
    log_path = log_dir / f"{tag}.log"
    # fasthttp client (bombardier's fastest); Go sizes GOMAXPROCS from the CPU affinity set by procs.spawn
    cmd = [
        str(bombardier),
        "--fasthttp",
        "-c",
        str(connections),
        "-n",
        str(bounds.max_requests),
        "-t",
        "10s",
        "-p",
        "r",
        "-o",
        f"path:{template}",
        url,
    ]
    spawned, ended = run_child(
        cmd, bounds=bounds, cpus=client_cpus, log_path=log_path, interrupt=True, on_spawn=on_spawn, alive=alive
    )
    try:
        data = read_report(log_path.read_text(errors="replace"))
    except OSError as exc:
        raise LoadFailed(f"bombardier left no log at {log_path}: {exc}") from None
    raw = log_dir / f"{tag}.json"
    raw.write_text(json.dumps(data, indent=1) + "\n")
    return to_load_result(
        data,
        url=url,
        spawned=spawned,
        ended=ended,
        connections=connections,
        client_cpus=client_cpus,
        extra={"raw": str(raw)},
    )


def to_load_result(
    data: Mapping,
    *,
    url: str,
    spawned: float,
    ended: float,
    connections: int,
    client_cpus: Sequence[int],
    extra: Mapping | None = None,
) -> LoadResult:
    """The `LoadResult` of one report (pure). As for oha and wrk (`driver_window`), the window is bombardier's
    own run time, placed to end at `ended` (the SIGINT, or the exit once the request bound ended the run),
    clamped to start no earlier than the spawn."""
    requests, successes, status, errors = bombardier_counts(data)
    started, seconds = driver_window(spawned, ended, float(data["timeTakenSeconds"]))
    latency_us = data.get("latencyUs", {})
    latency = {p: latency_us[key] / 1e6 for p, key in _PERCENTILES.items() if key in latency_us}
    # The same LoadResult.native call as native_driver.run_wrk's: each driver names its own counts and extras there.
    return LoadResult.native(
        "bombardier",
        url,
        started_at=started,
        seconds=seconds,
        requests=requests,
        successes=successes,
        client_cpus=client_cpus,
        latency=latency,
        connections=connections,
        errors=errors,
        status_counts=status,
        extra={"threads": len(client_cpus) or os.cpu_count(), "version": BOMBARDIER_VERSION, **(extra or {})},
    )
