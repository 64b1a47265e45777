"""Concept diagrams of the chips: memory levels (01), one BSP superstep (02), parallelism over
a grid of chips (06), embedding rows against memory granules (07)."""

from __future__ import annotations

import numpy as np
from matplotlib.patches import Rectangle

from ... import hardware
from ..style import PHASE_COLORS, chip_color, other_color
from .shapes import EDGE, FONT, GREY, arrow, box, canvas, lighten, new_ax


def _bytes(b: float) -> str:
    """Bytes as the unit people use for that size: KiB/MiB below a GB, GB above."""
    if b >= 1e9:
        return f"{b / 1e9:,.3g} GB"
    if b >= 2**20:
        m = b / 2**20
        return f"{m:,.0f} MiB" if m >= 10 else f"{m:.3g} MiB"
    return f"{b / 2**10:,.0f} KiB"


def _rate(bps: float) -> str:
    return f"{bps / 1e12:.3g} TB/s" if bps >= 1e12 else f"{bps / 1e9:.3g} GB/s"


# --------------------------------------------------------------------------------------------
# 01: memory hierarchy
# --------------------------------------------------------------------------------------------


def _unit_row(ax, x0, color, outer, top, bottom, n=6):
    """``n`` compute units side by side from ``x0``, then "...": each an ``outer`` (y, height) white
    box holding a ``top`` (label, y, height) and a ``bottom`` (label, y, height, fontsize) box."""
    y, h = outer
    for i in range(n):
        x = x0 + i * 0.85
        box(ax, x, y, 0.7, h, face="white", edge=color)
        box(
            ax,
            x + 0.08,
            top[1],
            0.54,
            top[2],
            top[0],
            face=lighten(color, 0.5),
            edge=color,
            fontsize=FONT - 3,
        )
        box(
            ax,
            x + 0.08,
            bottom[1],
            0.54,
            bottom[2],
            bottom[0],
            face=lighten(color, 0.2),
            edge=color,
            fontsize=bottom[3],
            color="white",
        )
    ax.text(x0 + 5.12, y + h / 2, "...", fontsize=FONT + 4, va="center", ha="center")


def memory_hierarchy(tile="gc200", gpu="a100-80gb", ax=None):
    """Tile chip (left) vs GPU (right): each memory level with its capacity and bandwidth.

    Every number is read from the presets (``hardware.chip``); the tile chip's Streaming Memory
    bandwidth is the preset's ASSUMPTION and is labelled so.
    """
    t, g = hardware.chip(tile), hardware.chip(gpu)
    if t.kind != "tile":
        raise ValueError(
            f"tile must be a tile-chip preset ({', '.join(hardware.TILE_PRESETS)}), got {tile!r}"
        )
    if g.kind != "gpu":
        raise ValueError(
            f"gpu must be a GPU preset ({', '.join(hardware.GPU_PRESETS)}), got {gpu!r}"
        )
    ax = canvas(ax, (12, 6.6), (0, 12), (0, 10.2))
    tc, gc = chip_color(t), chip_color(g)

    # ---- tile chip
    ax.text(
        3,
        9.85,
        f"{t.name.upper()} (tile chip)",
        ha="center",
        fontsize=FONT + 2,
        weight="bold",
        color=tc,
    )
    box(ax, 0.2, 4.2, 5.6, 5.2, face=lighten(tc, 0.85), edge=tc, lw=2)
    ax.text(0.4, 9.05, f"on the chip: {t.tiles:,} tiles", fontsize=FONT, weight="bold", va="center")
    _unit_row(
        ax, 0.5, tc, (7.1, 1.5), ("core", 7.9, 0.55), ("SRAM", 7.2, 0.6, FONT - 3)
    )  # core + own SRAM
    ax.text(
        0.4,
        6.65,
        f"tile SRAM: {t.tiles:,} x {_bytes(t.sram_per_tile_bytes)} = {_bytes(t.sram_bytes)}\n"
        f"({_bytes(t.data_bytes)} for data after the code reserve);\n"
        f"a tile reads only its own, {_rate(t.sram_bandwidth_bytes_per_s)} summed",
        fontsize=FONT,
        va="top",
    )
    arrow(ax, (0.6, 4.75), (5.4, 4.75), color=PHASE_COLORS["exchange"], both=True, lw=2)
    ax.text(
        3,
        5.0,
        f"exchange between tiles: {_rate(t.exchange_bandwidth_bytes_per_s)}",
        ha="center",
        fontsize=FONT,
        color=PHASE_COLORS["exchange"],
    )
    if t.offchip_bytes > 0:
        box(
            ax,
            0.2,
            0.5,
            5.6,
            1.5,
            f"Streaming Memory (DRAM, off chip)\n{_bytes(t.offchip_bytes)} per chip",
            face=GREY,
            fontsize=FONT,
        )
        arrow(ax, (3, 2.05), (3, 4.15), both=True, lw=2)
        ax.text(
            3.15,
            3.1,
            f"{_rate(t.offchip_bandwidth_bytes_per_s)} (ASSUMPTION:\nnot published)",
            fontsize=FONT,
            va="center",
        )
    else:
        ax.text(3, 1.2, "no off-chip memory on this card", ha="center", fontsize=FONT)

    # ---- GPU
    ax.text(
        9, 9.85, f"{g.name.upper()} (GPU)", ha="center", fontsize=FONT + 2, weight="bold", color=gc
    )
    box(ax, 6.2, 4.2, 5.6, 5.2, face=lighten(gc, 0.88), edge=gc, lw=2)
    ax.text(6.4, 9.05, f"on the chip: {g.sms} SMs", fontsize=FONT, weight="bold", va="center")
    _unit_row(ax, 6.5, gc, (7.6, 1.0), ("SM", 8.05, 0.45), ("smem", 7.67, 0.33, FONT - 4))
    ax.text(
        6.4,
        7.35,
        f"shared memory: {g.sms} x {_bytes(g.smem_per_sm_bytes)} = "
        f"{_bytes(g.sms * g.smem_per_sm_bytes)}",
        fontsize=FONT,
        va="top",
    )
    box(
        ax,
        6.5,
        4.55,
        5.0,
        1.5,
        f"L2 cache, shared by all SMs\n{_bytes(g.l2_bytes)}",
        face=lighten(gc, 0.6),
        edge=gc,
        fontsize=FONT,
    )
    arrow(ax, (10.6, 7.55), (10.6, 6.1), both=True, lw=1.5)  # right of the shared-memory line
    box(
        ax,
        6.2,
        0.5,
        5.6,
        1.5,
        f"HBM (stacked DRAM beside the chip)\n{_bytes(g.hbm_bytes)}",
        face=GREY,
        fontsize=FONT,
    )
    arrow(ax, (9, 2.05), (9, 4.5), both=True, lw=2)
    ax.text(
        9.15,
        3.25,
        f"{_rate(g.hbm_bandwidth_bytes_per_s)}: every\nweight read comes this way",
        fontsize=FONT,
        va="center",
    )
    return ax


# --------------------------------------------------------------------------------------------
# 02: one BSP superstep
# --------------------------------------------------------------------------------------------


def bsp_superstep(
    chip="gc200",
    compute_cycles=(1500, 2300, 1800, 1100),
    exchange_bytes=(4096, 2048, 6400, 3072),
    ax=None,
):
    """One superstep on a few tiles, in ``ipusim.tiles``' order: all wait at the sync, the exchange
    brings each tile its inputs, then each tile computes.

    ``compute_cycles[i]`` and ``exchange_bytes[i]`` are tile ``i``'s work (an illustration);
    the sync length and the exchange rate (bytes per cycle per tile) are the chip's. Each phase
    lasts as long as its slowest tile; the hatched part is the time the others wait.
    """
    c = hardware.chip(chip)
    if c.kind != "tile":
        raise ValueError(
            f"chip must be a tile-chip preset ({', '.join(hardware.TILE_PRESETS)}), got {chip!r}"
        )
    comp = np.asarray(compute_cycles, dtype=float)
    xb = np.asarray(exchange_bytes, dtype=float)
    if comp.ndim != 1 or comp.size < 2 or comp.size > 12 or xb.shape != comp.shape:
        raise ValueError(
            "compute_cycles and exchange_bytes must be two lists of equal length, 2-12 tiles "
            f"(got {comp.size} and {xb.size})"
        )
    if not (
        np.all(np.isfinite(comp))
        and np.all(comp > 0)
        and np.all(np.isfinite(xb))
        and np.all(xb >= 0)
    ):
        raise ValueError("compute_cycles must be > 0 and exchange_bytes >= 0, all finite")
    xc = xb / c.exchange_bytes_per_cycle_per_tile
    n = comp.size
    t_comp, t_sync, t_x = comp.max(), c.sync_cycles, xc.max()
    ax = new_ax(ax, (11, 0.55 * n + 2.2))
    ys = np.arange(n)[::-1]
    x0_exch, x0_comp = t_sync, t_sync + t_x  # sync, then exchange, then compute
    for y, cc, xx in zip(ys, comp, xc, strict=True):
        for left, used, longest, phase in (
            (x0_exch, xx, t_x, "exchange"),
            (x0_comp, cc, t_comp, "compute"),
        ):
            ax.barh(y, used, left=left, color=PHASE_COLORS[phase], height=0.6)
            ax.barh(
                y,
                longest - used,
                left=left + used,
                color="white",
                edgecolor="#9e9e9e",
                hatch="///",
                height=0.6,
                lw=0.5,
            )
    ax.axvspan(0, t_sync, color=PHASE_COLORS["sync"], alpha=0.35, lw=0)
    end = t_sync + t_x + t_comp
    top = n - 0.35
    for x0, x1, label in (
        (0, t_sync, f"sync\n{t_sync:,.0f} cycles"),
        (x0_exch, x0_comp, f"exchange\n{t_x:,.0f} cycles (slowest tile)"),
        (x0_comp, end, f"compute\n{t_comp:,.0f} cycles (slowest tile)"),
    ):
        ax.annotate(
            "", (x0, top), (x1, top), arrowprops={"arrowstyle": "<->", "color": EDGE, "lw": 1}
        )
        ax.text((x0 + x1) / 2, top + 0.12, label, ha="center", va="bottom", fontsize=FONT)
    ax.set_yticks(ys, [f"tile {i}" for i in range(n)], fontsize=FONT)
    ax.set_ylim(-0.6, n + 1.1)
    ax.set_xlim(0, end * 1.02)
    ax.set_xlabel(
        f"cycles ({c.name} at {c.clock_hz / 1e9:.4g} GHz: {end:,.0f} cycles = "
        f"{end / c.clock_hz * 1e6:.2f} µs)",
        fontsize=FONT,
    )
    ax.tick_params(labelsize=FONT - 1)
    for s in ("top", "right", "left"):
        ax.spines[s].set_visible(False)
    ax.set_title(
        f"One BSP superstep; exchange at {c.exchange_bytes_per_cycle_per_tile:.2f} bytes/cycle per tile, "
        "hatched = waiting for the slowest tile",
        fontsize=FONT,
        loc="left",
    )
    return ax


# --------------------------------------------------------------------------------------------
# 06: data, tensor and pipeline parallelism
# --------------------------------------------------------------------------------------------


def parallelism_grid(data: int = 2, tensor: int = 2, pipeline: int = 4, ax=None):
    """``data x tensor x pipeline`` chips: replicas stacked, each a grid of pipeline stages x tensor shards.

    ``data``, ``tensor`` and ``pipeline`` are a ``training.Placement``'s degrees (any Placement can be
    unpacked into them: ``parallelism_grid(p.data, p.tensor, p.pipeline)``).
    """
    from ...training import Placement

    p = Placement(data, tensor, pipeline, 1)  # validates the degrees
    if p.chips > 64:
        raise ValueError(
            f"draw at most 64 chips (data x tensor x pipeline = {p.chips}); pass smaller degrees"
        )
    bw, bh, sx, sy, gap = (
        1.25,
        0.7,
        1.75,
        0.95,
        0.55,
    )  # box size, column and row pitch, gap between replicas
    ax = new_ax(ax, (2.6 + 1.75 * p.pipeline, 1.0 + 0.8 * (p.data * p.tensor) + 0.35 * p.data))
    col = chip_color("tile")
    y, mids = 0.0, []
    for d in range(p.data)[::-1]:
        y0 = y
        for t in range(p.tensor)[::-1]:
            for s in range(p.pipeline):
                box(
                    ax,
                    s * sx,
                    y,
                    bw,
                    bh,
                    f"layers {s + 1}/{p.pipeline}\nshard {t + 1}/{p.tensor}",
                    face=lighten(col, 0.35 + 0.4 * (s % 2)),
                    edge=col,
                    fontsize=FONT - 1,
                )
            y += sy
        top = y - sy + bh
        for s in range(p.pipeline):
            if p.tensor > 1:  # the shards of one stage exchange partial results
                arrow(
                    ax,
                    (s * sx + bw + 0.1, y0 + 0.1),
                    (s * sx + bw + 0.1, top - 0.1),
                    color=PHASE_COLORS["exchange"],
                    both=True,
                    lw=1.5,
                )
            if s < p.pipeline - 1:
                arrow(
                    ax,
                    (s * sx + bw + 0.22, (y0 + top) / 2),
                    (s * sx + sx - 0.03, (y0 + top) / 2),
                    lw=1.5,
                )
        ax.text(-0.15, (y0 + top) / 2, f"replica {d + 1}", ha="right", va="center", fontsize=FONT)
        mids.append((y0 + top) / 2)
        y += gap
    if p.data > 1:
        xr = p.pipeline * sx - 0.1
        arrow(ax, (xr, mids[0]), (xr, mids[-1]), color="#7f7f7f", both=True, lw=1.5)
        ax.text(
            xr + 0.1,
            (mids[0] + mids[-1]) / 2,
            "data parallel:\naverage the\ngradients",
            va="center",
            fontsize=FONT - 1,
            color="#555555",
        )
    ax.set_xlim(-1.3, p.pipeline * sx + 1.1)
    ax.set_ylim(-0.2, y - gap + 0.1)
    ax.set_axis_off()
    ax.set_title(
        f"{p.chips} chips = data {p.data} x tensor {p.tensor} x pipeline {p.pipeline}. Black arrows: "
        "micro-batches flow through\nthe pipeline stages; red: the tensor shards of a stage combine "
        "partial results (all-reduce)",
        fontsize=FONT,
        loc="left",
    )
    return ax


# --------------------------------------------------------------------------------------------
# 07: embedding rows vs memory granules
# --------------------------------------------------------------------------------------------


def embedding_lookup(row_bytes=(8, 40, 512), ax=None):
    """Rows of ``row_bytes`` laid end to end, against 32-byte GPU sectors and 64-byte DRAM bursts.

    A look-up pays every granule its row touches; the useful share is row bytes / bytes fetched,
    averaged over where rows start (``embeddings.machines.granules``).
    """
    from ...embeddings import machines as em

    rb = [int(b) for b in np.atleast_1d(row_bytes)]
    if not rb or len(rb) > 4 or any(b <= 0 or b > 2048 for b in rb):
        raise ValueError(f"row_bytes must be 1-4 row sizes of 1-2048 bytes, got {row_bytes!r}")
    grans = (
        ("GPU sectors", em.SECTOR_BYTES, chip_color("gpu")),
        ("Streaming Memory bursts (ASSUMPTION)", em.STREAMING_GRANULE_BYTES, "#7f7f7f"),
    )
    ax = new_ax(ax, (12, 0.6 + 1.25 * len(rb)))
    W, y = (
        100.0,
        0.0,
    )  # drawing width of every row group; each group has its own bytes-to-width scale
    for b in rb:
        span = max(256, -(-3 * b // 64) * 64)  # bytes drawn: three rows, at least 256
        k = W / span
        for gi, (name, g, col) in enumerate(grans):
            yy = y - gi * 0.42
            for j in range(span // g):
                ax.add_patch(
                    Rectangle(
                        (j * g * k, yy - 0.16),
                        g * k,
                        0.32,
                        facecolor="white",
                        edgecolor=col,
                        lw=0.8,
                    )
                )
            for r in range(3):
                s0 = r * b
                if s0 + b > span:
                    break
                first, last = (s0 // g) * g, min(-(-(s0 + b) // g) * g, span)
                rc = other_color((1, 3, 0)[r])  # green, pink, orange: no chip's colour
                ax.add_patch(
                    Rectangle(
                        (first * k, yy - 0.16),
                        (last - first) * k,
                        0.32,
                        facecolor=rc,
                        alpha=0.22,
                        lw=0,
                    )
                )
                ax.add_patch(
                    Rectangle(
                        (s0 * k, yy - 0.07), b * k, 0.14, facecolor=rc, edgecolor="white", lw=0.6
                    )
                )
            useful = b / (em.granules(b, g) * g)
            ax.text(
                W + 2, yy, f"{g}-byte {name}: {useful:.0%} useful", va="center", fontsize=FONT - 1
            )
        ax.text(-2, y - 0.21, f"rows of\n{b} bytes", ha="right", va="center", fontsize=FONT)
        ax.text(
            W,
            y + 0.2,
            f"{span} bytes shown",
            ha="right",
            va="bottom",
            fontsize=FONT - 2,
            color="#757575",
        )
        y -= 1.25
    ax.set_xlim(-16, W + 48)
    ax.set_ylim(y + 0.55, 0.55)
    ax.set_axis_off()
    ax.set_title(
        "An embedding look-up fetches whole granules: three consecutive rows (dark) and the granules each "
        "touches (light);\nthe useful share is averaged over where a row starts "
        "(embeddings.machines.granules)",
        fontsize=FONT,
        loc="left",
    )
    return ax
