"""polyperf: re-measure published performance claims on this machine.

The programmatic API the CLI, the pytest suites, the nox sessions and notebooks share.
"""

from typing import Any

__all__ = ["load_env", "load_history", "load_run", "run"]


def __getattr__(name: str) -> Any:
    # Imported on first use: `import polyperf._native` (a benchmark worker process) then costs no pandas (0.8 s).
    if name in ("load_env", "load_run"):
        from polyperf.record import run_dir

        return getattr(run_dir, name)
    if name == "run":
        from polyperf.runner import run

        return run
    if name == "load_history":  # the runs' history store as one tidy table (report/history.py)
        from polyperf.report.history import load_history

        return load_history
    if name == "_native":  # `from polyperf import _native` asks here first (hasattr), before importing it
        import importlib

        try:
            return importlib.import_module("polyperf._native")
        except ModuleNotFoundError as exc:
            if exc.name != "polyperf._native":
                raise
            raise ImportError(NATIVE_MISSING) from None
    raise AttributeError(f"module 'polyperf' has no attribute {name!r}")


# Said where a suite imports the extension and it is not built; suites that do not import it run without it.
NATIVE_MISSING = (
    "polyperf's Rust extension (polyperf._native) is not built here, and this suite times Rust code through it: "
    "`pip install -e .` or `maturin develop --release` in the checkout builds it (about 3 min on 2 cores the first "
    "time); suites that do not import it run without it"
)


__version__ = "0.2.0"
