"""The result of a serving run: per-request times and a summary computed in one pass.

``ServingResult`` holds per-request arrays (seconds) and the device totals a kernel wrote;
``summary()`` reduces them with two Numba kernels: ``_totals`` (counts, sums, extremes, per
device) in one pass, and ``quantiles`` (exact percentiles, as ``numpy.percentile``'s
linear rule, from a histogram pass and a pass over the values in the wanted bins).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np
from numba import njit

_HIST_BINS = 1 << 12  # bins of the quantile histogram (fits the L1 cache)
# A run of 100+ requests that serves less than this share of the offered rate is not stable: its
# requests wait for a delay (or a batch that never fills) longer than the run.
STABLE_SERVED_SHARE = 0.5
_SUMMARY_QS = {50.0: "latency_p50_s", 90.0: "latency_p90_s", 99.0: "latency_p99_s", 99.9: "latency_p999_s"}


@njit(cache=True, error_model="numpy")
def _totals(arrival, start, finish, first, device, target, n_dev):
    """One pass: served, latency sum/min/max, wait sum/min/max, last finish, within target,
    started after the last arrival, served per device, time to first token min/max (when
    ``first`` is not empty)."""
    n = arrival.shape[0]
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
    gen = first.shape[0] > 0
    t1 = arrival[0]
    good = 0
    late = 0
    per_dev = np.zeros(n_dev, dtype=np.int64)
    for i in range(n):
        f = finish[i]
        if f != f:
            continue
        ns += 1
        a = arrival[i]
        lat = f - a
        w = start[i] - a
        lat_sum += lat
        wait_sum += w
        lat_lo = min(lat_lo, lat)
        lat_hi = max(lat_hi, lat)
        wait_lo = min(wait_lo, w)
        wait_hi = max(wait_hi, w)
        if gen:
            x = first[i] - a
            ft_lo = min(ft_lo, x)
            ft_hi = max(ft_hi, x)
        if f > t1:
            t1 = f
        if lat <= target:
            good += 1
        if start[i] > last_arrival:
            late += 1
        per_dev[device[i]] += 1
    return ns, lat_sum, lat_lo, lat_hi, wait_sum, wait_lo, wait_hi, t1, good, late, per_dev, ft_lo, ft_hi


@njit(cache=True, error_model="numpy")
def _ranks(qs, count):
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
def _quantiles_kernel(series, b, lo, hi, count, qs, out):
    """Percentiles ``qs`` (0..100) of x = a - b for each array ``a`` of the tuple ``series``
    (x = a when ``b`` is empty), over the entries where x is not NaN; ``out[s, q]``, as
    numpy.percentile's linear interpolation.

    Preconditions: ``count`` >= 1 entries are not NaN (the same entries in every series), all
    of series s within [lo[s], hi[s]]. One pass histograms every series, noting each bin's
    first value and how often it recurs (ties are common: a batch's requests share a
    finish, a policy's delay recurs); a second pass gathers the other values of the bins
    that hold the wanted order statistics, and one partial sort of each bin picks them.
    """
    n = b.shape[0] if b.shape[0] else series[0].shape[0]
    ns = len(series)
    nq = qs.shape[0]
    nbins = _HIST_BINS
    ranks, gam = _ranks(qs, count)
    scale = np.zeros(ns)
    for s in range(ns):
        if hi[s] > lo[s]:
            scale[s] = nbins / (hi[s] - lo[s])
    hist = np.zeros((ns, nbins), dtype=np.int64)
    first = np.empty((ns, nbins))  # each bin's first value
    ties = np.zeros((ns, nbins), dtype=np.int64)  # values equal to it
    hb = b.shape[0] > 0
    for i in range(n):
        bi = b[i] if hb else 0.0
        for s in range(ns):
            x = series[s][i] - bi
            if x == x:
                j = min(int((x - lo[s]) * scale[s]), nbins - 1)
                if hist[s, j] == 0:
                    first[s, j] = x
                if x == first[s, j]:
                    ties[s, j] += 1
                hist[s, j] += 1
    # bin of each rank, the values below it, and where each wanted bin's values go
    rbin = np.empty((ns, 2 * nq), dtype=np.int64)
    below = np.empty((ns, 2 * nq), dtype=np.int64)
    off = np.full((ns, nbins), -1, dtype=np.int64)
    total = 0
    for s in range(ns):
        if scale[s] == 0.0:  # every value is lo[s]
            continue
        for r in range(2 * nq):
            c = 0
            j = 0
            while c + hist[s, j] <= ranks[r]:
                c += hist[s, j]
                j += 1
            rbin[s, r] = j
            below[s, r] = c
            if off[s, j] < 0:
                off[s, j] = total
                total += hist[s, j] - ties[s, j]
    buf = np.empty(total)
    fill = off.copy()
    less = np.zeros((ns, nbins), dtype=np.int64)  # gathered values below the bin's first value
    for i in range(n):
        bi = b[i] if hb else 0.0
        for s in range(ns):
            x = series[s][i] - bi
            if x == x and scale[s] > 0.0:
                j = min(int((x - lo[s]) * scale[s]), nbins - 1)
                if fill[s, j] >= 0 and x != first[s, j]:
                    buf[fill[s, j]] = x
                    fill[s, j] += 1
                    if x < first[s, j]:
                        less[s, j] += 1
    stats = np.empty(2 * nq)
    for s in range(ns):
        if scale[s] == 0.0:
            out[s, :] = lo[s]
            continue
        done = np.zeros(2 * nq, dtype=np.bool_)
        for r in range(2 * nq):  # one partial sort per wanted bin, at all its ranks
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
                k = ranks[r2] - below[s, r2]
                if rbin[s, r2] == j and not lj <= k < lj + tj:
                    ks[m] = k if k < lj else k - tj
                    m += 1
            part = buf[off[s, j]:off[s, j] + hist[s, j] - tj]
            if m > 0:
                part = np.partition(part, ks[:m])
            for r2 in range(2 * nq):
                if rbin[s, r2] == j:
                    k = ranks[r2] - below[s, r2]
                    stats[r2] = part[k] if k < lj else (first[s, j] if k < lj + tj else part[k - tj])
                    done[r2] = True
        for q in range(nq):
            g = gam[q]
            d = stats[2 * q + 1] - stats[2 * q]
            out[s, q] = stats[2 * q + 1] - d * (1.0 - g) if g >= 0.5 else stats[2 * q] + d * g


@njit(cache=True, error_model="numpy")
def _select_percentile(arrival, finish, count, q):
    """Percentile ``q`` (0..100) of finish - arrival over the ``count`` >= 1 entries whose finish
    is not NaN, by numpy.percentile's linear rule: the two order statistics it lies between
    are found by one partial sort of the gathered values (not a histogram: for a few
    thousand values the histogram's bins cost more than the values)."""
    buf = np.empty(count)
    m = 0
    for i in range(finish.shape[0]):
        f = finish[i]
        if f == f:
            buf[m] = f - arrival[i]
            m += 1
    ranks, gam = _ranks(np.array([q]), count)
    k = ranks[0]
    part = np.partition(buf, k)
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


def percentile_rank(q: float, count: int) -> int:
    """The lower order statistic k (0-based) that percentile ``q`` (0..100) of ``count`` values
    lies at or above, by numpy.percentile's linear rule: the percentile is at least the k-th
    smallest value, so once ``count - k`` values exceed a bound the percentile does too."""
    if not 0.0 <= float(q) <= 100.0:
        raise ValueError(f"q must be a percentile between 0 and 100; got {q!r}")
    if int(count) != count or count < 1:
        raise ValueError(f"count must be a whole number of values >= 1; got {count!r}")
    return int(_ranks(np.array([float(q)]), int(count))[0][0])


def quantiles(a, b=None, qs=(50.0,), *, lo=None, hi=None, count=None) -> np.ndarray:
    """Percentiles ``qs`` of ``a - b`` (or of ``a``) over the entries that are not NaN, as
    ``numpy.percentile`` gives them; NaN when every entry is NaN. ``a`` may be a tuple of
    arrays (one row of the result each, NaN at the same entries); ``lo``, ``hi`` (one per
    array) and ``count`` (entries that are not NaN) may be passed when already known."""
    series = tuple(np.ascontiguousarray(x, dtype=np.float64) for x in (a if isinstance(a, tuple) else (a,)))
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
        _quantiles_kernel(series, b, np.atleast_1d(np.asarray(lo, dtype=np.float64)),
                          np.atleast_1d(np.asarray(hi, dtype=np.float64)), int(count), qs, out)
    return out if isinstance(a, tuple) else out[0]


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
    ranks, gam = _ranks(qs, total)
    if not hi > lo:
        out[:] = lo
        return
    nbins = _HIST_BINS
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
        v = np.append(bv[off[j]:off[j + 1]], first[j])
        w = np.append(bw[off[j]:off[j + 1]], ties[j])
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
        _weighted_quantiles_kernel(v, w, qs, out)
    return out


@dataclass(frozen=True)
class ServingResult:
    """Per-request times of a serving run and its summary. Times in seconds.

    Requests not served (a run stopped early as unstable) have NaN start and finish.
    Generation runs also carry ``first_token_s`` (time the first token is out),
    ``output_tokens`` (tokens generated per request) and the time between tokens over all
    tokens (``gap_s`` with ``gap_weight`` tokens each): the summary's ``tbt_p50_s`` and
    ``tbt_p99_s`` are percentiles over every inter-token gap, not over per-request means.
    """

    policy: str
    devices: tuple
    arrival_s: np.ndarray = field(repr=False)
    lengths: np.ndarray = field(repr=False)
    start_s: np.ndarray = field(repr=False)
    finish_s: np.ndarray = field(repr=False)
    device: np.ndarray = field(repr=False)  # int16, -1 when not served
    # int32, -1 when not served; generation runs have no batches: a read-only view of -1 (no memory)
    batch_id: np.ndarray = field(repr=False)
    device_busy_s: np.ndarray = field(repr=False)
    device_real_tokens: np.ndarray = field(repr=False)
    device_computed_tokens: np.ndarray = field(repr=False)
    batches: int = 0
    stopped_early: bool = False
    latency_target_s: float = 0.1
    max_waiting: int = 0
    capacity_rps: float = float("nan")  # rough a-priori estimate; the summary measures served per busy second
    first_token_s: np.ndarray | None = field(default=None, repr=False)  # generation only
    output_tokens: np.ndarray | None = field(default=None, repr=False)  # generation only
    # generation only: the gaps between consecutive tokens of every request, as distinct gaps
    # (s) and how many tokens waited each (sum of weights = output tokens - requests)
    gap_s: np.ndarray | None = field(default=None, repr=False)
    gap_weight: np.ndarray | None = field(default=None, repr=False)

    @property
    def n(self) -> int:
        return int(self.arrival_s.size)

    @property
    def latency_s(self) -> np.ndarray:
        return self.finish_s - self.arrival_s

    @property
    def queueing_s(self) -> np.ndarray:
        return self.start_s - self.arrival_s

    @functools.cached_property
    def _summary(self) -> dict:
        arr = self.arrival_s
        nd = len(self.devices)
        gen = self.first_token_s is not None
        first = self.first_token_s if gen else np.zeros(0)
        ns, lat_sum, lat_lo, lat_hi, wait_sum, wait_lo, wait_hi, t1, good, late, per_dev, ft_lo, ft_hi = _totals(
            arr, self.start_s, self.finish_s, first, self.device, self.latency_target_s, nd)
        t0 = float(arr[0])
        dur = max(float(t1) - t0, 1e-300)
        if gen:  # one histogram pass for the three series
            q, qw, qf = quantiles((self.finish_s, self.start_s, first), arr, (50, 90, 99, 99.9),
                                  lo=(lat_lo, wait_lo, ft_lo), hi=(lat_hi, wait_hi, ft_hi), count=ns)
        else:
            q, qw = quantiles((self.finish_s, self.start_s), arr, (50, 90, 99, 99.9), lo=(lat_lo, wait_lo),
                              hi=(lat_hi, wait_hi), count=ns)
        wait_p99 = qw[2]
        real, comp = int(self.device_real_tokens.sum()), int(self.device_computed_tokens.sum())
        offered, cap, throughput, stable, reason = self._load(ns, late, per_dev, dur, gen)
        busy = self.device_busy_s
        out = {
            "policy": self.policy, "devices": list(self.devices), "requests": self.n, "served": ns,
            "batches": self.batches,
            "mean_batch": ((real / self.batches) if gen else ns / self.batches) if self.batches else 0.0,
            "offered_rps": float(offered), "capacity_rps": cap,
            "throughput_rps": throughput,
            "goodput_rps": float(good) / dur,
            "latency_target_s": self.latency_target_s,
            "latency_mean_s": lat_sum / ns if ns else math.nan,
            "latency_p50_s": float(q[0]), "latency_p90_s": float(q[1]),
            "latency_p99_s": float(q[2]), "latency_p999_s": float(q[3]),
            "queueing_mean_s": wait_sum / ns if ns else math.nan,
            "queueing_p99_s": float(wait_p99),
            "utilization": float(busy.sum() / (dur * nd)),
            "device_utilization": (busy / dur).tolist(),
            "padded_token_waste": float(1.0 - real / comp) if comp else 0.0,
            "stable": stable, "unstable_reason": reason,
        }
        if gen:
            out["ttft_p50_s"], out["ttft_p99_s"] = float(qf[0]), float(qf[2])
            out.update(_between_tokens(self.gap_s, self.gap_weight))
        return out

    def _load(self, ns, late, per_dev, dur, gen):
        """(offered req/s, capacity req/s, throughput req/s, stable, reason) from the one-pass totals."""
        arr = self.arrival_s
        nd = len(self.devices)
        t0 = float(arr[0])
        offered = (self.n - 1) / (arr[-1] - t0) if self.n > 1 and arr[-1] > t0 else math.inf
        backlog = self.n - ns + int(late)
        busy = self.device_busy_s
        cap = float(np.sum(np.divide(per_dev, busy, out=np.zeros(nd), where=busy > 0)))
        if not cap:
            cap = self.capacity_rps
        throughput = ns / dur
        stable, reason = True, ""
        if self.stopped_early:
            stable, reason = False, (f"stopped: more than {self.max_waiting:,} requests waiting; offered "
                                     f"{offered:,.0f} req/s vs capacity about {cap:,.0f} req/s")
        elif self.n >= 100 and backlog > max(50, 0.05 * self.n):
            stable, reason = False, (f"queue grew: {backlog:,} of {self.n:,} requests were still waiting when the "
                                     f"last arrived; offered {offered:,.0f} req/s vs capacity about "
                                     f"{cap:,.0f} req/s")
        elif ns and not gen and np.any(busy * offered / ns > 1.0):
            # A device given a share per_dev/ns of the offered rate serves per_dev/busy requests per
            # busy second; it keeps up only if busy x offered / ns <= 1. Beyond that there is no
            # steady state, whatever the run length; per device, so one overloaded pool counts.
            # Not for generation: there "busy" is the time any sequence runs.
            d = int(np.argmax(busy * offered / ns))
            off_d, cap_d = offered * per_dev[d] / ns, per_dev[d] / busy[d]
            stable, reason = False, (f"offered {off_d:,.0f} req/s to {self.devices[d]} exceeds its capacity about "
                                     f"{cap_d:,.0f} req/s (requests served per busy second)")
        elif self.n >= 100 and math.isfinite(offered) and throughput < STABLE_SERVED_SHARE * offered:
            stable, reason = False, (f"served {throughput:,.4g} req/s of {offered:,.0f} offered: requests wait for the "
                                     "policy's longest delay (or a batch that never fills) longer than the run")
        return float(offered), cap, throughput, stable, reason

    def slo_view(self, q: float = 99.0) -> dict:
        """The summary's ``stable``, ``utilization`` and latency percentile ``q`` (0..100, s, as
        ``latency_q_s``), without the rest of the summary: one pass for the totals and one
        selection of the two order statistics the percentile lies between (numpy.percentile's
        linear rule, the same value the summary's histogram method gives). For a search that
        runs many simulations and reads only these (the checklist's capacity at a p99 target)."""
        q = float(q)
        if not 0.0 <= q <= 100.0:
            raise ValueError(f"q must be a percentile between 0 and 100; got {q!r}")
        cached = self.__dict__.get("_summary")
        gen = self.first_token_s is not None
        if cached is not None and q in _SUMMARY_QS:
            return {"latency_q_s": cached[_SUMMARY_QS[q]], "stable": cached["stable"],
                    "utilization": cached["utilization"]}
        arr = self.arrival_s
        ns, _, _, _, _, _, _, t1, _, late, per_dev, _, _ = _totals(
            arr, self.start_s, self.finish_s, np.zeros(0), self.device, self.latency_target_s, len(self.devices))
        dur = max(float(t1) - float(arr[0]), 1e-300)
        stable = self._load(ns, late, per_dev, dur, gen)[3]
        lat = _select_percentile(arr, self.finish_s, int(ns), q) if ns else math.nan
        return {"latency_q_s": float(lat), "stable": stable,
                "utilization": float(self.device_busy_s.sum() / (dur * len(self.devices)))}

    def summary(self) -> dict:
        """Headline numbers (see ``to_dict``)."""
        return dict(self._summary)

    def __getattr__(self, name):
        s = type(self).__dict__["_summary"].__get__(self)
        if name in s:
            return s[name]
        raise AttributeError(name)

    def to_dict(self) -> dict:
        return self.summary()

    def __repr__(self):
        s = self._summary
        flag = "" if s["stable"] else f"  UNSTABLE: {s['unstable_reason']}"
        gen = (f", TTFT p99 {s['ttft_p99_s'] * 1e3:,.1f} ms, TBT p99 {s['tbt_p99_s'] * 1e3:,.2f} ms"
               if "ttft_p99_s" in s else "")
        return (
            f"ServingResult({s['policy']} on {', '.join(self.devices)}: {s['served']:,}/{s['requests']:,} served, "
            f"{s['throughput_rps']:,.1f} req/s, p50 {s['latency_p50_s'] * 1e3:,.2f} ms, p99 "
            f"{s['latency_p99_s'] * 1e3:,.2f} ms{gen}, mean batch {s['mean_batch']:.1f}, utilization "
            f"{s['utilization']:.0%}, padding waste {s['padded_token_waste']:.0%}){flag}"
        )

    def _repr_html_(self):
        s = self._summary
        rows = "".join(
            f"<tr><td>{k}</td><td>{v:,.4g}</td></tr>" if isinstance(v, float) else f"<tr><td>{k}</td><td>{v}</td></tr>"
            for k, v in s.items() if k not in ("devices", "device_utilization")
        )
        return f"<table><caption>ServingResult</caption>{rows}</table>"


def _between_tokens(gap_s, gap_weight) -> dict:
    """Time between tokens (s) over every gap between two consecutive tokens of a request:
    p50, p99 and mean, each gap ``gap_s[i]`` counted ``gap_weight[i]`` times."""
    if gap_s is None or not gap_weight.sum():
        return {"tbt_p50_s": math.nan, "tbt_p99_s": math.nan, "tbt_mean_s": math.nan}
    q = weighted_quantiles(gap_s, gap_weight, (50, 99))
    return {"tbt_p50_s": float(q[0]), "tbt_p99_s": float(q[1]),
            "tbt_mean_s": float(np.dot(gap_s, gap_weight) / gap_weight.sum())}
