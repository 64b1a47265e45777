"""Exact percentiles of a serving run's per-request series, and the run's totals, in Numba kernels.

``summarize`` reduces a run in one pass in the usual case (``run_totals``): the totals
(counts, sums, extremes, per device) while it histograms latency, queueing delay (and time
to first token) over bins spread across the range of an evenly spaced sample of the values,
and copies the values that fall in a window of bins around each wanted percentile; a partial
sort of the copies (``_pick_copies``, ``_select_kth``) picks each order statistic. When a
window misses, the exact two-pass method (``_second_pass``: histogram, then gather the wanted
bins) takes over, compiled only then. Every percentile follows ``numpy.percentile``'s linear rule
(``percentile_rank``) and is exact, not binned. ``quantiles`` is the public entry point for any series (``weighted.weighted_quantiles`` for
weighted values); times are in seconds wherever a series is one.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

HIST_BINS = 1 << 12  # bins of the quantile histogram (fits the L1 cache)
_SAMPLE = 1 << 14  # evenly spaced entries: the span of the summary's bins, and where to look


@njit(cache=True, error_model="numpy")
def _bin(x, lo, scale):
    """Histogram bin of x (not NaN): (x - lo) * scale rounded down, clamped to the bins. Any
    order-keeping map gives exact order statistics; values outside the span go to the end
    bins (a bin is only a place to look).

    The histograms count each bin's values (``hist``) and note its first value (``first``:
    copies of it are counted, not gathered, in ``_select``: ties are common, a batch's
    requests share a finish, a policy's delay recurs); the counting is written out in each
    loop (a helper taking the arrays would cost reference counting on every value)."""
    y = (x - lo) * scale
    if not y >= 1.0:  # also NaN (x infinite with scale 0)
        return 0
    if y >= HIST_BINS - 1.0:
        return HIST_BINS - 1
    return int(y)


@njit(cache=True, error_model="numpy", inline="always")
def _select_kth(a, lo, hi, k):
    """Reorder ``a[lo:hi]`` (values not NaN) in place so that ``a[k]`` (lo <= k < hi) holds the
    value a sort would put there, every value of ``a[lo:k]`` at most it and every value of
    ``a[k + 1:hi]`` at least it: Hoare's FIND (Wirth's form) around the median of three
    entries, equal values stopping both scans so that runs of ties split evenly. Written out,
    not ``np.partition``: the same order statistics, a fraction of its compile time. Inlined
    where it is called (Numba IR): one compile in its caller, whatever the argument types."""
    left = lo
    right = hi - 1
    while left < right:
        x0 = a[left]
        x1 = a[(left + right) >> 1]
        x2 = a[right]
        x = max(min(x0, x1), min(max(x0, x1), x2))  # median of the three, a value in the range
        i = left
        j = right
        while i <= j:
            while a[i] < x:
                i += 1
            while x < a[j]:
                j -= 1
            if i <= j:
                t = a[i]
                a[i] = a[j]
                a[j] = t
                i += 1
                j -= 1
        if j < k:
            left = i
        if k < i:
            right = j


@njit(cache=True, error_model="numpy", inline="always")
def _select_ranks(a, ks, m):
    """``_select_kth`` of ``a`` at each of the ``m`` ranks ``ks[:m]`` (sorted in place first):
    after it ``a[k]`` is the k-th smallest value (0-based) for every such k."""
    for p in range(1, m):  # insertion sort: m is at most a few ranks
        v = ks[p]
        q = p
        while q > 0 and ks[q - 1] > v:
            ks[q] = ks[q - 1]
            q -= 1
        ks[q] = v
    lo = 0
    for p in range(m):
        _select_kth(a, lo, a.shape[0], ks[p])
        lo = ks[p] + 1


@njit(cache=True, error_model="numpy")
def run_totals(
    arrival, start, finish, first, device, idx, target, n_dev, series, lo, scale, win, buf
):
    """One pass over requests i, their times read at k = ``idx[i]`` (``start``, ``finish``,
    ``device`` per batch and ``idx`` the batch ids: -1, not served, skips the request) or at
    k = i when ``idx`` is empty (per request): served, latency sum/min/max, wait
    sum/min/max, last finish, within target, started after the last arrival, served per
    device, time to first token min/max (when ``series`` has three entries); and the
    histograms (``_bin``, from ``lo[s]`` at ``scale[s]`` bins/s) of latency, wait (and time
    to first token), one per entry of ``series``, copying the values of the bins marked in
    ``win`` to ``buf`` except copies of the bin's first value (counted in ``wties``).

    ``series`` is the tuple (finish, start[, first]) the summary takes percentiles of; only
    its length is read: known when the kernel compiles, it unrolls the per-series work (a
    loop over a count known only at run time costs a third more). Empty ``lo`` (and
    ``scale``): the totals alone, no histograms (``slo_view``: the same compiled kernel). Returns the totals, then ``hist``, ``first_v`` (each bin's first value),
    ``wties`` and ``fill`` (values copied per series, also those past the end of ``buf``)."""
    n = arrival.shape[0]
    nser = len(series)
    hist = np.zeros((nser, HIST_BINS), dtype=np.int64)
    first_v = np.empty((nser, HIST_BINS))
    wties = np.zeros((nser, HIST_BINS), dtype=np.int64)
    fill = np.zeros(nser, dtype=np.int64)
    # the bins' origin and scale as locals, three of them whatever nser is (unused ones 0)
    hh = lo.shape[0] > 0  # histograms wanted
    los = (
        lo[0] if hh and nser > 0 else 0.0,
        lo[1] if hh and nser > 1 else 0.0,
        lo[2] if hh and nser > 2 else 0.0,
    )
    scs = (
        scale[0] if hh and nser > 0 else 0.0,
        scale[1] if hh and nser > 1 else 0.0,
        scale[2] if hh and nser > 2 else 0.0,
    )
    last_arrival = arrival[n - 1]
    ns = 0
    lat_sum = 0.0
    wait_sum = 0.0
    lat_lo = np.inf
    lat_hi = -np.inf
    wait_lo = np.inf
    wait_hi = -np.inf
    ft_lo = np.inf
    ft_hi = -np.inf
    gen = nser > 2
    t1 = arrival[0]
    good = 0
    late = 0
    per_dev = np.zeros(n_dev, dtype=np.int64)
    cap = buf.shape[1]
    hidx = idx.shape[0] > 0
    kp = -1
    f = np.nan
    st = np.nan
    for i in range(n):
        k = i
        if hidx:
            k = idx[i]
            if k < 0:  # not served
                continue
            if k != kp:  # a request of another batch than the last: read its times
                kp = k
                f = finish[k]
                st = start[k]
        else:
            f = finish[k]
            st = start[k]
        if f != f:
            continue
        ns += 1
        a = arrival[i]
        lat = f - a
        w = st - a
        lat_sum += lat
        wait_sum += w
        lat_lo = min(lat_lo, lat)
        lat_hi = max(lat_hi, lat)
        wait_lo = min(wait_lo, w)
        wait_hi = max(wait_hi, w)
        if f > t1:
            t1 = f
        if lat <= target:
            good += 1
        if st > last_arrival:
            late += 1
        if n_dev > 1:
            per_dev[device[k]] += 1
        x = 0.0
        if gen:
            x = first[i] - a
            ft_lo = min(ft_lo, x)
            ft_hi = max(ft_hi, x)
        if not hh:
            continue
        for s in range(nser):  # the histograms (see _bin)
            v = lat if s == 0 else (w if s == 1 else x)
            j = _bin(v, los[s], scs[s])
            if hist[s, j] == 0:
                first_v[s, j] = v
            hist[s, j] += 1
            if win[s, j]:
                if v == first_v[s, j]:
                    wties[s, j] += 1
                else:
                    if fill[s] < cap:
                        buf[s, fill[s]] = v
                    fill[s] += 1
    if n_dev == 1:
        per_dev[0] = ns
    return (
        ns,
        lat_sum,
        lat_lo,
        lat_hi,
        wait_sum,
        wait_lo,
        wait_hi,
        t1,
        good,
        late,
        per_dev,
        ft_lo,
        ft_hi,
        hist,
        first_v,
        wties,
        fill,
    )


@njit(cache=True, error_model="numpy")
def quantile_ranks(qs, count):
    """numpy.percentile's linear rule on ``count`` sorted values: for each percentile q the
    order statistics (ranks[2q], ranks[2q + 1]) it lies between and its fraction gam[q]."""
    nq = qs.shape[0]
    ranks = np.empty(2 * nq, dtype=np.int64)
    gam = np.empty(nq)
    for q in range(nq):
        vi = qs[q] / 100.0 * (count - 1)
        k = int(math.floor(vi))
        gam[q] = vi - k
        ranks[2 * q] = k
        ranks[2 * q + 1] = min(k + 1, count - 1)
    return ranks, gam


@njit(cache=True, error_model="numpy")
def _rank_table(qs, count):
    """``quantile_ranks`` of each row of ``qs`` [series, q]: (ranks [series, 2q], gam [series, q])."""
    ns, nq = qs.shape
    ranks = np.empty((ns, 2 * nq), dtype=np.int64)
    gam = np.empty((ns, nq))
    for s in range(ns):
        rk, g = quantile_ranks(qs[s], count)
        for q in range(nq):  # element by element: an array assignment compiles a shape check
            gam[s, q] = g[q]
            ranks[s, 2 * q] = rk[2 * q]
            ranks[s, 2 * q + 1] = rk[2 * q + 1]
    return ranks, gam


@njit(cache=True, error_model="numpy")
def _rank_bins(hist, ranks, scale):
    """For each series s (scale > 0) and rank r: the bin holding order statistic ranks[s, r]
    (0-based) and how many values lie in the bins below it."""
    ns = hist.shape[0]
    rbin = np.zeros((ns, ranks.shape[1]), dtype=np.int64)
    below = np.zeros((ns, ranks.shape[1]), dtype=np.int64)
    for s in range(ns):
        if scale[s] == 0.0:
            continue
        for r in range(ranks.shape[1]):
            c = 0
            j = 0
            while c + hist[s, j] <= ranks[s, r]:
                c += hist[s, j]
                j += 1
            rbin[s, r] = j
            below[s, r] = c
    return rbin, below


@njit(cache=True, error_model="numpy")
def _histogram(series, b, lo, scale, hist, first, idx):
    """Histogram (``_bin``) of x = a[k] - b[i] for each array ``a`` of the tuple ``series`` (x =
    a[k] when ``b`` is empty), k = ``idx[i]`` (k = i when ``idx`` is empty; see
    ``run_totals``), over the entries where x is not NaN."""
    n = b.shape[0] if b.shape[0] else series[0].shape[0]
    hb = b.shape[0] > 0
    hidx = idx.shape[0] > 0
    for i in range(n):
        bi = b[i] if hb else 0.0
        k = idx[i] if hidx else i
        for s in range(len(series)):
            x = series[s][k] - bi
            if x == x:
                j = _bin(x, lo[s], scale[s])
                if hist[s, j] == 0:
                    first[s, j] = x
                hist[s, j] += 1


@njit(cache=True, error_model="numpy")
def _select(series, b, lo, scale, hist, first, count, qs, out, idx):
    """Percentiles ``qs[s]`` (0..100) of each series s of ``_histogram`` (``count`` >= 1 entries not
    NaN, the same entries in every series; a series with scale 0 holds only lo[s]) into
    ``out[s, q]``, as numpy.percentile's linear interpolation: a pass gathers the values of
    the bins that hold the wanted order statistics (counting, not gathering, the copies of a
    bin's first value; when those bins hold more than a sixteenth of the values, a pass
    counts the copies first, so the gathered values alone take memory), and one partial
    sort of each such bin picks them."""
    n = b.shape[0] if b.shape[0] else series[0].shape[0]
    ns = len(series)
    nq = qs.shape[1]
    nbins = HIST_BINS
    ranks, gam = _rank_table(qs, count)
    # bin of each rank, the values below it, and where each wanted bin's values go
    rbin, below = _rank_bins(hist, ranks, scale)
    off = np.full((ns, nbins), -1, dtype=np.int64)
    total = 0
    for s in range(ns):
        if scale[s] == 0.0:  # every value is lo[s]
            continue
        for r in range(2 * nq):
            j = rbin[s, r]
            if off[s, j] < 0:
                off[s, j] = 0
                total += hist[s, j]
    ties = np.zeros((ns, nbins), dtype=np.int64)  # copies of the bin's first value
    less = np.zeros((ns, nbins), dtype=np.int64)  # gathered values below the bin's first value
    hb = b.shape[0] > 0
    hidx = idx.shape[0] > 0
    counted = total > max(n >> 4, 1 << 16)  # count the copies in a sweep of their own first
    buf = np.empty(0)
    fill = off
    for sweep in range(2 if counted else 1):
        gather = sweep == counted
        if gather:
            total = 0
            for s in range(ns):
                for j in range(nbins):
                    if off[s, j] >= 0:
                        off[s, j] = total
                        total += hist[s, j] - ties[s, j]
            buf = np.empty(total)
            fill = off.copy()
        for i in range(n):
            bi = b[i] if hb else 0.0
            k = idx[i] if hidx else i
            for s in range(ns):
                x = series[s][k] - bi
                if x == x and scale[s] > 0.0:
                    j = _bin(x, lo[s], scale[s])
                    if off[s, j] < 0:
                        continue
                    if x == first[s, j]:
                        if not (counted and gather):
                            ties[s, j] += 1
                    elif gather:
                        buf[fill[s, j]] = x
                        fill[s, j] += 1
                        if x < first[s, j]:
                            less[s, j] += 1
    for s in range(ns):
        if scale[s] == 0.0:
            for q in range(nq):
                out[s, q] = lo[s]
        else:
            _pick(s, ranks, gam, rbin, below, off, hist, ties, less, first, buf, out)


@njit(cache=True, error_model="numpy")
def _pick(s, ranks, gam, rbin, below, off, hist, ties, less, first, buf, out):
    """The percentiles of series s into ``out[s]`` from the values gathered per wanted bin
    (``buf`` from ``off[s, j]``: ``less[s, j]`` values below the bin's first value, then the
    rest, ``ties[s, j]`` copies of the first value left out): one partial sort per wanted
    bin, at all its ranks, then numpy.percentile's linear interpolation."""
    nq = gam.shape[1]
    stats = np.empty(2 * nq)
    done = np.zeros(2 * nq, dtype=np.bool_)
    for r in range(2 * nq):
        if done[r]:
            continue
        j = rbin[s, r]
        m = 0
        for r2 in range(2 * nq):
            if rbin[s, r2] == j:
                m += 1
        # in the bin: `less` gathered values, then `ties` copies of first, then the rest
        lj, tj = less[s, j], ties[s, j]
        ks = np.zeros(m, dtype=np.int64)
        m = 0
        for r2 in range(2 * nq):
            k = ranks[s, r2] - below[s, r2]
            if rbin[s, r2] == j and not lj <= k < lj + tj:
                ks[m] = k if k < lj else k - tj
                m += 1
        part = buf[off[s, j] : off[s, j] + hist[s, j] - tj]
        _select_ranks(part, ks, m)
        for r2 in range(2 * nq):
            if rbin[s, r2] == j:
                k = ranks[s, r2] - below[s, r2]
                stats[r2] = part[k] if k < lj else (first[s, j] if k < lj + tj else part[k - tj])
                done[r2] = True
    for q in range(nq):
        g = gam[s, q]
        d = stats[2 * q + 1] - stats[2 * q]
        out[s, q] = stats[2 * q + 1] - d * (1.0 - g) if g >= 0.5 else stats[2 * q] + d * g


@njit(cache=True, error_model="numpy")
def _quantiles_kernel(series, b, lo, hi, count, qs, out):
    """Percentiles ``qs`` (0..100) of x = a - b for each array ``a`` of the tuple ``series``
    (x = a when ``b`` is empty), over the entries where x is not NaN; ``out[s, q]``, as
    numpy.percentile's linear interpolation. Preconditions: ``count`` >= 1 entries are not
    NaN (the same entries in every series), all of series s within [lo[s], hi[s]]."""
    ns = len(series)
    scale = np.zeros(ns)
    for s in range(ns):
        if hi[s] > lo[s]:
            scale[s] = HIST_BINS / (hi[s] - lo[s])
    hist = np.zeros((ns, HIST_BINS), dtype=np.int64)
    first = np.empty((ns, HIST_BINS))
    no_idx = np.zeros(0, dtype=np.int32)
    _histogram(series, b, lo, scale, hist, first, no_idx)
    qs2 = np.empty((ns, qs.shape[0]))
    for s in range(ns):
        for q in range(qs.shape[0]):
            qs2[s, q] = qs[q]
    _select(series, b, lo, scale, hist, first, count, qs2, out, no_idx)


def _sample(series, b, m, idx):
    """x = a[k] - b[i] of each series at about ``m`` evenly spaced entries i, k = ``idx[i]`` (i
    when ``idx`` is empty), where not NaN (the same entries in every series): (values
    [series, c] sorted, c). NumPy, not a kernel: a few thousand values, no compile."""
    n = b.shape[0]
    i = np.arange(0, n, max(n // m, 1))
    k = idx[i] if idx.shape[0] else i
    ok = ~np.isnan(series[0][k])
    i, k = i[ok], k[ok]
    vals = np.empty((len(series), i.size))
    for s, a in enumerate(series):
        np.subtract(a[k], b[i], out=vals[s])
    vals.sort(axis=1)
    return vals, int(i.size)


def _bins(x, lo, scale):
    """``_bin`` of each entry of array ``x`` (not NaN), in NumPy."""
    y = (x - lo) * scale
    return np.where(
        ~(y >= 1.0),
        0,
        np.where(y >= HIST_BINS - 1.0, HIST_BINS - 1, np.minimum(y, HIST_BINS).astype(np.int64)),
    )


def _windows(vals, c, qs, n):
    """From the sorted sample ``vals[s, :c]`` of ``n`` requests: each series' bins (``lo``,
    ``scale``: 0 when the sample holds one value) and, around each wanted percentile
    ``qs[s, q]`` of the sample, a window of bins wide enough (4 standard deviations of a sample
    percentile's rank, and more) to hold the run's percentile (``win``), and room for the
    values the run will copy from them (``cap`` per series: 1.5 times what the sample says,
    at most an eighth of the run; more: the second pass is cheaper)."""
    nser, nq = qs.shape
    lo, scale = np.zeros(nser), np.zeros(nser)
    win = np.zeros((nser, HIST_BINS), dtype=np.bool_)
    marked = 0
    for s in range(nser):
        if c and vals[s, c - 1] > vals[s, 0]:
            lo[s] = vals[s, 0]
            scale[s] = HIST_BINS / (vals[s, c - 1] - vals[s, 0])
            for q in range(nq):
                p = qs[s, q] / 100.0
                mid = p * (c - 1)
                d = 4.0 * math.sqrt(c * p * (1.0 - p)) + 3.0
                ja = _bin.py_func(vals[s, max(int(mid - d), 0)], lo[s], scale[s])
                jz = _bin.py_func(vals[s, min(int(mid + d) + 1, c - 1)], lo[s], scale[s])
                win[s, ja : jz + 1] = True
            marked = max(marked, int(win[s, _bins(vals[s, :c], lo[s], scale[s])].sum()))
    cap = min(n // 8, int(1.5 * marked * n / c)) + 4096 if c else 0
    return lo, scale, win, cap


def _rank_bins_of(hist, ranks, scale):
    """``_rank_bins`` in NumPy: the bin of each wanted order statistic and the values below it."""
    rbin, below = np.zeros(ranks.shape, dtype=np.int64), np.zeros(ranks.shape, dtype=np.int64)
    for s in np.flatnonzero(scale > 0.0):
        cum = np.cumsum(hist[s])
        rbin[s] = np.searchsorted(
            cum, ranks[s], side="right"
        )  # first bin whose running count exceeds the rank
        below[s] = cum[rbin[s]] - hist[s, rbin[s]]
    return rbin, below


def summarize(series, arrival, start, finish, first, device, idx, target, n_dev, qs, out):
    """``run_totals`` of a run (its first 13 entries) and, into ``out[s, q]``, percentiles
    ``qs[s, q]`` of each series (finish, start[, first]) - arrival over the served requests,
    exact, in one pass over the run in the usual case.

    A sample (``_sample``) sets the span of the bins and a window of bins around each
    percentile of the sample (``_windows``); the totals' pass histograms every series and
    copies the values in those windows (counting, not copying, repeats of a bin's first
    value). When the histogram shows each wanted order statistic inside a window whose copies
    all fit, ``_pick_copies`` picks them from the copies; otherwise (rare: a run unlike its
    sample, or one value repeated so often that its copies overflow) ``_second_pass`` does.
    The steps between the kernels are NumPy on a few thousand bins: no compile. A run of at
    most ``_TOTALS_NUMPY_MAX`` requests is reduced in NumPy instead (``totals_numpy``, then
    ``np.partition`` at the wanted ranks): the same numbers, and no kernel to compile."""
    if arrival.shape[0] <= _TOTALS_NUMPY_MAX:
        tot, values = _totals_numpy(
            arrival, start, finish, first, device, idx, target, n_dev, len(series) > 2
        )
        if tot[0]:
            for s, v in enumerate(values):
                out[s] = _percentiles_of(v, qs[s])
        return tot
    vals, c = _sample(series, arrival, _SAMPLE, idx)
    lo, scale, win, cap = _windows(vals, c, qs, arrival.shape[0])
    buf = np.empty((len(series), cap))
    t = run_totals(
        arrival, start, finish, first, device, idx, target, n_dev, series, lo, scale, win, buf
    )
    tot, (hist, first_v, wties, fill) = t[:13], t[13:]
    count = int(tot[0])
    if count == 0:
        return tot
    rg = [quantile_ranks.py_func(q, count) for q in qs]  # the kernel's arithmetic, uncompiled
    ranks, gam = np.array([r for r, _ in rg]), np.array([g for _, g in rg])
    rbin, below = _rank_bins_of(hist, ranks, scale)
    if (scale > 0.0).all() and (fill <= cap).all() and np.take_along_axis(win, rbin, axis=1).all():
        pick = _pick_copies_numpy if fill.sum() <= _COPIES_NUMPY_MAX else _pick_copies
        pick(buf, fill, lo, scale, ranks, gam, rbin, below, hist, wties, first_v, out)
    else:
        _second_pass(
            series,
            arrival,
            lo,
            scale,
            hist,
            first_v,
            count,
            qs,
            out,
            idx,
            np.array([tot[2], tot[5], tot[11]]),
            np.array([tot[3], tot[6], tot[12]]),
        )
    return tot


# copies up to which the summary picks its percentiles in NumPy (a millisecond or two: a run of up
# to about a million requests) rather than compile ``_pick_copies`` (seconds) for them
_COPIES_NUMPY_MAX = 1 << 17


def _pick_copies_numpy(buf, fill, lo, scale, ranks, gam, rbin, below, hist, wties, first_v, out):
    """``_pick_copies`` in NumPy, the same values: per wanted bin, its copies (all but those of
    its first value, which ``wties`` counts) partitioned at the ranks in it (``_pick``'s rule)."""
    for s in range(hist.shape[0]):
        x = buf[s, : fill[s]]
        j = _bins(x, lo[s], scale[s])
        want = np.zeros(HIST_BINS, dtype=np.bool_)
        want[rbin[s]] = True
        keep = want[j]
        x, j = x[keep], j[keep]
        stats = np.empty(ranks.shape[1])
        for jb in np.unique(rbin[s]):
            v = x[j == jb]
            f, tj = first_v[s, jb], int(wties[s, jb])
            lj = int(np.count_nonzero(v < f))
            rs = np.flatnonzero(rbin[s] == jb)
            ks = ranks[s, rs] - below[s, rs]
            kk = np.unique(np.where(ks < lj, ks, ks - tj)[(ks < lj) | (ks >= lj + tj)])
            part = np.partition(v, kk) if kk.size else v
            for r, k in zip(rs, ks, strict=True):
                stats[r] = part[k] if k < lj else (f if k < lj + tj else part[k - tj])
        g, a, b = gam[s], stats[0::2], stats[1::2]
        d = b - a
        out[s] = np.where(g >= 0.5, b - d * (1.0 - g), a + d * g)


@njit(cache=True, error_model="numpy")
def _pick_copies(buf, fill, lo, scale, ranks, gam, rbin, below, hist, wties, first_v, out):
    """The percentiles of each series s into ``out[s]`` from the ``fill[s]`` values the totals'
    pass copied to ``buf[s]`` (``run_totals``): each wanted bin's values gathered in one place,
    then ``_pick``."""
    nser = hist.shape[0]
    off = np.full((nser, HIST_BINS), -1, dtype=np.int64)
    less = np.zeros((nser, HIST_BINS), dtype=np.int64)
    for s in range(nser):
        total = 0
        for r in range(rbin.shape[1]):
            j = rbin[s, r]
            if off[s, j] < 0:
                off[s, j] = total
                total += hist[s, j] - wties[s, j]
        part = np.empty(total)
        put = off.copy()
        for k in range(fill[s]):
            x = buf[s, k]
            j = _bin(x, lo[s], scale[s])
            if put[s, j] >= 0:
                part[put[s, j]] = x
                put[s, j] += 1
                if x < first_v[s, j]:
                    less[s, j] += 1
        _pick(s, ranks, gam, rbin, below, off, hist, wties, less, first_v, part, out)


@njit(cache=True, error_model="numpy")
def _second_pass(series, arrival, lo, scale, hist, first_v, count, qs, out, idx, true_lo, true_hi):
    """The percentiles ``summarize`` could not pick from the copies, into ``out``: a series whose
    sample held one value (scale 0) but the run more (``true_lo[s]`` < ``true_hi[s]``, the
    run's extremes) is histogrammed again over its true range, then ``_select`` gathers the
    wanted bins in a second pass over the run. ``count`` >= 1 served requests."""
    again = False
    for s in range(len(series)):
        if scale[s] == 0.0:  # the sample held one value (or none): bin over the true range
            lo[s] = true_lo[s]
            if true_hi[s] > true_lo[s]:
                scale[s] = HIST_BINS / (true_hi[s] - true_lo[s])
                again = True
    if again:
        for s in range(hist.shape[0]):
            for j in range(hist.shape[1]):
                hist[s, j] = 0
        _histogram(series, arrival, lo, scale, hist, first_v, idx)
    _select(series, arrival, lo, scale, hist, first_v, count, qs, out, idx)


@njit(cache=True, error_model="numpy")
def select_percentile(arrival, finish, idx, count, q):
    """Percentile ``q`` (0..100) of finish[k] - arrival[i] over the ``count`` >= 1 requests i
    whose finish is not NaN, k = ``idx[i]`` (per batch, see ``run_totals``) or i when ``idx``
    is empty, by numpy.percentile's linear rule: the two order statistics it lies between
    are found by one partial sort of the gathered values (not a histogram: for a few
    thousand values the histogram's bins cost more than the values)."""
    buf = np.empty(count)
    m = 0
    hidx = idx.shape[0] > 0
    for i in range(arrival.shape[0]):
        f = finish[idx[i] if hidx else i]
        if f == f:
            buf[m] = f - arrival[i]
            m += 1
    ranks, gam = quantile_ranks(np.array([q]), count)
    k = ranks[0]
    part = buf
    _select_kth(part, 0, count, k)
    lo = part[k]
    hi = lo
    if ranks[1] > k:
        hi = part[k + 1]
        for j in range(k + 2, count):  # the smallest value above rank k
            if part[j] < hi:
                hi = part[j]
    g = gam[0]
    d = hi - lo
    return hi - d * (1.0 - g) if g >= 0.5 else lo + d * g


# requests up to which ``summarize`` and ``slo_numbers`` reduce a run in NumPy (tens of
# milliseconds for a million requests) rather than compile ``run_totals`` and
# ``select_percentile`` (a second or more of CPU each) for it
_TOTALS_NUMPY_MAX = 1 << 20


def _percentiles_of(v, q):
    """Percentiles ``q`` (0..100) of the values ``v`` (not NaN, at least one) by
    numpy.percentile's linear rule: the order statistics by ``np.partition`` at their ranks,
    interpolated as ``_pick`` does, bit for bit."""
    ranks, gam = quantile_ranks.py_func(np.asarray(q, dtype=np.float64), v.size)
    part = np.partition(v, np.unique(ranks))
    a, b = part[ranks[0::2]], part[ranks[1::2]]
    d = b - a
    return np.where(gam >= 0.5, b - d * (1.0 - gam), a + d * gam)


def _sum_lo_hi(v):
    """(sum in order, as a loop adds them: ``np.cumsum``; smallest; largest) of the values ``v``
    as Python floats, (0, inf, -inf) when there are none: ``run_totals``'s starting values."""
    if not v.size:
        return 0.0, math.inf, -math.inf
    return float(np.cumsum(v)[-1]), float(v.min()), float(v.max())


def _totals_numpy(arrival, start, finish, first, device, idx, target, n_dev, gen):
    """``run_totals``'s first 13 entries (the totals, as Python numbers) in NumPy, and the
    served requests' latency, wait (and time to first token when ``gen``): the same
    numbers, without the histograms."""
    hidx = idx.shape[0] > 0
    f = finish[idx] if hidx else finish  # batch id -1 reads the entry after the last batch: NaN
    ok = ~np.isnan(f)
    a, f = arrival[ok], f[ok]
    st = (start[idx] if hidx else start)[ok]
    values = [f - a, st - a] + ([first[ok] - a] if gen else [])
    ns = int(f.size)
    if n_dev > 1:
        per_dev = np.bincount((device[idx] if hidx else device)[ok], minlength=n_dev)
    else:
        per_dev = np.array([ns])
    t1 = max(float(arrival[0]), float(f.max())) if ns else float(arrival[0])
    good = int(np.count_nonzero(values[0] <= target))
    late = int(np.count_nonzero(st > arrival[-1]))
    ft = _sum_lo_hi(values[2])[1:] if gen else (math.inf, -math.inf)
    lat3, wait3 = _sum_lo_hi(values[0]), _sum_lo_hi(values[1])
    tot = (ns, *lat3, *wait3, t1, good, late, per_dev.astype(np.int64), *ft)
    return tot, values


def slo_numbers(arrival, start, finish, device, idx, n_dev, q):
    """What ``ServingResult.slo_view`` reads of a run: (served, last finish, started after the
    last arrival, served per device, latency percentile ``q``, NaN when none served), the
    numbers ``run_totals`` and ``select_percentile`` give. Up to ``_TOTALS_NUMPY_MAX``
    requests in NumPy (no kernel to compile; a fraction of a millisecond more for the 8,000
    requests of a checklist search's run), above by the two kernels."""
    if arrival.shape[0] > _TOTALS_NUMPY_MAX:
        ns, _, _, _, _, _, _, t1, _, late, per_dev = run_totals(
            arrival,
            start,
            finish,
            np.zeros(0),
            device,
            idx,
            0.0,
            n_dev,
            (finish, start),
            np.zeros(0),
            np.zeros(0),
            np.zeros((0, 0), dtype=np.bool_),
            np.zeros((0, 0)),
        )[:11]
        lat = select_percentile(arrival, finish, idx, int(ns), q) if ns else math.nan
        return ns, t1, late, per_dev, lat
    hidx = idx.shape[0] > 0
    f = finish[idx] if hidx else finish  # batch id -1 reads the entry after the last batch: NaN
    lat = f - arrival
    ok = ~np.isnan(lat)
    ns = int(np.count_nonzero(ok))
    if ns < lat.size:
        lat = lat[ok]
    if n_dev > 1:
        per_dev = np.bincount((device[idx] if hidx else device)[ok], minlength=n_dev)
    else:
        per_dev = np.array([ns])
    t1 = max(float(arrival[0]), float(np.fmax.reduce(f))) if ns else float(arrival[0])
    # NaN (not served) compares False
    late = int(np.count_nonzero((start[idx] if hidx else start) > arrival[-1]))
    q_lat = float(_percentiles_of(lat, [q])[0]) if ns else math.nan
    return ns, t1, late, per_dev.astype(np.int64), q_lat


def percentile_rank(q: float, count: int) -> int:
    """The lower order statistic k (0-based) that percentile ``q`` (0..100) of ``count`` values
    lies at or above, by numpy.percentile's linear rule: the percentile is at least the k-th
    smallest value, so once ``count - k`` values exceed a bound the percentile does too."""
    if not 0.0 <= float(q) <= 100.0:
        raise ValueError(f"q must be a percentile between 0 and 100; got {q!r}")
    if int(count) != count or count < 1:
        raise ValueError(f"count must be a whole number of values >= 1; got {count!r}")
    return int(
        quantile_ranks.py_func(np.array([float(q)]), int(count))[0][0]
    )  # the kernel's arithmetic, uncompiled


def quantiles(a, b=None, qs=(50.0,), *, lo=None, hi=None, count=None) -> np.ndarray:
    """Percentiles ``qs`` of ``a - b`` (or of ``a``) over the entries that are not NaN, as
    ``numpy.percentile`` gives them; NaN when every entry is NaN. ``a`` may be a tuple of
    arrays (one row of the result each, NaN at the same entries); ``lo``, ``hi`` (one per
    array) and ``count`` (entries that are not NaN) may be passed when already known."""
    series = tuple(
        np.ascontiguousarray(x, dtype=np.float64) for x in (a if isinstance(a, tuple) else (a,))
    )
    b = np.zeros(0) if b is None else np.ascontiguousarray(b, dtype=np.float64)
    qs = np.asarray(qs, dtype=np.float64)
    if count is None:
        xs = [x - b if b.size else x for x in series]
        ok = ~np.isnan(xs[0])
        count = int(ok.sum())
        if count:
            lo, hi = [float(x[ok].min()) for x in xs], [float(x[ok].max()) for x in xs]
    out = np.full((len(series), qs.size), math.nan)
    if count:
        _quantiles_kernel(
            series,
            b,
            np.atleast_1d(np.asarray(lo, dtype=np.float64)),
            np.atleast_1d(np.asarray(hi, dtype=np.float64)),
            int(count),
            qs,
            out,
        )
    return out if isinstance(a, tuple) else out[0]
