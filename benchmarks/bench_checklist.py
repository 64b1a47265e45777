"""Checklist: one whole quick run of the default case (every check, both candidates)."""

from __future__ import annotations

import os

from _timing import best_of


def rows(quick: bool) -> list[dict]:
    from ipusim.checklist import default_case, run_checklist

    old = os.environ.get("IPUSIM_QUICK")
    os.environ["IPUSIM_QUICK"] = "1"
    try:
        run_checklist(default_case(), show_progress=False)  # compile every kernel it reaches
        whole = best_of(lambda: run_checklist(default_case(), show_progress=False), 1 if quick else 3)
    finally:
        if old is None:
            del os.environ["IPUSIM_QUICK"]
        else:
            os.environ["IPUSIM_QUICK"] = old
    return [{"name": "run_checklist(default_case()) under IPUSIM_QUICK", "kernel_s": whole, "reference_s": None,
             "goal": "a few seconds per case (the serving and machine kernels are benchmarked in their own rows)",
             "note": "all eight checks, GC200 and A100-80GB"}]
