"""Load drivers (stage "load" of the pipeline): locust through its library API, and the native
generators oha and wrk. All return a `LoadResult`, refuse non-loopback targets, stay within a time
and a request bound, and run pinned to the client CPUs; `polyperf.metrics.measure` adds what the run
cost the server and the client."""

from polyperf.load.common import Bounds, LoadFailed, LoadResult, TargetNotLoopback, require_loopback
from polyperf.load.locust_driver import run_locust
from polyperf.load.native_driver import ensure_oha, ensure_wrk, run_oha, run_wrk

__all__ = [
    "Bounds",
    "LoadFailed",
    "LoadResult",
    "TargetNotLoopback",
    "ensure_oha",
    "ensure_wrk",
    "require_loopback",
    "run_locust",
    "run_oha",
    "run_wrk",
]
