"""``pack``: pad, bucket or pack a source of lengths with one strategy (``compare``: several),
checking inputs and memory limits, and which sequence went into which row. Tokens, bytes."""

from __future__ import annotations

import numpy as np

from .. import lengths as _lengths
from .. import limits
from .._validate import choice, lengths_array, positive
from .ffd import first_fit_rows, first_fit_shape
from .nnls import run_nnlshp
from .result import STRATEGIES, Packing
from .spfhp import run_spfhp


def _as_source(source, max_len):
    """(Histogram, lengths array or None) from a Histogram, a dataset name or a list of lengths."""
    if isinstance(source, _lengths.Histogram):
        h = source
        if h.longest > max_len:
            raise ValueError(
                f"a sequence of {h.longest} tokens is longer than the row (max_len={max_len})"
            )
        return h.with_max_len(max_len), None
    if isinstance(source, str):
        return _as_source(_lengths.dataset(source), max_len)
    arr = lengths_array("lengths", source)
    if arr.max() > max_len:
        raise ValueError(
            f"a sequence of {int(arr.max())} tokens is longer than the row (max_len={max_len})"
        )
    return _lengths.from_lengths(arr, max_len=max_len), arr


def _assign(comps, repeats, arr):
    """Row index of every input sequence, filling each composition's slots from per-length pools."""
    order = np.argsort(arr, kind="stable")
    sorted_len = arr[order]
    L = int(sorted_len[-1])
    start = np.searchsorted(
        sorted_len, np.arange(1, L + 2)
    )  # pool of length l: start[l-1]:start[l]
    ptr = start[:-1].copy()
    seq_row = np.empty(arr.size, np.int64)
    row0 = 0
    for comp, r in zip(comps, repeats, strict=True):
        r = int(r)
        for ln in comp:
            if ln <= 0:
                continue
            idx = order[ptr[ln - 1] : ptr[ln - 1] + r]
            seq_row[idx] = np.arange(row0, row0 + r)
            ptr[ln - 1] += r
        row0 += r
    return seq_row


def _bucket_boundaries(buckets, max_len):
    if buckets is None:
        buckets = 8
    if isinstance(buckets, (int, np.integer)) and not isinstance(buckets, bool):
        k = positive("buckets", buckets, integer=True)
        limits.check_at_most(
            "buckets", k, max_len, f"at most one bucket per token length; max_len is {max_len:,}"
        )
        b = np.unique(np.ceil(np.arange(1, k + 1) * max_len / k).astype(np.int64))
    else:
        b = np.unique(lengths_array("bucket boundaries", buckets, max_len=max_len))
    if b[-1] != max_len:
        b = np.append(b, max_len)
    return b


SPFHP_BYTES_PER_CELL = 8  # the int64 composition table (its copies are rows, not cells)
NNLSHP_MAX_LEN = 8192  # tokens per row for nnlshp (work ~ max_len^2; measured 3.5 s CPU at 4,096)
FFD_BYTES_PER_SEQUENCE = 48  # the expanded lengths, their order, and the row of each


FFD_BYTES_PER_CELL = (
    16  # a cell of the (rows x most sequences in a row) int64 row matrix and its masks
)


def pack_bytes(
    hist, max_len: int, strategy: str, *, max_per_row: int | None = None
) -> tuple[float, str]:
    """(bytes, why) that packing ``hist`` (a ``lengths.Histogram``; unused by the table strategies)
    into rows of ``max_len`` tokens with ``strategy`` needs, estimated before anything is built.

    spfhp, bfhp, nnlshp: their (2 x max_len + 1) x max_per_row composition table. ffd: its
    per-sequence work arrays and its (rows x fullest row) row matrix, whose shape
    ``first_fit_shape`` gives exactly from the histogram's counts before any sequence is
    placed (with too many distinct lengths for that, the work arrays only, and the row
    matrix is checked after the pass). pad and bucket: one entry per distinct length.
    """
    K = max_len if max_per_row is None else min(int(max_per_row), max_len)
    if strategy in ("spfhp", "bfhp", "nnlshp"):
        return (
            SPFHP_BYTES_PER_CELL * (2 * max_len + 1) * K,
            f"{strategy} keeps a (2 x max_len + 1) x max_per_row table of int64, "
            f"{SPFHP_BYTES_PER_CELL} bytes per cell with its work copies",
        )
    if strategy == "ffd":
        if hist.longest > max_len:  # refused by ``pack`` before anything is placed
            return (
                FFD_BYTES_PER_SEQUENCE * hist.n,
                f"ffd places {hist.n:,} sequences one by one, {FFD_BYTES_PER_SEQUENCE} bytes each",
            )
        shape = first_fit_shape(hist.counts, max_len, K)
        if shape is None:  # too many distinct lengths: the rows are checked after the pass
            return (
                FFD_BYTES_PER_SEQUENCE * hist.n,
                f"ffd places {hist.n:,} sequences one by one, {FFD_BYTES_PER_SEQUENCE} bytes each",
            )
        rows, width = shape
        return (
            FFD_BYTES_PER_CELL * rows * width + FFD_BYTES_PER_SEQUENCE * hist.n,
            f"ffd rows x fullest row ({rows:,} x {width:,}) = {rows * width:,} cells of its row "
            f"matrix, {FFD_BYTES_PER_CELL} bytes each, and {hist.n:,} sequences' work arrays, "
            f"{FFD_BYTES_PER_SEQUENCE} bytes each; a longer row holds more short sequences",
        )
    return 8.0 * (max_len + (0 if hist is None else hist.max_len)), "one entry per length"


def pack(
    source,
    max_len: int,
    strategy: str = "spfhp",
    *,
    max_per_row: int | None = None,
    buckets=None,
    slack: int = 0,
) -> Packing:
    """Put the sequences of ``source`` into rows of ``max_len`` tokens.

    Parameters
    ----------
    source : list/array of lengths, a ``lengths.Histogram``, or a dataset name
        ("wikipedia-512", "squad-384").
    max_len : tokens per row; no sequence may be longer.
    strategy : one of ``STRATEGIES``.
    max_per_row : cap on sequences per row for the packing strategies (default: no cap
        beyond what fits). Ignored (1) for pad and bucket.
    buckets : for "bucket": a number of equal-width buckets (default 8) or the list of
        bucket boundaries in tokens (``max_len`` is added if missing).
    slack : for "nnlshp": NNLS compositions may fall this many tokens short of ``max_len``.
    """
    max_len = positive("max_len", max_len, integer=True)
    limits.check_sequence_length("max_len", max_len)
    choice("strategy", strategy, STRATEGIES)
    sl = positive("slack", slack, integer=True, allow_zero=True)
    if sl >= max_len:
        raise ValueError(
            f"slack must lie in 0..{max_len - 1} (tokens an NNLSHP composition may fall short of "
            f"max_len {max_len}), got {sl}"
        )
    if max_per_row is None:
        K = max_len
    else:
        K = min(positive("max_per_row", max_per_row, integer=True), max_len)
    if strategy in (
        "spfhp",
        "bfhp",
        "nnlshp",
    ):  # before the source is read: these depend on max_len only
        need, why = pack_bytes(None, max_len, strategy, max_per_row=K)
        limits.check_memory(
            "max_len" if max_per_row is None else "max_len x max_per_row", max_len, need, why
        )
    if strategy == "nnlshp":
        limits.check_at_most(
            "max_len",
            max_len,
            NNLSHP_MAX_LEN,
            "nnlshp enumerates compositions of up to 3 lengths, work ~ max_len^2: "
            "3.5 s at 4,096; use spfhp for longer rows",
        )
    hist, arr = _as_source(source, max_len)
    if strategy == "ffd":
        need, why = pack_bytes(hist, max_len, strategy, max_per_row=K)
        limits.check_memory("ffd sequences", hist.n, need, why)
    name = hist.name
    lens = hist.lengths
    if strategy in ("pad", "bucket"):
        nz = hist.counts > 0
        comps = lens[nz].reshape(-1, 1)
        reps = hist.counts[nz]
        if strategy == "pad":
            row_len = np.full(reps.size, max_len, np.int64)
        else:
            bounds = _bucket_boundaries(buckets, max_len)
            row_len = bounds[np.searchsorted(bounds, comps[:, 0])]
        seq_row = _assign(comps, reps, arr) if arr is not None else None
        return Packing(strategy, max_len, 1, comps, reps, row_len, seq_row, name)

    if strategy == "ffd":
        from_list = arr is not None
        if arr is None:
            arr = hist.expand()
        order = np.argsort(-arr, kind="stable")
        srow = np.empty(arr.size, np.int64)
        nrows = first_fit_rows(arr[order], max_len, K, srow)
        seq_row = np.empty(arr.size, np.int64)
        seq_row[order] = srow
        comps = _rows_from_assignment(arr[order], srow, nrows)
        reps = np.ones(nrows, np.int64)
        return Packing(
            strategy,
            max_len,
            K,
            comps,
            reps,
            np.full(nrows, max_len, np.int64),
            seq_row if from_list else None,
            name,
        )

    if strategy in ("spfhp", "bfhp"):
        comps, reps = run_spfhp(hist.counts, K, shortest_first=strategy == "spfhp")
    else:
        comps, reps = run_nnlshp(hist.counts, K, sl)
    width = max(1, int((comps > 0).sum(axis=1).max()))
    comps = np.ascontiguousarray(comps[:, :width])
    seq_row = _assign(comps, reps, arr) if arr is not None else None
    return Packing(
        strategy, max_len, K, comps, reps, np.full(reps.size, max_len, np.int64), seq_row, name
    )


def _rows_from_assignment(sorted_lengths, srow, nrows):
    """(rows, slots) lengths of each row from the row index of each (sorted) sequence."""
    per_row = np.bincount(srow, minlength=nrows)
    width = int(per_row.max())
    limits.check_memory(  # checked before the pass too, when ``first_fit_shape`` finished
        f"ffd rows x fullest row ({nrows:,} x {width:,})",
        nrows * width,
        FFD_BYTES_PER_CELL * nrows * width + FFD_BYTES_PER_SEQUENCE * srow.size,
        f"ffd's row matrix, {FFD_BYTES_PER_CELL} bytes per cell, and its work arrays; "
        "a longer row holds more short sequences",
    )
    out = np.zeros((nrows, width), np.int64)
    order = np.argsort(srow, kind="stable")
    rows_sorted = srow[order]
    first = np.searchsorted(rows_sorted, np.arange(nrows))
    slot = np.arange(srow.size) - first[rows_sorted]
    out[rows_sorted, slot] = sorted_lengths[order]
    return out


def compare(
    source, max_len: int, *, max_per_row: int | None = 3, strategies=STRATEGIES, buckets=None
) -> list[Packing]:
    """Run several strategies on one source (for tables and plots)."""
    return [pack(source, max_len, s, max_per_row=max_per_row, buckets=buckets) for s in strategies]
