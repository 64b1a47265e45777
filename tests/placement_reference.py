"""The plain exhaustive placement search that ``ipusim.placement.place`` (pruned, best-first on
lower bounds) must agree with: every candidate placement simulated, the fastest that fits
kept. Seconds."""

from __future__ import annotations

import dataclasses

from ipusim import collectives, hardware, placement
from ipusim.result import DOES_NOT_FIT


def place(
    c, s, *, chips: int = 1, chips_per_node: int | None = None, **sim_kwargs
) -> placement.PlacedStep:
    """The fastest fitting placement of ``s`` on up to ``chips`` chips of ``c`` over every
    candidate (ties: fewer chips used), else the least short one; ``simulations`` counts the
    sub-steps simulated."""
    c = hardware.chip(c)
    fab = collectives.fabric(c, chips, chips_per_node=chips_per_node)
    ev = placement.cost.Evaluator(c, s, fab, sim_kwargs)
    every = [placement.evaluate(ev, cand) for cand in placement.search.candidates(s, chips, fab)]
    fitting = sorted(
        (p for p in every if p.fit != DOES_NOT_FIT), key=lambda x: (x.time_s, x.chips_used)
    )
    best = (
        fitting[0]
        if fitting
        else min(every, key=lambda x: (x.short_bytes, x.chips_used, x.micro_batches))
    )
    return dataclasses.replace(best, simulations=ev.simulations)
