"""Suite-specific figures, one module per suite, named after it."""
