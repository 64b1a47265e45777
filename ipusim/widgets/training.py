"""Widget for notebook 06: the best training placement as model, chip, chip count and the
Streaming Memory bandwidth change."""

from __future__ import annotations

import ipywidgets as w
import matplotlib.pyplot as plt

from .. import hardware, training, workloads
from ..plots import training as P
from .explorer import interactive


def show(model="llama-2-70b", chip="gc200", chips=1024, streaming_gb_s=64.0):
    """Print the best placement and draw its memory and time split; returns the result."""
    c = hardware.chip(chip)
    if c.kind == "tile" and c.offchip_bytes > 0:
        c = c.replace(offchip_bandwidth_bytes_per_s=streaming_gb_s * 1e9)
    r = training.best_placement(model, c, chips, explain=False)
    print(r)
    if r.fit != "does_not_fit":
        fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.6))
        P.plot_memory_per_chip([r], ax=a)
        P.plot_step_split([r], ax=b)
        fig.tight_layout()
        plt.show()
    return r


def training_explorer():
    """Controls: model, chip, chips (log steps), Streaming Memory GB/s (tile chips)."""
    return interactive(
        show,
        model=w.Dropdown(options=list(workloads.MODELS), value="llama-2-70b", description="model"),
        chip=w.Dropdown(options=list(hardware.PRESETS), value="gc200", description="chip"),
        chips=w.SelectionSlider(
            options=[2**k for k in range(3, 14)], value=1024, description="chips"
        ),
        streaming_gb_s=w.FloatLogSlider(
            value=64.0, base=10, min=1, max=3.5, step=0.25, description="Streaming GB/s"
        ),
    )
