"""Stage "measure"."""
