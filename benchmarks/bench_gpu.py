"""GPU machine: the Numba wave kernel vs its plain-Python reference on whole steps."""

from __future__ import annotations

import time

from ipusim import gpu, step


def _best_of(fn, repeat=3):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def rows(quick: bool) -> list[dict]:
    cases = [("bert-base b32 len128", [128] * 32, 128)]
    if not quick:
        cases.append(("bert-base b128 len384", [384] * 128, 384))
    out = []
    for name, lens, pad in cases:
        s = step("bert-base", lens, pad_to=pad)
        gpu.simulate("a100-40gb", s)  # compile / warm the kernel
        k = _best_of(lambda s=s: gpu.simulate("a100-40gb", s), 3 if quick else 5)
        ref = _best_of(lambda s=s: gpu.simulate("a100-40gb", s, use_kernel=False), 1 if quick else 3)
        out.append({"name": f"gpu.simulate {name} on A100", "kernel_s": k, "reference_s": ref,
                    "goal": "whole step well under 10 ms (serving calls it per batch)",
                    "note": "all GEMM tile candidates simulated, fastest kept"})
    return out
