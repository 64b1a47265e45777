"""GPU machine: the Numba wave kernel vs its plain-Python reference, on whole steps and alone."""

from __future__ import annotations

import sys
from pathlib import Path

from _timing import best_of

from ipusim import gpu, hardware, step

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import gpu_reference  # noqa: E402  (the plain-Python references live beside the tests)


def _plain(fn):
    """``fn`` run with the plain reference in place of the wave kernel."""

    def run():
        with gpu_reference.plain():
            return fn()

    return run


def _fresh(chip, s):
    """``gpu.simulate`` with no memoised kernel picks: every candidate through the wave loop."""
    gpu.autotune.clear_cache()
    return gpu.simulate(chip, s)


def _wave_inputs(s, chip):
    """The flat block-group arrays ``gpu.simulate`` hands the wave loop for step ``s``."""
    r = gpu.kernels.rates(chip, gpu.TENSOR_EFFICIENCY, gpu.HBM_EFFICIENCY)
    kernels = [
        k
        for name, ops in gpu.kernels.kernel_plan(s, "tensorrt")
        for k in gpu.kernels.op_kernel_candidates(ops, name, s, r, "tensorrt")
    ]
    return kernels, r


def rows(quick: bool) -> list[dict]:
    a100 = hardware.chip("a100-40gb")
    cases = [("bert-base b32 len128", [128] * 32, 128)]
    if not quick:
        cases.append(("bert-base b128 len384", [384] * 128, 384))
    out = []
    for name, lens, pad in cases:
        s = step("bert-base", lens, pad_to=pad)
        gpu.simulate(a100, s)  # compile / warm the kernel
        k = best_of(lambda s=s: _fresh(a100, s), 3 if quick else 5)
        ref = best_of(_plain(lambda s=s: gpu.simulate(a100, s)), 1 if quick else 3)
        memo = best_of(lambda s=s: gpu.simulate(a100, s), 3 if quick else 5)
        out.append(
            {
                "name": f"gpu.simulate {name} on A100",
                "kernel_s": k,
                "reference_s": ref,
                "goal": "whole step well under 10 ms (serving calls it per batch)",
                "note": "every GEMM tile candidate simulated, fastest kept "
                f"(memo empty; {memo * 1e3:.2f} ms with every matmul and element-wise pick "
                "memoised)",
            }
        )
        kernels, r = _wave_inputs(s, a100)
        kw = best_of(
            lambda kernels=kernels, r=r: gpu.waves.run_waves(kernels, r), 3 if quick else 5
        )
        rw = best_of(
            _plain(lambda kernels=kernels, r=r: gpu.waves.run_waves(kernels, r)), 1 if quick else 3
        )
        blocks = sum(g[0] for kern in kernels for g in kern.groups)
        out.append(
            {
                "name": f"gpu._waves alone, {name}",
                "kernel_s": kw,
                "reference_s": rw,
                "goal": "the per-block loop",
                "note": f"{len(kernels)} kernels, {blocks:,} blocks",
            }
        )
    return out
