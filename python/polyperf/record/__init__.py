"""Stage "record": the result schema (versioned, base units), the run directory, env.json, the recorder,
the load suites' environment object and the pytest plugin."""

from polyperf.record.recorder import Recorder
from polyperf.record.run_dir import finalize_run, load_env, load_run, new_run_dir, point_latest, resolve_run
from polyperf.record.schema import BASE_UNITS, COLUMNS, SCHEMA_VERSION, Row

__all__ = [
    "BASE_UNITS",
    "COLUMNS",
    "SCHEMA_VERSION",
    "Recorder",
    "Row",
    "finalize_run",
    "load_env",
    "load_run",
    "new_run_dir",
    "point_latest",
    "resolve_run",
]
