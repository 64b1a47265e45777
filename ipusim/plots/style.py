"""One visual vocabulary for the whole series: a colour per chip, a marker style per fit state.

Every figure that shows a chip takes its colour from ``chip_color``; everything else a figure
tells apart by colour (workloads, memory levels, phases, policies, packers) takes it from the
second palette, ``OTHER_COLORS`` (``other_color``), whose colours are far from every chip's, so a
colour always means the same chip. Importing this module makes ``OTHER_COLORS`` matplotlib's
default colour cycle (``C0``, ``C1``, ... and unstyled lines). Every figure that marks whether a
step fits uses ``fit_style`` (the three states of ``ipusim.result``). ``axes`` is the one helper
that makes a fresh axes when a plot function is called with ``ax=None``; ``legend_outside`` puts
a legend beside the data instead of over it.
"""

from __future__ import annotations

import matplotlib as mpl
import matplotlib.pyplot as plt
from cycler import cycler
from matplotlib.colors import to_rgb

# Tile chips in blues/greens, GPUs in reds/purples, darker for newer parts.
CHIP_COLORS = {
    "gc2": "#6baed6",
    "gc200": "#1f77b4",
    "bow": "#08519c",
    "a100-40gb": "#fb6a4a",
    "a100-80gb": "#d62728",
    "h100-sxm": "#7b3294",
    "h200": "#40004b",
}
KIND_COLORS = {"tile": "#1f77b4", "gpu": "#d62728"}  # a chip kind, or a chip not in CHIP_COLORS

# The second palette: for anything that is not a chip. Orange, green, brown, pink, olive, grey,
# black, gold: no blue, red or purple, so no colour here can be read as a chip
# (tests/test_plot_style.py holds every pair at least MIN_DISTANCE apart in RGB).
OTHER_COLORS = (
    "#e69f00",
    "#009e73",
    "#8c564b",
    "#e377c2",
    "#bcbd22",
    "#7f7f7f",
    "#000000",
    "#b8860b",
)
# Sequences, requests and batches, one colour each: the second palette without its grey and black
# (grey means padding or waiting) and a lighter shade of each, then eight more; 20 colours, none
# a chip's (tests/test_plot_style.py).
_SEQ_BASES = tuple(c for c in OTHER_COLORS if c not in ("#7f7f7f", "#000000"))
SEQUENCE_COLORS = tuple(
    c for base in _SEQ_BASES for c in (base, tuple(0.65 + 0.35 * v for v in to_rgb(base)))
) + ("#3b7a57", "#6b4226", "#f5c242", "#d95f02", "#66a61e", "#a6761d", "#e7298a", "#1b9e77")
# the phases of a step, on either machine (BSP traces, kernel splits, per-op bars)
PHASE_COLORS = {
    "compute": "#009e73",
    "sync": "#e377c2",
    "exchange": "#e69f00",
    "streaming": "#8c564b",
    "memory": "#b8860b",
    "launch": "#7f7f7f",
}
MIN_DISTANCE = 60  # RGB 0-255 Euclidean distance between a chip colour and any other colour
mpl.rcParams["axes.prop_cycle"] = cycler(color=list(OTHER_COLORS))

# on_chip: filled marker; streams: half-filled (the step runs, but pays for copies);
# does_not_fit: hollow marker on a dotted line (no honest time exists).
FIT_STYLES = {
    "on_chip": {"fillstyle": "full", "linestyle": "-"},
    "streams": {"fillstyle": "bottom", "linestyle": "--"},
    "does_not_fit": {"fillstyle": "none", "linestyle": ":"},
}
FIT_LABELS = {"on_chip": "on chip", "streams": "streams weights", "does_not_fit": "does not fit"}

# A queue that is not stable (arrivals outrun the server) has no meaningful p99: its latency
# grows with the length of the run. Such a run is drawn as this marker at the top edge of
# the axes, never at its p99 value (and never hollow: hollow means does_not_fit).
UNSTABLE_STYLE = {"marker": "^", "ms": 7, "ls": "none"}
UNSTABLE_LABEL = "unstable (latency grows with the run)"


def chip_color(c) -> str:
    """The series' colour for a chip (a preset name, a chip object, or a kind: "tile"/"gpu")."""
    name = getattr(c, "name", c)
    if name in CHIP_COLORS:
        return CHIP_COLORS[name]
    kind = getattr(c, "kind", name)
    if kind in KIND_COLORS:
        return KIND_COLORS[kind]
    raise ValueError(
        f"no colour for chip {name!r}: use a preset name, a chip object, or 'tile'/'gpu'"
    )


def other_color(i: int) -> str:
    """Colour number ``i`` (cycling) of the palette for things that are not chips."""
    return OTHER_COLORS[int(i) % len(OTHER_COLORS)]


def sequence_color(i: int):
    """Colour number ``i`` (cycling) of ``SEQUENCE_COLORS``: one request, sequence or batch each."""
    return SEQUENCE_COLORS[int(i) % len(SEQUENCE_COLORS)]


def label_color(label: str, default=None):
    """The chip colour for a label that names a preset chip ("GC200 (IPU)", "A100 40GB (GPU)"),
    else ``default``. Longer preset names are matched first ("a100-80gb" before "a100")."""
    key = "-".join(str(label).lower().replace("(", " ").replace(")", " ").replace(",", " ").split())
    for name in sorted(CHIP_COLORS, key=len, reverse=True):
        if name in key:
            return CHIP_COLORS[name]
    for name in CHIP_COLORS:  # a family name alone ("A100, padded"): its first preset
        if name.split("-")[0] in key.split("-"):
            return CHIP_COLORS[name]
    return default


def fit_style(state: str) -> dict:
    """Matplotlib keyword arguments (``fillstyle``, ``linestyle``) for a fit state."""
    if state not in FIT_STYLES:
        raise ValueError(f"fit state must be one of {', '.join(FIT_STYLES)}; got {state!r}")
    return dict(FIT_STYLES[state])


def axes(ax=None, size=(6.4, 4.4)):
    """``ax`` itself, or a new axes of ``size`` inches when ``ax`` is None."""
    if ax is None:
        _, ax = plt.subplots(figsize=size)
    return ax


def legend_outside(ax, *, fontsize=8, title=None, **kw):
    """The legend to the right of the axes, outside the data, top-aligned; returns it."""
    return ax.legend(
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        borderaxespad=0.0,
        fontsize=fontsize,
        title=title,
        **kw,
    )


def finish(ax, *, xlabel=None, ylabel=None, title=None, legend_fontsize=8, **legend_kw):
    """Set the axis labels and title that are given, draw the legend (``legend_fontsize=None``: no
    legend; ``legend_kw`` such as ``loc`` go to ``ax.legend``), and return ``ax``."""
    if xlabel is not None:
        ax.set_xlabel(xlabel)
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    if title is not None:
        ax.set_title(title)
    if legend_fontsize is not None:
        ax.legend(fontsize=legend_fontsize, **legend_kw)
    return ax
