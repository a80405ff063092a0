"""polyperf: re-measure published performance claims on this machine.

The programmatic API the CLI, the pytest suites, the nox sessions and notebooks share.
"""

from polyperf.record.run_dir import load_env, load_run
from polyperf.runner import run

__all__ = ["load_env", "load_run", "run"]
__version__ = "0.2.0"
