"""Stage "analyse"."""
