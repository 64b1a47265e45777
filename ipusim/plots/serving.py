"""Figures of the serving simulator: latency vs throughput, timelines, batch sizes, theory checks."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..serving import theory
from .style import (
    UNSTABLE_LABEL,
    UNSTABLE_STYLE,
    chip_color,
    label_color,
    legend_outside,
    other_color,
)


def _ax(ax):
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 4.2), layout="constrained")
    return ax


def latency_throughput(
    curves: dict,
    ax=None,
    *,
    title: str = "",
    latency_key: str = "latency_p99_s",
    target_s: float | None = None,
):
    """p99 latency (ms, log) against achieved throughput (req/s), one line per policy.

    ``curves`` maps a label to the list of summaries from ``serving.sweep_rates``. Only
    stable runs have a latency to plot; an unstable run (its p99 grows with the length of the
    run) is marked at the top edge of the axes (``plots.style.UNSTABLE_STYLE``) at its
    throughput, in its line's colour.
    """
    ax = _ax(ax)
    unstable = []
    for label, rows in curves.items():
        x = np.array([r["throughput_rps"] for r in rows])
        y = np.array([r[latency_key] for r in rows]) * 1e3
        ok = np.array([r["stable"] for r in rows])
        (line,) = ax.plot(x[ok], y[ok], "o-", label=label, ms=4, color=label_color(label))
        if (~ok).any():
            unstable.append((x[~ok], line.get_color()))
    if target_s:
        ax.axhline(
            target_s * 1e3, color="grey", ls=":", lw=1, label=f"target {target_s * 1e3:g} ms"
        )
    ax.set_yscale("log")
    if unstable:
        top = ax.get_ylim()[1]
        ax.set_ylim(top=top * 2.5)  # a band above the data for the unstable marks
        for i, (xu, col) in enumerate(unstable):
            ax.plot(
                xu,
                np.full(xu.size, top * 1.6),
                color=col,
                mfc=col,
                label=UNSTABLE_LABEL if i == 0 else None,
                **UNSTABLE_STYLE,
            )
    ax.set_xlabel("throughput (requests/s)")
    ax.set_ylabel(f"{latency_key.split('_')[1]} latency (ms)")
    ax.set_title(title or "Latency vs throughput")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="upper left")
    return ax


def timeline(result, ax=None, *, title: str = "", max_requests: int | None = None):
    """Each request as a line from arrival (dot) through waiting (thin) to its batch (thick), by request number."""
    ax = _ax(ax)
    n = result.n if max_requests is None else min(result.n, max_requests)
    idx = np.arange(n)
    a, s, f = result.arrival_s[:n], result.start_s[:n], result.finish_s[:n]
    ax.hlines(idx, a, s, color=other_color(5), lw=0.6, label="waiting")
    ax.hlines(idx, s, f, color=other_color(0), lw=1.6, label="in a batch on the device")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("request number")
    ax.set_title(title or result.policy)
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(alpha=0.3)
    return ax


def batch_sizes(result, ax=None, *, label: str | None = None):
    """Histogram of the number of requests per batch."""
    ax = _ax(ax)
    served = result.batch_id >= 0
    sizes = np.bincount(result.batch_id[served])
    sizes = sizes[sizes > 0]
    counts, _, _ = ax.hist(
        sizes, bins=np.arange(0.5, sizes.max() + 1.5), alpha=0.7, label=label or result.policy
    )
    ax.set_xlabel("requests per batch")
    ax.set_ylabel("batches")
    ax.set_title("Batch sizes")
    # the legend in the upper corner away from the tallest bar (an explicit place: loc="best"
    # searches every position against every bar, which matplotlib warns can be slow)
    ax.legend(
        fontsize=8, loc="upper left" if np.argmax(counts) >= counts.size / 2 else "upper right"
    )
    return ax


def latency_cdf(results: dict, ax=None, *, target_s: float | None = None):
    """The latency tail: share of requests slower than each latency (complementary CDF), both
    axes log, so the p99 (where the curve crosses 1%) and beyond are as legible as the median."""
    ax = _ax(ax)
    n_max = 1
    for label, r in results.items():
        lat = np.sort(r.latency_s[~np.isnan(r.latency_s)]) * 1e3
        n_max = max(n_max, lat.size)
        slower = 1.0 - np.arange(lat.size) / lat.size  # share of requests at or above each latency
        stable = getattr(r, "stable", True)
        ax.step(
            lat,
            slower,
            where="post",
            color=label_color(label),
            ls="-" if stable else ":",
            label=label if stable else f"{label}: {UNSTABLE_LABEL}",
        )
    low = max(0.5 / n_max, 1e-5)  # the axis ends where a single request's share would be
    for q, name in ((0.5, "p50"), (0.01, "p99")):
        if (
            q < low
        ):  # too few served requests to show this quantile: no line, no label below the axes
            continue
        ax.axhline(q, color="0.5", lw=0.8, ls="--")
        ax.annotate(
            name,
            (0, q),
            xycoords=("axes fraction", "data"),
            xytext=(3, 2),
            textcoords="offset points",
            fontsize=8,
            color="0.3",
        )
    if target_s:
        ax.axvline(
            target_s * 1e3, color="grey", ls=":", lw=1, label=f"latency target {target_s:g} s"
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(low, 1.2)
    ax.set_xlabel("latency (ms)")
    ax.set_ylabel("share of requests slower")
    ax.set_title("Latency tail (complementary CDF)")
    ax.grid(alpha=0.3, which="both")
    if len(ax.figure.axes) == 1:  # alone in its figure: outside, since the tails reach every corner
        w, h = ax.figure.get_size_inches()  # widen the figure for the legend, not squeeze the axes
        longest = max((len(t) for t in ax.get_legend_handles_labels()[1]), default=0)
        ax.figure.set_size_inches(w + 0.065 * longest + 0.6, h)
        legend_outside(ax)
    else:
        ax.legend(fontsize=8, loc="lower left")
    return ax


def theory_check(rows: list[dict], ax=None):
    """Simulated vs Pollaczek-Khinchine mean waiting time against utilization (rows from the notebook check)."""
    ax = _ax(ax)
    for i, (kind, marker) in enumerate((("M/M/1", "o"), ("M/D/1", "s"))):
        col = other_color(i)  # one colour per queue: its theory line and its simulated points
        rr = [r for r in rows if r["queue"] == kind]
        rho = np.array([r["rho"] for r in rr])
        rho_line = np.linspace(0.05, 0.95, 100)
        cv2 = theory.SERVICE_CV2["mm1" if kind == "M/M/1" else "md1"]
        s = rr[0]["service_s"]
        ax.plot(
            rho_line,
            theory.pk_wait_s(rho_line / s, s, cv2) * 1e3,
            "-",
            lw=1,
            color=col,
            label=f"{kind} theory",
        )
        ax.plot(
            rho,
            np.array([r["simulated_s"] for r in rr]) * 1e3,
            marker,
            color=col,
            label=f"{kind} simulated",
        )
    ax.set_yscale("log")
    ax.set_xlabel("utilisation ρ (share of time the server is busy)")
    ax.set_ylabel("mean wait in queue (ms)")
    ax.set_title("Simulator vs queueing theory (batch size 1)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(
        fontsize=8, loc="upper left"
    )  # waits rise with the utilization: the upper left is empty
    return ax


def service_curves(models: dict, length: int, max_batch: int, axes=None):
    """Batch time (ms) and throughput (req/s) against batch size for each labelled ``ServiceModel``."""
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(10, 3.8), layout="constrained")
    b = np.arange(1, max_batch + 1)
    for label, m in models.items():
        t = np.array([m.time_s([length] * k) for k in b])
        axes[0].plot(b, t * 1e3, label=label, color=label_color(label))
        axes[1].plot(b, b / t, label=label, color=label_color(label))
    axes[0].set_xlabel("batch size (requests)")
    axes[0].set_ylabel("batch time (ms)")
    axes[0].set_title(f"Time of one batch, {length} tokens each")
    axes[1].set_xlabel("batch size (requests)")
    axes[1].set_ylabel("throughput (requests/s)")
    axes[1].set_title("Back-to-back throughput")
    for a in axes:
        a.grid(alpha=0.3)
        a.legend(
            fontsize=8, loc="lower right"
        )  # both curves rise with the batch: the lower right is empty
    return axes


def deployment_capacities(comparison, ax=None):
    """Capacity at the p99 target of each deployment of a ``serving.deployments.Comparison``
    (one hourly cost): one bar each, in the colour of its first chip (the only one, the prefill
    chip or the short prompts' chip) with hatching in the colour of its second; a dashed line at
    the best one-kind deployment."""
    deps = list(comparison.deployments)
    if ax is None:
        _, ax = plt.subplots(figsize=(8.4, 1.2 + 0.22 * len(deps)), layout="constrained")
    y = np.arange(len(deps))[::-1]
    for yi, d in zip(y, deps, strict=True):
        first = d.chips[0][0]
        second = d.chips[-1][0]
        ax.barh(
            yi,
            d.capacity_rps,
            color=chip_color(first),
            hatch="//" if second != first else None,
            edgecolor=chip_color(second) if second != first else "none",
            height=0.7,
        )
        ax.text(d.capacity_rps, yi, f" {d.capacity_rps:,.0f}", va="center", fontsize=8)
    base = comparison.best("co-located").capacity_rps
    ax.axvline(base, color="0.3", ls="--", lw=1, label="best one-kind deployment")
    ax.set_yticks(y, [d.name for d in deps], fontsize=8)
    ax.set_xlim(0, 1.2 * max(d.capacity_rps for d in deps))
    ax.set_xlabel(f"capacity at p99 <= {comparison.slo_p99_s:g} s (requests/s)")
    ax.set_title(
        f"at most {max(d.usd_per_hour for d in deps):.2f} USD an hour each; bar colour: first chip, "
        "hatching: second",
        fontsize=9,
    )
    legend_outside(ax)
    return ax
