"""Facts of record/ (the run directory, the row schema, the recorder) that its other tests left unchecked:
each assertion here kills mutants that `nox -s mutants` found surviving."""
