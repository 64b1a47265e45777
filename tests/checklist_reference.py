"""Plain references of the checklist's capacity search (the tests and benchmarks compare the
fast search against them): every probe a whole ``search.serve`` run read through its full
summary, every policy searched in order, the first of the highest capacity kept."""

from __future__ import annotations

import math

import numpy as np

from ipusim.checklist import search


def plain_capacity(lengths, su, policy, slo, top, *, servers=1, seed=0, iters=7):
    """(capacity req/s, ServingResult there): bisection in log rate between top / 1e4 and top."""
    n = lengths.size
    unit = np.cumsum(np.random.default_rng(seed).exponential(1.0, n))
    unit *= n / unit[-1]

    def run(rate):
        return search.serve(unit / rate, lengths, su, policy, servers)

    def ok(r):
        s = r.summary()
        return (
            s["stable"] and s["latency_p99_s"] <= slo and s["utilization"] < search.MAX_UTILIZATION
        )

    return log_bisection(run, ok, top, iters)


def log_bisection(run, ok, top, iters):
    """(highest rate that passes ``ok``, the run there): plain bisection in log rate between
    top / 1e4 and top, each probe a whole ``run(rate)``; (0, the run at top / 1e4) when even
    that fails."""
    lo, hi = top / 1e4, top
    r_lo = run(lo)
    if not ok(r_lo):
        return 0.0, r_lo
    best = r_lo
    r_hi = run(hi)
    if ok(r_hi):
        return hi, r_hi
    for _ in range(iters):
        mid = math.sqrt(lo * hi)
        r = run(mid)
        if ok(r):
            lo, best = mid, r
        else:
            hi = mid
    return lo, best


def plain_best_policy(ctx, cand, pl, mode, svc, lengths):
    """(policy, capacity req/s) as ``Context.best_policy`` chose before: every policy listed,
    in order, bisected plainly; the first of the highest capacity wins."""
    servers = ctx.depth(pl)
    mean_len = float(np.mean(lengths))
    best = None
    for pol in ctx.policies(cand, svc.max_batch, svc):
        b = pol.max_batch
        upper = 2.0 * b * servers / max(svc.time_at(b, min(mean_len, svc.max_prompt)), 1e-12)
        cap, _ = plain_capacity(
            lengths,
            svc,
            pol,
            ctx.case.slo_p99_s,
            search.rate_bound(lengths, svc, pol, upper, servers=servers),
            servers=servers,
            seed=ctx.case.seed,
            iters=ctx.quick_bisect,
        )
        if best is None or cap > best[1]:
            best = (pol, cap)
    return best
