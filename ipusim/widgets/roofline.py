"""Roofline explorer: pick a chip, a model, a batch and a sequence length; see the ops of that
step on the chip's roofline and the throughput bound of every chip across batch sizes.
"""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np

from .. import hardware, roofline, workloads
from ..plots import roofline as views
from .explorer import interactive

BATCHES = tuple(2**i for i in range(10))  # 1 .. 512
SEQ_LENS = tuple(2**i for i in range(4, 13))  # 16 .. 4096


def show_step(
    chip: str, model: str, batch: int, seq_len: int, phase: str = "forward", fused: bool = False
):
    """Draw the explorer's two panels for one choice and return its ``StepRoofline``.

    A sequence length beyond the model's maximum is clipped to that maximum (and said so).
    ``fused`` gives the fused-kernel bound (the bound of a fused GPU) in the printed result;
    the sweep panel is the unfused bound.
    """
    m = workloads.model(model)
    ln = min(int(seq_len), m.max_positions)
    s = workloads.step(m, [ln] * int(batch), phase=phase)
    r = roofline.analyze(chip, s, fused=fused)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, 4.6), layout="constrained")
    views.roofline_chart(chip, [s], ax=a1)
    grid = roofline.sweep(list(hardware.PRESETS), m, np.array(BATCHES), [ln], phase=phase)
    views.sweep_chart(grid, ax=a2, mark_batch=batch)
    if ln != seq_len:
        print(f"seq_len clipped to {m.name}'s maximum of {ln} tokens")
    print(r)
    return r


def roofline_explorer(
    chip: str = "gc200",
    model: str = "bert-base",
    batch: int = 8,
    seq_len: int = 128,
    phase: str = "forward",
) -> widgets.interactive:
    """Controls for chip, model, batch, sequence length, phase and fusion, wired to ``show_step``.

    Returns the ``ipywidgets.interactive``; its ``.result`` is the current ``StepRoofline``.
    """
    controls = dict(
        chip=widgets.Dropdown(options=list(hardware.PRESETS), value=chip, description="chip"),
        model=widgets.Dropdown(options=list(workloads.MODELS), value=model, description="model"),
        batch=widgets.SelectionSlider(options=list(BATCHES), value=batch, description="batch"),
        seq_len=widgets.SelectionSlider(
            options=list(SEQ_LENS), value=seq_len, description="seq len"
        ),
        phase=widgets.Dropdown(
            options=["forward", "decode", "train"], value=phase, description="phase"
        ),
        fused=widgets.Checkbox(value=False, description="fused kernels"),
    )
    for w in controls.values():
        w.continuous_update = False
    return interactive(show_step, **controls)
