"""Checklist: its stand-in serving kernel vs the plain-Python reference, and one whole quick run."""

from __future__ import annotations

import os
import time

import numpy as np

from ipusim import hardware, workloads
from ipusim.checklist import _engine as eng


def _best_of(fn, repeat=3):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def rows(quick: bool) -> list[dict]:
    svc = eng.ServiceModel(hardware.chip("a100-80gb"), workloads.model("bert-base"), "classify", "padded",
                           max_batch=64)
    n = 5_000 if quick else 50_000
    rng = np.random.default_rng(0)
    lens = rng.integers(16, 513, n)
    svc.table()  # fill the service table before timing
    policy = eng.Policy("dynamic", 16, 0.002)
    arr = eng.poisson_arrivals(0.8 * eng.saturation_rate(lens, svc, 16), n, seed=1)
    eng.simulate_standin(arr[:100], lens[:100], svc, policy, 1)  # compile / warm the kernel
    k = _best_of(lambda: eng.simulate_standin(arr, lens, svc, policy, 1))
    ref = _best_of(lambda: eng.simulate_reference(arr, lens, svc.batch_time, policy, 1), 1)
    out = [{"name": f"checklist stand-in batcher, {n:,} requests", "kernel_s": k, "reference_s": ref,
            "goal": "thousands of runs per checklist (policy search x bisection)",
            "note": "FIFO dynamic batcher, max batch 16, 80% load"}]
    from ipusim.checklist import default_case, run_checklist

    old = os.environ.get("IPUSIM_QUICK")
    os.environ["IPUSIM_QUICK"] = "1"
    try:
        run_checklist(default_case(), show_progress=False)  # warm every kernel
        whole = _best_of(lambda: run_checklist(default_case(), show_progress=False), 1 if quick else 3)
    finally:
        if old is None:
            del os.environ["IPUSIM_QUICK"]
        else:
            os.environ["IPUSIM_QUICK"] = old
    out.append({"name": "run_checklist(default_case()) under IPUSIM_QUICK", "kernel_s": whole, "reference_s": None,
                "goal": "a few seconds per case", "note": "all eight checks, both candidates"})
    return out
