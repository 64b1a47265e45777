"""C2: each candidate's best batching policy and its capacity at the p99 target (and, for
generation on a GPU and a tile chip, whether splitting prefill from decode pays: ``split``)."""

from __future__ import annotations

import math

import numpy as np

from . import search
from .case import Case
from .context import Context
from .evidence import Check, Evidence, fmt
from .split import split_proposal


# ---------------------------------------------------------------------------------------
# C2 Throughput at the latency target
# ---------------------------------------------------------------------------------------
def check_throughput(case: Case, ctx: Context | None = None) -> Check:
    """C2: the best batching policy of each candidate, its capacity at the p99 target."""
    ctx = ctx or Context(case)
    rows, ev = [], []
    slo = case.slo_p99_s
    fastest = math.inf
    straddles = []  # candidates whose p99 interval at the offered rate contains the target
    median = int(np.median(ctx.lengths))
    for cand in case.candidates:
        dep = ctx.best(cand)
        f = ctx.fit(cand)
        key = cand.label.replace(" ", "")
        if f["placements"]:
            pl = f["given"][0] if f["given"] else f["placements"][0]
            svc = ctx.service(cand, pl, "packed")
            fastest = min(fastest, svc.batch_time(np.array([median])))
        if dep is None:
            rows.append(
                {
                    "candidate": cand.label,
                    "placement": "-",
                    "mode": "-",
                    "policy": "none meets the target",
                    "capacity_req_s": 0.0,
                    "replicas_given": 0,
                    "p50_ms": math.nan,
                    "p99_ms": math.nan,
                    "utilization_%": math.nan,
                    "meets_slo": False,
                }
            )
            ev.append(Evidence(f"capacity.{key}", 0.0, "req/s", "no policy meets the p99 target"))
            continue
        given = [p for p in f["given"] if p.kind == dep.placement.kind]
        replicas = cand.count // dep.placement.chips if given else 0
        cap_given = replicas * dep.capacity_per_replica
        if replicas:
            r = ctx.offered(cand, dep, replicas)
            dep.offered = r
        else:
            r = None
        # Meets the target only if the p99 is within it, the run is not overloaded (queue
        # growing, or busy above MAX_UTILIZATION) and the capacity carries the offered rate.
        meets = (
            r is not None
            and search.p99_s(r) <= slo
            and not search.saturated(r)
            and cap_given >= case.rate_per_s
        )
        rows.append(
            {
                "candidate": cand.label,
                "placement": dep.placement.label,
                "mode": dep.mode,
                "policy": dep.policy.label,
                "capacity_req_s": cap_given,
                "replicas_given": replicas,
                "p50_ms": r.latency_p50_s * 1e3 if r else math.nan,
                "p99_ms": search.p99_s(r) * 1e3 if r else math.nan,
                "utilization_%": search.utilization(r) * 100 if r else math.nan,
                "meets_slo": meets,
            }
        )
        ev.append(
            Evidence(
                f"capacity_per_replica.{key}",
                dep.capacity_per_replica,
                "req/s",
                f"{dep.mode}, {dep.policy.label}, p99 <= {fmt(slo * 1e3, 'ms')}",
            )
        )
        ev.append(
            Evidence(f"capacity.{key}", cap_given, "req/s", f"{replicas} replica(s) as given")
        )
        if r is not None:
            ev.append(
                Evidence(
                    f"p99_at_rate.{key}",
                    search.p99_s(r) * 1e3,
                    "ms",
                    f"at {fmt(case.rate_per_s, 'req/s')}",
                )
            )
            ci = ctx.offered_interval(cand, dep, replicas)
            if ci is not None:
                for end in ("lo", "hi"):
                    ev.append(
                        Evidence(
                            f"p99_{end}_at_rate.{key}",
                            ci[end] * 1e3,
                            "ms",
                            f"{'low' if end == 'lo' else 'high'} end of the p99's 95% interval over "
                            f"{ci['n']} seeded replications, warm-up discarded (serving.replications)",
                        )
                    )
                if ci["lo"] <= slo <= ci["hi"]:
                    straddles.append(cand.label)
            ev.append(
                Evidence(
                    f"utilization.{key}",
                    search.utilization(r) * 100,
                    "%",
                    "busy share at the offered rate",
                )
            )
    ev.append(
        Evidence(
            "fastest_single_request",
            fastest * 1e3,
            "ms",
            f"one request of the median length ({median} tokens) on the fastest candidate",
        )
    )
    ok = [r for r in rows if r["meets_slo"]]
    impossible = fastest > slo
    if impossible:
        status = "fail"
        reason = (
            f"impossible target: one request of the median length alone takes {fmt(fastest * 1e3, 'ms')} "
            f"on the fastest candidate, above the p99 target of {fmt(slo * 1e3, 'ms')}; no batching "
            "policy can meet it (raise the target or pick a faster chip)"
        )
    elif not any(r["capacity_req_s"] > 0 or r["policy"] != "none meets the target" for r in rows):
        status, reason = "fail", "no candidate meets the p99 target with any policy searched"
    elif len(ok) == len(rows):
        status, reason = (
            "pass",
            "every candidate carries the offered rate within the p99 target as given",
        )
    else:
        status = "warn"
        miss = [r["candidate"] for r in rows if not r["meets_slo"]]
        reason = (
            f"{', '.join(miss)} cannot carry {fmt(case.rate_per_s, 'req/s')} within the target "
            "with the chips given; the cost check scales each to the chips it needs"
        )
    if straddles:
        reason += (
            f"; the p99 interval at the offered rate straddles the {fmt(slo * 1e3, 'ms')} target for "
            f"{', '.join(straddles)}: whether it meets the target is within the simulation's noise"
        )
    summary = "; ".join(
        f"{r['candidate']}: {fmt(r['capacity_req_s'], 'req/s')} at p99 <= "
        f"{fmt(slo * 1e3, 'ms')} ({r['policy']}, {r['mode']})"
        for r in rows
    )
    src = ctx.sources() + "; " + search.SERVING_SOURCE
    if ctx.continuous():
        src += " (continuous batching)"
    tables = {"throughput": rows}
    split_rows, split_ev, split_text = split_proposal(case)  # generation on a GPU and a tile chip
    ev += split_ev
    if split_text:
        reason += "; " + split_text
    if split_rows:
        tables["disaggregated split (same hourly cost)"] = split_rows
    return Check(
        "C2",
        "Throughput at the latency target",
        status,
        summary,
        reason,
        ev,
        tables,
        src,
        {"impossible_target": impossible, "split_proposal": split_text},
    )
