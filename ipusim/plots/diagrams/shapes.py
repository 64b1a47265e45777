"""The drawing vocabulary of the concept diagrams: a canvas, rounded boxes, arrows, one font size."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

FONT = 10  # pt, body text of every diagram
GREY = "#f0f0f0"
EDGE = "#404040"


def new_ax(ax, size):
    """``ax``, or a new axes of ``size`` (inches) with constrained layout when it is None."""
    if ax is None:
        _, ax = plt.subplots(figsize=size, layout="constrained")
    return ax


def canvas(ax, size, xlim, ylim):
    """An axes with data coordinates ``xlim`` x ``ylim`` and no frame, for box-and-arrow drawings."""
    ax = new_ax(ax, size)
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_axis_off()
    return ax


def box(
    ax,
    x,
    y,
    w,
    h,
    text="",
    *,
    face=GREY,
    edge=EDGE,
    lw=1.2,
    fontsize=FONT,
    color="k",
    weight="normal",
    round_=0.08,
    alpha=1.0,
    ha="center",
):
    """A rounded box at (``x``, ``y``), ``w`` x ``h``, with ``text`` centred (``ha="left"``: at its left)."""
    ax.add_patch(
        FancyBboxPatch(
            (x, y),
            w,
            h,
            boxstyle=f"round,pad=0,rounding_size={round_}",
            facecolor=face,
            edgecolor=edge,
            lw=lw,
            alpha=alpha,
        )
    )
    if text:
        tx = x + w / 2 if ha == "center" else x + 0.12
        ax.text(
            tx, y + h / 2, text, ha=ha, va="center", fontsize=fontsize, color=color, weight=weight
        )


def arrow(ax, xy0, xy1, *, color=EDGE, lw=1.5, style="-|>", both=False):
    """An arrow from ``xy0`` to ``xy1`` (a head at both ends with ``both``)."""
    ax.add_patch(
        FancyArrowPatch(
            xy0,
            xy1,
            arrowstyle="<|-|>" if both else style,
            mutation_scale=14,
            color=color,
            lw=lw,
            shrinkA=0,
            shrinkB=0,
        )
    )


def lighten(color, amount=0.75):
    """``color`` mixed with white: ``amount`` 0 leaves it, 1 makes it white."""
    from matplotlib.colors import to_rgb

    r, g, b = to_rgb(color)
    return (r + (1 - r) * amount, g + (1 - g) * amount, b + (1 - b) * amount)
