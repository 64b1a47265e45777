"""Pad, bucket or pack sequences into rows of fixed length, and count the waste.

Strategies (``pack(source, max_len, strategy=...)``), all returning a ``Packing``:

* ``"pad"``: one sequence per row, every row ``max_len`` tokens.
* ``"bucket"``: one sequence per row, each row padded only to the smallest bucket
  boundary that holds it (sort by length, cut into buckets).
* ``"ffd"``: first-fit decreasing on the individual lengths: longest first, each into the
  first row (lowest index) with room and fewer than ``max_per_row`` sequences.
* ``"spfhp"``: shortest-pack-first histogram packing (Krell et al., arXiv:2107.02027):
  lengths longest first, on the histogram's counts; each group of equal lengths
  goes to the *shortest* open pack (fewest tokens, most free space) that still has room,
  splitting a group of packs when fewer sequences remain than packs.
* ``"bfhp"``: best-fit histogram packing, the same loop but into the *fullest* open pack
  that still fits (least free space left), a best-fit variant that gets closer to optimal
  when many sequences may share a row.
* ``"nnlshp"``: non-negative least-squares histogram packing after Krell et al.:
  enumerate every pack *composition* of up to 3 sequences whose lengths sum to exactly
  ``max_len`` (``slack`` tokens short allowed), solve ``min |A x - counts|, x >= 0`` for
  how many packs of each, round down, remove any overuse of a length, and pack what is
  left with SPFHP (cap ``max_per_row``). Our NNLS solver is projected coordinate descent
  (a fixed number of sweeps), not an exact active-set solver such as SciPy's nnls.

The package, one idea a module: ``result`` (``Packing``), ``ffd``, ``spfhp`` and ``nnls``
(the kernels of each strategy; their references are in ``tests/packing_reference.py``),
``strategies`` (``pack``, ``compare``).

Histogram strategies work on counts (16 million sequences are a 512-entry array) and
return row *compositions* with repeat counts; ``Packing.rows_as_lists`` expands them for small
inputs. Given a list of lengths, every strategy also says which sequence went into which
row (``Packing.seq_row``).

Token accounting: ``real_tokens`` (content), ``padded_tokens`` (padding slots, the
waste), ``total_tokens`` = their sum (token positions computed), ``efficiency`` =
real / total. ``flops()`` counts the FLOPs a BERT-style forward spends on the padding,
with attention counted per sequence under a block-diagonal mask for packed rows.
"""

from __future__ import annotations

from .ffd import first_fit_rows, first_fit_rows_into
from .nnls import NNLS_DEPTH, NNLS_SWEEPS
from .result import PACKING_STRATEGIES, STRATEGIES, Packing
from .strategies import compare, pack

__all__ = [
    "NNLS_DEPTH",
    "NNLS_SWEEPS",
    "PACKING_STRATEGIES",
    "STRATEGIES",
    "Packing",
    "compare",
    "first_fit_rows",
    "first_fit_rows_into",
    "pack",
]
