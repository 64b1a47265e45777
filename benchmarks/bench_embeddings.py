"""Embeddings: the look-up tally kernel against its plain-Python reference, and whole steps."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from _timing import best_of

from ipusim import embeddings
from ipusim.embeddings import access

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import embeddings_reference  # noqa: E402  (the plain-Python references live beside the tests)


def _plain_simulate(chip, w, chips):
    """``embeddings.simulate`` with the plain reference in place of the tally kernel."""
    with embeddings_reference.plain():
        return embeddings.simulate(chip, w, chips=chips)


def _args(w, n_units, per, cached, stream):
    rows = np.array([t.rows for t in w.tables], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(rows)[:-1]]).astype(np.int64)
    return (
        *stream,
        rows,
        offsets,
        np.asarray(cached, dtype=np.int64),
        access.rotations(len(rows), n_units),
        n_units,
        per,
        w.batch,
        False,
        access.SCATTER_MULTIPLIER,
    )


def rows(quick: bool) -> list[dict]:
    batch = 2048 if quick else 65536
    w = embeddings.preset("dlrm-mlperf", batch=batch, zipf=1.05)
    U, per = 1472 * 4, 1472
    cached = access.cache_rows(w, 3e9, [512] * 26)
    stream = access.lookup_stream(w, 0)
    args = _args(w, U, per, cached, stream)
    n = stream[0].size
    outs = (
        [np.zeros(U, dtype=np.int64) for _ in range(5)]
        + [np.zeros(4, dtype=np.int64) for _ in range(2)]
        + [np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)]
    )

    def kernel():
        for o in outs[:7]:
            o.fill(0)
        access._tally(*args, *outs)

    kernel()  # compile (or load the cache)
    out = [
        {
            "name": f"embeddings: tally kernel ({n:,} look-ups -> {U:,} tiles)",
            "kernel_s": best_of(kernel, 5),
            "reference_s": best_of(lambda: embeddings_reference.tally(*args), 1),
            "goal": ">= 50x reference",
            "note": "_tally vs tests/embeddings_reference.tally, dlrm-mlperf Zipf 1.05 with a cache",
        }
    ]
    for chip, chips in (("gc200", 4), ("a100-80gb", 2)):
        embeddings.simulate(chip, w, chips=chips)
        out.append(
            {
                "name": f"embeddings: simulate dlrm-mlperf b{batch} on {chips} x {chip}",
                "kernel_s": best_of(lambda c=chip, k=chips: embeddings.simulate(c, w, chips=k), 3),
                "reference_s": best_of(lambda c=chip, k=chips: _plain_simulate(c, w, k), 1)
                if quick
                else None,
                "goal": "well under a second",
                "note": "whole simulate(): draw, tally (twice on a tile chip), cost",
            }
        )
    return out
