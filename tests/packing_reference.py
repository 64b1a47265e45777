"""Plain-Python references of the packing kernels (``ipusim.packing``): the tests and
benchmarks compare the Numba kernels against them. Lengths in tokens."""

from __future__ import annotations

import numpy as np


def spfhp(counts, max_per_row, shortest_first=True):
    """Plain-Python SPFHP (or best fit): list of (composition tuple, repeats), kernel order."""
    L = len(counts)
    stacks = {r: [] for r in range(L + 1)}
    groups = []  # [composition list, count, free space]
    for ln in range(L, 0, -1):
        n = int(counts[ln - 1])
        while n > 0:
            order = range(L, ln - 1, -1) if shortest_first else range(ln, L + 1)
            r = next((r for r in order if stacks[r]), None)
            if r is None:
                groups.append([[ln], n, L - ln])
                g = len(groups) - 1
                n = 0
            elif n >= groups[stacks[r][-1]][1]:
                g = stacks[r].pop()
                groups[g][0].append(ln)
                groups[g][2] -= ln
                n -= groups[g][1]
            else:
                s = stacks[r][-1]
                groups[s][1] -= n
                groups.append([groups[s][0] + [ln], n, groups[s][2] - ln])
                g = len(groups) - 1
                n = 0
            if len(groups[g][0]) < max_per_row and groups[g][2] > 0:
                stacks[groups[g][2]].append(g)
    return [(tuple(c), k) for c, k, _ in groups]


def ffd(lengths, max_len, max_per_row):
    """Plain-Python first-fit decreasing: (row of each input sequence, number of rows)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])  # stable, longest first
    free, count, seq_row = [], [], [0] * len(lengths)
    for i in order:
        ln = lengths[i]
        for r in range(len(free)):
            if free[r] >= ln and count[r] < max_per_row:
                break
        else:
            free.append(max_len)
            count.append(0)
            r = len(free) - 1
        free[r] -= ln
        count[r] += 1
        seq_row[i] = r
    return seq_row, len(free)


def nnls_compositions(counts, depth, slack):
    """Plain-Python list of the same compositions, as sorted tuples (longest first)."""
    from itertools import combinations_with_replacement

    L = len(counts)
    present = [x for x in range(1, L + 1) if counts[x - 1] > 0]
    out = set()
    for k in range(1, depth + 1):
        for combo in combinations_with_replacement(present, k):
            if L - slack <= sum(combo) <= L and all(counts[x - 1] >= combo.count(x) for x in combo):
                out.add(tuple(sorted(combo, reverse=True)))
    return out


def nnls_cd(comp, counts, sweeps, x):
    """NumPy version of ``_nnls_cd`` (same update order), for tests."""
    comp = np.asarray(comp)
    A = np.zeros((len(counts), comp.shape[0]))
    for s, row in enumerate(comp):
        for ln in row:
            if ln > 0:
                A[ln - 1, s] += 1.0
    nrm = (A * A).sum(axis=0)
    r = np.asarray(counts, float) - A @ x
    for _ in range(sweeps):
        for s in range(comp.shape[0]):
            xn = max(0.0, x[s] + A[:, s] @ r / nrm[s])
            r -= A[:, s] * (xn - x[s])
            x[s] = xn
    return r


def nnls_repair(comp, reps, counts):
    """Plain-Python ``_nnls_repair``: returns the lowered repeats."""
    reps = [int(r) for r in reps]
    used = [0] * len(counts)
    for row, r in zip(comp, reps, strict=True):
        for ln in row:
            if ln:
                used[ln - 1] += r
    for s, row in enumerate(comp):
        row = [int(v) for v in row]
        for ln in row:
            if ln == 0:
                continue
            over = used[ln - 1] - counts[ln - 1]
            if over > 0 and reps[s] > 0:
                m = row.count(ln)
                k = min(reps[s], -(-over // m))
                reps[s] -= k
                for q in row:
                    if q:
                        used[q - 1] -= k
    return reps
