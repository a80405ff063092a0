"""The suites' fixtures come from polyperf's pytest plugins: the run directory, `record`, `profile` and
`load_options` from `record/pytest_plugin.py`, the load suites' `load_env` and `env` from
`orchestrate/pytest_suites.py`. Installed, polyperf registers the first itself (`pytest11`) and it brings the
second; listed here too, so a checkout run from its source tree has them, and pytest registers each once."""

pytest_plugins = ["polyperf.record.pytest_plugin", "polyperf.orchestrate.pytest_suites"]
