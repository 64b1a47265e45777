"""First-fit decreasing on individual lengths: the Numba kernels ``first_fit_rows`` and
``first_fit_rows_into`` (its plain-Python reference is in ``tests/packing_reference.py``). Lengths in tokens."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def first_fit_rows(sorted_lengths, max_len, max_per_row, seq_row_sorted):
    """First fit for lengths already sorted longest first; returns the number of rows.

    Preconditions: 1 <= sorted_lengths[i] <= max_len, non-increasing; max_per_row >= 1;
    seq_row_sorted has the same size. Allocates the work arrays of ``first_fit_rows_into``.
    """
    n = sorted_lengths.size
    size = 1
    while size < n:
        size *= 2
    return first_fit_rows_into(
        sorted_lengths,
        n,
        max_len,
        max_per_row,
        seq_row_sorted,
        np.empty(2 * size, np.int64),
        np.empty(size, np.int64),
    )


@njit(cache=True)
def first_fit_rows_into(sorted_lengths, n, max_len, max_per_row, seq_row_sorted, tree, count):
    """First fit of the first ``n`` lengths (sorted longest first) into rows; returns the rows.

    Preconditions: as ``first_fit_rows``; ``tree`` holds at least 2 x (n rounded up to a power
    of two) and ``count`` half that (work arrays, overwritten). A segment tree over row
    slots holds each row's free space (-1 once it holds ``max_per_row`` sequences); the
    leftmost row with free space >= l is found in O(log n).
    """
    size = 1
    while size < n:
        size *= 2
    for i in range(size, 2 * size):
        tree[i] = max_len if i - size < n else -1
    for i in range(size - 1, 0, -1):
        tree[i] = max(tree[2 * i], tree[2 * i + 1])
    count[:size] = 0
    rows = 0
    for j in range(n):
        ln = sorted_lengths[j]
        node = 1
        while node < size:
            node = 2 * node if tree[2 * node] >= ln else 2 * node + 1
        r = node - size
        seq_row_sorted[j] = r
        if r + 1 > rows:
            rows = r + 1
        count[r] += 1
        tree[node] = -1 if count[r] >= max_per_row else tree[node] - ln
        node //= 2
        while node >= 1:
            tree[node] = max(tree[2 * node], tree[2 * node + 1])
            node //= 2
    return rows
