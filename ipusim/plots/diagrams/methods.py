"""Concept diagrams of how the series reaches its answers: the checklist (05), a two-parameter
sweep (08), a claim's verdict and how far to trust it (09)."""

from __future__ import annotations

import numpy as np

from ..style import chip_color
from .shapes import EDGE, FONT, GREY, arrow, box, canvas, lighten, new_ax

# --------------------------------------------------------------------------------------------
# 05: the checklist's pipeline
# --------------------------------------------------------------------------------------------


def checklist_pipeline(ax=None):
    """A case goes through the eight checks C1..C8 (named as ``ipusim.checklist`` names them) to a verdict."""
    from ...checklist.checks import CHECK_NAMES
    from ...checklist.verdict import POLICY

    ax = canvas(ax, (13, 3.2), (0, 14), (0.3, 3.8))
    box(
        ax,
        0.05,
        1.15,
        1.9,
        2.5,
        "a case\n\nmodel,\ntraffic,\np99 target,\ncandidates,\nprices",
        face="#fff2cc",
        fontsize=FONT,
    )
    kinds = {"C6": ("#2ca02c", "training"), "C7": ("#7f7f7f", "questionnaire"), "C8": (EDGE, "")}
    x0, w, h, gap = 2.45, 2.05, 1.05, 0.15
    for k, cid in enumerate(CHECK_NAMES):
        x, y = x0 + (k % 4) * (w + gap), 2.6 if k < 4 else 1.2
        edge = kinds.get(cid, (chip_color("tile"), ""))[0]
        box(
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
    arrow(ax, (1.98, 2.4), (2.4, 2.4))
    right = x0 + 4 * (w + gap)
    arrow(ax, (right - 0.1, 2.4), (right + 0.3, 2.4))
    box(
        ax,
        right + 0.35,
        1.15,
        14 - right - 0.4,
        2.5,
        f"verdict\npoints, with\nranked reasons\n\n>= {POLICY['migrate_at']}: migrate*\n>= {POLICY['pilot_at']}: pilot\n"
        f"< {POLICY['pilot_at']}: stay",
        face=lighten(chip_color("tile"), 0.7),
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
    ax = new_ax(ax, (8.5, 4.8))
    X, Y = np.meshgrid(np.arange(n), np.arange(n))
    contour = lambda x: (n - 1) * 0.95 - 0.8 * x  # noqa: E731  a sketched falling contour
    ahead = Y > contour(X)
    ax.scatter(
        X[~ahead],
        Y[~ahead],
        s=110,
        color=lighten(chip_color("gpu"), 0.45),
        edgecolors="k",
        lw=0.5,
        label="ratio < 1: tile chip behind the GPU",
        zorder=3,
    )
    ax.scatter(
        X[ahead],
        Y[ahead],
        s=110,
        color=lighten(chip_color("tile"), 0.3),
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
    from ..claims import VERDICT_COLORS

    ax = canvas(ax, (13, 4.6), (0, 14), (0, 4.9))
    box(
        ax,
        0.1,
        3.0,
        2.4,
        1.3,
        "a claim\nquoted from the articles\n(docs/claims.md)",
        face="#fff2cc",
    )
    arrow(ax, (2.55, 3.65), (2.95, 3.65))
    box(ax, 3.0, 3.0, 2.9, 1.3, "ipusim's numbers\nthe claim's workload,\nsimulated on both chips")
    arrow(ax, (5.95, 3.65), (6.35, 3.65))
    box(
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
        arrow(ax, (9.35, 3.65), (9.75, y + 0.25), lw=1.2)
        box(
            ax,
            9.8,
            y,
            4.1,
            0.52,
            text,
            face=lighten(VERDICT_COLORS[state], 0.55),
            edge=VERDICT_COLORS[state],
            fontsize=FONT - 1,
            ha="left",
        )
    ax.text(0.1, 4.65, "How a verdict is reached (section 1)", fontsize=FONT + 1, weight="bold")

    ax.text(0.1, 2.35, "How far to trust the numbers (section 3)", fontsize=FONT + 1, weight="bold")
    box(
        ax,
        0.1,
        0.45,
        2.4,
        1.55,
        "published\nmeasurements\n(ipusim/data/\npublished.csv)",
        face="#fff2cc",
    )
    box(ax, 3.0, 1.25, 2.9, 0.8, "calibration rows\na parameter is set from each")
    box(ax, 3.0, 0.2, 2.9, 0.8, "check rows\nnothing is set from them", face="white")
    arrow(ax, (2.55, 1.4), (2.95, 1.65))
    arrow(ax, (2.55, 1.0), (2.95, 0.6))
    arrow(ax, (4.45, 2.1), (4.45, 2.95))
    ax.text(4.55, 2.5, "set the model's\nparameters", fontsize=FONT - 1, va="center")
    box(ax, 6.4, 1.25, 2.9, 0.8, "in-sample error\nsmall by construction", face=GREY)
    box(
        ax,
        6.4,
        0.2,
        2.9,
        0.8,
        "held-out error\nhow far a prediction is off",
        face="white",
        edge=EDGE,
        lw=1.8,
        weight="bold",
    )
    arrow(ax, (5.95, 1.65), (6.35, 1.65))
    arrow(ax, (5.95, 0.6), (6.35, 0.6))
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
