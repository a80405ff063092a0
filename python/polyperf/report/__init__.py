"""Reports: a run's tidy table → PNG figures, a claims table, `summary.md` and `report.html`.

Each suite contributes figures through one function `figures(table) -> list[Figure]` registered in
`registry.SUITE_FIGURES`; adding a suite's report never touches the rendering.
"""

from polyperf.report.figure import Figure
from polyperf.report.render import write_report

__all__ = ["Figure", "write_report"]
