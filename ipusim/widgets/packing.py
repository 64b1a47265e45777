"""Packing explorer: length distribution, row length, strategy and sequences per row -> rows and waste."""

from __future__ import annotations

import ipywidgets as W
import matplotlib.pyplot as plt

from .. import lengths, packing
from ..plots import packing as P
from .explorer import interactive

DISTRIBUTIONS = ("wikipedia-512", "squad-384", "long-text mix")


def source_histogram(distribution: str, long_pct: float, max_len: int):
    """The chosen distribution, sequences longer than ``max_len`` truncated to it."""
    if distribution == "long-text mix":
        h = lengths.long_text_mix(long_pct / 100.0, resolution=100_000)
    else:
        h = lengths.dataset(distribution)
    return h.truncate(max_len)


def show(distribution="squad-384", long_pct=40, max_len=384, strategy="spfhp", max_per_row=3):
    """Draw the length histogram and a picture of the rows; return the ``Packing``."""
    h = source_histogram(distribution, long_pct, max_len)
    res = packing.pack(h, max_len, strategy, max_per_row=max_per_row)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5))
    P.length_histogram(h, max_len=max_len, ax=a1)
    P.rows_picture(res, n_rows=20, ax=a2)
    waste = res.flops()["wasted_fraction"]
    fig.suptitle(
        f"{h.name}: {res.rows:,} rows, efficiency {res.efficiency:.1%}, "
        f"BERT-base FLOPs wasted {waste:.1%}"
    )
    fig.tight_layout()
    plt.show()
    return res


def packing_explorer():
    """The interactive: distribution, long-text share, row length, strategy, sequences per row."""
    return interactive(
        show,
        distribution=W.Dropdown(options=DISTRIBUTIONS, value="squad-384", description="lengths"),
        long_pct=W.IntSlider(value=40, min=0, max=100, step=5, description="long texts %"),
        max_len=W.IntSlider(value=384, min=64, max=512, step=32, description="row length"),
        strategy=W.Dropdown(options=packing.STRATEGIES, value="spfhp", description="strategy"),
        max_per_row=W.IntSlider(value=3, min=1, max=16, description="seqs/row"),
    )
