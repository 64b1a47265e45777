"""Views of the memory wall: rooflines with ops on them, the capacity wall, energy per level.

Every function takes ``ax=None`` (a new figure when None), draws, and returns the axes.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from .. import energy, hardware, roofline, workloads
from .style import FIT_LABELS, OTHER_COLORS, chip_color, fit_style

# memory levels take the second palette (a chip colour means a chip) where they are the only
# colours of a figure (energy bars); on a roofline the steps take the colours and the ceilings are
# told apart by line style alone, in dark grey (_CEILING_COLOR)
_CEILING_COLOR = "#404040"
_LEVEL_STYLE = {
    "tile SRAM": ("#009e73", "-"),
    "exchange": ("#bcbd22", "--"),
    "streaming DRAM": ("#8c564b", "-."),
    "HBM": ("#e69f00", "-"),
    "chip-to-chip link": ("#7f7f7f", ":"),
}
_KIND_MARKER = {
    "matmul": "o",
    "attention": "s",
    "softmax": "v",
    "norm": "^",
    "activation": "D",
    "embedding": "P",
}


def _ax(ax, figsize=(6.4, 4.4)):
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def _fit_state(r) -> str:
    """The fit state of a roofline analysis: on chip, weights streamed from off-chip DRAM, or neither."""
    if r.fits:
        return "on_chip"
    return "streams" if not r.placement.get("weights", True) else "does_not_fit"


def roofline_chart(chip, steps=(), labels=None, *, ax=None, levels=None, intensity=(0.1, 1e4)):
    """Roofline of ``chip`` (one ceiling per memory level) with the ops of ``steps`` placed on it.

    Each op sits at (its FLOP/byte, FLOPs / its lower-bound time): on a ceiling when it runs
    at its bound. Colour = step, marker = op kind, line style = memory level (dark grey).
    """
    ax = _ax(ax)
    c = hardware.chip(chip)
    x = np.logspace(np.log10(intensity[0]), np.log10(intensity[1]), 200)
    lv = roofline.memory_levels(c)
    for name in levels or lv:
        _, ls = _LEVEL_STYLE.get(name, ("k", "-"))
        ax.plot(
            x,
            roofline.attainable_flops(c, x, lv[name]),
            color=_CEILING_COLOR,
            ls=ls,
            lw=2,
            label=f"{name} {lv[name] / 1e12:,.3g} TB/s",
        )
    ax.axhline(c.peak_flops, color="k", lw=0.8, alpha=0.4)
    if isinstance(steps, workloads.Step):
        steps = [steps]
    labels = labels or [f"{s.model.name} {s.phase} b{s.batch}" for s in steps]
    colors = OTHER_COLORS
    kinds_seen = set()
    for i, (s, lab) in enumerate(zip(steps, labels, strict=True)):
        col = colors[i % len(colors)]
        r = roofline.analyze(c, s)
        state = _fit_state(r)
        for b in r.bounds:
            if b.flops <= 0:
                continue
            kinds_seen.add(b.kind)
            ax.plot(
                b.intensity,
                b.attained_flops,
                marker=_KIND_MARKER.get(b.kind, "o"),
                ms=6.5,
                alpha=0.8,
                ls="none",
                color=col,
                mec=col,
                fillstyle=fit_style(state)["fillstyle"],
                zorder=3,
            )
        ax.plot(
            [],
            [],
            "o",
            color=col,
            fillstyle=fit_style(state)["fillstyle"],
            label=lab + ("" if state == "on_chip" else f" ({FIT_LABELS[state]})"),
        )
    for k in sorted(kinds_seen):
        ax.scatter([], [], color="0.4", marker=_KIND_MARKER.get(k, "o"), label=k)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*intensity)
    ax.set_ylim(c.peak_flops * 1e-4, c.peak_flops * 2.5)
    ax.set_xlabel("arithmetic intensity (FLOP per byte touched)")
    ax.set_ylabel("attainable FLOP/s")
    ax.set_title(f"{c.name}: {c.peak_flops / 1e12:,.0f} TFLOP/s FP16 peak")
    # below the axes: inside, the legend would cover ceilings or ops
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=3)
    ax.grid(True, which="major", alpha=0.3)
    return ax


def capacity_chart(models, chips, *, mode="inference", batch=1, seq_len=2048, ax=None):
    """Bytes each model needs (bars, log scale) against each chip's memory levels (lines)."""
    ax = _ax(ax, (7, 4))
    models = [workloads.model(m) for m in models]
    need = [
        roofline.capacity(
            chips[0], m, mode=mode, batch=batch, seq_len=min(seq_len, m.max_positions)
        ).need_bytes
        for m in models
    ]
    y = np.arange(len(models))
    # A marker per model, not a bar: on a log axis a bar's length depends on where the axis starts.
    ax.plot(need, y, "D", color="#000000", ms=8, ls="none", label="bytes needed")
    for yi, n in zip(y, need, strict=True):
        ax.annotate(
            f"{n / 1e12:,.3g} TB" if n >= 1e12 else f"{n / 1e9:,.3g} GB",
            (n, yi),
            xytext=(0, 8),
            textcoords="offset points",
            ha="center",
            fontsize=8,
        )
    seen = {}
    for ch in chips:
        c = hardware.chip(ch)
        for lvl, cap in roofline.memory_capacities(c).items():
            seen.setdefault(round(cap / 1e6), []).append((c, lvl))
    styles = ["-", "--", "-.", ":"]
    for i, (cap_mb, owners) in enumerate(sorted(seen.items())):
        ax.axvline(
            cap_mb * 1e6,
            color=chip_color(owners[0][0]),
            ls=styles[i % 4],
            lw=1.5,
            label=f"{', '.join(f'{c.name} {lvl}' for c, lvl in owners)}: {cap_mb / 1e3:,.3g} GB",
        )
    ax.set_yticks(y, [m.name for m in models])
    ax.set_ylim(-0.6, len(models) - 0.4)
    ax.set_xscale("log")
    ax.set_xlabel(f"bytes needed for {mode} (batch {batch}, up to {seq_len} tokens)")
    ax.set_title(f"The capacity wall: {mode}")
    ax.legend(fontsize=7, loc="lower right")
    ax.set_xlim(min(need) / 3, max(max(need), max(seen) * 1e6) * 20)
    return ax


def energy_chart(step, chips, *, ax=None, per_token=True):
    """Energy of one step on each chip, split into compute and bytes moved per memory level."""
    ax = _ax(ax, (6.4, 4))
    chips = [hardware.chip(c) for c in chips]
    scale = 1.0 / step.real_tokens if per_token else 1.0
    unit = "mJ per token" if per_token else "mJ per step"
    levels = list(energy.BYTE)
    for i, c in enumerate(chips):
        e = roofline.step_energy(c, step)
        bottom = e.compute_j * scale * 1e3
        ax.bar(i, bottom, color="0.6", label="compute" if i == 0 else None)
        for lvl in levels:
            v = e.movement_j.get(lvl, 0.0) * scale * 1e3
            if v:
                ax.bar(i, v, bottom=bottom, color=_LEVEL_STYLE[lvl][0], label=f"data: {lvl}")
                bottom += v
        ax.text(i, bottom * 1.02, f"{e.data_share:.0%} data", ha="center", fontsize=8)
    handles, labs = ax.get_legend_handles_labels()
    uniq = dict(zip(labs, handles, strict=True))
    ax.legend(uniq.values(), uniq.keys(), fontsize=8, loc="upper left", ncol=3)
    ax.set_ylim(0, ax.get_ylim()[1] * 1.2)
    ax.set_xticks(range(len(chips)), [c.name for c in chips])
    ax.set_ylabel(unit)
    ax.set_title(f"Energy: {step.model.name} {step.phase}, batch {step.batch} (45 nm pJ table)")
    return ax


def energy_levels_chart(*, ax=None):
    """pJ per byte of each memory level against pJ per FLOP, and the intensity (FLOP/byte)
    below which an op spends more energy moving bytes than computing."""
    ax = _ax(ax, (6.4, 3.4))
    names = list(energy.BYTE)
    pj = [energy.BYTE[n].pj for n in names]
    y = np.arange(len(names))
    # markers, not bars: on a log axis a bar's length depends on where the axis starts
    for yi, n, v in zip(y, names, pj, strict=True):
        ax.plot(v, yi, "o", ms=11, color=_LEVEL_STYLE[n][0], ls="none")
    ax.axvline(
        energy.FLOP_FP16.pj,
        color="k",
        ls="--",
        label=f"one FP16 FLOP: {energy.FLOP_FP16.pj:.2f} pJ",
    )
    for yi, v in zip(y, pj, strict=True):
        ax.text(
            v * 1.35,
            yi,
            f"{v:,.3g} pJ/byte = {v / energy.FLOP_FP16.pj:,.0f} FLOPs",
            va="center",
            fontsize=8,
        )
    ax.set_yticks(
        y, [n + (" (assumed)" if "ASSUMPTION" in energy.BYTE[n].source else "") for n in names]
    )
    ax.set_xscale("log")
    ax.set_xlim(0.3, max(pj) * 30)
    ax.set_ylim(-0.6, len(names) - 0.4)
    ax.grid(True, axis="x", which="major", alpha=0.3)
    ax.set_xlabel("energy, pJ (45 nm; see ipusim.energy for sources)")
    ax.set_title("Reading one byte vs computing one FLOP")
    ax.legend(fontsize=8, loc="lower right")
    return ax


def sweep_chart(grid, *, seq_len=None, ax=None, mark_batch=None):
    """Upper bound on tokens/s against batch size for each chip in a ``roofline.sweep`` grid,
    at one sequence length; past a chip's memory the marker takes the fit state's style
    (``plots.style``: half filled where a tile chip streams, hollow where a GPU does not fit)."""
    ax = _ax(ax)
    j = 0 if seq_len is None else int(np.argmin(np.abs(grid.seq_lens - seq_len)))
    tps = grid.tokens_per_s[:, :, j]
    for k, name in enumerate(grid.chips):
        kind = hardware.chip(name).kind
        col = chip_color(name)
        ax.plot(grid.batches, tps[k], ls="-" if kind == "tile" else "--", color=col, label=name)
        nf = ~grid.fits[k, :, j]
        if (
            nf.any()
        ):  # past its memory a tile chip's bound streams from off-chip DRAM; a GPU has no room left
            state = "streams" if kind == "tile" else "does_not_fit"
            ax.plot(
                grid.batches[nf],
                tps[k][nf],
                "o",
                ls="none",
                color=col,
                mec=col,
                ms=6,
                zorder=3,
                fillstyle=fit_style(state)["fillstyle"],
                label=f"{name}: {FIT_LABELS[state]}",
            )
    if mark_batch is not None:
        ax.axvline(mark_batch, color="k", lw=0.8, alpha=0.5)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    what = "context" if grid.phase == "decode" else "sequence length"
    ax.set_xlabel("batch (sequences per step)")
    ax.set_ylabel(
        "tokens/s (upper bound)" if grid.phase != "decode" else "new tokens/s (upper bound)"
    )
    ax.set_title(f"{grid.model} {grid.phase}, {what} {int(grid.seq_lens[j])}")
    ax.legend(
        fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0)
    )  # outside: the curves fill the axes
    ax.grid(True, alpha=0.3)
    return ax
