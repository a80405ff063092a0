"""Optional flamegraphs of a server during a measured window (`--flamegraph`): `perf record -e cpu-clock`
of the server's PID while the load runs, rendered to SVG by inferno (`inferno-collapse-perf` +
`inferno-flamegraph`), which the project installs into `<repo>/.tools` like oha. cpu-clock is a
software event, so it works where hardware counters are not exposed (VMs, this machine).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from polyperf.common import procs
from polyperf.common.paths import TOOLS_DIR
from polyperf.common.tools import cargo_install
from polyperf.errors import PolyperfError, ToolchainMissing

__all__ = ["INFERNO_VERSION", "PerfRecord", "ensure_inferno", "render"]

INFERNO_VERSION = "0.12.8"
SAMPLE_HZ = 499  # odd, so sampling does not lock step with 1 ms / 10 ms timers


def ensure_inferno(*, root: Path = TOOLS_DIR, install: bool = True) -> tuple[Path, Path]:
    """(inferno-collapse-perf, inferno-flamegraph) in `<root>/bin`, installed with cargo if missing."""
    collapse, flame = cargo_install(
        "inferno",
        INFERNO_VERSION,
        ["inferno-collapse-perf", "inferno-flamegraph"],
        root=root,
        install=install,
        check_version=False,
    )
    return collapse, flame


class PerfRecord:
    """`perf record` of one PID for as long as the `with` block runs (stopped with SIGINT, as perf expects)."""

    def __init__(self, pid: int, out: Path, *, cpus: Sequence[int] = ()) -> None:
        if shutil.which("perf") is None:
            raise ToolchainMissing("`perf` not found: apt-get install linux-perf")
        self.pid = pid
        self.out = Path(out)
        self.cpus = list(cpus)
        self.proc = None

    def __enter__(self) -> PerfRecord:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        cmd = [
            "perf",
            "record",
            "-e",
            "cpu-clock",
            "-F",
            str(SAMPLE_HZ),
            "--call-graph",
            "dwarf,16384",
            "-p",
            str(self.pid),
            "-o",
            str(self.out),
            "--quiet",
        ]
        self.proc = procs.spawn(cmd, log_path=self.out.with_suffix(".log"), cpus=self.cpus)
        time.sleep(0.2)  # perf attaches before the load starts
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.proc is not None:
            procs.stop(self.proc, grace=30.0, sig=signal.SIGINT)


def render(perf_data: Path, svg: Path, *, title: str) -> Path:
    """perf script → inferno-collapse-perf → inferno-flamegraph → `svg`."""
    collapse, flame = ensure_inferno(install=False)
    script = subprocess.run(["perf", "script", "-i", str(perf_data)], capture_output=True, check=False)
    if script.returncode != 0 or not script.stdout:
        raise PolyperfError(f"perf script -i {perf_data} failed: {script.stderr.decode(errors='replace')[-300:]}")
    folded = subprocess.run([str(collapse)], input=script.stdout, capture_output=True, check=True).stdout
    image = subprocess.run([str(flame), "--title", title], input=folded, capture_output=True, check=True).stdout
    svg.write_bytes(image)
    return svg
