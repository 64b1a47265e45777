"""Placement search (ipusim.placement.place) against the plain exhaustive search it must agree with.

Each search starts cold (``placement.clear_cache()``: no sub-step result reused) after the
machine kernels are compiled. The pruned search simulates a few sub-steps in order of a lower
bound; the reference simulates every placement. Goal (issue 9): a 7B-70B model on 64 chips
in under 1 s.
"""

from __future__ import annotations

import sys
from pathlib import Path

from _timing import best_of

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))


def _search(chip, step, chips, exhaustive):
    import placement_reference  # the plain exhaustive search lives beside the tests

    from ipusim import placement

    search = placement_reference.place if exhaustive else placement.place

    def run():
        placement.clear_cache()
        return search(chip, step, chips=chips)

    return run


def rows(quick: bool) -> list[dict]:
    from ipusim import machine, workloads

    cases = [
        ("gc200", "llama-2-7b", 8, 1024, 64, True),
        ("gc200", "llama-2-70b", 8, 1024, 64, not quick),
        ("a100-80gb", "llama-2-70b", 8, 1024, 64, not quick),
    ]
    if quick:
        cases = [("gc200", "gpt2", 4, 256, 8, True), ("gc200", "llama-2-7b", 8, 1024, 64, False)]
    out = []
    for chip, model, batch, ctx, chips, with_ref in cases:
        s = workloads.step(model, [ctx] * batch, phase="decode")
        machine.simulate(
            chip, workloads.step(workloads.shard(model, tensor=2, layers=1), [ctx], phase="decode")
        )
        fast = _search(chip, s, chips, False)
        t_fast = best_of(fast, 1 if quick else 3)
        pl = fast()
        t_ref, note_ref = None, ""
        if with_ref:
            ref = _search(chip, s, chips, True)
            t_ref = best_of(ref, 1)
            rp = ref()
            same = (
                abs(rp.time_s - pl.time_s) <= 1e-9 * pl.time_s
                if pl.time_s < float("inf")
                else rp.fit == pl.fit
            )
            note_ref = f"; exhaustive: {rp.simulations} sub-steps, same answer: {same}"
        out.append(
            {
                "name": f"place {model} decode {batch}x{ctx} on {chips} {chip}",
                "kernel_s": t_fast,
                "reference_s": t_ref,
                "goal": "< 1 s for 7B-70B on 64 chips",
                "note": f"{pl.label()} {pl.fit} {pl.time_s * 1e3:,.3f} ms; {pl.simulations} sub-steps simulated{note_ref}",
            }
        )
    return out
