"""Shortest-pack-first (and best-fit) histogram packing (Krell et al., arXiv:2107.02027): the
Numba kernel ``_spfhp`` (its plain-Python reference is in ``tests/packing_reference.py``) and
``run_spfhp``. Lengths in tokens."""

from __future__ import annotations

import numpy as np
from numba import njit

from .. import _numba_cache

# Seconds of ``_spfhp`` run by the interpreter, at most 1.5e-7 x max_len^2 (every length
# present: 37 ms at 512, 0.16 s at 1,024, 2.3 s at 4,096), against about 0.55 s to compile it
# cold: both measured on a 2-core machine (benchmarks/bench_startup.py); only their ratio counts
INTERPRETED_S_PER_LEN2 = 1.5e-7
COMPILE_S = 0.55


@njit(cache=True, error_model="numpy")
def _spfhp(counts, max_per_row, shortest_first, comp, ncomp, cnt, rem):
    """Histogram packing, longest length first; returns the number of pack groups written.

    Open groups (fewer than max_per_row sequences, free space > 0) sit on a stack per free
    space. Length l goes to the top of the first non-empty stack at free space max_len,
    max_len - 1, ..., l (``shortest_first``: SPFHP, the shortest pack) or at l, l + 1, ...,
    max_len (best fit: the fullest pack that fits).
    Preconditions: counts (max_len,) >= 0; comp (>= 2 max_len + 1, max_per_row) zeroed;
    ncomp, cnt, rem sized like comp's first axis.
    """
    L = counts.size
    # np.empty and a loop, not np.full: no compile of np.full's overload for this kernel alone
    head = np.empty(L + 1, dtype=np.int64)
    nxt = np.empty(comp.shape[0], dtype=np.int64)
    for i in range(head.size):
        head[i] = -1
    for i in range(nxt.size):
        nxt[i] = -1
    ng = 0
    for ln in range(L, 0, -1):
        n = counts[ln - 1]
        while n > 0:
            if shortest_first:
                r = L
                while r >= ln and head[r] < 0:
                    r -= 1
                if r < ln:
                    r = L + 1
            else:
                r = ln
                while r <= L and head[r] < 0:
                    r += 1
            if r > L:  # no open group fits: start n new packs
                g = ng
                ng += 1
                comp[g, 0] = ln
                ncomp[g] = 1
                cnt[g] = n
                rem[g] = L - ln
                n = 0
            else:
                s = head[r]
                if n >= cnt[s]:  # the whole group takes one more sequence
                    head[r] = nxt[s]
                    comp[s, ncomp[s]] = ln
                    ncomp[s] += 1
                    rem[s] -= ln
                    n -= cnt[s]
                    g = s
                else:  # split: n packs of the group take it, the rest stay open
                    cnt[s] -= n
                    g = ng
                    ng += 1
                    for j in range(ncomp[s]):
                        comp[g, j] = comp[s, j]
                    comp[g, ncomp[s]] = ln
                    ncomp[g] = ncomp[s] + 1
                    cnt[g] = n
                    rem[g] = rem[s] - ln
                    n = 0
            # the group just made or grown stays open (on the stack of its free space) while it
            # has room: one push for the three cases, not one each (less code to compile)
            if ncomp[g] < max_per_row and rem[g] > 0:
                nxt[g] = head[rem[g]]
                head[rem[g]] = g
    return ng


def run_spfhp(counts, K, shortest_first=True):
    """(compositions, repeat counts) of SPFHP (``shortest_first``) or BFHP on a histogram's ``counts``
    with at most ``K`` sequences per row: allocates the tables and runs ``_spfhp`` (interpreted
    while that costs less than compiling it: ``_numba_cache.interpreted_or_compiled``)."""
    cap = 2 * counts.size + 1
    comp = np.zeros((cap, K), np.int64)
    ncomp = np.zeros(cap, np.int64)
    cnt = np.zeros(cap, np.int64)
    rem = np.zeros(cap, np.int64)
    ng = _numba_cache.interpreted_or_compiled(
        _spfhp,
        (counts.copy(), K, shortest_first, comp, ncomp, cnt, rem),
        INTERPRETED_S_PER_LEN2 * counts.size**2,
        COMPILE_S,
    )
    return comp[:ng], cnt[:ng]
