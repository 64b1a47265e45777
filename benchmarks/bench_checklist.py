"""Checklist: one whole quick run of the default case (every check, both candidates), and the
capacity search the checks share beside the plain search it replaced (same answers)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from _timing import best_of

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))


def _cpu(fn):
    """(wall s, CPU user+sys s of this process, fn's value)."""
    w0, c0 = time.perf_counter(), time.process_time()
    v = fn()
    return time.perf_counter() - w0, time.process_time() - c0, v


def _search_rows(quick: bool) -> list[dict]:
    """Every (candidate, placement, mode) of the default case: ``Context.best_policy`` (rate
    bounds first, stopped and head-started searches, summary-free probes) beside the plain
    loop (``checklist_reference.plain_best_policy``: every policy bisected with whole runs)."""
    from checklist_reference import plain_best_policy

    from ipusim.checklist import Context, default_case

    case = default_case()
    ctx = Context(case)
    work = [
        (c, pl, mode, ctx.service(c, pl, mode))
        for c in case.candidates
        for pl in ctx.fit(c)["placements"][:1]
        for mode in ctx.modes(c)
    ]
    ctx.best_policy(*work[0][:4], ctx.lengths)  # load the kernels
    fast_w, fast_c, fast = _cpu(
        lambda: [Context(case).best_policy(c, pl, m, s, ctx.lengths) for c, pl, m, s in work]
    )
    plain_w, plain_c, plain = _cpu(
        lambda: [plain_best_policy(ctx, c, pl, m, s, ctx.lengths) for c, pl, m, s in work]
    )
    same = all((d.policy, d.capacity_per_replica) == p for d, p in zip(fast, plain, strict=True))
    return [
        {
            "name": f"checklist capacity search, {len(work)} deployments ({ctx.n:,} requests)",
            "kernel_s": fast_w,
            "reference_s": plain_w,
            "goal": "same policy and capacity as the plain search",
            "note": f"same: {same}; CPU user+sys {fast_c:.2f} s vs {plain_c:.2f} s: {plain_c / fast_c:,.1f}x "
            "(reference: every policy bisected with whole runs and full summaries)",
        }
    ]


def rows(quick: bool) -> list[dict]:
    from ipusim.checklist import default_case, run_checklist

    old = os.environ.get("IPUSIM_QUICK")
    os.environ["IPUSIM_QUICK"] = "1"
    try:
        run_checklist(default_case(), show_progress=False)  # compile every kernel it reaches
        whole = best_of(
            lambda: run_checklist(default_case(), show_progress=False), 1 if quick else 3
        )
        out = [
            {
                "name": "run_checklist(default_case()) under IPUSIM_QUICK",
                "kernel_s": whole,
                "reference_s": None,
                "goal": "a few seconds per case (the serving and machine kernels are benchmarked in their own rows)",
                "note": "all eight checks, GC200 and A100-80GB",
            }
        ]
        if quick:
            out += _search_rows(quick)
    finally:
        if old is None:
            del os.environ["IPUSIM_QUICK"]
        else:
            os.environ["IPUSIM_QUICK"] = old
    if not quick:
        out += _search_rows(quick)  # full mode: 8,000 requests, every policy, 12 bisection steps
    return out
