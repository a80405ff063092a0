"""Input data polyperf makes itself, deterministically, so every machine measures the same bytes."""
