"""io_buffering's sweep figures: log-log capacity axes, the measured medians plotted, nothing drawn without rows."""

from __future__ import annotations

import matplotlib
import pytest

from polyperf.record.schema import as_frame
from polyperf.report.suites import io_buffering

matplotlib.use("Agg")

CAPACITIES = (64, 1024, 8192)


def _table():
    rows = []
    for repeat in range(6):
        for cap in CAPACITIES:
            params = {"capacity": cap, "bytes": 65536}
            for metric, unit, value in (("read_syscalls", "count", 65536 / cap + repeat), ("seconds", "s", 1e-3 / cap)):
                rows.append(
                    {"run_id": "r", "suite": "io_buffering", "case": "capacity_sweep", "implementation": "x"}
                    | {"variant": "buffered", "metric": metric, "unit": unit, "value": value, "repeat": repeat}
                    | {"params": params}
                )
    return as_frame(rows)


@pytest.mark.parametrize(
    ("make", "ylabel"),
    [
        (io_buffering._syscalls_vs_capacity, "read syscalls per parse"),
        (io_buffering._time_vs_capacity, "ms per parse (median, 95% CI)"),
    ],
)
def test_capacity_figures_share_log_log_axes(make, ylabel):
    ax = make(_table()).figure.axes[0]
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    assert ax.get_xlabel() == "BufReader capacity (bytes)" and ax.get_ylabel() == ylabel
    assert make(_table().iloc[:0]) is None


def test_syscalls_figure_plots_the_median_per_capacity():
    measured = io_buffering._syscalls_vs_capacity(_table()).figure.axes[0].get_lines()[0]
    assert tuple(measured.get_xdata()) == CAPACITIES
    # repeats 0..5 add 0..5 to bytes / capacity: the median adds 2.5
    assert list(measured.get_ydata()) == pytest.approx([65536 / c + 2.5 for c in CAPACITIES])
