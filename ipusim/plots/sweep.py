"""Views of a sweep table: a tile/GPU ratio heat map with its break-even contour, and the Pareto front."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import LogNorm

from .style import FIT_LABELS, KIND_COLORS, axes, chip_color, fit_style, legend_outside


def _binary(v: float) -> str | None:
    for unit, scale in (("Ti", 1024**4), ("Gi", 1024**3), ("Mi", 1024**2), ("Ki", 1024)):
        if v >= scale and v % (scale // 8 or 1) == 0:
            return f"{v / scale:g}{unit}"
    return None


def _decimal(v: float) -> str:
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.3g}{unit}"
    return f"{v:.3g}"


def _fmt_axis(values) -> list[str]:
    """Tick labels in one notation per axis: binary prefixes (256Ki, 2Mi) when every value is a
    round binary size, else 3 significant digits with decimal prefixes (1.49M, 2.45k)."""
    vals = [float(v) for v in values]
    labels = [_binary(v) for v in vals]
    return labels if all(labels) else [_decimal(v) for v in vals]


def ratio_grid(table, x: str, y: str, value: str = "ratio"):
    """(x values, y values, Z[y, x]) of ``value`` over two parameters (NaN where a cell is missing);
    the table must hold one row per (x, y) cell (hold the other parameters first)."""
    for c in (x, y, value):
        if c not in table:
            raise ValueError(f"column {c!r} not in the table")
    if table.duplicated([x, y]).any():
        raise ValueError(
            f"more than one row per ({x}, {y}) cell: select one value of the other parameters first"
        )
    piv = table.pivot(index=y, columns=x, values=value).sort_index().sort_index(axis=1)
    return piv.columns.to_numpy(), piv.index.to_numpy(), piv.to_numpy(dtype=float)


# human axis labels, with units, for the sweep's parameter and ratio columns
AXIS_LABELS = {
    "sram_per_tile_bytes": "SRAM per tile (bytes)",
    "tiles": "tiles per chip",
    "offchip_bandwidth_bytes_per_s": "Streaming Memory bandwidth per chip (bytes/s)",
    "link_bandwidth_bytes_per_s": "IPU-Link bandwidth per chip (bytes/s)",
    "exchange_bytes_per_cycle_per_tile": "exchange rate (bytes per cycle per tile)",
    "seq_len": "sequence length (tokens)",
    "clock_hz": "clock (Hz)",
    "power_w": "board power (W)",
    "batch": "batch (sequences)",
    "fp16_flops_per_cycle_per_tile": "FP16 FLOPs per cycle per tile",
    "rows": "rows per table",
    "zipf": "Zipf exponent s",
    "chips": "chips",
}
VALUE_LABELS = {
    "ratio": "throughput, tile chip / GPU",
    "ratio_per_usd": "throughput per dollar, tile chip / GPU",
    "ratio_per_j": "throughput per watt, tile chip / GPU",
}


def axis_label(name: str) -> str:
    """The human label (with its unit) of a sweep column; the column name when none is known."""
    return AXIS_LABELS.get(name, VALUE_LABELS.get(name, name))


def _fit_marker(ax, j, i, state):
    """The series' fit marker of one cell, in its lower-left corner (``plots.style.fit_style``)."""
    st = fit_style(state)
    ax.plot(
        j - 0.32,
        i - 0.3,
        "o",
        ms=5,
        color="k",
        fillstyle=st["fillstyle"],
        markerfacecoloralt="white",
        mew=0.8,
    )


def ratio_heatmap(
    table,
    x: str,
    y: str,
    *,
    value: str = "ratio",
    level: float = 1.0,
    ax=None,
    label: str | None = None,
):
    """Heat map of ``value`` (a tile/GPU ratio) over parameters ``x`` and ``y`` (one cell per swept
    pair, evenly spaced), on a log colour scale centred on ``level``, with the ``level`` contour
    (break-even) drawn over it. Every cell carries the series' fit marker of its row (filled: on
    chip, half filled: streams, hollow: does not fit; ``plots.style``), explained in a legend
    below the axes; cells that did not run (refused) are grey, cells where the tile chip does not
    fit are white. Axes and colour bar carry human labels with units (``axis_label``)."""
    ax = axes(ax, (6.4, 4.8))
    xs, ys, z = ratio_grid(table, x, y, value)
    fits = None
    if "fit" in table:
        fits = table.pivot(index=y, columns=x, values="fit").sort_index().sort_index(axis=1)
        fits = fits.to_numpy(dtype=object)
    pos = z[np.isfinite(z) & (z > 0)]
    span = max(float(np.max(np.abs(np.log10(pos / level)))) if pos.size else 1.0, 0.3)
    norm = LogNorm(vmin=level / 10**span, vmax=level * 10**span)
    shown = np.where(z > 0, z, np.nan)
    ax.set_facecolor("0.85")
    im = ax.imshow(shown, origin="lower", cmap="RdBu", norm=norm, aspect="auto")
    seen = set()
    for (i, j), v in np.ndenumerate(z):
        state = fits[i, j] if fits is not None else ("does_not_fit" if v == 0 else None)
        if state in FIT_LABELS:
            _fit_marker(ax, j, i, state)
            seen.add(state)
        if v > 0 and np.isfinite(v):
            ax.text(
                j,
                i,
                f"{v:.2g}",
                ha="center",
                va="center",
                fontsize=7,
                color="white" if abs(np.log10(v / level)) > 0.6 * span else "black",
            )
    zc = np.where(z > 0, np.log10(np.where(z > 0, z, 1) / level), -span)
    label = label or VALUE_LABELS.get(value, value)
    if np.nanmin(zc) < 0 < np.nanmax(zc):
        cs = ax.contour(
            np.arange(len(xs)), np.arange(len(ys)), zc, levels=[0.0], colors="k", linewidths=2
        )
        cs.set_label(f"break-even ({label} = {level:g})")
    ax.set_xticks(range(len(xs)), _fmt_axis(xs), rotation=45)
    ax.set_yticks(range(len(ys)), _fmt_axis(ys))
    ax.set_xlabel(axis_label(x))
    ax.set_ylabel(axis_label(y))
    ax.figure.colorbar(im, ax=ax, label=label)
    handles = [
        plt.Line2D(
            [],
            [],
            marker="o",
            ls="none",
            color="k",
            ms=5,
            fillstyle=fit_style(st)["fillstyle"],
            markerfacecoloralt="white",
            label=FIT_LABELS[st],
        )
        for st in FIT_LABELS
        if st in seen
    ]
    handles.append(plt.Line2D([], [], color="k", lw=2, label=f"break-even ({level:g})"))
    ax.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.22),
        ncol=len(handles),
        fontsize=7,
        frameon=False,
    )
    return ax


def pareto(table, front, *, x: str = "per_usd", y: str = "per_j", gpu=None, ax=None):
    """Every row that ran (marker by fit state), the Pareto ``front`` (a line), and ``gpu`` (a
    row or dict with ``x``, ``y`` and ``chip``) as a star: beyond it on both axes the tile chip wins
    on throughput per dollar and per watt."""
    ax = axes(ax, (6.4, 4.6))
    ok = table[(table["error"] == "") & (table[x] > 0)]
    for state, rows in ok.groupby("fit"):
        st = fit_style(state)
        ax.plot(
            rows[x],
            rows[y],
            "o",
            color=KIND_COLORS["tile"],
            fillstyle=st["fillstyle"],
            alpha=0.7,
            label=f"tile chips ({FIT_LABELS[state]})",
        )
    ax.plot(front[x], front[y], "-", color="k", lw=1.5, label="Pareto front")
    if gpu is not None:
        ax.plot(
            [gpu[x]], [gpu[y]], "*", ms=16, color=chip_color(gpu["chip"]), label=str(gpu["chip"])
        )
        ax.axvline(gpu[x], color=chip_color(gpu["chip"]), lw=0.8, ls=":")
        ax.axhline(gpu[y], color=chip_color(gpu["chip"]), lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel({"per_usd": "throughput per dollar (items / USD of chip time)"}.get(x, x))
    ax.set_ylabel({"per_j": "throughput per watt (items / J)"}.get(y, y))
    legend_outside(ax)
    return ax
