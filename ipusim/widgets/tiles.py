"""Widget: pick a chip, a model, a batch and a length; see the step's profile views."""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt

from .. import hardware, machine, tiles, workloads
from ..plots import tiles as pt
from .explorer import interactive


def show_step(chip: str, model: str, batch: int, seq_len: int, packed: bool = False):
    """Draw the views of one forward step and return its ``StepResult``.

    A tile chip gets the memory heat map, the memory histogram, the fullest tiles and the
    per-op proportions; a GPU chip gets its per-kernel proportions.
    """
    s = workloads.step(model, [seq_len] * batch, pad_to=None if packed else seq_len)
    c = hardware.chip(chip)
    if c.kind == "tile":
        prof = tiles.profile(c, s)
        fig = plt.figure(figsize=(13, 7))
        gs = fig.add_gridspec(2, 2)
        pt.memory_heatmap(prof, fig.add_subplot(gs[0, :]))
        pt.memory_histogram(prof, fig.add_subplot(gs[1, 0]))
        pt.op_proportions(prof.result, fig.add_subplot(gs[1, 1]))
        r = prof.result
    else:
        r = machine.simulate(c, s)
        fig, ax = plt.subplots(figsize=(7, 4))
        pt.op_proportions(r, ax)
    fig.suptitle(repr(r) + (f"\n{r.fit_message[:160]}" if r.fit_message else ""), fontsize=9)
    fig.tight_layout()
    return r


def step_explorer(
    chip: str = "gc200", model: str = "bert-base", batch: int = 32, seq_len: int = 128
):
    """Controls for ``show_step``; returns the ``ipywidgets.interactive`` (its ``.result`` is the StepResult)."""
    models = [m for m in workloads.MODELS if not m.startswith(("llama-2-70b", "gpt-3"))]
    return interactive(
        show_step,
        chip=widgets.Dropdown(options=list(hardware.PRESETS), value=chip, description="chip"),
        model=widgets.Dropdown(options=models, value=model, description="model"),
        batch=widgets.IntSlider(value=batch, min=1, max=128, description="batch"),
        seq_len=widgets.IntSlider(value=seq_len, min=8, max=512, step=8, description="length"),
        packed=widgets.Checkbox(value=False, description="packed"),
    )
