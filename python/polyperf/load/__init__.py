"""Stage "load": the drivers — locust through its library API, and the native generators oha, wrk (Debian's) and
bombardier (built by the project from the Go module proxy). All return a `LoadResult`, refuse non-loopback
targets unless told `allow_remote`, stay within a time and a request bound, and run pinned to the client CPUs;
`polyperf.measure` adds what a run cost the server and the client. `distributed` runs oha on several client
hosts through locust's master/worker messaging."""

from polyperf.load.bombardier_driver import ensure_bombardier, run_bombardier
from polyperf.load.distributed import run_oha_workers
from polyperf.load.driver import BombardierOptions, Driver, LocustOptions, OhaOptions, WrkOptions
from polyperf.load.locust_driver import run_locust
from polyperf.load.native_driver import ensure_oha, ensure_wrk, run_oha, run_wrk
from polyperf.load.result import Bounds, LoadFailed, LoadResult, TargetNotLoopback, require_loopback, require_target

__all__ = [
    "DRIVERS",
    "BombardierOptions",
    "Bounds",
    "Driver",
    "LoadFailed",
    "LoadResult",
    "LocustOptions",
    "OhaOptions",
    "TargetNotLoopback",
    "WrkOptions",
    "ensure_bombardier",
    "ensure_oha",
    "ensure_wrk",
    "require_loopback",
    "require_target",
    "run_bombardier",
    "run_locust",
    "run_oha",
    "run_oha_workers",
    "run_wrk",
]

# Every driver keeps the `Driver` contract and takes its own options (`OhaOptions`, ...) as keyword arguments.
DRIVERS: dict[str, Driver] = {
    "oha": run_oha,
    "wrk": run_wrk,
    "bombardier": run_bombardier,
    "locust": run_locust,
}
