"""Figures for training at scale: memory per chip by category, and where a step's time goes."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Patch

from .style import PHASE_COLORS, axes, chip_color, finish, legend_outside, other_color

CATEGORIES = ("weights", "gradients", "optimizer", "activations", "working")
SPLIT_COLORS = {  # one colour per category of TrainingStep.split, the same in every figure
    "ops_compute": PHASE_COLORS["compute"],
    "ops_exchange": PHASE_COLORS["exchange"],
    "ops_sync": PHASE_COLORS["sync"],
    "ops_streaming": "#937860",
    "ops_memory": PHASE_COLORS["memory"],
    "ops_launch": PHASE_COLORS["launch"],
    "recompute": "#ccb974",
    "tensor_parallel": "#dd8452",
    "pipeline_bubble": "#eeeeee",
    "pipeline_p2p": "#da8bc3",
    "data_parallel": "#3b7a57",
    "optimizer": "#000000",
}
SPLIT_LABELS = {  # the same categories in words, for legends
    "ops_compute": "compute (ops)",
    "ops_exchange": "exchange between tiles",
    "ops_sync": "sync",
    "ops_streaming": "Streaming Memory copies",
    "ops_memory": "HBM traffic",
    "ops_launch": "kernel launches",
    "recompute": "recomputation",
    "tensor_parallel": "tensor-parallel all-reduces",
    "pipeline_bubble": "pipeline bubble",
    "pipeline_p2p": "pipeline sends between stages",
    "data_parallel": "data-parallel gradient all-reduce",
    "optimizer": "optimizer update",
}
_HATCH = {"weights": "", "gradients": "//", "optimizer": "xx", "activations": "..", "working": "--"}


def plot_memory_wall(
    models, per_param_bytes: float = 16.0, capacities: dict | None = None, ax=None
):
    """Training states (``per_param_bytes`` per parameter) of each model against per-chip capacities
    (``{label: bytes}``), on a log axis of GB (bars start at 1 GB, so they read as totals)."""
    ax = axes(ax)
    names = [m.name for m in models]
    vals = np.array([m.params * per_param_bytes / 1e9 for m in models])
    ax.barh(names, vals, color="0.6", label=f"{per_param_bytes:g} B/param (weights, grads, Adam)")
    for label, cap in (capacities or {}).items():
        ax.axvline(
            cap / 1e9, color=chip_color(label.split()[0]) if label.split()[0] else "k", ls="--"
        )
        ax.text(cap / 1e9, len(names) - 0.5, f" {label}", rotation=90, va="top", fontsize=8)
    ax.set_xscale("log")
    return finish(ax, xlabel="GB", title="Training states vs one chip's memory", loc="lower right")


def plot_memory_per_chip(steps, ax=None):
    """Stacked bars: memory per chip (the busiest chip) by category for several ``TrainingStep``
    results, in GB. Solid: the part held on chip (tile SRAM, or a GPU's HBM); light with a dashed
    edge: the part in Streaming Memory (``memory_where``). A black tick on each bar marks that
    chip's on-chip capacity; the legend sits outside the data."""
    from .. import hardware

    ax = axes(ax, (7, 4.4))
    x = np.arange(len(steps))
    bottom = np.zeros(len(steps))
    shown = []
    for off in (False, True):  # on-chip parts first, so the capacity tick reads against them
        for cat in CATEGORIES:
            v = np.array(
                [
                    s.memory_per_chip_bytes.get(cat, 0.0) / 1e9
                    if (s.memory_where.get(cat) == "streaming DRAM") == off
                    else 0.0
                    for s in steps
                ]
            )
            if not v.any():
                continue
            ax.bar(
                x,
                v,
                bottom=bottom,
                hatch=_HATCH[cat],
                color=[chip_color(s.chip) for s in steps],
                edgecolor="k",
                ls="--" if off else "-",
                alpha=0.25 if off else 0.7,
            )
            bottom += v
            shown.append((cat, off))
    for i, s in enumerate(steps):
        c = hardware.chip(s.chip)
        cap, level = (c.data_bytes, "tile SRAM") if c.kind == "tile" else (c.hbm_bytes, "HBM")
        ax.plot([i - 0.42, i + 0.42], [cap / 1e9] * 2, color="k", lw=2.5)
        ax.text(
            i, cap / 1e9, f"{level} {cap / 1e9:,.2g} GB", ha="center", va="bottom", fontsize=6.5
        )
    ax.set_xticks(x, [f"{s.model}\n{s.chips} x\n{s.chip}\n{s.fit}" for s in steps], fontsize=7)
    ax.set_ylabel("GB on the busiest chip")
    ax.set_title("Memory per chip at the best placement")
    handles = [  # neutral patches: the bar colours are the chips'
        Patch(
            facecolor="0.85" if off else "0.55",
            edgecolor="k",
            hatch=_HATCH[cat],
            ls="--" if off else "-",
            label=f"{cat} ({'Streaming Memory' if off else 'on chip'})",
        )
        for cat, off in dict.fromkeys(shown)
    ]
    handles.append(plt.Line2D([], [], color="k", lw=2.5, label="on-chip capacity"))
    legend_outside(ax, fontsize=7, handles=handles)
    return ax


def plot_step_split(steps, ax=None):
    """Stacked horizontal bars: where each step's time goes, as a share of the step."""
    ax = axes(ax)
    keys = list(dict.fromkeys(k for s in steps for k in s.split))
    y = np.arange(len(steps))
    left = np.zeros(len(steps))
    cmap = {k: SPLIT_COLORS.get(k, "0.5") for k in keys}
    for k in keys:
        v = np.array([s.split.get(k, 0.0) / s.step_time_s for s in steps])
        ax.barh(y, v, left=left, color=cmap[k], label=SPLIT_LABELS.get(k, k.replace("_", " ")))
        left += v
    ax.set_yticks(y, [f"{s.model} on {s.chips} {s.chip}" for s in steps], fontsize=8)
    ax.set_xlim(0, 1)
    finish(
        ax,
        xlabel="share of the step time",
        title="Where a training step's time goes",
        legend_fontsize=None,
    )
    legend_outside(ax, fontsize=7)
    return ax


def plot_cost_sensitivity(bandwidths, ratios, *, claim=(0.80, 0.85), ax=None):
    """Tile/GPU cost ratio against the Streaming Memory bandwidth (GB/s), with the claim's band."""
    ax = axes(ax)
    for label, r in ratios.items():
        ax.plot(np.asarray(bandwidths) / 1e9, r, "o-", label=label)
    ax.axhspan(*claim, color="g", alpha=0.2, label="claim: 15-20% cheaper")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xscale("log")
    return finish(
        ax,
        xlabel="Streaming Memory bandwidth per tile chip (GB/s; preset 64 is an ASSUMPTION)",
        ylabel="tile / GPU cost to train",
        title="The cost claim vs the uncertain Streaming Memory bandwidth",
    )


def plot_convergence(run, ax=None):
    """Loss per step with FP32, FP16 round-to-nearest and FP16 stochastic-rounding weights."""
    ax = axes(ax)
    for mode, ls, col in (
        ("fp32", "-", "k"),
        ("nearest", "--", other_color(0)),
        ("stochastic", ":", other_color(1)),
    ):
        ax.plot(
            run.steps,
            run.loss[mode],
            ls,
            color=col,
            label=f"weights {mode if mode == 'fp32' else 'fp16 ' + mode}",
        )
    ax.set_yscale("log")
    return finish(
        ax,
        xlabel="step",
        ylabel="loss (mean squared error)",
        title="FP16 weight updates: round-to-nearest stalls",
    )


def plot_published(rows, ax=None):
    """Predicted / published for each row of ``training.calibration.published_table()``: a point per
    row, its tolerance band as a bar behind it, and the line of agreement at 1 (linear axis)."""
    ax = axes(ax, size=(7.5, 0.45 * len(rows) + 1.2))
    y = np.arange(len(rows))[::-1]
    for yi, r in zip(y, rows, strict=True):
        ax.barh(
            yi,
            2 * r["tolerance"],
            left=1 - r["tolerance"],
            height=0.6,
            color="0.85",
            label="tolerance" if yi == y[0] else None,
        )
        ax.plot(r["ratio"], yi, "o", color=chip_color(r["step"].chip), ms=7)
        ax.annotate(f" {r['ratio']:.2f}", (r["ratio"], yi), va="center", fontsize=8)
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_yticks(y, [f"{r['run']}\n{r['quantity']}" for r in rows], fontsize=7)
    return finish(
        ax,
        xlabel="predicted / published",
        title="Training model vs published runs",
        loc="lower right",
    )
