"""Checklist figures: each draws labelled axes from a report and returns them."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def report():
    import os

    os.environ.setdefault("MPLBACKEND", "Agg")
    old = os.environ.get("IPUSIM_QUICK")
    os.environ["IPUSIM_QUICK"] = "1"
    from ipusim.checklist import Training, default_case, run_checklist

    try:
        return run_checklist(
            default_case(training=Training(models=("llama-2-7b",))), show_progress=False
        )
    finally:
        if old is None:
            del os.environ["IPUSIM_QUICK"]
        else:
            os.environ["IPUSIM_QUICK"] = old


@pytest.mark.parametrize(
    "name",
    [
        "plot_capacity",
        "plot_cost",
        "plot_padding",
        "plot_rate_sensitivity",
        "plot_long_share",
        "plot_training",
    ],
)
def test_plot_draws_labelled_axes(report, name):
    import matplotlib.pyplot as plt

    from ipusim.plots import checklist as P

    ax = getattr(P, name)(report)
    assert ax.get_title() and (ax.get_ylabel() or ax.get_xlabel())
    assert ax.patches or ax.lines
    plt.close(ax.figure)


def test_report_figures_keys(report):
    import matplotlib.pyplot as plt

    figs = report.figures()
    assert set(figs) == {"overview", "C3", "C5", "C6"}
    for f in figs.values():
        plt.close(f)


def test_library_does_not_import_matplotlib():
    import subprocess
    import sys

    code = "import sys, ipusim.checklist, ipusim.commands.checklist; print('matplotlib' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.stdout.strip() == "False", r.stderr
