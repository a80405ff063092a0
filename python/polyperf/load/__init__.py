"""Stage "load": the drivers — locust through its library API, and the native generators oha and wrk. All
return a `LoadResult`, refuse non-loopback targets, stay within a time and a request bound, and run pinned
to the client CPUs; `polyperf.measure` adds what a run cost the server and the client."""

from collections.abc import Callable

from polyperf.load.common import Bounds, LoadFailed, LoadResult, TargetNotLoopback, require_loopback
from polyperf.load.locust_driver import run_locust
from polyperf.load.native_driver import ensure_oha, ensure_wrk, run_oha, run_wrk

__all__ = [
    "DRIVERS",
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

# Every driver takes (url, *, bounds, client_cpus, log_dir, on_spawn, alive, **its own options).
DRIVERS: dict[str, Callable[..., LoadResult]] = {"oha": run_oha, "wrk": run_wrk, "locust": run_locust}
