"""Where a notebook fits: the series 01-09 as a strip of boxes, the current one highlighted."""

from __future__ import annotations

import numpy as np

from ..style import chip_color
from .shapes import FONT, GREY, arrow, box, canvas

SERIES = (
    ("01", "Memory wall"),
    ("02", "Tile-local compute"),
    ("03", "Dynamic batching"),
    ("04", "Unpadded inference"),
    ("05", "POC checklist"),
    ("06", "Training at scale"),
    ("07", "Sparse embeddings"),
    ("08", "Design space"),
    ("09", "Verdicts"),
)
"""The notebook series: number and short title (each title's words appear in the notebook's own)."""


def series_strip(current, ax=None):
    """The series 01..09 as a strip of boxes with notebook ``current`` (1-9 or "03") highlighted."""
    numbers = [n for n, _ in SERIES]
    key = (
        f"{int(current):02d}"
        if isinstance(current, (int, np.integer)) and not isinstance(current, bool)
        else str(current)
    )
    if key not in numbers:
        raise ValueError(
            f"current must be a notebook number 1-{len(SERIES)} (or '01'..'0{len(SERIES)}'), "
            f"got {current!r}"
        )
    n = len(SERIES)
    ax = canvas(ax, (12, 1.25), (-0.05, n * 1.5 - 0.25), (0, 1))
    hi = chip_color("tile")
    for i, (num, title) in enumerate(SERIES):
        x = i * 1.5
        on = num == key
        box(
            ax,
            x,
            0.08,
            1.2,
            0.84,
            f"{num}\n{title.replace(' ', chr(10), 1) if len(title) > 12 else title}",
            face=hi if on else GREY,
            edge=hi if on else "#b0b0b0",
            lw=2 if on else 1,
            color="white" if on else "#404040",
            weight="bold" if on else "normal",
            fontsize=FONT - 1,
        )
        if i < n - 1:
            arrow(ax, (x + 1.22, 0.5), (x + 1.48, 0.5), color="#b0b0b0", lw=1)
    ax.set_title("Where this notebook fits in the series", fontsize=FONT, loc="left")
    return ax
