"""Fixtures shared by every suite: the run directory, `record`, `profile` (polyperf.pytest_plugin)."""

pytest_plugins = ["polyperf.pytest_plugin", "polyperf.load.pytest_options"]
