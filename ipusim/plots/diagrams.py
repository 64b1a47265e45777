"""Concept diagrams: one picture per idea, shown before the first data figure of its topic.

Each function takes ``ax=None`` (a new figure of a readable size when None), draws and returns
the axes. The numbers written on a diagram come from the library, never typed in: capacities
and bandwidths from ``ipusim.hardware`` presets, BSP phase lengths from a chip's sync and
exchange rates, batching timelines from ``ipusim.serving.simulate`` on a small toy service
model, rows from ``ipusim.packing`` on a seeded sample of ``ipusim.lengths``, check names from
``ipusim.checklist``, look-up granules from ``ipusim.embeddings``. Colours per chip come from
``ipusim.plots.style``; BSP phase colours from ``ipusim.plots.tiles``.

=======================  ==================================================================
``series_strip``         the notebooks 01-09 as boxes, the current one highlighted
``memory_hierarchy``     tile chip vs GPU: memory levels with capacities and bandwidths
``bsp_superstep``        sync, exchange and compute of one superstep over a few tiles
``batching_timelines``   a queue with a batcher, then one timeline per batching policy
``padding_rows``         the same requests padded, bucketed and packed into rows
``checklist_pipeline``   case -> checks C1..C8 -> verdict
``parallelism_grid``     data, tensor and pipeline parallelism on a grid of chips
``embedding_lookup``     rows of an embedding table against 32-byte sectors / 64-byte bursts
``sweep_grid``           a two-parameter sweep: one row per point, and a break-even line
``verdict_pipeline``     claim -> model -> rule -> verdict; published rows: calibration vs check
=======================  ==================================================================
"""

from __future__ import annotations

from types import MappingProxyType

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

from .. import hardware
from .style import PHASE_COLORS, chip_color, other_color, sequence_color

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

FONT = 10  # pt, body text of every diagram
_GREY = "#f0f0f0"
_EDGE = "#404040"


def _new_ax(ax, size):
    if ax is None:
        _, ax = plt.subplots(figsize=size, layout="constrained")
    return ax


def _canvas(ax, size, xlim, ylim):
    """An axes with data coordinates ``xlim`` x ``ylim`` and no frame, for box-and-arrow drawings."""
    ax = _new_ax(ax, size)
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_axis_off()
    return ax


def _box(
    ax,
    x,
    y,
    w,
    h,
    text="",
    *,
    face=_GREY,
    edge=_EDGE,
    lw=1.2,
    fontsize=FONT,
    color="k",
    weight="normal",
    round_=0.08,
    alpha=1.0,
    ha="center",
):
    ax.add_patch(
        FancyBboxPatch(
            (x, y),
            w,
            h,
            boxstyle=f"round,pad=0,rounding_size={round_}",
            facecolor=face,
            edgecolor=edge,
            lw=lw,
            alpha=alpha,
        )
    )
    if text:
        tx = x + w / 2 if ha == "center" else x + 0.12
        ax.text(
            tx, y + h / 2, text, ha=ha, va="center", fontsize=fontsize, color=color, weight=weight
        )


def _arrow(ax, xy0, xy1, *, color=_EDGE, lw=1.5, style="-|>", both=False):
    ax.add_patch(
        FancyArrowPatch(
            xy0,
            xy1,
            arrowstyle="<|-|>" if both else style,
            mutation_scale=14,
            color=color,
            lw=lw,
            shrinkA=0,
            shrinkB=0,
        )
    )


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


def _lighten(color, amount=0.75):
    from matplotlib.colors import to_rgb

    r, g, b = to_rgb(color)
    return (r + (1 - r) * amount, g + (1 - g) * amount, b + (1 - b) * amount)


# --------------------------------------------------------------------------------------------
# Where this notebook fits
# --------------------------------------------------------------------------------------------


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
    ax = _canvas(ax, (12, 1.25), (-0.05, n * 1.5 - 0.25), (0, 1))
    hi = chip_color("tile")
    for i, (num, title) in enumerate(SERIES):
        x = i * 1.5
        on = num == key
        _box(
            ax,
            x,
            0.08,
            1.2,
            0.84,
            f"{num}\n{title.replace(' ', chr(10), 1) if len(title) > 12 else title}",
            face=hi if on else _GREY,
            edge=hi if on else "#b0b0b0",
            lw=2 if on else 1,
            color="white" if on else "#404040",
            weight="bold" if on else "normal",
            fontsize=FONT - 1,
        )
        if i < n - 1:
            _arrow(ax, (x + 1.22, 0.5), (x + 1.48, 0.5), color="#b0b0b0", lw=1)
    ax.set_title("Where this notebook fits in the series", fontsize=FONT, loc="left")
    return ax


# --------------------------------------------------------------------------------------------
# 01: memory hierarchy
# --------------------------------------------------------------------------------------------


def _unit_row(ax, x0, color, outer, top, bottom, n=6):
    """``n`` compute units side by side from ``x0``, then "...": each an ``outer`` (y, height) white
    box holding a ``top`` (label, y, height) and a ``bottom`` (label, y, height, fontsize) box."""
    y, h = outer
    for i in range(n):
        x = x0 + i * 0.85
        _box(ax, x, y, 0.7, h, face="white", edge=color)
        _box(
            ax,
            x + 0.08,
            top[1],
            0.54,
            top[2],
            top[0],
            face=_lighten(color, 0.5),
            edge=color,
            fontsize=FONT - 3,
        )
        _box(
            ax,
            x + 0.08,
            bottom[1],
            0.54,
            bottom[2],
            bottom[0],
            face=_lighten(color, 0.2),
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
    ax = _canvas(ax, (12, 6.6), (0, 12), (0, 10.2))
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
    _box(ax, 0.2, 4.2, 5.6, 5.2, face=_lighten(tc, 0.85), edge=tc, lw=2)
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
    _arrow(ax, (0.6, 4.75), (5.4, 4.75), color=PHASE_COLORS["exchange"], both=True, lw=2)
    ax.text(
        3,
        5.0,
        f"exchange between tiles: {_rate(t.exchange_bandwidth_bytes_per_s)}",
        ha="center",
        fontsize=FONT,
        color=PHASE_COLORS["exchange"],
    )
    if t.offchip_bytes > 0:
        _box(
            ax,
            0.2,
            0.5,
            5.6,
            1.5,
            f"Streaming Memory (DRAM, off chip)\n{_bytes(t.offchip_bytes)} per chip",
            face=_GREY,
            fontsize=FONT,
        )
        _arrow(ax, (3, 2.05), (3, 4.15), both=True, lw=2)
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
    _box(ax, 6.2, 4.2, 5.6, 5.2, face=_lighten(gc, 0.88), edge=gc, lw=2)
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
    _box(
        ax,
        6.5,
        4.55,
        5.0,
        1.5,
        f"L2 cache, shared by all SMs\n{_bytes(g.l2_bytes)}",
        face=_lighten(gc, 0.6),
        edge=gc,
        fontsize=FONT,
    )
    _arrow(ax, (10.6, 7.55), (10.6, 6.1), both=True, lw=1.5)  # right of the shared-memory line
    _box(
        ax,
        6.2,
        0.5,
        5.6,
        1.5,
        f"HBM (stacked DRAM beside the chip)\n{_bytes(g.hbm_bytes)}",
        face=_GREY,
        fontsize=FONT,
    )
    _arrow(ax, (9, 2.05), (9, 4.5), both=True, lw=2)
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
    ax = _new_ax(ax, (11, 0.55 * n + 2.2))
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
            "", (x0, top), (x1, top), arrowprops={"arrowstyle": "<->", "color": _EDGE, "lw": 1}
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
# 03: a queue with a batcher, and one timeline per policy
# --------------------------------------------------------------------------------------------

_TOY_FIXED_S = (
    0.004  # s per batch pass (toy service model for the timelines; ASSUMPTION, illustrative)
)
_TOY_PER_TOKEN_S = 5e-6  # s per computed token slot (ditto)
_TOY_LEN_STEP = 32  # tokens per service-table column


def _toy_service(max_rows=16, max_len=512, packed=False):
    """A padded (or packed) ``ServiceModel`` whose batch time is a fixed pass plus a cost per token slot."""
    from ..serving import ServiceModel

    rows = np.arange(max_rows + 1)[:, None]
    if packed:  # one column: rows of max_len tokens
        tab = np.zeros((max_rows + 1, 2))
        tab[1:, 1] = _TOY_FIXED_S + _TOY_PER_TOKEN_S * rows[1:, 0] * max_len
        return ServiceModel("toy packed", tab, max_len, packed=True, pack_len=max_len, source="toy")
    cols = np.arange(max_len // _TOY_LEN_STEP + 1)[None, :]
    tab = _TOY_FIXED_S + _TOY_PER_TOKEN_S * rows * cols * _TOY_LEN_STEP
    tab[0, :] = 0.0
    tab[:, 0] = 0.0
    return ServiceModel("toy padded", tab, _TOY_LEN_STEP, source="toy")


def toy_policies(max_batch: int = 4) -> dict:
    """The six policies of ``ipusim.policies``, built by ``policies.make`` with small knobs for a timeline."""
    from .. import policies

    kw = {
        "static": {"timeout_s": 0.010},
        "token": {"max_tokens": 512, "token_max_batch": 8},
        "buckets": {"edges": (128, 512)},
        "adaptive": {"latency_target_s": 0.02},
        "continuous": {"kv_capacity_tokens": 10_000},
    }
    return {
        name: policies.make(name, max_batch=max_batch, max_delay_s=0.004, **kw.get(name, {}))
        for name in policies.POLICIES
    }


def batching_timelines(n_requests: int = 12, rate_per_s: float = 300.0, seed: int = 3, ax=None):
    """A queue and a batcher (top), then when each request waits and is served under each policy.

    The timelines are ``serving.simulate`` (``simulate_generation`` for continuous batching)
    on the same ``n_requests`` Poisson arrivals and lengths, with a toy service model (4 ms per
    pass + 5 µs per computed token slot; an illustration, not a chip). A thin grey line is a
    request waiting in the queue, a coloured bar its batch running (continuous: the request's
    run from its first step to its last token).

    Returns the figure (queue picture on top, one axes per policy below); given ``ax``, draws only
    the queue picture on it and returns ``ax``.
    """
    from .. import arrivals, lengths, policies, serving
    from ..serving.generation import GenerationModel

    n = int(n_requests)
    if n != n_requests or not 2 <= n <= 40:
        raise ValueError(
            f"n_requests must be a whole number in 2..40 (one line each), got {n_requests!r}"
        )
    if not (np.isfinite(rate_per_s) and rate_per_s > 0):
        raise ValueError(
            f"rate_per_s must be a positive number of requests per second, got {rate_per_s!r}"
        )
    arr = arrivals.poisson(rate_per_s, n, seed=seed)
    lens = np.minimum(lengths.sample(n, long_fraction=0.3, seed=seed), 512)
    pol = toy_policies()
    padded, packed = _toy_service(), _toy_service(packed=True)
    runs = {}
    for name, p in pol.items():
        if isinstance(p, policies.Continuous):
            dec = np.full((p.max_batch + 1, 17), 0.0)
            dec[1:, :] = (
                0.001 + 0.0001 * np.arange(1, p.max_batch + 1)[:, None]
            )  # s per decode step (toy)
            gen = GenerationModel("toy", padded, dec, 64, source="toy")
            runs[name] = serving.simulate_generation(arr, lens // 4 + 1, np.full(n, 3), p, gen)
        else:
            runs[name] = serving.simulate(
                arr, lens, p, packed if isinstance(p, policies.TokenBudget) else padded
            )

    if ax is None:
        fig = plt.figure(figsize=(12, 1.9 + 1.15 * len(runs)), layout="constrained")
        gs = fig.add_gridspec(len(runs) + 1, 1, height_ratios=[1.6] + [1] * len(runs))
        top = fig.add_subplot(gs[0])
        axes = [fig.add_subplot(gs[i + 1]) for i in range(len(runs))]
        for a in axes[1:]:
            a.sharex(axes[0])
    else:
        top, axes = ax, None
    _queue_picture(top)
    if axes is None:
        return top
    t_end = max(float(np.max(r.finish_s)) for r in runs.values()) * 1e3
    for a, (name, r) in zip(axes, runs.items(), strict=True):
        y = np.arange(n)[::-1]
        a.hlines(y, arr * 1e3, r.start_s * 1e3, color="#9e9e9e", lw=1.2)
        a.plot(arr * 1e3, y, "|", color="k", ms=6)
        bid = r.batch_id
        for i in range(n):
            col = sequence_color(2 * int(bid[i]) if bid[i] >= 0 else 2 * i)  # dark shades first
            a.barh(
                y[i],
                (r.finish_s[i] - r.start_s[i]) * 1e3,
                left=r.start_s[i] * 1e3,
                height=0.7,
                color=col,
            )
        a.set_yticks([])
        a.set_ylim(-0.8, n - 0.2)
        a.set_xlim(0, t_end * 1.01)
        what = (
            " (bar: a request's run, from its first step to its last token)"
            if name == "continuous"
            else ""
        )
        a.set_title(f"{name}: {pol[name].describe()}{what}", fontsize=FONT, loc="left", pad=2)
        a.tick_params(labelsize=FONT - 1)
        for s in ("top", "right", "left"):
            a.spines[s].set_visible(False)
        if a is not axes[-1]:
            a.tick_params(labelbottom=False)
    axes[-1].set_xlabel(
        "time, ms (| arrival, grey: waiting in the queue, bar: served, one colour per batch)",
        fontsize=FONT,
    )
    return axes[0].figure


def _queue_picture(ax):
    ax.set_xlim(0, 12)
    ax.set_ylim(0, 2)
    ax.set_axis_off()
    for i, x in enumerate(np.linspace(0.3, 1.5, 4)):
        ax.add_patch(Rectangle((x, 0.75), 0.22, 0.5, color=sequence_color(2 * i)))
    ax.text(1.0, 0.35, "requests arrive", ha="center", fontsize=FONT)
    _arrow(ax, (1.85, 1.0), (2.6, 1.0))
    _box(ax, 2.7, 0.55, 3.0, 0.9, face=_GREY)
    for i in range(5):
        ax.add_patch(
            Rectangle((3.0 + i * 0.5, 0.75), 0.35, 0.5, color=sequence_color(2 * i + 8), alpha=0.8)
        )
    ax.text(4.2, 0.25, "queue (first in, first out)", ha="center", fontsize=FONT)
    _arrow(ax, (5.8, 1.0), (6.5, 1.0))
    _box(
        ax,
        6.6,
        0.45,
        2.2,
        1.1,
        "batcher: when to send,\nhow many together",
        face="#fff2cc",
        fontsize=FONT,
    )
    _arrow(ax, (8.9, 1.0), (9.6, 1.0))
    _box(
        ax,
        9.7,
        0.45,
        2.1,
        1.1,
        "device runs\none batch",
        face=_GREY,
        fontsize=FONT,
    )
    ax.text(
        0.0,
        1.85,
        "A batching server; below, the same 12 arrivals under each policy "
        "(simulated, toy service times)",
        fontsize=FONT,
        va="top",
    )


# --------------------------------------------------------------------------------------------
# 04: padded vs bucketed vs packed rows
# --------------------------------------------------------------------------------------------

ROWS_SAMPLE = MappingProxyType(
    {"n": 10, "long_fraction": 0.3, "seed": 5}
)  # padding_rows' default (lengths.sample)


def padding_rows(lengths=None, max_len: int = 512, buckets=(128, 256, 512), ax=None):
    """The same requests three ways: padded to ``max_len``, padded to their bucket, packed (SPFHP).

    ``lengths`` defaults to ``ROWS_SAMPLE``: 10 requests drawn (seed 5) by ``lengths.sample`` with 30% long texts.
    Each panel's title gives ``Packing.efficiency`` (real tokens / computed slots). Returns the figure
    of three panels; given ``ax``, draws only the packed panel on it and returns ``ax``.
    """
    from .. import lengths as L
    from .. import packing

    lens = L.sample(**ROWS_SAMPLE) if lengths is None else np.asarray(lengths)
    if lens.ndim != 1 or lens.size == 0 or lens.size > 40:
        raise ValueError(f"lengths must be a list of 1-40 request lengths, got {lens.size}")
    runs = [
        packing.pack(lens, max_len, "pad"),
        packing.pack(lens, max_len, "bucket", buckets=list(buckets)),
        packing.pack(lens, max_len, "spfhp"),
    ]
    edges = sorted(set(int(b) for b in buckets) | {max_len})
    titles = [
        f"padded to the row length, {max_len}",
        f"bucketed: padded to its bucket's edge {tuple(edges)}",
        "packed (SPFHP): several requests share a row",
    ]
    if ax is None:
        fig, axes = plt.subplots(
            1, 3, figsize=(13, 0.3 * lens.size + 1.6), sharey=True, layout="constrained"
        )
    else:
        axes = [ax]
        runs, titles = runs[2:], titles[2:]
    order = np.argsort(-lens, kind="stable")
    colors = {int(i): sequence_color(k) for k, i in enumerate(order)}
    for a, p, title in zip(axes, runs, titles, strict=True):
        row_len = p.row_lengths()
        rows = {}
        for i, r in enumerate(p.seq_row):
            rows.setdefault(int(r), []).append(i)
        for y, (r, members) in enumerate(
            sorted(rows.items(), key=lambda kv: -sum(lens[m] for m in kv[1]))
        ):
            yy = lens.size - 1 - y
            a.barh(yy, row_len[r], color="#e0e0e0", height=0.75, edgecolor="#bdbdbd", lw=0.5)
            x = 0
            for m in sorted(members, key=lambda m: -lens[m]):
                a.barh(yy, lens[m], left=x, color=colors[m], height=0.75, edgecolor="white", lw=0.8)
                if lens[m] >= 45:
                    a.text(
                        x + lens[m] / 2,
                        yy,
                        f"{lens[m]}",
                        ha="center",
                        va="center",
                        fontsize=FONT - 2,
                    )
                x += lens[m]
        a.set_title(
            f"{title}\n{p.rows} rows, {p.efficiency:.0%} of slots carry tokens", fontsize=FONT
        )
        a.set_xlim(0, max_len)
        a.set_xlabel("token slots in a row", fontsize=FONT)
        a.set_yticks([])
        a.tick_params(labelsize=FONT - 1)
        if p.strategy == "bucket":
            for b in edges[:-1]:
                a.axvline(b, color="#757575", lw=0.8, ls=":")
        for s in ("top", "right", "left"):
            a.spines[s].set_visible(False)
    axes[0].set_ylim(-0.6, lens.size - 0.4)
    return axes[0].figure if ax is None else axes[0]


# --------------------------------------------------------------------------------------------
# 05: the checklist's pipeline
# --------------------------------------------------------------------------------------------


def checklist_pipeline(ax=None):
    """A case goes through the eight checks C1..C8 (named as ``ipusim.checklist`` names them) to a verdict."""
    from ..checklist.checks import CHECK_NAMES
    from ..checklist.verdict import POLICY

    ax = _canvas(ax, (13, 3.2), (0, 14), (0.3, 3.8))
    _box(
        ax,
        0.05,
        1.15,
        1.9,
        2.5,
        "a case\n\nmodel,\ntraffic,\np99 target,\ncandidates,\nprices",
        face="#fff2cc",
        fontsize=FONT,
    )
    kinds = {"C6": ("#2ca02c", "training"), "C7": ("#7f7f7f", "questionnaire"), "C8": (_EDGE, "")}
    x0, w, h, gap = 2.45, 2.05, 1.05, 0.15
    for k, cid in enumerate(CHECK_NAMES):
        x, y = x0 + (k % 4) * (w + gap), 2.6 if k < 4 else 1.2
        edge = kinds.get(cid, (chip_color("tile"), ""))[0]
        _box(
            ax,
            x,
            y,
            w,
            h,
            f"{cid}\n{_wrap(CHECK_NAMES[cid], 20)}",
            face="white",
            edge=edge,
            lw=1.6,
            fontsize=FONT,
        )
    _arrow(ax, (1.98, 2.4), (2.4, 2.4))
    right = x0 + 4 * (w + gap)
    _arrow(ax, (right - 0.1, 2.4), (right + 0.3, 2.4))
    _box(
        ax,
        right + 0.35,
        1.15,
        14 - right - 0.4,
        2.5,
        f"verdict\npoints, with\nranked reasons\n\n>= {POLICY['migrate_at']}: migrate*\n>= {POLICY['pilot_at']}: pilot\n"
        f"< {POLICY['pilot_at']}: stay",
        face=_lighten(chip_color("tile"), 0.7),
        fontsize=FONT,
    )
    ax.text(
        x0,
        0.85,
        "blue: serving checks (C2's capacities feed C3-C5)   green: training, if the case asks   "
        "grey: software questionnaire\nC8 turns C1-C7 into the experiments a proof of concept should run",
        fontsize=FONT - 1,
        va="top",
        color="#404040",
    )
    ax.text(
        14,
        0.85,
        "* and software risk below high;\na veto (e.g. nothing fits) means stay",
        ha="right",
        va="top",
        fontsize=FONT - 1,
        color="#404040",
    )
    ax.set_title(
        "The checklist: one case, eight checks, one verdict", fontsize=FONT + 1, loc="left"
    )
    return ax


def _wrap(text: str, width: int) -> str:
    words, lines, cur = text.split(), [], ""
    for wd in words:
        if cur and len(cur) + 1 + len(wd) > width:
            lines.append(cur)
            cur = wd
        else:
            cur = f"{cur} {wd}".strip()
    lines.append(cur)
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# 06: data, tensor and pipeline parallelism
# --------------------------------------------------------------------------------------------


def parallelism_grid(data: int = 2, tensor: int = 2, pipeline: int = 4, ax=None):
    """``data x tensor x pipeline`` chips: replicas stacked, each a grid of pipeline stages x tensor shards.

    ``data``, ``tensor`` and ``pipeline`` are a ``training.Placement``'s degrees (any Placement can be
    unpacked into them: ``parallelism_grid(p.data, p.tensor, p.pipeline)``).
    """
    from ..training import Placement

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
    ax = _new_ax(ax, (2.6 + 1.75 * p.pipeline, 1.0 + 0.8 * (p.data * p.tensor) + 0.35 * p.data))
    col = chip_color("tile")
    y, mids = 0.0, []
    for d in range(p.data)[::-1]:
        y0 = y
        for t in range(p.tensor)[::-1]:
            for s in range(p.pipeline):
                _box(
                    ax,
                    s * sx,
                    y,
                    bw,
                    bh,
                    f"layers {s + 1}/{p.pipeline}\nshard {t + 1}/{p.tensor}",
                    face=_lighten(col, 0.35 + 0.4 * (s % 2)),
                    edge=col,
                    fontsize=FONT - 1,
                )
            y += sy
        top = y - sy + bh
        for s in range(p.pipeline):
            if p.tensor > 1:  # the shards of one stage exchange partial results
                _arrow(
                    ax,
                    (s * sx + bw + 0.1, y0 + 0.1),
                    (s * sx + bw + 0.1, top - 0.1),
                    color=PHASE_COLORS["exchange"],
                    both=True,
                    lw=1.5,
                )
            if s < p.pipeline - 1:
                _arrow(
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
        _arrow(ax, (xr, mids[0]), (xr, mids[-1]), color="#7f7f7f", both=True, lw=1.5)
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
    from ..embeddings import machines as em

    rb = [int(b) for b in np.atleast_1d(row_bytes)]
    if not rb or len(rb) > 4 or any(b <= 0 or b > 2048 for b in rb):
        raise ValueError(f"row_bytes must be 1-4 row sizes of 1-2048 bytes, got {row_bytes!r}")
    grans = (
        ("GPU sectors", em.SECTOR_BYTES, chip_color("gpu")),
        ("Streaming Memory bursts (ASSUMPTION)", em.STREAMING_GRANULE_BYTES, "#7f7f7f"),
    )
    ax = _new_ax(ax, (12, 0.6 + 1.25 * len(rb)))
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


# --------------------------------------------------------------------------------------------
# 08: a two-parameter sweep
# --------------------------------------------------------------------------------------------


def sweep_grid(n: int = 6, ax=None):
    """How a two-parameter sweep is read: an ``n x n`` grid of simulated chips, one table row per point, and the
    break-even contour that ``sweep.break_even`` interpolates between the two rows that bracket a ratio of 1.

    A concept sketch with no numbers: where the contour lies is what notebook 08 computes.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 3 <= n <= 12:
        raise ValueError(f"n must be a whole number of grid points per axis in 3..12, got {n!r}")
    n = int(n)
    ax = _new_ax(ax, (8.5, 4.8))
    X, Y = np.meshgrid(np.arange(n), np.arange(n))
    contour = lambda x: (n - 1) * 0.95 - 0.8 * x  # noqa: E731  a sketched falling contour
    ahead = Y > contour(X)
    ax.scatter(
        X[~ahead],
        Y[~ahead],
        s=110,
        color=_lighten(chip_color("gpu"), 0.45),
        edgecolors="k",
        lw=0.5,
        label="ratio < 1: tile chip behind the GPU",
        zorder=3,
    )
    ax.scatter(
        X[ahead],
        Y[ahead],
        s=110,
        color=_lighten(chip_color("tile"), 0.3),
        edgecolors="k",
        lw=0.5,
        label="ratio > 1: tile chip ahead",
        zorder=3,
    )
    xs = np.linspace(-0.3, n - 0.7, 50)
    ax.plot(xs, contour(xs), "k-", lw=2, label="break-even contour (ratio = 1)", zorder=2)
    cx = n // 2
    lo, hi = int(np.floor(contour(cx))), int(np.floor(contour(cx))) + 1
    ax.plot([cx, cx], [lo, hi], color="#ff7f0e", lw=4, alpha=0.8, zorder=2)
    ax.plot(cx, contour(cx), "D", color="#ff7f0e", ms=9, mec="k", zorder=4)
    ax.annotate(
        "break_even: interpolated between\nthe two rows that bracket ratio 1",
        (cx, contour(cx)),
        (n - 0.1, 2.2),
        fontsize=FONT - 1,
        arrowprops={"arrowstyle": "->", "lw": 1},
        annotation_clip=False,
    )
    ax.annotate(
        "one point = one simulation = one\ntable row: point_key, fit, time_s,\nratio, ...",
        (n - 1, 0),
        (n - 0.1, 0.0),
        fontsize=FONT - 1,
        va="center",
        arrowprops={"arrowstyle": "->", "lw": 1},
        annotation_clip=False,
    )
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_xlim(-0.6, n - 0.4)
    ax.set_ylim(-0.6, n - 0.4)
    ax.set_xlabel("parameter 1 (e.g. tiles per chip)", fontsize=FONT)
    ax.set_ylabel("parameter 2 (e.g. SRAM per tile)", fontsize=FONT)
    ax.legend(fontsize=FONT - 1, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_title(
        "A two-parameter sweep, read as notebook 08 reads it (a sketch: the sweeps compute where "
        "the contour lies)",
        fontsize=FONT,
        loc="left",
    )
    return ax


# --------------------------------------------------------------------------------------------
# 09: how a verdict is reached, and how far to trust it
# --------------------------------------------------------------------------------------------


def verdict_pipeline(ax=None):
    """A claim goes through ipusim's numbers and the claim's rule to one of three verdicts (top);
    the published measurements split into calibration rows, which set parameters (in-sample
    error), and check rows, which nothing was set from (held-out error) (bottom)."""
    from .claims import VERDICT_COLORS

    ax = _canvas(ax, (13, 4.6), (0, 14), (0, 4.9))
    _box(
        ax,
        0.1,
        3.0,
        2.4,
        1.3,
        "a claim\nquoted from the articles\n(docs/claims.md)",
        face="#fff2cc",
    )
    _arrow(ax, (2.55, 3.65), (2.95, 3.65))
    _box(ax, 3.0, 3.0, 2.9, 1.3, "ipusim's numbers\nthe claim's workload,\nsimulated on both chips")
    _arrow(ax, (5.95, 3.65), (6.35, 3.65))
    _box(
        ax,
        6.4,
        3.0,
        2.9,
        1.3,
        "the claim's rule\na comparator and a threshold\n(ipusim/claims/rules.py)",
        face="white",
    )
    outcomes = (
        ("supported", "supported: the numbers meet the rule"),
        ("contradicted", "contradicted: they do not"),
        ("depends", "depends: on a price or a choice;\nthe break-even says where it flips"),
    )
    for k, (state, text) in enumerate(outcomes):
        y = 3.95 - k * 0.62
        _arrow(ax, (9.35, 3.65), (9.75, y + 0.25), lw=1.2)
        _box(
            ax,
            9.8,
            y,
            4.1,
            0.52,
            text,
            face=_lighten(VERDICT_COLORS[state], 0.55),
            edge=VERDICT_COLORS[state],
            fontsize=FONT - 1,
            ha="left",
        )
    ax.text(0.1, 4.65, "How a verdict is reached (section 1)", fontsize=FONT + 1, weight="bold")

    ax.text(0.1, 2.35, "How far to trust the numbers (section 3)", fontsize=FONT + 1, weight="bold")
    _box(
        ax,
        0.1,
        0.45,
        2.4,
        1.55,
        "published\nmeasurements\n(ipusim/data/\npublished.csv)",
        face="#fff2cc",
    )
    _box(ax, 3.0, 1.25, 2.9, 0.8, "calibration rows\na parameter is set from each")
    _box(ax, 3.0, 0.2, 2.9, 0.8, "check rows\nnothing is set from them", face="white")
    _arrow(ax, (2.55, 1.4), (2.95, 1.65))
    _arrow(ax, (2.55, 1.0), (2.95, 0.6))
    _arrow(ax, (4.45, 2.1), (4.45, 2.95))
    ax.text(4.55, 2.5, "set the model's\nparameters", fontsize=FONT - 1, va="center")
    _box(ax, 6.4, 1.25, 2.9, 0.8, "in-sample error\nsmall by construction", face=_GREY)
    _box(
        ax,
        6.4,
        0.2,
        2.9,
        0.8,
        "held-out error\nhow far a prediction is off",
        face="white",
        edge=_EDGE,
        lw=1.8,
        weight="bold",
    )
    _arrow(ax, (5.95, 1.65), (6.35, 1.65))
    _arrow(ax, (5.95, 0.6), (6.35, 0.6))
    ax.text(
        9.8,
        1.1,
        "Each row is predicted again with the\nparameters in force. A verdict is only as\n"
        "good as the held-out error of the\nmodel it rests on.",
        fontsize=FONT,
        va="center",
        color="#404040",
    )
    ax.set_title(
        "From a claim to a verdict, and how far to trust it", fontsize=FONT + 1, loc="left"
    )
    return ax
