"""How far to trust ipusim: predicted against published for every row of the registry."""

from __future__ import annotations

import numpy as np

from ..published import AREAS
from .style import axes, finish, other_color

AREA_COLORS = {area: other_color(i) for i, area in enumerate(AREAS)}
"""One colour per area of the registry, from the second palette (``plots.style.OTHER_COLORS``):
an area is not a chip, so not even the tile and GPU areas borrow a chip's colour."""
USE_MARKERS = {
    "calibration": "s",
    "check": "o",
}  # squares: in sample (a parameter was set from the row)


def predicted_vs_published(results=None, ax=None, *, band: float = 0.25):
    """Predicted against published, log-log, one point per row of ``ipusim.validation.validate``
    (run now when ``results`` is None): colour by area, squares for calibration rows (in
    sample), circles for check rows (out of sample); the diagonal and the ``±band`` lines.
    Rows have different units, so the axes are in each row's own unit."""
    if results is None:
        from ..validation import validate

        results = validate()
    if not results:
        raise ValueError("predicted_vs_published needs at least one row")
    if not 0 < band < 1:
        raise ValueError(f"band must be a fraction in (0, 1), got {band!r}")
    ax = axes(ax, size=(6.4, 5.6))
    pub = np.array([r["published"] for r in results])
    pred = np.array([r["predicted"] for r in results])
    lo = min(pub.min(), pred.min()) / 2
    hi = max(pub.max(), pred.max()) * 2
    x = np.geomspace(lo, hi, 50)
    ax.plot(x, x, color="black", lw=1, label="predicted = published")
    ax.fill_between(x, x * (1 - band), x * (1 + band), color="0.85", label=f"within {band:.0%}")
    for area, color in AREA_COLORS.items():
        for use, marker in USE_MARKERS.items():
            sel = [i for i, r in enumerate(results) if r["area"] == area and r["use"] == use]
            if sel:
                ax.plot(
                    pub[sel],
                    pred[sel],
                    marker=marker,
                    ls="none",
                    color=color,
                    ms=6,
                    alpha=0.85,
                    label=f"{area}, {'calibration (in sample)' if use == 'calibration' else 'check'}",
                )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    return finish(
        ax,
        xlabel="published (row's unit)",
        ylabel="predicted by ipusim (same unit)",
        title="How far to trust ipusim",
        legend_fontsize=7,
        loc="upper left",
    )


def errors_by_area(summary, ax=None):
    """Per area of ``ipusim.validation.summary`` (the "all" row last): the error
    ``exp(mean |ln(predicted / published)|) - 1`` of its calibration rows (in sample) beside
    that of its check rows (held out), as horizontal bars in per cent, each labelled with its
    value and row count; an area with no row of a kind says "no rows"."""
    rows = list(summary)
    if not rows:
        raise ValueError("errors_by_area needs the rows of ipusim.validation.summary")
    ax = axes(ax, size=(6.0, 0.55 * len(rows) + 1.2))
    kinds = (
        ("in", "in sample (calibration rows)", "0.75", None),
        ("out", "held out (check rows)", "0.25", "//"),
    )
    y = np.arange(len(rows))[::-1]
    top = max(
        (r[f"{k}_geomean_abs_error"] for r in rows for k, *_ in kinds if r[f"{k}_rows"]),
        default=0.0,
    )
    for j, (k, label, color, hatch) in enumerate(kinds):
        pos = y + (0.2 if j == 0 else -0.2)
        for yy, r in zip(pos, rows, strict=True):
            n = r[f"{k}_rows"]
            err = r[f"{k}_geomean_abs_error"] if n else 0.0
            ax.barh(
                yy,
                err * 100,
                height=0.38,
                color=color,
                hatch=hatch,
                edgecolor="black",
                lw=0.5,
                label=label if yy == pos[0] else None,
            )
            text = f"{err:.1%} ({n} rows)" if n else "no rows"
            ax.text(err * 100 + top * 2, yy, text, va="center", fontsize=7)
    ax.set_yticks(y, [r["area"] for r in rows])
    ax.set_xlim(0, top * 100 * 1.35 + 1)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, -0.14), ncol=2, frameon=False)
    ax.set_xlabel("typical error, exp(mean |ln(predicted / published)|) - 1 (%)")
    ax.set_title("Error per area: in sample vs held out")
    return ax
