"""Figures of a checklist report. Each function takes the report and ``ax=None``, draws, returns the axes."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

from .style import KIND_COLORS, axes, chip_color, finish

TILE_COLOR, GPU_COLOR = KIND_COLORS["tile"], KIND_COLORS["gpu"]  # the series' colours (plots.style)


def _ax(ax, size=(6, 4)):
    return axes(ax, size)


def _color(name, kind="gpu"):
    """The series' colour for a chip name, or for its kind ("tile"/"gpu") when the name is not a preset."""
    try:
        return chip_color(name)
    except ValueError:
        return chip_color(kind if kind in KIND_COLORS else "gpu")


def _sig3(x: float) -> str:
    """A number to 3 significant figures with thousands separators (4.68, 4,540)."""
    if not math.isfinite(x) or x == 0:
        return f"{x:g}"
    digits = max(0, 2 - int(math.floor(math.log10(abs(x)))))
    return f"{float(f'{x:.3g}'):,.{digits}f}"


def plot_capacity(report, ax=None):
    """C2: requests/s each candidate carries within the p99 target, against the offered rate."""
    ax = _ax(ax)
    c2 = report.checks["C2"]
    rows = c2.tables.get("throughput", [])
    kinds = {c.label: c.chip.kind for c in report.case.candidates}
    names = [r["candidate"] for r in rows]
    caps = [r["capacity_req_s"] for r in rows]
    ax.bar(names, caps, color=[_color(n.split()[0], kinds.get(n, "gpu")) for n in names])
    ax.axhline(
        report.case.rate_per_s,
        color="k",
        ls="--",
        lw=1,
        label=f"offered {report.case.rate_per_s:g} req/s",
    )
    for i, (r, cap) in enumerate(zip(rows, caps, strict=True)):
        label = f"{_sig3(cap)}\n{r['mode']}" if cap > 0 else "none meets\nthe target"
        ax.annotate(label, (i, cap), ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("capacity at the p99 target (requests/s)")
    ax.set_title(f"C2: throughput with p99 <= {report.case.slo_p99_s * 1e3:g} ms (chips as given)")
    ax.margins(y=0.35)  # room above the tallest bar's label for the legend
    ax.legend(loc="upper left", fontsize=8)
    return ax


def plot_cost(report, ax=None):
    """C4: cost per million requests of each candidate, two views side by side: scaled to the
    offered rate (the chips needed, however idle) and with the chips at their C2 capacity.
    The legend says which view the verdict weighs (``C4.data["weighed_view"]``)."""
    ax = _ax(ax)
    c4 = report.checks["C4"]
    rows = [r for r in c4.tables.get("cost", []) if math.isfinite(r["usd_per_million"])]
    names = [
        f"{r['candidate'].split()[0]}\n{r['chips_needed']} chip{'s' if r['chips_needed'] != 1 else ''} needed"
        for r in rows
    ]
    view = c4.data.get("weighed_view", "")
    weighs_offered = "mean of both" in view
    weighs_cap = bool(view)
    x = np.arange(len(rows))
    w = 0.38
    for dx, key, label, hatch, weighed in (
        (-w / 2, "usd_per_million", "at the offered rate", "", weighs_offered),
        (w / 2, "usd_per_million_at_capacity", "with the chips at capacity", "//", weighs_cap),
    ):
        vals = [r[key] for r in rows]
        ax.bar(
            x + dx,
            vals,
            w,
            color=[_color(r["candidate"].split()[0], r["kind"]) for r in rows],
            hatch=hatch,
            edgecolor="white",
            label=label + (" (weighed by the verdict)" if weighed else ""),
        )
        for xi, v in zip(x + dx, vals, strict=True):
            ax.annotate(f"${v:,.2f}", (xi, v), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, names)
    ax.set_ylabel("USD per million requests")
    ax.set_title("C4: cost per request, two views (ASSUMED prices)")
    ax.margins(y=0.25)
    ax.legend(fontsize=7, loc="upper left")
    return ax


def plot_padding(report, ax=None):
    """C3: share of token slots wasted by each padding scheme."""
    ax = _ax(ax)
    rows = report.checks["C3"].tables.get("waste", [])
    names = [r["scheme"] for r in rows]
    vals = [r["padding_%"] for r in rows]
    ax.barh(names, vals, color="#7f7f7f")
    for i, v in enumerate(vals):
        ax.annotate(f"{v:.1f}%", (v, i), va="center", ha="left", fontsize=8)
    ax.set_xlabel("padding (% of computed token slots)")
    ax.set_xlim(0, 100)
    ax.invert_yaxis()
    ax.set_title("C3: waste of padded traffic")
    return ax


def _table_rows(report, check: str, table: str, ax):
    """Rows of one table of a check, or ``None`` after writing "<check> skipped" on ``ax``."""
    rows = report.checks[check].tables.get(table, [])
    if not rows:
        ax.text(0.5, 0.5, f"{check} skipped", ha="center", transform=ax.transAxes)
        return None
    return rows


def _tile_and_gpu_costs(draw, x, rows):
    """Both chip kinds' best-deployment cost per million requests against ``x``, drawn by ``draw``
    (``ax.plot`` or ``ax.loglog``)."""
    draw(
        x,
        [r["tile_usd_per_million"] for r in rows],
        "o-",
        color=TILE_COLOR,
        label="best tile deployment",
    )
    draw(
        x,
        [r["gpu_usd_per_million"] for r in rows],
        "s-",
        color=GPU_COLOR,
        label="best GPU deployment",
    )


def plot_rate_sensitivity(report, ax=None):
    """C5: cost per million requests against the arrival rate, both chip kinds."""
    ax = _ax(ax)
    rows = _table_rows(report, "C5", "rate", ax)
    if rows is None:
        return ax
    _tile_and_gpu_costs(ax.loglog, np.array([x["rate_req_s"] for x in rows]), rows)
    ax.axvline(report.case.rate_per_s, color="k", ls="--", lw=1, label="offered rate")
    return finish(
        ax,
        xlabel="arrival rate (requests/s)",
        ylabel="USD per million requests",
        title="C5: cost against traffic (whole chips)",
    )


def plot_long_share(report, ax=None):
    """C5: cost per million requests against the share of long texts."""
    ax = _ax(ax)
    rows = _table_rows(report, "C5", "long_share", ax)
    if rows is None:
        return ax
    _tile_and_gpu_costs(ax.plot, [x["long_share_%"] for x in rows], rows)
    ax.set_ylim(0, ax.get_ylim()[1] * 1.3)
    return finish(
        ax,
        xlabel="long texts (% of requests)",
        ylabel="USD per million requests (chips at capacity)",
        title="C5: cost against the long-text share",
    )


def plot_training(report, ax=None):
    """C6: cost to train each model on each chip kind (ASSUMED prices)."""
    ax = _ax(ax)
    rows = _table_rows(report, "C6", "training", ax)
    if rows is None:
        return ax
    models = list(dict.fromkeys(r["model"] for r in rows))
    chips = list(dict.fromkeys((r["chip"], r["kind"]) for r in rows))
    x = np.arange(len(models))
    # Costs span orders of magnitude, so a log axis; markers, not bars (a bar's length on a log
    # axis depends on where the axis starts).
    for chip, kind in chips:
        vals = [
            next(r["usd"] for r in rows if r["model"] == m and r["chip"] == chip) for m in models
        ]
        ax.plot(
            x,
            vals,
            "o" if kind == "tile" else "s",
            ms=8,
            ls="none",
            color=_color(chip, kind),
            label=chip,
        )
    if len(chips) == 2:  # tile / GPU cost ratio beside each pair of markers
        for i, m in enumerate(models):
            t, g = (
                next(r["usd"] for r in rows if r["model"] == m and r["chip"] == ch)
                for ch, _ in chips
            )
            ax.vlines(x[i], min(t, g), max(t, g), color="0.6", lw=1, zorder=0)
            ax.annotate(
                f"{t / g:.2f}x",
                (x[i], max(t, g)),
                xytext=(0, 6),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=8,
            )
    ax.set_yscale("log")
    ax.margins(x=0.2, y=0.2)
    ax.set_xticks(x, models)
    return finish(
        ax,
        ylabel="USD to train the token budget",
        title=f"C6: training cost, {report.case.training.token_budget / 1e9:g}B tokens (ASSUMED prices)",
    )


def report_figures(report) -> dict:
    """The report's figures as {key: Figure}; keys are "overview" and check ids."""
    figs = {}
    if report.case.inference and report.checks["C2"].tables.get("throughput"):
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        plot_capacity(report, axes[0])
        plot_cost(report, axes[1])
        fig.tight_layout()
        figs["overview"] = fig
        fig, ax = plt.subplots(figsize=(6, 3))
        plot_padding(report, ax)
        fig.tight_layout()
        figs["C3"] = fig
        if report.checks["C5"].tables:
            fig, axes = plt.subplots(1, 2, figsize=(11, 4))
            plot_rate_sensitivity(report, axes[0])
            plot_long_share(report, axes[1])
            fig.tight_layout()
            figs["C5"] = fig
    if report.checks["C6"].tables.get("training"):
        fig, ax = plt.subplots(figsize=(7, 4))
        plot_training(report, ax)
        fig.tight_layout()
        figs["C6"] = fig
    return figs
