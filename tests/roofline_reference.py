"""Plain-Python reference of ``ipusim.roofline.grid.sweep``: builds every step and bounds it op
by op (the tests and benchmarks compare the Numba kernel against it). Seconds."""

from __future__ import annotations

import numpy as np

from ipusim import workloads
from ipusim.roofline.bounds import fits_on_chip, step_time_s
from ipusim.roofline.grid import BoundGrid, _sweep_inputs


def sweep(
    chips, model_or_name, batches, seq_lens, *, phase: str = "forward", dtype_bytes: int = 2
) -> BoundGrid:
    """Plain-Python reference of ``sweep``: builds every step and bounds it op by op."""
    m, cs, b, lens = _sweep_inputs(chips, model_or_name, batches, seq_lens)
    out_t = np.empty((len(cs), b.size, lens.size))
    out_f = np.empty((len(cs), b.size, lens.size), dtype=bool)
    for j, ln in enumerate(lens):
        for i, n in enumerate(b):
            s = workloads.step(m, [int(ln)] * int(n), phase=phase, dtype_bytes=dtype_bytes)
            for k, c in enumerate(cs):
                out_f[k, i, j] = fits_on_chip(c, s)
                out_t[k, i, j] = step_time_s(c, s)
    return BoundGrid(tuple(c.name for c in cs), m.name, phase, b, lens, out_t, out_f)
