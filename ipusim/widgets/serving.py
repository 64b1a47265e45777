"""Widget for notebook 03: arrival rate, policy, max batch, max delay and long-request share."""

from __future__ import annotations

import math

import ipywidgets as W
import matplotlib.pyplot as plt
import numpy as np

from .. import arrivals, lengths, policies, serving
from ..claims.comparisons import SAME_GENERATION
from ..plots import serving as plots
from .explorer import interactive


def explore(*, chips=SAME_GENERATION, model: str = "bert-base", n: int = 5000):
    """Build the interactive explorer; returns the ``ipywidgets.interactive`` object.

    ``chips``: the chips offered, by default the claims' same-generation pair
    (``claims.comparisons.SAME_GENERATION``: GC200 and A100-80GB), as in notebook 03.

    Each change runs one simulation of ``n`` Poisson requests and draws the latency
    distribution and the batch sizes, with the headline numbers in the title. A setting the
    simulator refuses (a batch that does not fit the chip) shows the reason instead, as one
    line ("ValueError: ..."); the result is then that line (``widgets.explorer``). The rate
    starts at half the first chip's capacity for back-to-back batches of 16 padded to the
    longest sampled request (a lower bound on its capacity), on the slider's grid, so the
    default view is a stable queue whatever the calibration.
    """

    def show(chip, policy, rate, max_batch, max_delay_ms, long_fraction):
        arr = arrivals.poisson(rate, n, seed=0)
        lens = lengths.sample(n, long_fraction=long_fraction, seed=1)
        pol = policies.make(policy, max_batch=max_batch, max_delay_s=max_delay_ms / 1e3)
        packed = policy == "token"
        rows = getattr(pol, "max_batch", max_batch)
        dev = serving.chip_service(chip, model, max_batch=rows, packed=packed)
        # a setting the simulator refuses (a batch that does not fit the chip) raises
        # ValueError: the explorer shows it as one line in place of the figure
        r = serving.simulate(arr, lens, pol, dev, max_waiting=n // 5)
        fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
        plots.latency_cdf({policy: r}, ax=axes[0], target_s=r.latency_target_s)
        plots.batch_sizes(r, ax=axes[1])
        s = r.summary()
        state = "stable" if s["stable"] else "UNSTABLE"
        fig.suptitle(
            f"{chip}: {s['throughput_rps']:,.0f} req/s, p99 {s['latency_p99_s'] * 1e3:,.1f} ms, "
            f"utilization {s['utilization']:.0%}, padding waste {s['padded_token_waste']:.0%} ({state})"
        )
        fig.tight_layout()
        plt.show()
        return r

    longest = int(np.max(lengths.sample(n, long_fraction=0.2, seed=1)))
    cap = serving.chip_service(chips[0], model, max_batch=16).throughput_rps(longest, 16)
    rate0 = 10 ** (
        math.floor(math.log10(0.5 * cap) / 0.05) * 0.05
    )  # on the slider's 0.05-decade grid
    return interactive(
        show,
        chip=W.Dropdown(options=list(chips), value=chips[0], description="chip"),
        policy=W.Dropdown(
            options=["static", "dynamic", "token", "buckets", "adaptive"],
            value="dynamic",
            description="policy",
        ),
        rate=W.FloatLogSlider(
            value=rate0, base=10, min=1, max=4.5, step=0.05, description="rate (req/s)"
        ),
        max_batch=W.IntSlider(value=16, min=1, max=64, description="max batch"),
        max_delay_ms=W.FloatSlider(
            value=2.0, min=0.0, max=20.0, step=0.5, description="max delay ms"
        ),
        long_fraction=W.FloatSlider(
            value=0.2, min=0.0, max=1.0, step=0.05, description="long share"
        ),
    )
