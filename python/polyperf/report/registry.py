"""Which figures each suite contributes to a report (one line per suite)."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from polyperf.report import bson, bson_server, http_frameworks, io_buffering
from polyperf.report.figure import Figure

SUITE_FIGURES: dict[str, Callable[[pd.DataFrame], list[Figure]]] = {
    "io_buffering": io_buffering.figures,
    "http_frameworks": http_frameworks.figures,
    "bson_server": bson_server.figures,
    "bson": bson.figures,
}
