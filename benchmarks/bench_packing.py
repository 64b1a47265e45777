"""Packing kernels vs their plain-Python references.

* SPFHP on the 16.3-million-sequence Wikipedia-512 histogram (goal: well under 50 ms;
  Krell et al. report 0.02 s for their NumPy code).
* First-fit decreasing on 1 million individual lengths (goal: under 1 s). The plain-Python
  first fit scans every open row, O(n x rows): on 1 million lengths it would take hours,
  so its row times it on a smaller n, with the kernel timed on the same n for the ratio.
* NNLSHP (the method nearer optimal) on the Wikipedia histogram, kernel only.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from _timing import best_of

from ipusim import lengths, packing

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import packing_reference  # noqa: E402  (the plain-Python references live beside the tests)


def rows(quick: bool) -> list[dict]:
    wiki = lengths.dataset("wikipedia-512")
    counts = wiki.counts
    packing.spfhp.run_spfhp(counts, 3)  # compile
    out = [
        {
            "name": f"spfhp wikipedia-512 ({wiki.n / 1e6:.1f}M seqs), <=3/row",
            "kernel_s": best_of(lambda: packing.pack(wiki, 512, "spfhp", max_per_row=3), 5),
            "reference_s": best_of(lambda: packing_reference.spfhp(counts, 3), 1 if quick else 3),
            "goal": "well under 50 ms",
            "note": "public pack() incl. checks; reference: plain-Python SPFHP on the same counts",
        },
        {
            "name": f"spfhp wikipedia-512 ({wiki.n / 1e6:.1f}M seqs), <=16/row",
            "kernel_s": best_of(lambda: packing.spfhp.run_spfhp(counts, 16), 5),
            "reference_s": best_of(lambda: packing_reference.spfhp(counts, 16), 1 if quick else 3),
            "goal": "well under 50 ms",
            "note": "",
        },
    ]

    rng = np.random.default_rng(0)
    n_big = 100_000 if quick else 1_000_000
    big = wiki.sample(n_big, seed=0)
    packing.pack(big[:1000], 512, "ffd", max_per_row=3)  # compile
    out.append(
        {
            "name": f"ffd {n_big:,} lengths (wikipedia sample), <=3/row",
            "kernel_s": best_of(
                lambda: packing.pack(big, 512, "ffd", max_per_row=3), 1 if quick else 3
            ),
            "reference_s": None,
            "goal": "under 1 s (1M lengths)",
            "note": "public pack(): sort + kernel + row table; reference too slow at this size",
        }
    )
    n_small = 2_000 if quick else 20_000
    small = rng.integers(1, 513, n_small)
    small_list = [int(v) for v in small]
    srt = np.sort(small)[::-1].copy()
    srow = np.empty(n_small, np.int64)
    out.append(
        {
            "name": f"ffd kernel vs plain-Python first fit, {n_small:,} lengths",
            "kernel_s": best_of(lambda: packing.first_fit_rows(srt, 512, 3, srow)),
            "reference_s": best_of(lambda: packing_reference.ffd(small_list, 512, 3), 1),
            "goal": "",
            "note": "same n for both; the reference scans every row",
        }
    )

    packing.pack(lengths.dataset("squad-384"), 384, "nnlshp", max_per_row=3)  # compile
    out.append(
        {
            "name": "nnlshp wikipedia-512, <=3/row (NNLS + SPFHP rest)",
            "kernel_s": best_of(
                lambda: packing.pack(wiki, 512, "nnlshp", max_per_row=3), 1 if quick else 3
            ),
            "reference_s": None,
            "goal": "Krell et al. report 28.4 s for theirs",
            "note": f"{packing.NNLS_SWEEPS} coordinate-descent sweeps",
        }
    )
    return out
