"""Embedding explorer: pick a chip, a table size, a skew and a cache; see look-ups/s and fit."""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt

from .. import embeddings
from ..embeddings.sweep import table_size_sweep
from ..plots import embeddings as views
from .explorer import interactive

ROWS = (1_000, 10_000, 100_000, 1_000_000, 4_000_000, 40_000_000)


def show(chip: str = "gc200", rows: int = 1_000_000, zipf: float = 0.0, cache: bool = True):
    """Draw look-ups/s against table size for ``chip`` and an A100 with the chosen point marked;
    return the chosen point's ``EmbeddingResult``."""
    sweep = table_size_sweep([chip, "a100-80gb"], ROWS, zipf=zipf, cache=cache)
    fig, ax = plt.subplots(figsize=(7.5, 4.4), layout="constrained")
    views.lookups_vs_size(sweep, ax)
    w = embeddings.Workload("w", embeddings.uniform_tables(26, int(rows), 128), 2048, 4, zipf)
    r = embeddings.simulate(chip, w, cache=cache)
    if r.fits:
        ax.plot([w.table_bytes], [r.lookups_per_s], "k*", ms=14, label="chosen")
    ax.set_title(f"{chip}: {r.fit}, {r.lookups_per_s / 1e6 if r.fits else 0:,.0f} M look-ups/s")
    plt.show()
    return r


def explorer(chip: str = "gc200"):
    """The interactive widget (build it after drawing the static figures)."""
    return interactive(
        show,
        chip=widgets.Dropdown(options=["gc200", "bow", "gc2", "a100-80gb", "h100-sxm"], value=chip),
        rows=widgets.SelectionSlider(options=ROWS, value=1_000_000, description="rows/table"),
        zipf=widgets.FloatSlider(value=0.0, min=0.0, max=1.4, step=0.05, description="Zipf s"),
        cache=widgets.Checkbox(value=True, description="hot-row cache"),
    )
