"""polyperf: re-measure published performance claims on this machine.

The programmatic API the CLI, the pytest suites, the nox sessions and notebooks share.
"""

from polyperf.results import load_run
from polyperf.runner import run

__all__ = ["load_run", "run"]
__version__ = "0.1.0"
