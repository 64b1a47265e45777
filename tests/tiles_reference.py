"""Plain-Python reference of the superstep kernel (``ipusim.supersteps._superstep_cycles``), and
``plain()`` to run ``tiles.profile``, ``tiles.simulate`` and ``tiles.matmul`` on it and on the
planner's references (``tileplan_reference.plain``; see ``kernel_swap``). Cycles per tile."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import tileplan_reference
from kernel_swap import filling, swapped

from ipusim import supersteps as _supersteps


def superstep_cycles(
    flops, load, vertices, recv, send, flop_rate, sram_rate, x_rate, vertex_cycles, bus
):
    """Plain-Python ``_superstep_cycles``; returns (comp, exch, max)."""
    S, T = flops.shape
    comp, exch, mx = np.zeros((S, T)), np.zeros((S, T)), np.zeros((S, 2))
    for s in range(S):
        for t in range(T):
            c = 0.0
            if vertices[s][t] > 0:
                c = (
                    max(flops[s][t] / flop_rate[s], load[s][t] / sram_rate)
                    + vertices[s][t] * vertex_cycles
                )
            b0 = (t // bus) * bus
            sent = sum(send[s][u] for u in range(b0, min(b0 + bus, T)))
            comp[s][t], exch[s][t] = c, max(recv[s][t], sent / (min(b0 + bus, T) - b0)) / x_rate
        mx[s] = comp[s].max(), exch[s].max()
    return comp, exch, mx


@contextmanager
def plain():
    """Run ``ipusim.tiles`` with every kernel replaced by its plain reference."""
    with (
        tileplan_reference.plain(),
        swapped({(_supersteps, "_superstep_cycles"): filling(superstep_cycles, 3)}),
    ):
        yield
