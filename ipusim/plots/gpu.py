"""GPU views: per-kernel compute vs memory time, and the calibration against published latencies."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np


def _axes(ax):
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4.5))
    return ax


def kernel_times(result, ax=None, *, unit: str = "ms"):
    """Stacked bars per kernel (all layers): compute, memory wait, launch, for a GPU StepResult.

    ``result`` comes from ``ipusim.gpu.simulate`` (or ``machine.simulate`` on a GPU chip); the
    kernels are read from ``result.extra["kernels"]``.
    """
    if getattr(result, "kind", None) != "gpu" or "kernels" not in result.extra:
        raise ValueError("kernel_times needs a GPU StepResult (from ipusim.gpu.simulate)")
    scale = {"ms": 1e3, "us": 1e6, "s": 1.0}[unit]
    ax = _axes(ax)
    ks = result.extra["kernels"]
    names = [f"{k['kernel']}\n{k['tile']}" + (f" x{k['count']}" if k["count"] > 1 else "") for k in ks]
    x = np.arange(len(ks))
    bottom = np.zeros(len(ks))
    for key, label, color in (("compute_s", "compute (SM busy)", "tab:blue"),
                              ("memory_s", "memory (HBM wait + pipeline fill)", "tab:orange"),
                              ("launch_s", "launch", "tab:gray")):
        v = np.array([k[key] for k in ks]) * scale
        ax.bar(x, v, bottom=bottom, label=label, color=color)
        bottom += v
    ax.set_xticks(x, names, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel(f"time over all layers ({unit})")
    ax.set_title(f"{result.model} {result.phase}, batch {result.batch} on {result.chip}: "
                 f"{result.time_s * 1e3:,.2f} ms per step")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return ax


def calibration(rows, ax=None, *, tolerance: float | None = None):
    """Published vs simulated latency (log-log) with the y = x line and a +-tolerance band.

    ``rows`` are ``ipusim.gpu.calibration_table()`` rows; ``tolerance`` defaults to
    ``ipusim.gpu.CALIBRATION_TOLERANCE``.
    """
    if tolerance is None:
        from ..gpu import CALIBRATION_TOLERANCE as tolerance
    ax = _axes(ax)
    pub = np.array([r["published_ms"] for r in rows])
    sim = np.array([r["simulated_ms"] for r in rows])
    lo, hi = min(pub.min(), sim.min()) / 1.5, max(pub.max(), sim.max()) * 1.5
    line = np.geomspace(lo, hi, 50)
    ax.plot(line, line, color="black", lw=1, label="simulated = published")
    ax.fill_between(line, line * (1 - tolerance), line * (1 + tolerance), color="gray", alpha=0.2,
                    label=f"±{tolerance:.0%} tolerance")
    for seq, marker in ((128, "o"), (384, "s")):
        sel = [i for i, r in enumerate(rows) if r["seq"] == seq]
        if not sel:
            continue
        ax.scatter(pub[sel], sim[sel], marker=marker, s=40, zorder=3, label=f"sequence length {seq}")
        for i in sel:
            ax.annotate(f"b{rows[i]['batch']}", (pub[i], sim[i]), textcoords="offset points",
                        xytext=(5, -10), fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("published latency (ms), TensorRT 8.4.3 BERT-base FP16, A100 40GB")
    ax.set_ylabel("simulated latency (ms)")
    ax.set_title("GPU model vs published TensorRT latencies")
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(alpha=0.3, which="both")
    return ax
