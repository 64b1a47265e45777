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
def on_chips_given(ctx: Context, cand):
    """The deployment C2 runs on the chips as given, and how many replicas of it they hold.

    Rule: among the candidate's searched deployments that meet the p99 target (capacity per
    replica > 0) and whose placement uses at most ``cand.count`` chips, the one that carries the
    most on the chips given, ``cand.count // placement.chips`` replicas x its capacity per
    replica (ties go to the cheaper, ``Context.best``'s order). Any placement counts: one chip,
    a pipeline over several, or a tensor/pipeline placement (kind "placed", found on the chips
    given), streamed or not. ``(None, 0)`` when no such deployment exists, e.g. every fitting
    placement needs more chips than given; C4 then still prices ``Context.best`` scaled to the
    offered rate."""
    deps = [
        ctx.cost(cand, d)
        for d in ctx.search(cand)
        if d.capacity_per_replica > 0 and d.placement.chips <= cand.count
    ]
    if not deps:
        return None, 0
    dep = max(
        deps,
        key=lambda d: (
            cand.count // d.placement.chips * d.capacity_per_replica,
            -d.usd_per_million,
            d.capacity_per_replica,
        ),
    )
    return dep, cand.count // dep.placement.chips


def check_throughput(case: Case, ctx: Context | None = None) -> Check:
    """C2: the best batching policy of each candidate, its capacity at the p99 target on the
    chips as given (``on_chips_given``: replicas of the deployment that carries the most on
    them), and whether that carries the offered rate."""
    ctx = ctx or Context(case)
    rows, ev = [], []
    slo = case.slo_p99_s
    fastest = math.inf
    straddles = []  # candidates whose p99 interval at the offered rate contains the target
    scaled = []  # (candidate, Context.best): what C4 scales to the offered rate
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
                    "chips_per_replica": 0,
                    "p50_ms": math.nan,
                    "p99_ms": math.nan,
                    "utilization_%": math.nan,
                    "meets_slo": False,
                }
            )
            ev.append(Evidence(f"capacity.{key}", 0.0, "req/s", "no policy meets the p99 target"))
            continue
        best = dep  # the cheapest at the offered rate, which C4 scales to the chips it needs
        scaled.append((cand, best))
        dep, replicas = on_chips_given(ctx, cand)
        if dep is None:  # every placement that meets the target needs more chips than given
            dep = best
        cap_given = replicas * dep.capacity_per_replica
        if replicas:
            r = ctx.offered(cand, dep, replicas)
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
                "chips_per_replica": dep.placement.chips,
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
            Evidence(
                f"capacity.{key}",
                cap_given,
                "req/s",
                f"on the {cand.count} chip(s) given: {replicas} replica(s) of "
                f"{dep.placement.chips} chip(s) x the capacity per replica"
                if replicas
                else f"on the {cand.count} chip(s) given: no replica, every placement that meets "
                f"the target needs more chips ({dep.placement.chips} for {dep.placement.label})",
            )
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
        held = "; ".join(
            f"{r['candidate']}: {r['replicas_given']} replica(s) of {r['chips_per_replica']} chip(s), "
            f"{fmt(r['capacity_req_s'], 'req/s')}"
            for r in rows
            if not r["meets_slo"] and r["chips_per_replica"]
        )
        needs = ", ".join(
            f"{c.label} to {d.chips_needed // d.placement.chips} x {d.placement.chips} = "
            f"{d.chips_needed} chips"
            for c, d in scaled
            if c.label in miss
        )
        reason = (
            f"{', '.join(miss)} cannot carry {fmt(case.rate_per_s, 'req/s')} within the target "
            "with the chips given"
            + (f" ({held})" if held else "")
            + "; the cost check (C4) scales each to the replicas of its "
            "cheapest deployment the offered rate needs" + (f": {needs}" if needs else "")
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
