"""Profiler views of the tile machine (what PopVision's Graph Analyser shows for a real IPU).

Each function takes a ``tiles.TileProfile`` (or a ``machine.StepResult``), draws on ``ax``
(a new figure when None) and returns the axes.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from .style import PHASE_COLORS, legend_outside, other_color

KIB = 1024

LIMIT_COLOR = "#000000"  # a tile's SRAM limit, drawn as a line
FLOORPLAN_COLUMNS = (
    16  # ASSUMPTION: GC2 has 16 tile columns (IPUG §2.1); GC200 layout not published
)


def _ax(ax, size=(7, 4)):
    if ax is None:
        _, ax = plt.subplots(figsize=size)
    return ax


def memory_heatmap(prof, ax=None, columns: int = FLOORPLAN_COLUMNS):
    """Peak bytes per tile over the tile floor plan: ``columns`` rows of tiles, tile 0 top left."""
    ax = _ax(ax, (9, 3.2))
    mem = prof.memory / KIB
    T = mem.size
    per = -(-T // columns)
    grid = np.full(columns * per, np.nan)
    grid[:T] = mem
    limit = prof.chip.sram_per_tile_bytes / KIB
    vmax = max(limit, mem.max()) * 1.01  # room above the limit, so its line shows on the colour bar
    im = ax.imshow(
        grid.reshape(columns, per),
        aspect="auto",
        cmap="viridis",
        vmin=min(mem.min(), limit) * 0.98,
        vmax=vmax,
        interpolation="nearest",
    )
    cb = ax.figure.colorbar(im, ax=ax, pad=0.01)
    cb.ax.axhline(limit, color=LIMIT_COLOR, lw=2)
    cb.set_label(f"peak memory per tile (KiB)\nblack line: tile limit {limit:,.0f} KiB")
    ax.set_xlabel(f"tile position within its column ({per} tiles per column)")
    ax.set_ylabel(f"tile column (one row each, {columns})")
    ax.set_title(
        f"{prof.chip.name}: tile memory, {prof.result.model} "
        f"(max {mem.max():,.0f} of {limit:,.0f} KiB)"
    )
    return ax


def memory_histogram(prof, ax=None, bins: int = 64):
    """Histogram of peak (and always-live) bytes per tile, with the tile limit marked."""
    ax = _ax(ax)
    limit = prof.chip.sram_per_tile_bytes / KIB
    bins = np.linspace(0, max(limit, prof.memory.max() / KIB) * 1.02, bins)
    ax.hist(
        prof.memory / KIB,
        bins=bins,
        color=other_color(0),
        alpha=0.8,
        label="peak (always-live + temporary)",
    )
    ax.hist(prof.always_live / KIB, bins=bins, color="tab:gray", alpha=0.6, label="always-live")
    ax.axvline(limit, color=LIMIT_COLOR, lw=2, label=f"tile limit {limit:,.0f} KiB")
    ax.set_xlabel("memory per tile (KiB)")
    ax.set_ylabel("tiles")
    ax.set_title(
        f"{prof.chip.name}: memory per tile, {prof.result.model} batch {prof.result.batch}"
    )
    ax.legend(fontsize=8)
    return ax


def fullest_tiles(prof, n: int = 5, ax=None):
    """The ``n`` fullest tiles: always-live and temporary bytes, with the op at the peak."""
    ax = _ax(ax, (7, 2.8))
    top = prof.fullest_tiles(n)
    y = np.arange(len(top))[::-1]
    al = np.array([t["always_live"] for t in top]) / KIB
    tmp = np.array([t["temporary"] for t in top]) / KIB
    ax.barh(y, al, color="tab:gray", label="always-live (code, weights, KV)")
    ax.barh(y, tmp, left=al, color=other_color(0), label="temporary (peak op)")
    limit = prof.chip.sram_per_tile_bytes / KIB
    ax.axvline(limit, color=LIMIT_COLOR, lw=2, label="tile limit")
    ax.set_yticks(y, [f"tile {t['tile']} ({t['op']})" for t in top])
    ax.set_xlabel("KiB")
    ax.set_title(f"The {len(top)} fullest tiles")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=3)
    return ax


def bsp_trace(prof, ax=None, groups: int = 32, ops=None):
    """BSP trace of one instance of each op (one layer): per tile group, compute/sync/exchange.

    Tiles are cut into ``groups`` contiguous groups; each bar is the group's *mean* busy
    time in that phase, the gap to the phase's end is the group waiting for the slowest tile.
    """
    ax = _ax(ax, (10, 4.5))
    prog, c = prof.program, prof.chip
    hz = c.clock_hz * 1e-6  # cycles per microsecond
    T = prog.comp.shape[1]
    edges = np.linspace(0, T, groups + 1).astype(int)
    keep = [i for i, ph in enumerate(prog.phases) if ops is None or ph.op in ops]
    t0 = 0.0
    for s in keep:
        sync, xs, cs = prog.sync_cycles / hz, prog.slowest[s, 1] / hz, prog.slowest[s, 0] / hz
        ax.axvspan(t0, t0 + sync, color=PHASE_COLORS["sync"], alpha=0.35, lw=0)
        for g in range(groups):
            lo, hi = edges[g], edges[g + 1]
            x = prog.exch[s, lo:hi].mean() / hz
            cm = prog.comp[s, lo:hi].mean() / hz
            ax.broken_barh(
                [(t0 + sync, x), (t0 + sync + xs, cm)],
                (g, 0.9),
                facecolors=(PHASE_COLORS["exchange"], PHASE_COLORS["compute"]),
            )
        dur = sync + xs + cs
        ph = prog.phases[s]
        if dur > 0.03 * max(1e-9, prog.superstep_cycles[keep].sum() / hz):
            name = ph.op + (" (reduce)" if ph.label == "reduce" else "")
            ax.text(
                t0 + dur / 2, groups + 0.3, name, ha="center", va="bottom", fontsize=7, rotation=90
            )
        t0 += dur
    ax.set_xlim(0, t0)
    ax.set_ylim(0, groups * 1.35)
    ax.set_xlabel("time (µs), one instance of each op")
    ax.set_ylabel(f"tile group ({T // groups} tiles each)")
    ax.set_title(f"BSP trace: {prof.result.model} on {c.name}")
    handles = [
        plt.Rectangle((0, 0), 1, 1, color=PHASE_COLORS[k], alpha=0.35 if k == "sync" else 1)
        for k in ("compute", "sync", "exchange")
    ]
    ax.legend(
        handles,
        ["compute", "sync", "exchange"],
        fontsize=8,
        loc="upper left",
        bbox_to_anchor=(1.0, 1.0),
    )
    return ax


def _diagnostic_time(result) -> float:
    """The step's time, or for a step that does not fit (time inf, the fit rule in
    ``machine.StepResult``) its as-if-unlimited-memory estimate."""
    if np.isfinite(result.time_s):
        return result.time_s
    return float(result.extra.get("time_if_unlimited_s", np.nan))


def op_proportions(result, ax=None):
    """Share of the step's time per op, split by phase (works for tile and GPU results).

    A step that does not fit shows the shares of its as-if-unlimited-memory estimate, and
    the title says it does not fit."""
    ax = _ax(ax, (6, 4))
    names = list(result.op_names)
    y = np.arange(len(names))[::-1]
    left = np.zeros(len(names))
    total = _diagnostic_time(result)
    for k, v in result.op_split.items():
        share = np.asarray(v) / total * 100
        ax.barh(y, share, left=left, color=PHASE_COLORS.get(k), label=k)
        left += share
    ax.set_yticks(y, names)
    ax.set_xlabel("share of step time (%)")
    if result.fits:
        ax.set_title(f"{result.chip}: {result.time_s * 1e3:,.2f} ms per step")
    else:
        ax.set_title(f"{result.chip}: DOES NOT FIT (as if it did: {total * 1e3:,.2f} ms)")
    ax.legend(fontsize=8, loc="lower right")
    return ax


def op_proportions_side_by_side(tile_result, gpu_result, fig=None):
    """The tile chip's per-op cycle proportions beside the GPU's per-kernel compute vs memory time."""
    fig = fig or plt.figure(figsize=(12, 4.2))
    a1, a2 = fig.subplots(
        1, 2, sharey=True, sharex=True
    )  # same ops, same % scale: the chips compare
    op_proportions(tile_result, a1)
    op_proportions(gpu_result, a2)
    fig.suptitle(f"{tile_result.model}, batch {tile_result.batch}: where the time goes")
    fig.tight_layout()
    return a1, a2


def split_vs(x, results, ax=None, xlabel: str = "", per: str = "step", log: bool = True):
    """Time of each split part (and the total) of a list of results against ``x``, in µs."""
    ax = _ax(ax)
    keys = []
    for r in results:
        keys += [k for k in r.split if k not in keys]
    for k in keys:
        v = np.array([r.split.get(k, 0.0) for r in results]) * 1e6
        if log:
            v = np.where(
                v > 0, v, np.nan
            )  # zero (e.g. no exchange on one tile) has no place on a log axis
        ax.plot(x, v, marker="o", ms=3, color=PHASE_COLORS.get(k), label=k)
    tot = np.array([r.time_s if np.isfinite(r.time_s) else np.nan for r in results]) * 1e6
    ax.plot(
        x,
        tot,
        "k--",
        lw=1.5,
        label="total (gaps: does not fit)" if np.isnan(tot).any() else "total",
    )
    if log:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"time per {per} (µs)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return ax


def throughput_sweep(
    x,
    curves: dict,
    ax=None,
    xlabel: str = "",
    ylabel: str = "sequences / s",
    fits: dict | None = None,
    streamed: dict | None = None,
):
    """Throughput curves against ``x``, one per chip (a preset name as the label takes the
    series' colour, ``plots.style``).

    Points that do not fit have no throughput (the fit rule): they are left off the line and
    drawn with the ``does_not_fit`` marker (hollow) on a band at the bottom of the axes, below
    every measured point, whatever ``curves`` holds for them; points whose weights stream from
    off-chip DRAM take the ``streams`` marker (half filled). The legend sits outside the data.
    """
    from .style import FIT_LABELS, chip_color, fit_style

    ax = _ax(ax)
    for label, y in curves.items():
        y = np.asarray(y, float)
        ok = (
            np.ones(y.size, bool)
            if not fits or label not in fits
            else np.asarray(fits[label], bool)
        )
        st = (
            np.zeros(y.size, bool)
            if not streamed or label not in streamed
            else np.asarray(streamed[label], bool)
        )
        try:
            col = chip_color(label)
        except ValueError:
            col = None
        y_line = np.where(
            ok, y, np.nan
        )  # a step that does not fit has no throughput: break the line
        (line,) = ax.plot(x, y_line, "-", color=col, label=label)
        col = line.get_color()
        xs = np.asarray(x)
        for state, sel in (("on_chip", ok & ~st), ("streams", ok & st)):
            sel = sel & np.isfinite(y) & (y > 0)
            if sel.any():
                ax.plot(
                    xs[sel],
                    y[sel],
                    "o",
                    ls="none",
                    color=col,
                    mec=col,
                    ms=6,
                    fillstyle=fit_style(state)["fillstyle"],
                    label=None if state == "on_chip" else f"{label}: {FIT_LABELS[state]}",
                )
        if (~ok).any():  # no time exists: a hollow marker on the bottom band, never at a value
            ax.plot(
                xs[~ok],
                np.full((~ok).sum(), 0.03),
                "o",
                ls="none",
                color=col,
                mec=col,
                ms=8,
                fillstyle=fit_style("does_not_fit")["fillstyle"],
                transform=ax.get_xaxis_transform(),
                clip_on=False,
                label=f"{label}: {FIT_LABELS['does_not_fit']} (no time, bottom band)",
            )
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    legend_outside(ax)
    return ax


def serial_passes(batches, results, single_pass_s, ax=None, label: str = ""):
    """Step time (ms) against the batch, marking where serial passes begin and what they cost.

    ``results``: the ``StepResult`` of each batch (one chip); ``single_pass_s``: the same
    step's time if every op ran in one pass (``tiles.single_pass_time_s``). Circles are steps
    with every op in one pass, squares steps in which some op runs in serial passes; the
    fill follows the fit state (``plots.style.fit_style``; steps that do not fit are left
    off). The dashed line is the one-pass time (the gap is what the passes cost); a dotted
    vertical line marks the first batch with passes.
    """
    from .style import chip_color, fit_style

    ax = _ax(ax)
    b = np.asarray(batches)
    t = np.array([r.time_s if r.fits else np.nan for r in results]) * 1e3
    passes = np.array([bool(r.extra.get("passes")) for r in results])
    col = (
        chip_color(results[0].chip)
        if results[0].chip in ("gc2", "gc200", "bow")
        else chip_color("tile")
    )
    ax.plot(b, t, "-", color=col, lw=1.5, label=f"{label} simulated step".strip())
    for state in ("on_chip", "streams"):
        st = np.array([r.fit == state for r in results])
        for sel, mk, what in ((st & ~passes, "o", "one pass"), (st & passes, "s", "serial passes")):
            if sel.any():
                ax.plot(
                    b[sel],
                    t[sel],
                    mk,
                    color=col,
                    ms=6,
                    ls="none",
                    fillstyle=fit_style(state)["fillstyle"],
                    label=f"{what}, {state}",
                )
    ax.plot(
        b,
        np.asarray(single_pass_s) * 1e3,
        "--",
        color="0.4",
        lw=1,
        label="every op in one pass (memory ignored)",
    )
    if passes.any():
        first = b[np.argmax(passes)]
        ax.axvline(first, color="0.4", ls=":", lw=1)
        ax.annotate(
            f"passes from batch {first}",
            (first, np.nanmax(t) * 0.9),
            fontsize=8,
            xytext=(4, 0),
            textcoords="offset points",
        )
    ax.set_xlabel("batch (sequences)")
    ax.set_ylabel("step time (ms)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return ax
