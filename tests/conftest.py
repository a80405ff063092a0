"""Fast tests of the harness, the extension and the apps (run by `nox -s tests`, i.e. CI)."""
