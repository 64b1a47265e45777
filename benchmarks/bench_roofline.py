"""Roofline explorer sweep: step lower bounds over chips x batches x sequence lengths.

Kernel: ``roofline.sweep`` (coefficients once, then a Numba loop over the grid).
Reference: ``roofline_reference.sweep`` (tests/) (builds every step with ``workloads.step`` and
bounds it op by op with ``roofline.step_time_s``), the same function the tests compare to.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from _timing import kernel_row

from ipusim import hardware, roofline

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import roofline_reference  # noqa: E402  (the plain-Python references live beside the tests)


def rows(quick: bool) -> list[dict]:
    n = 12 if quick else 48
    chips = list(hardware.PRESETS)
    batches = np.unique(np.geomspace(1, 512, n).round().astype(int))
    out = []
    for model, phase, max_len in (("bert-base", "forward", 512), ("llama-2-7b", "decode", 4096)):
        lens = np.unique(np.geomspace(16, max_len, n).round().astype(int))
        roofline.sweep(
            chips, model, batches[:2], lens[:2], phase=phase
        )  # compile / load the kernel
        pts = len(chips) * batches.size * lens.size
        out.append(
            kernel_row(
                f"roofline sweep {model} {phase} ({pts:,} points)",
                lambda m=model, p=phase, ls=lens: roofline.sweep(chips, m, batches, ls, phase=p),
                lambda m=model, p=phase, ls=lens: roofline_reference.sweep(
                    chips, m, batches, ls, phase=p
                ),
                goal="explorer redraws a full grid well under 0.1 s",
                note="kernel time includes solving the per-op coefficients (5 small steps)",
            )
        )
    return out
