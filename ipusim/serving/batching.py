"""Batched serving: the event kernel and ``simulate``.

Requests (arrival times, lengths) wait in one queue (or one per length bucket, or one per
pool of a ``Router``); a policy from ``ipusim.policies`` decides when a batch leaves and how
many it holds; a ``ServiceModel`` per device says how long the batch takes.
``plan.make_plan`` turns the inputs into the arrays the kernel reads (a ``Plan``); ``run_plan`` runs the Numba
kernel; ``simulate`` does both and returns a ``ServingResult``. The tests hold an
independent plain-Python event-driven reference and a simpy model of the same policies.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .. import limits as _limits
from .. import packing
from .._validate import positive
from .plan import (
    ADAPTIVE,
    BYTES_PER_REQUEST,
    DEFAULT_SEED,
    DYNAMIC,
    MAX_REQUESTS,
    STATIC,
    TOKEN,
    Plan,
    Router,
    as_devices,
    make_plan,
)
from .result import ServingResult
from .service import batch_shape

_INF = np.inf


@njit(cache=True, error_model="numpy")
def _svc(tables, mi, m_rows, rows, j):
    """Seconds in model ``mi``'s table (its own row count); beyond it, whole tables in series."""
    rmax = m_rows[mi]
    if rows <= rmax:
        return tables[mi, rows, j]
    full = rows // rmax
    rest = rows - full * rmax
    t = full * tables[mi, rmax, j]
    if rest > 0:
        t += tables[mi, rest, j]
    return t


@njit(cache=True, error_model="numpy")
def _adaptive_target(
    arrival,
    lengths,
    qidx,
    qoff,
    k,
    h,
    tables,
    mi,
    m_rows,
    m_len_step,
    m_packed,
    m_pack_len,
    B,
    n_serving,
    ad_target,
    ad_util,
    ad_window,
):
    """(fill target b, delay) of the adaptive policy for queue ``k`` with head position ``h``."""
    one = qidx.shape[0] == 0
    w = min(h, ad_window)
    rate = 0.0
    if w >= 1:
        span = (
            arrival[h if one else qidx[qoff[k] + h]]
            - arrival[h - w if one else qidx[qoff[k] + h - w]]
        )
        if span > 0.0:
            rate = w / span
    L = lengths[h if one else qidx[qoff[k] + h]]
    need = rate / (ad_util * n_serving)
    b = B
    for c in range(1, B + 1):
        r, j, _ = batch_shape(m_len_step[mi], m_packed[mi], m_pack_len[mi], c, L, c * L)
        if c / _svc(tables, mi, m_rows, r, j) >= need:
            b = c
            break
    r, j, _ = batch_shape(m_len_step[mi], m_packed[mi], m_pack_len[mi], b, L, b * L)
    d = ad_target - _svc(tables, mi, m_rows, r, j)
    if d < 0.0:
        d = 0.0
    return b, d


def _event_kernel(ADAPT: int):
    """The event kernel (``kernel`` below), with the adaptive policy's code (``ADAPT`` = 1) or
    without it (0: static, dynamic and token budget, packed or not). ``ADAPT`` is a constant
    of the closure: Numba's dead-branch pruning drops the adaptive code before typing, so the
    other policies compile a loop 40% smaller, and Numba caches the two kernels apart (it keys
    a closure's cache entry on its constants). Made on first use.
    Splitting further (a kernel per kind, or packing apart) costs more than it saves: the
    shared loop is most of the compile, and the checklist runs three kinds, packed and not."""
    got = _KERNELS.get(ADAPT)
    if got is not None:
        return got

    @njit(cache=True, error_model="numpy")
    def kernel(
        arrival,
        lengths,
        mult,
        qidx,
        qoff,
        serves,
        dev_model,
        tables,
        m_len_step,
        m_packed,
        m_pack_len,
        m_rand,
        m_rows,
        kind,
        q_batch,
        q_delay,
        budget,
        pad_full,
        pref_min,
        pref,
        ad_target,
        ad_util,
        ad_window,
        max_waiting,
        late_s,
        late_limit,
        start,
        finish,
        device,
        batch_id,
        dev_busy,
        dev_real,
        dev_computed,
        info,
    ):
        """Event loop of batched serving. Writes each request's batch (``batch_id``, -1 when not
        served) and each batch's start, finish and device, which its requests share (4 bytes
        per request and 18 per batch, not 22 per request); the entry after the last batch gets
        NaN, NaN, -1, so a request's batch id -1 reads "not served".

        Preconditions: ``arrival`` sorted ascending, n >= 1; every queue is served by at least
        one device; outputs of size n + 1 (``batch_id``: n; any content: every entry up to the
        last batch's is written); ``dev_*`` zeroed. ``info`` gets [batches, stopped (0/1),
        dispatched requests]. Each step picks the (device, queue) pair that can send a batch
        earliest (ties: the device free first, then the oldest head request, then lower
        indices), sends it, and repeats. Stops early when more than ``max_waiting`` requests
        wait, or (info[1] = 2) once ``late_limit`` requests have a latency above ``late_s`` (a
        search that needs only to know a percentile is above ``late_s``). A packed batch is
        sorted and packed first fit in work arrays allocated once.
        """
        n = arrival.shape[0]
        nd = serves.shape[0]
        nq = serves.shape[1]
        # np.empty and loops, not np.zeros(n, dtype=np.int64): one overload fewer to compile
        head = np.empty(nq, dtype=np.int64)
        cnt = np.empty(nq, dtype=np.int64)
        n_serving = np.empty(nq, dtype=np.int64)
        for k in range(nq):
            head[k] = 0
            cnt[k] = qoff[k + 1] - qoff[k]
            n_serving[k] = 0
        for d in range(nd):
            for k in range(nq):
                if serves[d, k]:
                    n_serving[k] += 1
        # np.empty with dtype= and a loop, not np.zeros: the one float allocation the kernels
        # compile (np.zeros adds three overloads to a newcomer's first run)
        free = np.empty(nd, dtype=np.float64)
        for d in range(nd):
            free[d] = 0.0
        qmax = 1
        for k in range(nq):
            if q_batch[k] > qmax:
                qmax = q_batch[k]
        size2 = 1
        while size2 < qmax:
            size2 *= 2
        pbuf = np.empty(qmax, dtype=np.int64)  # lengths of a packed batch, sorted longest first
        prow = np.empty(qmax, dtype=np.int64)
        ptree = np.empty(2 * size2, dtype=np.int64)
        pcount = np.empty(size2, dtype=np.int64)
        one = qidx.shape[0] == 0  # a single queue: queue position = request id
        dispatched = 0
        nb = 0
        tail = 0
        stopped = 0
        late = 0
        while dispatched < n:
            best_t = _INF
            best_f = _INF
            best_a = _INF
            bd = -1
            bk = -1
            for k in range(nq):
                h = head[k]
                if h >= cnt[k]:
                    continue
                B = q_batch[k]
                fill = B
                D = q_delay[k]
                if ADAPT == 1 and kind == ADAPTIVE:
                    # any device serving k gives the same plan; take the first
                    for d in range(nd):
                        if serves[d, k]:
                            fill, D = _adaptive_target(
                                arrival,
                                lengths,
                                qidx,
                                qoff,
                                k,
                                h,
                                tables,
                                dev_model[d],
                                m_rows,
                                m_len_step,
                                m_packed,
                                m_pack_len,
                                B,
                                n_serving[k],
                                ad_target,
                                ad_util,
                                ad_window,
                            )
                            break
                # earliest time queue k may send a batch (written out here: helper calls that take
                # arrays cost reference counting on every call)
                a0 = arrival[h if one else qidx[qoff[k] + h]]
                r = a0 + D
                if kind == TOKEN:
                    tok = 0
                    c = 0
                    m = h
                    while m < cnt[k]:
                        i = m if one else qidx[qoff[k] + m]
                        tok += lengths[i]
                        c += 1
                        if tok >= budget or c >= B:
                            if arrival[i] < r:
                                r = arrival[i]
                            break
                        m += 1
                else:
                    if h + fill - 1 < cnt[k]:
                        x = arrival[h + fill - 1 if one else qidx[qoff[k] + h + fill - 1]]
                        if x < r:
                            r = x
                    if kind == DYNAMIC and pref_min > 0 and h + pref_min - 1 < cnt[k]:
                        x = arrival[h + pref_min - 1 if one else qidx[qoff[k] + h + pref_min - 1]]
                        if x < r:
                            r = x
                for d in range(nd):
                    if not serves[d, k]:
                        continue
                    f = free[d]
                    t = r if r > f else f
                    if t < best_t or (
                        t == best_t and (f < best_f or (f == best_f and a0 < best_a))
                    ):
                        best_t = t
                        best_f = f
                        best_a = a0
                        bd = d
                        bk = k
            k = bk
            d = bd
            t = best_t
            h = head[k]
            B = q_batch[k]
            D = q_delay[k]
            # size of the batch sent at t
            size = 0
            tok = 0
            mx = 0
            m = h
            while m < cnt[k] and size < B:
                i = m if one else qidx[qoff[k] + m]
                if arrival[i] > t:
                    break
                li = lengths[i]
                if kind == TOKEN and size > 0 and tok + li > budget:
                    break
                tok += li
                if li > mx:
                    mx = li
                size += 1
                m += 1
            if kind == DYNAMIC and size < B and pref_min > 0 and t < best_a + D:
                # sent early because a preferred size was reached: the largest preferred <= size
                p = 0
                for x in pref:
                    if x <= size:
                        p = x
                if p < size:
                    size = p
                    tok = 0
                    mx = 0
                    for m in range(h, h + size):
                        li = lengths[m if one else qidx[qoff[k] + m]]
                        tok += li
                        if li > mx:
                            mx = li
            mi = dev_model[d]
            rows_req = B if (kind == STATIC and pad_full) else size
            rows, j, computed = batch_shape(
                m_len_step[mi], m_packed[mi], m_pack_len[mi], rows_req, mx, tok
            )
            if m_packed[
                mi
            ]:  # a real packing of this batch: first-fit decreasing into pack_len rows
                for m in range(size):  # insertion sort, longest first
                    li = lengths[h + m if one else qidx[qoff[k] + h + m]]
                    p = m
                    while p > 0 and pbuf[p - 1] < li:
                        pbuf[p] = pbuf[p - 1]
                        p -= 1
                    pbuf[p] = li
                rows = packing.first_fit_rows_into(
                    pbuf, size, m_pack_len[mi], m_pack_len[mi], prow, ptree, pcount
                )
                computed = rows * m_pack_len[mi]
            rmax = m_rows[mi]
            if rows <= rmax:
                s = tables[mi, rows, j]
            else:  # beyond the table: whole tables in series, then the rest
                s = (rows // rmax) * tables[mi, rmax, j]
                if rows % rmax > 0:
                    s += tables[mi, rows % rmax, j]
            if m_rand[mi]:
                s = s * mult[h if one else qidx[qoff[k] + h]]
            fin = t + s
            start[nb] = t
            finish[nb] = fin
            device[nb] = d
            for m in range(h, h + size):
                i = m if one else qidx[qoff[k] + m]
                batch_id[i] = nb
                if fin - arrival[i] > late_s:
                    late += 1
            free[d] = fin
            dev_busy[d] += s
            dev_real[d] += tok
            dev_computed[d] += computed if m_len_step[mi] > 0 else tok
            head[k] = h + size
            dispatched += size
            nb += 1
            while tail < n and arrival[tail] <= t:
                tail += 1
            if tail - dispatched > max_waiting:
                stopped = 1
                break
            if late >= late_limit:
                stopped = 2
                break
        for k in range(nq):  # requests never sent
            for m in range(head[k], cnt[k]):
                batch_id[m if one else qidx[qoff[k] + m]] = -1
        start[nb] = np.nan
        finish[nb] = np.nan
        device[nb] = -1
        info[0] = nb
        info[1] = stopped
        info[2] = dispatched

    _KERNELS[ADAPT] = kernel
    return kernel


_KERNELS: dict = {}


def event_kernel(adaptive: bool = False):
    """The event kernel (a Numba dispatcher) of the adaptive policy, or of the others: for a
    caller that asks whether Numba's cache holds it (``ipusim.background.cached``)."""
    return _event_kernel(int(bool(adaptive)))


def run_plan(plan: Plan, *, late_s: float = _INF, late_limit: int | None = None):
    """Run the kernel: (start, finish, device, batch_id, busy, real tokens, computed tokens, info),
    where start, finish (s) and device are per batch, with one entry more (NaN, NaN, -1) read
    by requests not served (batch id -1); see ``_event_kernel``.

    ``late_s``, ``late_limit``: stop once ``late_limit`` requests have a latency above ``late_s``
    seconds (``info[1]`` = 2; default: never). With ``late_limit`` = n - k, where k is the
    lower order statistic of a percentile (numpy's linear rule, ``result.percentile_rank``),
    the whole run's percentile would be above ``late_s``: a search that only asks "is the
    p99 within the target" learns "no" without the rest of the run."""
    n, nd = plan.arrival.size, plan.serves.shape[0]
    # per batch: room for n batches and one entry more (pages never written cost nothing)
    start, finish, device = np.empty(n + 1), np.empty(n + 1), np.empty(n + 1, dtype=np.int16)
    batch_id = np.empty(n, dtype=np.int32)
    busy, real, comp = np.zeros(nd), np.zeros(nd, dtype=np.int64), np.zeros(nd, dtype=np.int64)
    info = np.zeros(3, dtype=np.int64)
    _event_kernel(int(plan.kind == ADAPTIVE))(
        plan.arrival,
        plan.lengths,
        plan.mult,
        plan.qidx,
        plan.qoff,
        plan.serves,
        plan.dev_model,
        plan.tables,
        plan.m_len_step,
        plan.m_packed,
        plan.m_pack_len,
        plan.m_rand,
        plan.m_rows,
        plan.kind,
        plan.q_batch,
        plan.q_delay,
        plan.budget,
        plan.pad_full,
        plan.pref_min,
        plan.pref,
        plan.ad_target,
        plan.ad_util,
        plan.ad_window,
        plan.max_waiting,
        float(late_s),
        n + 1 if late_limit is None else int(late_limit),
        start,
        finish,
        device,
        batch_id,
        busy,
        real,
        comp,
        info,
    )
    m = (
        int(info[0]) + 1
    )  # the batches and the entry after them: a copy, unless they fill most of the room
    start, finish, device = (a[:m].copy() if m < n // 2 else a[:m] for a in (start, finish, device))
    return start, finish, device, batch_id, busy, real, comp, info


def result_of(
    plan: Plan,
    devices,
    policy,
    out,
    latency_target_s: float,
    *,
    capacity: bool = True,
    by_batch: bool = True,
) -> ServingResult:
    """The ``ServingResult`` of a run's outputs ``out`` (as ``run_plan`` returns them: start,
    finish and device per batch; ``by_batch=False``: per request, as the tests' reference
    writes them). ``capacity=False`` leaves the rough a-priori ``capacity_rps`` NaN (it costs a
    service-time lookup per device; a search that reads only ``slo_view`` adds it with
    ``capacity_rps`` to the result it keeps)."""
    start, finish, device, batch_id, busy, real, comp, info = out
    if (
        info[2] and not np.isfinite(busy).all()
    ):  # a batch whose step did not fit has an infinite time
        i = int(np.flatnonzero(np.isinf(finish[batch_id] if by_batch else finish))[0])
        raise ValueError(
            f"request {i} ({int(plan.lengths[i])} tokens) landed in a batch that does not fit its device "
            f"(the machine model has no time for it); lower the policy's batch or token budget"
        )
    return ServingResult(
        policy=policy.describe(),
        devices=tuple(d.name for d in devices),
        arrival_s=plan.arrival,
        lengths=plan.lengths,
        times=(start, finish, device),
        by_batch=by_batch,
        batch_id=batch_id,
        device_busy_s=busy,
        device_real_tokens=real,
        device_computed_tokens=comp,
        batches=int(info[0]),
        stopped_early=bool(info[1]),
        latency_target_s=float(latency_target_s),
        max_waiting=plan.max_waiting,
        capacity_rps=capacity_rps(devices, plan) if capacity else float("nan"),
        queues=(plan.qoff, plan.qidx) if len(plan.qoff) > 2 else None,
    )


def simulate(
    arrival_s,
    lengths,
    policy,
    devices,
    *,
    router: Router | None = None,
    latency_target_s: float = 0.1,
    max_waiting: int | None = 100_000,
    seed: int = DEFAULT_SEED,
) -> ServingResult:
    """Simulate requests (``arrival_s``, sorted, s; ``lengths``, tokens) through ``policy`` onto ``devices``.

    ``devices`` is a ``ServiceModel`` or a list (one per device). ``router`` splits
    requests by length between two device pools. ``latency_target_s`` defines goodput.
    The run stops early (and reports ``stable = False``) when more than ``max_waiting``
    requests wait at once; ``None`` never stops early. ``seed`` draws exponential service
    times.
    """
    positive(
        "latency_target_s", latency_target_s, at_most=_limits.MAX_SECONDS, why="a latency target, s"
    )
    if hasattr(arrival_s, "__len__"):
        _limits.check_at_most(
            "requests (len(arrival_s))",
            len(arrival_s),
            MAX_REQUESTS,
            "requests in one run; split longer runs",
        )
        _limits.check_memory(
            "requests (len(arrival_s))",
            len(arrival_s),
            BYTES_PER_REQUEST * len(arrival_s),
            f"about {BYTES_PER_REQUEST} bytes per request",
        )
    devs = as_devices(devices)
    plan = make_plan(arrival_s, lengths, policy, devs, router, seed, max_waiting)
    return result_of(plan, devs, policy, run_plan(plan), latency_target_s)


def capacity_rps(devs, plan) -> float:
    """Rough service capacity (req/s, the ``ServingResult.capacity_rps`` of a run of ``plan``): each device's best requests/s at the mean length and the policy's batch."""
    mean = plan.length_mean if np.isfinite(plan.length_mean) else plan.lengths.mean()
    L = int(round(float(mean)))
    B = int(plan.q_batch[0])
    cap = 0.0
    for d in devs:
        lens = [min(L, d.max_len)] * B
        rows = B if plan.kind == STATIC else None
        cap += B / d.time_s(lens, rows=rows)
    return cap


def sweep_rates(
    rates,
    lengths_fn,
    policy,
    devices,
    *,
    n: int = 20_000,
    router: Router | None = None,
    latency_target_s: float = 0.1,
    seed: int = DEFAULT_SEED,
    progress=None,
    arrivals_fn=None,
) -> list[dict]:
    """Run ``simulate`` at each arrival rate; one summary dict per rate (with ``rate_rps``).

    ``lengths_fn(n, seed)`` draws the request lengths (the same for every rate);
    ``arrivals_fn(rate, n, seed)`` the arrival times (default Poisson).
    ``progress`` optionally wraps the rate iterable (e.g. ``ipusim.config.progress``).
    """
    from .. import arrivals

    arrivals_fn = arrivals_fn or (lambda rate, n, seed: arrivals.poisson(rate, n, seed=seed))
    lens = lengths_fn(n, seed)
    out = []
    it = rates if progress is None else progress(rates)
    for rate in it:
        arr = arrivals_fn(rate, n, seed)
        r = simulate(
            arr,
            lens,
            policy,
            devices,
            router=router,
            latency_target_s=latency_target_s,
            seed=seed,
            max_waiting=max(1000, n // 10),
        )
        out.append({"rate_rps": float(rate), **r.summary()})
    return out
