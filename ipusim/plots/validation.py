"""How far to trust ipusim: predicted against published for every row of the registry."""

from __future__ import annotations

import numpy as np

from .style import KIND_COLORS, axes, finish

AREA_COLORS = {  # the two machine kinds in their chip colours, other areas from the second palette
    "tile": KIND_COLORS["tile"],
    "gpu": KIND_COLORS["gpu"],
    "training": "#e377c2",
    "serving": "#e69f00",
    "embeddings": "#8c564b",
    "packing": "#7f7f7f",
}
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
