"""Non-negative least-squares histogram packing (after Krell et al.): compositions that fill a
row, projected coordinate descent, repair of overused lengths (Numba kernels, each with a
plain-Python reference in ``tests/packing_reference.py``), and ``run_nnlshp``. Lengths in tokens."""

from __future__ import annotations

import numpy as np
from numba import njit

from .spfhp import run_spfhp

NNLS_DEPTH = 3  # sequences per composition in the NNLS step (Krell et al. use 3)
NNLS_SWEEPS = 300  # coordinate-descent sweeps; see tests/test_packing.py for convergence


@njit(cache=True)
def _nnls_compositions(counts, depth, slack, out):
    """Write every composition of 1..depth lengths (non-increasing) whose sum lies in
    [L - slack, L] and whose lengths all occur often enough; returns how many.

    Preconditions: counts (L,) >= 0; 1 <= depth <= 3; out (capacity, 3) zeroed, either
    large enough or with 0 rows (then only count: the caller sizes ``out`` from that).
    """
    L = counts.size
    lo = L - slack
    write = out.shape[0] > 0
    s = 0
    for a in range(L, 0, -1):
        if counts[a - 1] == 0:
            continue
        if a >= lo:
            if write:
                out[s, 0] = a
            s += 1
        if depth < 2:
            continue
        for b in range(min(a, L - a), 0, -1):
            if counts[b - 1] < 1 + (b == a):
                continue
            if a + b >= lo:
                if write:
                    out[s, 0] = a
                    out[s, 1] = b
                s += 1
            if depth < 3:
                continue
            for c in range(min(b, L - a - b), 0, -1):
                if a + b + c < lo:
                    break
                if counts[c - 1] < 1 + (c == b) + (c == a):
                    continue
                if write:
                    out[s, 0] = a
                    out[s, 1] = b
                    out[s, 2] = c
                s += 1
    return s


@njit(cache=True)
def _nnls_cd(comp, counts, sweeps, x):
    """Projected coordinate descent for min |A x - counts|^2, x >= 0; returns the residual.

    ``A[l - 1, s]`` = how often length l occurs in composition ``comp[s]`` (0 = empty slot).
    Preconditions: comp (S, D) with >= 1 length per row; x (S,) float64 >= 0 (start point,
    updated in place); sweeps >= 0.
    """
    S, D = comp.shape
    r = counts.astype(np.float64)
    for s in range(S):  # residual of the start point
        for j in range(D):
            if comp[s, j] > 0:
                r[comp[s, j] - 1] -= x[s]
    nrm = np.zeros(S)
    for s in range(S):  # |A_s|^2 = sum over occurrences of the multiplicity
        for j in range(D):
            if comp[s, j] > 0:
                for k in range(D):
                    if comp[s, k] == comp[s, j]:
                        nrm[s] += 1.0
    for _ in range(sweeps):
        for s in range(S):
            g = 0.0
            for j in range(D):
                if comp[s, j] > 0:
                    g += r[comp[s, j] - 1]
            xn = x[s] + g / nrm[s]
            if xn < 0.0:
                xn = 0.0
            d = xn - x[s]
            if d != 0.0:
                for j in range(D):
                    if comp[s, j] > 0:
                        r[comp[s, j] - 1] -= d
                x[s] = xn
    return r


@njit(cache=True)
def _nnls_repair(comp, reps, used, counts):
    """Lower ``reps`` (in composition order) until no length is used more than it occurs.

    Preconditions: used[l - 1] = sum over s of reps[s] x (occurrences of l in comp[s]).
    """
    S, D = comp.shape
    for s in range(S):
        for j in range(D):
            ln = comp[s, j]
            if ln == 0:
                continue
            over = used[ln - 1] - counts[ln - 1]
            if over > 0 and reps[s] > 0:
                m = 0
                for k in range(D):
                    if comp[s, k] == ln:
                        m += 1
                k = min(reps[s], (over + m - 1) // m)
                reps[s] -= k
                for q in range(D):
                    if comp[s, q] > 0:
                        used[comp[s, q] - 1] -= k


def run_nnlshp(counts, K, slack):
    """(compositions, repeat counts) of NNLSHP: NNLS on the compositions of up to ``NNLS_DEPTH``
    sequences ``slack`` tokens short of the row at most, rounded down and repaired, then SPFHP on
    what is left (at most ``K`` sequences per row)."""
    L = counts.size
    depth = min(K, NNLS_DEPTH)
    S = _nnls_compositions(counts, depth, slack, np.zeros((0, 3), np.int64))  # count
    out = np.zeros((S, 3), np.int64)
    _nnls_compositions(counts, depth, slack, out)
    comp = out[:S]
    x = np.zeros(S)
    if S:
        _nnls_cd(comp, counts, NNLS_SWEEPS, x)
    reps = np.floor(x).astype(np.int64)
    used = np.zeros(L, np.int64)
    for j in range(3):
        m = comp[:, j] > 0
        np.add.at(used, comp[m, j] - 1, reps[m])
    _nnls_repair(comp, reps, used, counts)
    keep = reps > 0
    comp_nn, reps_nn = comp[keep], reps[keep]
    left = counts - used
    if left.sum() == 0:  # NNLS placed every sequence (e.g. one sequence filling one row)
        comps_sp, reps_sp = np.zeros((0, 1), np.int64), np.zeros(0, np.int64)
    else:
        comps_sp, reps_sp = run_spfhp(left, K)
    width = max(3 if comp_nn.size else 1, comps_sp.shape[1] if reps_sp.size else 1)
    comps = np.zeros((comp_nn.shape[0] + comps_sp.shape[0], width), np.int64)
    comps[: comp_nn.shape[0], :3] = comp_nn if comp_nn.size else 0
    comps[comp_nn.shape[0] :, : comps_sp.shape[1]] = comps_sp
    return comps, np.concatenate([reps_nn, reps_sp])
