"""Numbers for people: base units scaled, three significant digits, never an exponent."""

from __future__ import annotations

import pytest

from polyperf.common.units import format_value


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (0.00123, "s", "1.23 ms"),
        (2009109, "count", "2,009,109"),
        (999.6, "1/s", "1,000 /s"),  # rounds up to four digits: still no 1e+03
        (0.99996, "s", "1,000 ms"),
        (float("nan"), "s", "–"),
    ],
)
def test_format_value(value, unit, text):
    assert format_value(value, unit) == text
