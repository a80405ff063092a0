"""Stage "record": the result schema (versioned, base units), the metric catalogue, the run folder and its one
owner (`Run`), env.json, the recorder and the pytest plugin."""

from polyperf.record.catalogue import CATALOGUE, MetricInfo, metric_info
from polyperf.record.recorder import Recorder
from polyperf.record.run import Run
from polyperf.record.run_dir import finalize_run, load_env, load_run, new_run_dir, point_latest, resolve_run
from polyperf.record.schema import BASE_UNITS, COLUMNS, SCHEMA_VERSION, Row

__all__ = [
    "BASE_UNITS",
    "CATALOGUE",
    "COLUMNS",
    "SCHEMA_VERSION",
    "MetricInfo",
    "Recorder",
    "Row",
    "Run",
    "finalize_run",
    "load_env",
    "load_run",
    "metric_info",
    "new_run_dir",
    "point_latest",
    "resolve_run",
]
