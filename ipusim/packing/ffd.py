"""First-fit decreasing on individual lengths: the Numba kernel ``first_fit_rows_into`` (its
plain-Python reference is in ``tests/packing_reference.py``), ``first_fit_rows``, which runs it, and
``first_fit_shape``, the rows and fullest row they give, from a histogram's counts. Lengths in tokens."""

from __future__ import annotations

import numpy as np
from numba import njit


def first_fit_rows(sorted_lengths, max_len, max_per_row, seq_row_sorted):
    """First fit for lengths already sorted longest first; returns the number of rows.

    Preconditions: 1 <= sorted_lengths[i] <= max_len, non-increasing; max_per_row >= 1;
    seq_row_sorted has the same size (int64). Allocates the work arrays of the kernel
    ``first_fit_rows_into`` and runs it: plain Python, not a kernel of its own (one kernel
    fewer for a newcomer's first run to compile; a call costs two small allocations).
    """
    n = int(sorted_lengths.size)
    size = 1
    while size < n:
        size *= 2
    return int(
        first_fit_rows_into(
            sorted_lengths,
            n,
            int(max_len),
            int(max_per_row),
            seq_row_sorted,
            np.empty(2 * size, dtype=np.int64),
            np.empty(size, dtype=np.int64),
        )
    )


@njit(cache=True, error_model="numpy")
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
    # a loop, not a slice assignment: no slice-setitem implementation to compile
    for i in range(size):
        count[i] = 0
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


SHAPE_MAX_STEPS = 2_000_000  # run visits ``first_fit_shape`` makes at most (about 1 s of Python)


def first_fit_shape(
    counts, max_len: int, max_per_row: int, *, max_steps: int = SHAPE_MAX_STEPS
) -> tuple[int, int] | None:
    """(rows, most sequences in a row) that ``first_fit_rows`` gives for the histogram
    ``counts`` (``counts[i]`` sequences of ``i + 1`` tokens, all <= ``max_len``), without
    placing the sequences one by one; None if that takes more than ``max_steps`` run visits
    (at most distinct lengths x open runs; the 512 lengths of wikipedia-512 take thousands).

    First fit on lengths taken longest first puts the sequences of one length into the
    leftmost row with room, so the leftmost such row takes ``min(free // l, max_per_row -
    held)`` of them before the next row takes any. Rows in the same state form a run
    ``[free tokens, sequences held, rows]``; one length splits at most one run and opens at
    most two new ones. Runs that can take nothing more (full by count, or less free space
    than the shortest length) are closed and leave the list.
    """
    counts = np.asarray(counts, np.int64)
    present = np.flatnonzero(counts > 0)
    if present.size == 0:
        return 0, 0
    shortest = int(present[0]) + 1
    K = int(max_per_row)
    runs: list[list[int]] = []  # open runs in row order: [free, held, rows]
    rows = widest = steps = 0

    def keep(out, run):
        nonlocal widest
        widest = max(widest, run[1])
        if run[1] < K and run[0] >= shortest:
            out.append(run)

    for i in present[::-1]:
        ln, rem = int(i) + 1, int(counts[i])
        out: list[list[int]] = []
        for j, run in enumerate(runs):
            steps += 1
            free, held, m = run
            q = min(free // ln, K - held)
            if q <= 0:
                out.append(run)
                continue
            if q * m <= rem:
                keep(out, [free - q * ln, held + q, m])
                rem -= q * m
            else:
                full, part = divmod(rem, q)
                if full:
                    keep(out, [free - q * ln, held + q, full])
                if part:
                    keep(out, [free - part * ln, held + part, 1])
                left = m - full - (1 if part else 0)
                if left:
                    out.append([free, held, left])
                rem = 0
            if rem == 0:
                out.extend(runs[j + 1 :])
                break
        if steps > max_steps:
            return None
        if rem > 0:
            q = min(max_len // ln, K)
            full, part = divmod(rem, q)
            rows += full + (1 if part else 0)
            if full:
                keep(out, [max_len - q * ln, q, full])
            if part:
                keep(out, [max_len - part * ln, part, 1])
        runs = out
    return rows, widest
