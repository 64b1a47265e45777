"""Views of the embedding model: look-ups per second against table size, skew, per watt."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Patch

from .style import FIT_LABELS, axes, chip_color, fit_style, legend_outside


def lookups_vs_size(rows: list[dict], ax=None):
    """Look-ups/s (log) against table bytes (log), one line per chip and chip count: the chip's
    colour, solid with round markers for one chip, dashed with squares for several; markers by
    fit state (``plots.style``); steps that do not fit are left out; the legend sits outside the
    data. ``rows`` from ``table_size_sweep``."""
    ax = axes(ax, (7.5, 4.6))
    for key in dict.fromkeys((r["chip"], r["chips"]) for r in rows):
        sel = [r for r in rows if (r["chip"], r["chips"]) == key and r["lookups_per_s"] > 0]
        if not sel:
            continue
        x = np.array([r["table_bytes"] for r in sel])
        y = np.array([r["lookups_per_s"] for r in sel])
        label = key[0] if key[1] == 1 else f"{key[1]} x {key[0]}"
        ls, mk = ("-", "o") if key[1] == 1 else ("--", "s")
        ax.plot(x, y, ls, color=chip_color(key[0]), lw=1.2, label=label)
        for state in ("on_chip", "streams"):
            m = np.array([r["fit"] == state for r in sel])
            if m.any():
                st = fit_style(state)
                ax.plot(x[m], y[m], mk, color=chip_color(key[0]), fillstyle=st["fillstyle"], ms=6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("bytes of all tables")
    ax.set_ylabel("look-ups per second")
    ax.grid(alpha=0.3, which="both")
    handles, _ = ax.get_legend_handles_labels()
    for state in ("on_chip", "streams"):
        handles.append(
            plt.Line2D(
                [],
                [],
                marker="o",
                ls="none",
                color="0.3",
                fillstyle=fit_style(state)["fillstyle"],
                label=FIT_LABELS[state],
            )
        )
    legend_outside(ax, handles=handles)
    return ax


def hit_rate_vs_skew(skews, closed, simulated, ax=None, *, label="", color=None):
    """Cache hit rate against the Zipf exponent: closed form (line) and simulated stream (crosses),
    both in ``color`` (the chip's, ``plots.style.chip_color``, when the cache is a chip's)."""
    ax = axes(ax)
    ax.plot(skews, closed, "-", color=color, label=f"closed form {label}".strip())
    # "x", not a hollow dot: hollow means does_not_fit in the series' vocabulary (plots.style)
    ax.plot(skews, simulated, "x", ms=7, color=color, label=f"simulated stream {label}".strip())
    ax.set_xlabel("Zipf exponent s")
    ax.set_ylabel("share of look-ups served by the cache")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return ax


def per_watt_bars(table: list[dict], ax=None, *, against: str | None = None):
    """Throughput per watt relative to the best GPU of each case, or to the chip ``against``
    (a preset name, for example the claims' comparison GPU) (linear axis, 1 = that chip).

    ``table`` rows: ``case``, ``chip``, ``kind``, ``per_w`` (0 when it does not fit) and,
    optionally, ``fit``: a bar whose step streams is hatched, one that does not fit is marked
    with a hollow marker on the axis (the series' fit rule, ``plots.style``). The legend sits
    outside the data.
    """
    ax = axes(ax, (8, 4.4))
    cases = list(dict.fromkeys(r["case"] for r in table))
    chips = list(dict.fromkeys(r["chip"] for r in table))
    if against is not None and against not in chips:
        raise ValueError(f"against={against!r} is not a chip of the table; its chips: {chips}")
    width = 0.8 / len(chips)
    seen = set()
    for j, ch in enumerate(chips):
        vals, fits = [], []
        for case in cases:
            gpu_best = max(
                r["per_w"]
                for r in table
                if r["case"] == case and (r["chip"] == against if against else r["kind"] == "gpu")
            )
            row = next(r for r in table if r["case"] == case and r["chip"] == ch)
            vals.append(row["per_w"] / gpu_best if gpu_best > 0 else np.nan)
            fits.append(row.get("fit", "on_chip"))
        xs = np.arange(len(cases)) + (j - (len(chips) - 1) / 2) * width
        bars = ax.bar(xs, vals, width, color=chip_color(ch), label=ch)
        for bar, x, state in zip(bars, xs, fits, strict=True):
            seen.add(state)
            if state == "streams":
                bar.set_hatch("////")
                bar.set_edgecolor("white")
            elif state == "does_not_fit":
                ax.plot(
                    x,
                    0,
                    "o",
                    color=chip_color(ch),
                    ms=7,
                    clip_on=False,
                    **{"fillstyle": fit_style("does_not_fit")["fillstyle"]},
                )
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(np.arange(len(cases)), cases, rotation=15, ha="right", fontsize=8)
    ax.set_ylabel(f"throughput per watt / {against or 'best GPU'}'s")
    ax.grid(alpha=0.3, axis="y")
    handles, _ = ax.get_legend_handles_labels()
    if "streams" in seen:
        handles.append(
            Patch(facecolor="0.6", hatch="////", edgecolor="white", label=FIT_LABELS["streams"])
        )
    if "does_not_fit" in seen:
        handles.append(
            plt.Line2D(
                [],
                [],
                marker="o",
                ls="none",
                color="0.3",
                fillstyle=fit_style("does_not_fit")["fillstyle"],
                label=FIT_LABELS["does_not_fit"],
            )
        )
    legend_outside(ax, handles=handles)
    return ax
