"""Stage "report": a run's tidy table → PNG figures, a claims table, `summary.md` and `report.html`.

Every suite gets a default section; a module `polyperf.report.suites.<suite>` with a function
`figures(table) -> list[Figure]` replaces its default figures — found by name, nothing to register.
"""

from polyperf.report.figure import Figure
from polyperf.report.render import write_report

__all__ = ["Figure", "write_report"]
