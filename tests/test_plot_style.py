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
    for path in sorted(Path(plots.__file__).parent.rglob("*.py")):
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


def _rgb(c):
    from matplotlib.colors import to_rgb

    return [255 * v for v in to_rgb(c)]


def test_the_other_palette_cannot_be_read_as_a_chip():
    """Workloads, memory levels, phases, policies and packers take colours far from every chip's,
    and matplotlib's default cycle (C0, C1, ...) is that palette once ipusim.plots is imported."""
    import math

    import matplotlib as mpl

    chips = list(style.CHIP_COLORS.values()) + list(style.KIND_COLORS.values())
    nearest = min(math.dist(_rgb(o), _rgb(c)) for o in style.OTHER_COLORS for c in chips)
    assert nearest >= style.MIN_DISTANCE, nearest
    assert len(set(style.OTHER_COLORS)) == len(style.OTHER_COLORS)
    assert mpl.rcParams["axes.prop_cycle"].by_key()["color"] == list(style.OTHER_COLORS)
    assert style.other_color(len(style.OTHER_COLORS)) == style.OTHER_COLORS[0]


def test_no_plot_module_colours_a_non_chip_with_a_chip_colour():
    """A plot module names no blue, red or purple by hand: those are the chips' (chip_color)."""
    import re
    from pathlib import Path

    import ipusim.plots as plots

    chipish = re.compile(
        r"""["'](tab:(blue|red|purple|cyan)|"""
        + "|".join(re.escape(c) for c in style.CHIP_COLORS.values())
        + r""")["']""",
        re.IGNORECASE,
    )
    for path in sorted(Path(plots.__file__).parent.rglob("*.py")):
        if path.name == "style.py":
            continue
        bad = [ln.strip() for ln in path.read_text().splitlines() if chipish.search(ln)]
        assert not bad, f"{path.name} picks a chip colour by hand: {bad}"


def test_legend_outside_sits_right_of_the_data():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], label="a")
    leg = style.legend_outside(ax)
    fig.canvas.draw()
    box = leg.get_window_extent()
    assert box.x0 >= ax.get_window_extent().x1
    plt.close(fig)


def test_sweep_heatmap_marks_every_cell_by_its_fit_state_with_human_labels():
    import matplotlib.pyplot as plt
    import pandas as pd

    from ipusim.plots import sweep as ps

    t = pd.DataFrame(
        {
            "tiles": [736, 1472, 736, 1472],
            "sram_per_tile_bytes": [256 * 1024, 256 * 1024, 512 * 1024, 512 * 1024],
            "fit": ["does_not_fit", "streams", "on_chip", "on_chip"],
            "ratio": [0.0, 0.5, 0.8, 1.5],
        }
    )
    ax = ps.ratio_heatmap(t, "tiles", "sram_per_tile_bytes")
    marks = [ln for ln in ax.lines if ln.get_marker() == "o"]
    assert sorted(ln.get_fillstyle() for ln in marks) == sorted(
        style.fit_style(s)["fillstyle"] for s in t["fit"]
    )
    assert ax.get_xlabel() == "tiles per chip" and "bytes" in ax.get_ylabel()
    labels = [x.get_text() for x in ax.get_legend().get_texts()]
    assert {style.FIT_LABELS[s] for s in t["fit"]} <= set(labels)
    plt.close("all")


def test_sequence_colours_are_neither_chips_nor_padding_grey():
    """Requests, sequences and batches (packing rows, batching timelines) take SEQUENCE_COLORS."""
    import math

    from matplotlib.colors import to_rgb

    chips = list(style.CHIP_COLORS.values()) + list(style.KIND_COLORS.values())
    assert len(style.SEQUENCE_COLORS) == 20
    assert style.sequence_color(20) == style.SEQUENCE_COLORS[0]
    for c in style.SEQUENCE_COLORS:
        assert min(math.dist(_rgb(c), _rgb(k)) for k in chips) >= style.MIN_DISTANCE, c
        r, g, b = to_rgb(c)
        assert max(r, g, b) - min(r, g, b) > 0.08, f"{c} is grey: grey means padding"


def test_no_plot_module_takes_a_default_qualitative_colour_map():
    """tab10/tab20 hold the chips' blue, red and purple: a plot module colours requests, rows and
    batches from SEQUENCE_COLORS (or OTHER_COLORS) instead."""
    from pathlib import Path

    import ipusim.plots as plots

    for path in sorted(Path(plots.__file__).parent.rglob("*.py")):
        bad = [ln.strip() for ln in path.read_text().splitlines() if '"tab1' in ln or '"tab2' in ln]
        assert not bad, f"{path.name} takes a tab colour map: {bad}"
