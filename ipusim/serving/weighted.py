"""Exact percentiles of weighted values (value i counted ``weights[i]`` times), as
``numpy.percentile`` of the repeated values gives them: a NumPy sort for a few thousand
entries, a histogram kernel (``_weighted_quantiles_kernel``, compiled only then) for more.
The serving summary's time between tokens uses it (``result._between_tokens``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .percentiles import HIST_BINS, quantile_ranks


@njit(cache=True, error_model="numpy")
def _weighted_quantiles_kernel(values, weights, qs, out):
    """Percentiles ``qs`` (0..100) of the multiset holding ``weights[i]`` copies of ``values[i]``,
    as numpy.percentile's linear interpolation gives them on that multiset; ``out[q]``.

    Preconditions: weights >= 0 with a positive sum, values finite. As ``_quantiles_kernel``:
    one pass finds the extremes, one histograms the weights (noting each bin's first value
    and the weight of its copies), one gathers the other entries of the bins that hold the
    wanted ranks, and each such bin is sorted to walk its weights to the rank.
    """
    m = values.shape[0]
    lo = np.inf
    hi = -np.inf
    total = 0
    for i in range(m):
        if weights[i] > 0:
            total += weights[i]
            lo = min(lo, values[i])
            hi = max(hi, values[i])
    nq = qs.shape[0]
    ranks, gam = quantile_ranks(qs, total)
    if not hi > lo:
        out[:] = lo
        return
    nbins = HIST_BINS
    scale = nbins / (hi - lo)
    hist = np.zeros(nbins, dtype=np.int64)
    first = np.empty(nbins)
    ties = np.zeros(nbins, dtype=np.int64)
    for i in range(m):
        w = weights[i]
        if w > 0:
            x = values[i]
            j = min(int((x - lo) * scale), nbins - 1)
            if hist[j] == 0:
                first[j] = x
            if x == first[j]:
                ties[j] += w
            hist[j] += w
    rbin = np.empty(2 * nq, dtype=np.int64)
    below = np.empty(2 * nq, dtype=np.int64)
    want = np.zeros(nbins, dtype=np.bool_)
    for r in range(2 * nq):
        c = 0
        j = 0
        while c + hist[j] <= ranks[r]:
            c += hist[j]
            j += 1
        rbin[r] = j
        below[r] = c
        want[j] = True
    cnt = np.zeros(nbins, dtype=np.int64)  # entries to gather per wanted bin
    for i in range(m):
        if weights[i] > 0:
            j = min(int((values[i] - lo) * scale), nbins - 1)
            if want[j] and values[i] != first[j]:
                cnt[j] += 1
    off = np.zeros(nbins + 1, dtype=np.int64)
    for j in range(nbins):
        off[j + 1] = off[j] + cnt[j]
    bv = np.empty(off[nbins])
    bw = np.empty(off[nbins], dtype=np.int64)
    fill = off[:nbins].copy()
    for i in range(m):
        if weights[i] > 0:
            j = min(int((values[i] - lo) * scale), nbins - 1)
            if want[j] and values[i] != first[j]:
                bv[fill[j]] = values[i]
                bw[fill[j]] = weights[i]
                fill[j] += 1
    stats = np.empty(2 * nq)
    for r in range(2 * nq):
        j = rbin[r]
        v = np.append(bv[off[j] : off[j + 1]], first[j])
        w = np.append(bw[off[j] : off[j + 1]], ties[j])
        o = np.argsort(v)
        k = ranks[r] - below[r]
        c = 0
        for p in o:
            c += w[p]
            if c > k:
                stats[r] = v[p]
                break
    for q in range(nq):
        g = gam[q]
        d = stats[2 * q + 1] - stats[2 * q]
        out[q] = stats[2 * q + 1] - d * (1.0 - g) if g >= 0.5 else stats[2 * q] + d * g


def weighted_quantiles(values, weights, qs=(50.0,)) -> np.ndarray:
    """Percentiles ``qs`` of ``values`` where value i counts ``weights[i]`` times (whole numbers
    >= 0), as ``numpy.percentile(np.repeat(values, weights), qs)``; NaN when the weights sum to 0."""
    v = np.ascontiguousarray(values, dtype=np.float64)
    w = np.ascontiguousarray(weights, dtype=np.int64)
    if v.shape != w.shape or v.ndim != 1:
        raise ValueError("values and weights must be one-dimensional arrays of the same length")
    if w.size and w.min() < 0:
        raise ValueError("weights must be whole numbers >= 0")
    qs = np.asarray(qs, dtype=np.float64)
    out = np.full(qs.size, math.nan)
    if w.sum() > 0:
        if not np.isfinite(v[w > 0]).all():
            raise ValueError("values with a positive weight must be finite")
        if v.size <= _WEIGHTED_NUMPY_MAX:
            _weighted_quantiles_sorted(v, w, qs, out)
        else:
            _weighted_quantiles_kernel(v, w, qs, out)
    return out


# entries up to which ``weighted_quantiles`` sorts with NumPy (about a millisecond) rather than
# compile and run ``_weighted_quantiles_kernel`` (seconds to compile, linear time after)
_WEIGHTED_NUMPY_MAX = 1 << 16


def _weighted_quantiles_sorted(values, weights, qs, out):
    """``_weighted_quantiles_kernel`` by a full sort in NumPy, same preconditions, same values:
    the order statistic of rank k is the first sorted value whose cumulative weight exceeds k;
    numpy.percentile's linear interpolation between the two (``_pick``'s arithmetic)."""
    keep = weights > 0
    v, w = values[keep], weights[keep]
    o = np.argsort(v, kind="stable")
    v, cw = v[o], np.cumsum(w[o])
    ranks, gam = quantile_ranks.py_func(qs, int(cw[-1]))
    stats = v[np.searchsorted(cw, ranks, side="right")]
    for q in range(qs.size):
        g = gam[q]
        d = stats[2 * q + 1] - stats[2 * q]
        out[q] = stats[2 * q + 1] - d * (1.0 - g) if g >= 0.5 else stats[2 * q] + d * g
