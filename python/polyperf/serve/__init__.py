"""Stage "serve"."""
