"""The series' visual vocabulary: one colour per chip, one marker style per fit state."""

import matplotlib

matplotlib.use("Agg")

import pytest

from ipusim import hardware
from ipusim.plots import style
from ipusim.result import FIT_STATES


def test_every_preset_has_its_own_colour():
    colours = [style.chip_color(n) for n in hardware.PRESETS]
    assert len(set(colours)) == len(colours)
    assert style.chip_color(hardware.chip("gc200")) == style.chip_color("gc200")


def test_every_fit_state_has_a_distinct_style():
    seen = {tuple(sorted(style.fit_style(s).items())) for s in FIT_STATES}
    assert len(seen) == len(FIT_STATES) and set(style.FIT_LABELS) == set(FIT_STATES)
    with pytest.raises(ValueError, match="fit state must be one of"):
        style.fit_style("fits")
    with pytest.raises(ValueError, match="no colour"):
        style.chip_color("tpu-v4")


def test_no_plot_module_draws_hollow_markers_of_its_own():
    """Hollow means does_not_fit everywhere: a plot module gets it from ``fit_style``, never by hand."""
    import re
    from pathlib import Path

    import ipusim.plots as plots

    hand = re.compile(r"""(fillstyle|mfc|markerfacecolor|facecolors?)\s*=\s*["']none["']""")
    for path in sorted(Path(plots.__file__).parent.glob("*.py")):
        if path.name == "style.py":
            continue
        bad = [ln for ln in path.read_text().splitlines() if hand.search(ln) and "hatch" not in ln]
        assert not bad, f"{path.name} draws hollow markers by hand: {bad}"


def test_label_colour_finds_the_chip_in_a_label():
    assert style.label_color("GC200 (IPU)") == style.chip_color("gc200")
    assert style.label_color("A100 40GB (GPU)") == style.chip_color("a100-40gb")
    assert style.label_color("A100, padding removed") == style.chip_color(
        "a100-40gb"
    )  # family: first preset
    assert style.label_color("static 16, timeout 5 ms", "k") == "k"


def test_unstable_runs_are_marked_not_plotted_at_a_latency():
    import matplotlib.pyplot as plt

    from ipusim.plots import serving as sp

    rows = [
        {"throughput_rps": 10.0, "latency_p99_s": 0.01, "stable": True},
        {"throughput_rps": 20.0, "latency_p99_s": 0.02, "stable": True},
        {"throughput_rps": 25.0, "latency_p99_s": 900.0, "stable": False},
    ]
    ax = sp.latency_throughput({"GC200 (IPU)": rows})
    line = ax.lines[0]
    assert list(line.get_ydata()) == [10.0, 20.0] and line.get_color() == style.chip_color("gc200")
    marks = [ln for ln in ax.lines if ln.get_label() == style.UNSTABLE_LABEL]
    assert (
        len(marks) == 1 and marks[0].get_ydata()[0] < 900e3
    )  # at the top band, not at the 900 s p99
    assert marks[0].get_ydata()[0] > 20.0
    plt.close("all")


def test_sweep_heatmap_ticks_use_one_notation_per_axis():
    from ipusim.plots.sweep import _fmt_axis

    assert _fmt_axis([256 * 1024, 512 * 1024, 2 * 1024**2]) == ["256Ki", "512Ki", "2Mi"]
    mixed = _fmt_axis([262144, 1.49e6, 2 * 1024**2])  # one value is not a round binary size
    assert mixed == ["262k", "1.49M", "2.1M"]
    assert _fmt_axis([2450.0, 5888.0]) == ["2.45k", "5.89k"]
