"""Plain references of the planner's kernels and fast searches (``ipusim.tileplan``), and the
context managers that run the planner on them (see ``kernel_swap``):

* ``distribute``: the ``_distribute`` kernel (pieces dealt to tiles) as a plain loop;
* ``best_grid_numpy``: the exhaustive NumPy search the ``_grid_search`` kernel is held to (every
  candidate grid costed at once by ``grid_cost``); ``best_grid``: the same search one grid at
  a time in plain Python;
* ``attention_phases`` / ``attention_cost``: the attention tables dealt whole (``deal`` of
  ``attention_tables``) and costed from the per-tile arrays, which the attention cost kernel
  and ``_distribute`` of repeated rows are held to.

``exhaustive()`` plans with these searches in place of the kernels (``best_grid_numpy``,
``attention_phases``, ``attention_cost``); ``plain()`` also deals with ``distribute``. Both
clear the plan cache on entry and exit. Units: bytes, FLOP, cycles; per-tile arrays.
"""

from __future__ import annotations

import numpy as np
from kernel_swap import filling, swapped

from ipusim import tile_params as _cal
from ipusim.hardware import TileChip
from ipusim.tileplan import attention as _attention
from ipusim.tileplan import base as _base
from ipusim.tileplan import matmul as _matmul
from ipusim.tileplan.base import PARTIAL_BYTES, deal
from ipusim.tileplan.matmul import MatmulPlan, _weight_remote
from ipusim.tileplan.search import candidates, clear_plan_cache


def distribute(work, n_tiles):
    """Plain-Python ``_distribute``: piece i to tile (i * n_tiles) // P; the (n_tiles, K + 1)
    per-tile sums, pieces per tile in the last column."""
    P, K = work.shape
    out = np.zeros((n_tiles, K + 1))
    for i in range(P):
        t = (i * n_tiles) // P
        for j in range(K):
            out[t, j] += work[i, j]
        out[t, K] += 1.0
    return out


def _distribute_repeated(work, rep, n_tiles):
    """The ``_distribute`` kernel's arguments: ``distribute`` of each row of ``work`` repeated
    ``rep`` times."""
    return distribute(np.repeat(work, rep, axis=0), n_tiles)


def grid_cost(m, k, n, dt, c: TileChip, acc: bool, pm, pn, pk):
    """One pass of an (m x k) @ (k x n) matmul on grids (pm, pn, pk) (broadcast arrays).

    Returns (pass cycles, reduction cycles, working-set bytes) per grid, on the largest
    block: compute ``2 mb kb nb / FLOP-rate`` (the AMP's rate for ``dt``-byte operands) plus a
    vertex; exchange of the input block (sent once, multicast, ASSUMPTION) and of the weight
    block gathered from the ``pm`` tiles that share it; for ``pk > 1`` a reduction superstep
    over FP32 partials. ``acc``: the output block is an FP32 accumulator (passes over k).
    """
    T = c.tiles
    mb, kb, nb = -(-m // pm), -(-k // pk), -(-n // pn)
    # the calibrated terms run_program charges (ipusim.tile_calibration): exchange at
    # EXCHANGE_EFFICIENCY of its rate; an AMP phase's fixed overhead and the rearranging of
    # the bytes it received, so the planner ranks grids by the costs the simulation charges
    x = c.exchange_bytes_per_cycle_per_tile * _cal.EXCHANGE_EFFICIENCY
    red = pk > 1
    out_b = np.where(red | acc, PARTIAL_BYTES, dt)
    recv = mb * kb * (dt * (T - 1) / T) + kb * nb * dt * _weight_remote(T, pm, pn, pk)
    part = (pk - 1) / pk * (mb * nb)
    cycles = (
        c.vertex_overhead_cycles
        + (2.0 / c.amp_flops_per_cycle_per_tile(dt)) * (mb * kb) * nb
        + _cal.AMP_PHASE_OVERHEAD_CYCLES
        + recv / _cal.REARRANGE_BYTES_PER_CYCLE
        + recv / x
        + c.sync_cycles
    )
    red_cycles = red * (
        c.sync_cycles + part * (PARTIAL_BYTES / x + 1.0 / c.fp32_flops_per_cycle_per_tile)
    )
    temp = (mb * kb) * dt + kb * nb * dt + (mb * nb) * out_b + red * part * PARTIAL_BYTES
    return cycles, red_cycles, temp


def best_grid_numpy(m, k, n, dt, c: TileChip, axis: str, passes: int, budget: float) -> MatmulPlan:
    """``_best_grid`` vectorised with NumPy over every candidate grid at once (the exhaustive
    search the ``_grid_search`` kernel is held to)."""
    T = c.tiles
    sub = {"m": m, "k": k, "n": n}
    if passes > 1:
        sub[axis] = -(-sub[axis] // passes)
    sm, sk, sn = sub["m"], sub["k"], sub["n"]
    cm, cn, ck = candidates(sm, T), candidates(sn, T), candidates(sk, T, small=4, factors=(1, 3))
    # one block per tile: only grids that fit the tiles, in C order of (pm, pn, pk)
    im, jn, lk = np.nonzero((cm[:, None, None] * cn[None, :, None]) * ck[None, None, :] <= T)
    pm, pn, pk = cm[im], cn[jn], ck[lk]
    cyc, red, temp = grid_cost(sm, sk, sn, dt, c, axis == "k" and passes > 1, pm, pn, pk)
    reductions = 1 if axis == "k" or passes == 1 else passes
    total = passes * cyc + reductions * red
    if axis in ("m", "n") and passes > 1:
        temp = temp + m * n * dt / T  # output finished so far, spread over the tiles
    feasible = temp <= budget
    i = int(np.argmin(np.where(feasible, total, np.inf)) if feasible.any() else np.argmin(temp))
    return MatmulPlan(
        int(pm[i]),
        int(pn[i]),
        int(pk[i]),
        axis if passes > 1 else "",
        passes,
        float(total[i]),
        float(temp[i]),
        bool(feasible.any()),
    )


def best_grid(m, k, n, dt, c: TileChip, axis: str, passes: int, budget: float) -> MatmulPlan:
    """Plain-Python ``_best_grid``: the same search, one candidate at a time."""
    T = c.tiles
    sub = {"m": m, "k": k, "n": n}
    if passes > 1:
        sub[axis] = -(-sub[axis] // passes)
    sm, sk, sn = sub["m"], sub["k"], sub["n"]
    acc = axis == "k" and passes > 1
    reductions = 1 if axis == "k" or passes == 1 else passes
    best = least = None
    for pm in candidates(sm, T):
        for pn in candidates(sn, T):
            for pk in candidates(sk, T, small=4, factors=(1, 3)):
                if pm * pn * pk > T:
                    continue
                cyc, red, temp = (float(v) for v in grid_cost(sm, sk, sn, dt, c, acc, pm, pn, pk))
                total = passes * cyc + reductions * red
                if axis in ("m", "n") and passes > 1:
                    temp += m * n * dt / T
                row = (int(pm), int(pn), int(pk), total, temp)
                if temp <= budget and (best is None or total < best[3]):
                    best = row
                if least is None or temp < least[4]:
                    least = row
    pick = best or least
    return MatmulPlan(
        pick[0],
        pick[1],
        pick[2],
        axis if passes > 1 else "",
        passes,
        pick[3],
        pick[4],
        best is not None,
    )


def attention_phases(s, c, r, nb, which):
    """``_attention_phases`` from the whole tables: ``deal`` of ``attention_tables`` (every
    (head, chunk) row repeated), first key block and each later one."""
    tables = [
        deal(t, c.tiles)
        for t in _attention.attention_tables(s, r, nb, which, c.tiles, first_only=nb == 1)
    ]
    return tables[0], tables[-1]


def attention_cost(s, c, r, nb, inputs=None):
    """``_attention_cost`` from the dealt per-tile tables (the cost kernel's reference; it works
    from the step itself, so the kernel's ``inputs`` are not read)."""
    cyc, work = 0.0, np.zeros(c.tiles)
    x = (
        c.exchange_bytes_per_cycle_per_tile * _cal.EXCHANGE_EFFICIENCY
    )  # calibrated as in run_program
    for which in _attention._ATT_OPS:
        amp = which != "softmax"
        rate = (
            c.amp_flops_per_cycle_per_tile(s.dtype_bytes)
            if amp
            else c.fp32_flops_per_cycle_per_tile
        )
        first, rest = attention_phases(s, c, r, nb, which)
        for per, times in ((first, 1), (rest, nb - 1)):
            if times:
                comp = (
                    np.maximum(per[:, 0] / rate, per[:, 1] / c.sram_bytes_per_cycle_per_tile)
                    + per[:, -1] * c.vertex_overhead_cycles
                )
                if amp:  # an AMP phase's calibrated overhead and rearranging (tile_calibration)
                    comp = comp + np.where(
                        per[:, -1] > 0,
                        _cal.AMP_PHASE_OVERHEAD_CYCLES + per[:, 2] / _cal.REARRANGE_BYTES_PER_CYCLE,
                        0.0,
                    )
                cyc += times * (c.sync_cycles + comp.max() + (per[:, 2] / x).max())
        work = np.maximum(work, np.maximum(first[:, 4], rest[:, 4]))
    return cyc, float(work.max())


def _searches():
    return {
        (_matmul, "_best_grid"): best_grid_numpy,
        (_attention, "_attention_phases"): attention_phases,
        (_attention, "_attention_cost"): attention_cost,
    }


def exhaustive():
    """Plan with the reference searches in place of the kernels (the NumPy grid search, the
    attention costs from whole dealt tables); dealing still runs the ``_distribute`` kernel."""
    return swapped(_searches(), on_enter=clear_plan_cache)


def plain():
    """``exhaustive()`` with the plain ``distribute`` loop in place of the ``_distribute`` kernel."""
    return swapped(
        {**_searches(), (_base, "_distribute"): filling(_distribute_repeated, 1)},
        on_enter=clear_plan_cache,
    )
