"""Views of a sweep table: a tile/GPU ratio heat map with its break-even contour, and the Pareto front."""

from __future__ import annotations

import numpy as np
from matplotlib.colors import LogNorm

from .style import FIT_LABELS, KIND_COLORS, axes, chip_color, fit_style


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


def ratio_heatmap(
    table,
    x: str,
    y: str,
    *,
    value: str = "ratio",
    level: float = 1.0,
    ax=None,
    label: str = "tile / GPU",
):
    """Heat map of ``value`` (a tile/GPU ratio) over parameters ``x`` and ``y`` (one cell per swept
    pair, evenly spaced), on a log colour scale centred on ``level``, with the ``level`` contour
    (break-even) drawn over it. Cells that did not run (refused) are grey; cells where the tile
    chip does not fit (ratio 0) are white with an x."""
    ax = axes(ax, (6.4, 4.8))
    xs, ys, z = ratio_grid(table, x, y, value)
    pos = z[np.isfinite(z) & (z > 0)]
    span = max(float(np.max(np.abs(np.log10(pos / level)))) if pos.size else 1.0, 0.3)
    norm = LogNorm(vmin=level / 10**span, vmax=level * 10**span)
    shown = np.where(z > 0, z, np.nan)
    ax.set_facecolor("0.85")
    im = ax.imshow(shown, origin="lower", cmap="RdBu", norm=norm, aspect="auto")
    for (i, j), v in np.ndenumerate(z):
        if v == 0:
            ax.plot(j, i, "x", color="0.3", ms=7)
        elif np.isfinite(v):
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
    if np.nanmin(zc) < 0 < np.nanmax(zc):
        cs = ax.contour(
            np.arange(len(xs)), np.arange(len(ys)), zc, levels=[0.0], colors="k", linewidths=2
        )
        cs.set_label(f"break-even ({label} = {level:g})")
    ax.set_xticks(range(len(xs)), _fmt_axis(xs), rotation=45)
    ax.set_yticks(range(len(ys)), _fmt_axis(ys))
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.figure.colorbar(im, ax=ax, label=f"{label} ({value})")
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
    ax.legend(fontsize=8, loc="lower right")
    return ax
