"""GPU views: per-kernel compute vs memory time, and the calibration against published latencies."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from .style import PHASE_COLORS


def _axes(ax):
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4.5))
    return ax


def kernel_times(result, ax=None, *, unit: str = "ms", style: str = "stacked"):
    """Per-kernel time of a GPU StepResult, summed over layers.

    ``style="stacked"``: where each kernel's time goes (compute = slowest SM busy, memory =
    extra wait for HBM and pipeline fill, launch), bars add up to the step time.
    ``style="paired"``: compute time beside the pure HBM transfer time (bytes / bandwidth) for
    each kernel, the per-kernel roofline view: the taller bar says what bounds the kernel.
    ``result`` comes from ``ipusim.gpu.simulate`` (kernels in ``result.extra["kernels"]``). For a
    step that does not fit, the bars are the as-if-unlimited estimate and the title says so.
    """
    if getattr(result, "kind", None) != "gpu" or "kernels" not in getattr(result, "extra", {}):
        raise ValueError("kernel_times needs a GPU StepResult (from ipusim.gpu.simulate)")
    scales = {"ms": 1e3, "us": 1e6, "s": 1.0}
    if unit not in scales or style not in ("stacked", "paired"):
        raise ValueError(
            f"unit must be one of {list(scales)} and style 'stacked' or 'paired'; "
            f"got unit={unit!r}, style={style!r}"
        )
    scale = scales[unit]
    ax = _axes(ax)
    ks = result.extra["kernels"]
    names = [
        f"{k['kernel']}\n{k['tile']}" + (f" x{k['count']}" if k["count"] > 1 else "") for k in ks
    ]
    x = np.arange(len(ks))
    if style == "stacked":
        bottom = np.zeros(len(ks))
        for key, label, color in (
            ("compute_s", "compute (slowest SM busy)", PHASE_COLORS["compute"]),
            ("memory_s", "memory (HBM wait + pipeline fill)", PHASE_COLORS["memory"]),
            ("launch_s", "launch overhead", PHASE_COLORS["launch"]),
        ):
            v = np.array([k[key] for k in ks]) * scale
            ax.bar(x, v, bottom=bottom, label=label, color=color)
            bottom += v
    else:
        w = 0.4
        ax.bar(
            x - w / 2,
            np.array([k["compute_s"] for k in ks]) * scale,
            w,
            color=PHASE_COLORS["compute"],
            label="compute (slowest SM busy)",
        )
        ax.bar(
            x + w / 2,
            np.array([k["hbm_s"] for k in ks]) * scale,
            w,
            color=PHASE_COLORS["memory"],
            label="HBM transfer (bytes / achievable bandwidth)",
        )
    ax.set_xticks(x, names, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel(f"time over all layers ({unit})")
    if result.fits:
        when = f"{result.time_s * 1e3:,.2f} ms per step"
    else:  # fit rule: no time; the bars are the as-if-unlimited-HBM estimate
        est = result.extra.get("time_if_unlimited_s", float("nan"))
        when = f"DOES NOT FIT in HBM (bars: as if it did, {est * 1e3:,.2f} ms)"
    ax.set_title(f"{result.model} {result.phase}, batch {result.batch} on {result.chip}: {when}")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return ax


def wave_staircase(data: dict, ax=None):
    """Kernel time vs number of thread blocks (``gpu.wave_staircase``'s result): flat within
    a wave, a step at each new wave, beside the time with no quantization."""
    ax = _axes(ax)
    n, t, per_wave = data["blocks"], data["time_s"], data["per_wave"]
    ideal = t[per_wave - 1] * n / per_wave  # perfect load balance: time proportional to blocks
    ax.plot(n, t * 1e6, drawstyle="steps-post", label="simulated (waves)")
    ax.plot(n, ideal * 1e6, "--", color="gray", label="no quantization (time ∝ blocks)")
    for w in range(1, n.size // per_wave):
        ax.axvline(w * per_wave, color="black", lw=0.5, alpha=0.4)
    ax.set_xlabel(
        f"thread blocks ({data['sms']} SMs x {data['blocks_per_sm']} per SM = {per_wave} per wave)"
    )
    ax.set_ylabel("kernel time (µs)")
    ax.set_title(f"Wave quantization on {data['chip']}: block {per_wave + 1} starts a new wave")
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(alpha=0.3)
    return ax


def calibration(rows, ax=None, *, tolerance: float | None = None):
    """Published vs simulated latency (log-log) with the y = x line and a +-tolerance band.

    ``rows`` are ``ipusim.gpu.calibration_table()`` rows (any sources); ``tolerance`` defaults to
    ``ipusim.gpu.CALIBRATION_TOLERANCE``. Filled markers are in-sample rows (they set
    ``TENSOR_EFFICIENCY``), out-of-sample ones carry a thick black edge (hollow means
    does_not_fit in the series' vocabulary, ``plots.style``); circles 128 tokens, squares 384.
    Colours are the chips' (``plots.style.chip_color``).
    """
    if tolerance is None:
        from ..gpu import CALIBRATION_TOLERANCE as tolerance
    ax = _axes(ax)
    pub = np.array([r["published_ms"] for r in rows])
    sim = np.array([r["simulated_ms"] for r in rows])
    lo, hi = min(pub.min(), sim.min()) / 1.5, max(pub.max(), sim.max()) * 1.5
    line = np.geomspace(lo, hi, 50)
    ax.plot(line, line, color="black", lw=1, label="simulated = published")
    ax.fill_between(
        line,
        line * (1 - tolerance),
        line * (1 + tolerance),
        color="gray",
        alpha=0.2,
        label=f"±{tolerance:.0%} tolerance",
    )
    from .style import chip_color

    colors = {"TRT-BERT": chip_color("a100-40gb"), "FT-GUIDE": chip_color("a100-80gb")}
    names = {"TRT-BERT": "TensorRT 8.4.3, A100 40GB", "FT-GUIDE": "FasterTransformer, A100 80GB"}
    fams = ["TRT-BERT" if r.get("source", "TRT-BERT") == "TRT-BERT" else "FT-GUIDE" for r in rows]
    for fam in dict.fromkeys(fams):
        for seq, marker in ((128, "o"), (384, "s")):
            for sample in ("in", "out"):
                sel = [
                    i
                    for i, r in enumerate(rows)
                    if r["seq"] == seq and fams[i] == fam and r.get("sample", "in") == sample
                ]
                if not sel:
                    continue
                filled = sample == "in"
                ax.scatter(
                    pub[sel],
                    sim[sel],
                    marker=marker,
                    s=40,
                    zorder=3,
                    facecolors=colors[fam],
                    edgecolors=colors[fam] if filled else "black",
                    linewidths=0.5 if filled else 1.8,
                    label=f"{names[fam]}, {seq} tokens, {'in' if filled else 'out of'} sample",
                )
                for i in sel:
                    ax.annotate(
                        f"b{rows[i]['batch']}",
                        (pub[i], sim[i]),
                        textcoords="offset points",
                        xytext=(5, -10),
                        fontsize=8,
                    )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("published latency (ms), BERT-base FP16, padded batches")
    ax.set_ylabel("simulated latency (ms)")
    ax.set_title("GPU model vs published latencies (black edge: out of sample)", fontsize=10)
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(alpha=0.3, which="both")
    return ax
