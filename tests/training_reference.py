"""Plain reference of the training placement search (``training.best_placement``): every
placement on the grid timed one at a time, no pruning. Tests and ``benchmarks/bench_training.py``
compare the search to it."""

from __future__ import annotations

import numpy as np

from ipusim.training import model as tm
from ipusim.training import search


def search_reference(
    model, chip, chips: int, *, seq_len: int | None = None, global_batch: int | None = None
) -> tuple:
    """Plain exhaustive reference: every placement on the grid timed one at a time, no pruning.
    Returns (best placement, its step time); for tests and the benchmark."""
    cfg, c, chips, seq_len, global_batch = search.inputs(model, chip, chips, seq_len, global_batch)
    g = search.candidates(cfg, chips, global_batch)
    best, best_t = None, float("inf")
    for i in range(g["d"].size):
        row = tm.evaluate(
            cfg,
            c,
            chips,
            seq_len,
            global_batch,
            *(g[k][i] for k in ("d", "t", "p", "b")),
            g["recompute"][i],
            g["sharding"][i],
        )
        t = float(np.ravel(row["step_time_s"])[0])
        if t < best_t:
            best, best_t = search._placement(g, i), t
    return best, best_t
