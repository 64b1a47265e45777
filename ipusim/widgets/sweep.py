"""Widget: pick two swept parameters of a sweep table and see the tile/GPU ratio heat map."""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt

from ..plots import sweep as ps
from .explorer import interactive


def varied(table, params) -> list:
    """The parameters in ``params`` that take more than one value in ``table``."""
    return [p for p in params if p in table and table[p].nunique() > 1]


def show_pair(table, x: str, y: str, *, value: str = "ratio"):
    """Draw the heat map of ``value`` over ``x`` and ``y``, every other varied parameter held at its
    first value; returns the slice of the table drawn."""
    if x == y:
        raise ValueError("pick two different parameters")
    others = [
        p for p in varied(table, table.attrs.get("params", list(table.columns))) if p not in (x, y)
    ]
    sl = table
    for p in others:
        sl = sl[sl[p] == sorted(sl[p].unique())[0]]
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    ps.ratio_heatmap(sl, x, y, value=value, ax=ax)
    held = ", ".join(f"{p} = {sl[p].iloc[0]}" for p in others)
    ax.set_title(f"{value}" + (f" ({held})" if held else ""), fontsize=9)
    fig.tight_layout()
    return sl


def pair_explorer(table, params, *, value: str = "ratio"):
    """Two drop-downs (the varied ``params``) wired to ``show_pair``; returns the ``interactive``."""
    names = varied(table, params)
    if len(names) < 2:
        raise ValueError(f"the table varies fewer than two of {list(params)}")
    t = table.copy()
    t.attrs["params"] = list(names)
    return interactive(
        lambda x, y: show_pair(t, x, y, value=value),
        x=widgets.Dropdown(options=names, value=names[0], description="x"),
        y=widgets.Dropdown(options=names, value=names[1], description="y"),
    )
