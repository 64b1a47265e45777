"""Matmul planning: a grid of blocks, one per tile, run in serial passes when one pass does not fit.

An (m x k) @ (k x n) matmul is cut into a grid of ``pm x pn x pk`` blocks, one per tile; a
grid whose working set does not fit the budget runs as ``passes`` serial passes over blocks of
``k`` (FP32 partial sums accumulate across passes), of ``m`` or of ``n``. ``plan_matmul``
searches the grids (the ``_grid_search`` kernel; an exhaustive NumPy search and a plain-Python
loop, its references, are in ``tests/tileplan_reference.py``) with the calibrated costs
(``ipusim.tile_calibration``); ``map_matmul`` turns the chosen plan into supersteps.

Units: bytes, FLOP, cycles; per-tile arrays.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import numpy as np
from numba import njit

from .. import tile_params as _cal
from .._validate import choice, positive
from ..hardware import TileChip
from ..hardware import chip as _chip
from ..workloads import Op
from .base import PARTIAL_BYTES, OpPlan, budget_bytes, deal, dealt_phase
from .search import BudgetMemo, candidates, fewest, plan_cache

PASS_AXES = ("m", "n", "k")


def _splits(n: int, parts: int) -> np.ndarray:
    """Balanced split of n into ``parts`` integers (floor/ceil): the remainder imbalance."""
    return n // parts + (np.arange(parts) < n % parts)


class MatmulPlan(NamedTuple):
    """A matmul plan: grid ``(pm, pn, pk)`` of blocks, one per tile, run ``passes`` times over
    blocks of ``axis``; ``cycles`` the planner's estimate (largest blocks), ``temp_bytes``
    the largest per-tile working set, ``fits`` whether it is within the budget."""

    pm: int
    pn: int
    pk: int
    axis: str  # "" for one pass
    passes: int
    cycles: float
    temp_bytes: float
    fits: bool


def _weight_remote(T, pm, pn, pk):
    """Share of its weight block a tile must receive: weights are stored spread evenly over
    all ``T`` tiles (the storage layout, independent of the compute grid), so of a block
    read by ``pm`` of the ``pm pn pk`` tiles in use, each reader holds ``pm pn pk / (T pm)``
    (ASSUMPTION: the storage layout puts a block's bytes on its readers as far as the even
    spread allows). With every tile in use this is ``(pm - 1) / pm``."""
    return 1.0 - (pm * pn * pk) / (T * pm)


@njit(cache=True, error_model="numpy")
def _grid_search(
    sm,
    sk,
    sn,
    dt,
    T,
    cm,
    cn,
    ck,
    acc,
    passes,
    reductions,
    held,
    budget,
    in_share,
    vertex,
    two_per_flop,
    amp_overhead,
    rearrange,
    x,
    sync,
    red_per_elem,
):
    """Best grid of one pass count: the cost of every candidate (pm, pn, pk) of the
    ascending ``cm x cn x ck`` with ``pm pn pk <= T``, in C order, one at a time.

    Returns (pm, pn, pk, total cycles, working set, fits): the first grid of least total
    among those whose working set (plus ``held`` bytes) is within ``budget``, else the first
    of least working set. Preconditions: candidates ascending and >= 1. Per grid, on the
    largest block: compute ``2 mb kb nb / FLOP-rate`` plus a vertex, the AMP phase's calibrated
    overhead and rearranging of the received bytes; exchange of the input block (sent once,
    multicast, ASSUMPTION) and of the weight block gathered from the ``pm`` tiles that share it
    (``_weight_remote``); for ``pk > 1`` a reduction superstep over FP32 partials; ``acc``: the
    output block is an FP32 accumulator (passes over k). The result equals the exhaustive NumPy
    search of ``tests/tileplan_reference.py`` bit for bit (``in_share`` = dt (T-1)/T, ``two_per_flop`` =
    2 / AMP rate, ``red_per_elem`` = PARTIAL_BYTES / x + 1 / vector rate, computed by the caller).
    Since candidates ascend, the loops stop at the first product over ``T`` (the rest are over too);
    a grid over the budget with no fewer bytes than one seen before is not costed (it can be
    neither answer); once a grid fits, a (pm, pn) whose every pk costs at least the best total
    so far (a lower bound from ``pk <= T // (pm pn)``: the smallest k block, the least received
    bytes, no reduction; with a 1e-9 margin over rounding) is skipped (it cannot be the answer:
    a later grid replaces the best only with less total). Claim 10's 14,540 searches take about a
    fifth less time with it (0.62 s against 0.80 s, same run).
    """
    best_total, best_temp, bi, bj, bl = np.inf, 0.0, -1, -1, -1
    least_total, least_temp, li, lj, ll = 0.0, np.inf, -1, -1, -1
    # the skip's bound (see above): per pass, the fixed cycles and the cycles per received byte
    fixed, y, w, cut = (
        vertex + amp_overhead + sync,
        1.0 / rearrange + 1.0 / x,
        dt / T,
        passes * (1.0 - 1e-9),
    )
    kbs = np.empty(ck.size, dtype=np.int64)  # k block of each pk, once (not once per pm, pn)
    for d in range(ck.size):
        kbs[d] = -(-sk // ck[d])
    for a in range(cm.size):
        pm = cm[a]
        if pm > T:
            break
        mb = -(-sm // pm)
        for b in range(cn.size):
            pn = cn[b]
            if pm * pn > T:
                break
            nb = -(-sn // pn)
            if bi > 0:
                # once a grid fits, one with less total is all that can change the answer: skip
                # this (pm, pn) when a bound below every total of its pk (<= q) reaches the best
                q = T // (pm * pn)
                kq = -(-sk // q)
                low = kq * (two_per_flop * mb * nb + (mb * in_share + nb * (dt - pn * q * w)) * y)
                if (fixed + low) * cut >= best_total:
                    continue
            for d in range(ck.size):
                pk = ck[d]
                if pm * pn * pk > T:
                    break
                kb = kbs[d]
                red = pk > 1
                out_b = PARTIAL_BYTES if (red or acc) else dt
                part = (pk - 1) / pk * (mb * nb)
                temp = (
                    (mb * kb) * dt
                    + kb * nb * dt
                    + (mb * nb) * out_b
                    + (part * PARTIAL_BYTES if red else 0.0)
                )
                temp = temp + held
                if temp > budget and temp >= least_temp:
                    continue  # neither fits nor has fewer bytes than one seen: its cost is moot
                recv = mb * kb * in_share + kb * nb * dt * (1.0 - (pm * pn * pk) / (T * pm))
                cyc = (
                    vertex
                    + two_per_flop * (mb * kb) * nb
                    + amp_overhead
                    + recv / rearrange
                    + recv / x
                    + sync
                )
                red_cyc = sync + part * red_per_elem if red else 0.0
                total = passes * cyc + reductions * red_cyc
                if temp <= budget and total < best_total:
                    best_total, best_temp, bi, bj, bl = total, temp, pm, pn, pk
                if temp < least_temp:
                    least_total, least_temp, li, lj, ll = total, temp, pm, pn, pk
    if bi > 0:
        return bi, bj, bl, best_total, best_temp, True
    return li, lj, ll, least_total, least_temp, False


def _sub_dims(m, k, n, axis, passes):
    """(m, k, n) of one pass: the pass axis cut in ``passes`` (ceiling)."""
    if passes > 1:
        if axis == "m":
            return -(-m // passes), k, n
        if axis == "k":
            return m, -(-k // passes), n
        if axis == "n":
            return m, k, -(-n // passes)
    return m, k, n


# ``_grid_search`` results by their inputs: the same sub-matmul recurs under other budgets (the
# steps of a table, a training search's chips with less room), and one result holds for a range.
# 4,096 keys hold a few MB; the repeats come close together (claim 10: four times the keys
# would save 2% more of its 19,760 searches)
_GRIDS = BudgetMemo(maxsize=4096)


_RATES: dict = {}  # (id of a chip, dtype bytes) -> (the chip, calibration, _rates)


def _rates(c: TileChip, dt: int) -> tuple:
    """The chip's and the calibration's inputs of ``_grid_search`` after the budget, at ``dt``
    bytes per element, as ``_best_grid``'s key holds them (remembered for the chip object and
    the calibration in force: every search of a step asks for the same ones)."""
    cal = (_cal.EXCHANGE_EFFICIENCY, _cal.AMP_PHASE_OVERHEAD_CYCLES, _cal.REARRANGE_BYTES_PER_CYCLE)
    got = _RATES.get((id(c), dt))
    if got is not None and got[0] is c and got[1] == cal:
        return got[2]
    T = c.tiles
    x = c.exchange_bytes_per_cycle_per_tile * _cal.EXCHANGE_EFFICIENCY  # as run_program
    out = (
        dt * (T - 1) / T,
        float(c.vertex_overhead_cycles),
        2.0 / c.amp_flops_per_cycle_per_tile(dt),
        float(_cal.AMP_PHASE_OVERHEAD_CYCLES),
        float(_cal.REARRANGE_BYTES_PER_CYCLE),
        x,
        float(c.sync_cycles),
        PARTIAL_BYTES / x + 1.0 / c.fp32_flops_per_cycle_per_tile,
    )
    if len(_RATES) >= 64:
        _RATES.clear()
    _RATES[(id(c), dt)] = (c, cal, out)
    return out


def _best_grid(m, k, n, dt, c: TileChip, axis: str, passes: int, budget: float) -> MatmulPlan:
    """Fastest grid for ``passes`` passes over ``axis`` (``_grid_search`` over all candidate
    grids); the one with the least working set when none fits ``budget``. Memoised by
    ``_GRIDS`` (``search.BudgetMemo``: a result is reused only for budgets it must hold for)."""
    T = c.tiles
    sm, sk, sn = _sub_dims(m, k, n, axis, passes)
    held = m * n * dt / T if axis in ("m", "n") and passes > 1 else 0.0  # output finished so far
    # every input of the search but the budget, by value (the chip's rates and the calibration
    # in force among them): the key of the budget memo
    key = (
        sm,
        sk,
        sn,
        dt,
        T,
        axis == "k" and passes > 1,
        passes,
        1 if axis == "k" or passes == 1 else passes,
        float(held),
        *_rates(c, dt),
    )
    budget = float(budget)
    found = _GRIDS.get(key, budget)
    if found is None:
        found = _grid_search(
            *key[:5],
            candidates(sm, T),
            candidates(sn, T),
            candidates(sk, T, small=4, factors=(1, 3)),
            *key[5:9],
            budget,
            *key[9:],
        )
        _GRIDS.put(key, budget, found, bool(found[5]), float(found[4]))
    pm, pn, pk, total, temp, fits = found
    return MatmulPlan(
        int(pm),
        int(pn),
        int(pk),
        axis if passes > 1 else "",
        passes,
        float(total),
        float(temp),
        bool(fits),
    )


_NO_FIT = MatmulPlan(0, 0, 0, "", 0, np.inf, np.inf, False)  # a probe known not to fit


def _least_bytes(m, k, n, dt, T: int, axis: str, passes: int) -> float:
    """A lower bound on the working set (plus held output) of every grid ``_best_grid`` tries
    for ``passes`` passes over ``axis``: with blocks ``mb >= sm / pm``, ``kb >= sk / pk``,
    ``nb >= sn / pn`` and ``pm pn pk <= T``, the three block terms ``a = dt mb kb``,
    ``b = dt kb nb``, ``c = out mb nb`` have ``a b c >= dt^2 out (sm sk sn / T)^2``, and
    ``a + b + c >= 3 (a b c)^(1/3)`` (AM-GM); the FP32 partials add more, never less."""
    sm, sk, sn = _sub_dims(m, k, n, axis, passes)
    acc = axis == "k" and passes > 1
    out_b = PARTIAL_BYTES if acc else min(dt, PARTIAL_BYTES)  # the least output bytes a grid has
    held = m * n * dt / T if axis in ("m", "n") and passes > 1 else 0.0
    return 3.0 * (dt * dt * out_b) ** (1 / 3) * (sm * sk * sn / T) ** (2 / 3) + held


def _probe(m, k, n, dt, c: TileChip, axis: str, passes: int, budget: float) -> MatmulPlan:
    """``_best_grid`` as ``fewest`` asks it: ``fewest`` reads only whether a probe fits and
    keeps only plans that fit, so a pass count whose working set cannot fit ``budget`` by the
    bound of ``_least_bytes`` is answered 'does not fit' without the search (claim 10: a fifth
    of the searches; the bound is checked with a 1e-9 margin, far above its rounding)."""
    if _least_bytes(m, k, n, dt, c.tiles, axis, passes) * (1.0 - 1e-9) > budget:
        return _NO_FIT
    return _best_grid(m, k, n, dt, c, axis, passes, budget)


@lru_cache(maxsize=4096)
def _pass_counts(dim: int) -> tuple:
    """Pass counts tried along one axis, ascending: 2..16, then 3 and 1 times powers of two,
    and the whole dimension (memoised: the same dimensions recur in every layer and step)."""
    return tuple(int(p) for p in candidates(dim, dim, small=16, factors=(1, 3)) if p > 1)


@plan_cache(maxsize=4096)
def _plan_matmul(
    m, k, n, dt, c: TileChip, passes: int = 0, axis: str = "k", budget: float = -1.0
) -> MatmulPlan:
    """The matmul plan: the fastest of the one-pass plan (if any grid fits the budget) and,
    along each axis, the fewest passes that fit. ``passes > 0`` forces that many
    passes over ``axis``. ``budget < 0`` means ``budget_bytes(c)``."""
    budget = budget_bytes(c) if budget < 0 else budget
    if passes:
        return _best_grid(m, k, n, dt, c, axis, passes, budget)
    one = _best_grid(m, k, n, dt, c, "", 1, budget)
    # the fastest plan that fits: passes shrink the blocks, so under a tight budget two passes
    # can reach a grid that exchanges and rearranges less than any one-pass grid that fits
    best = one if one.fits else None
    for ax, dim in (("k", k), ("m", m), ("n", n)):
        plan = fewest(_pass_counts(dim), lambda p, ax=ax: _probe(m, k, n, dt, c, ax, p, budget))
        if plan is not None and (best is None or plan.cycles < best.cycles):
            best = plan
    return best or one


def plan_matmul(
    c,
    m: int,
    k: int,
    n: int,
    *,
    dtype_bytes: int = 2,
    passes: int | None = None,
    axis: str = "k",
    budget: float | None = None,
) -> MatmulPlan:
    """The planner's choice for an (m x k) @ (k x n) matmul on tile chip ``c``.

    By default: the fastest of one pass (when a grid's working set fits ``budget`` bytes per
    tile, default ``budget_bytes(c)``) and, along each axis, the fewest passes that fit. ``passes``
    forces that many serial passes over ``axis`` ("m", "n" or "k"), the fastest grid for it.
    """
    c = _chip(c)
    if not isinstance(c, TileChip):
        raise ValueError(f"plan_matmul needs a tile chip, got {c.name!r}")
    m, k, n = (positive(nm, v, integer=True) for nm, v in (("m", m), ("k", k), ("n", n)))
    dt = positive("dtype_bytes", dtype_bytes, integer=True)
    choice("axis", axis, PASS_AXES)
    if passes is not None:
        passes = positive("passes", passes, integer=True)
        if passes > {"m": m, "n": n, "k": k}[axis]:
            raise ValueError(f"passes ({passes}) must not exceed the {axis} dimension")
    b = -1.0 if budget is None else positive("budget", budget)
    return _plan_matmul(m, k, n, dt, c, passes or 0, axis, float(b))


def _matmul_pass(m, k, n, dt, T, pm, pn, pk, acc):
    """Piece table (one row per block) of one pass of an (m x k) @ (k x n) matmul (the
    weights column is zero: weights are stored spread over all tiles, see ``map_matmul``),
    and each block's output area."""
    # blocks in C order of (m block, k block, n block): each column is worked out on the block
    # sizes broadcast over that (pm, pk, pn) grid, the same products in the same order as on
    # the raveled (np.meshgrid(..., indexing="ij")) sizes, written into the table in place
    mi = _splits(m, pm).astype(float)[:, None, None]
    kl = _splits(k, pk).astype(float)[None, :, None]
    nj = _splits(n, pn).astype(float)[None, None, :]
    P = pm * pk * pn
    remote_w = _weight_remote(T, pm, pn, pk)
    # each byte leaves its owner once (multicast); with pm = 1 only the bytes off their reader
    send = (m * k * dt * (T - 1) / T + k * n * dt * (1.0 if pm > 1 else remote_w)) / P
    out_b = PARTIAL_BYTES if (pk > 1 or acc) else dt
    mk, kn, mn = mi * kl, kl * nj, mi * nj
    table = np.empty((pm, pk, pn, 6))
    table[..., 0] = 2 * mi * kl * nj
    table[..., 1] = (mk + kn) * dt
    table[..., 2] = mk * dt * (T - 1) / T + kn * dt * remote_w
    table[..., 3] = send
    table[..., 4] = mk * dt + kn * dt + mn * out_b
    table[..., 5] = 0.0
    return table.reshape(P, 6), np.broadcast_to(mn, (pm, pk, pn)).ravel()


def _reduce_table(area, pk):
    """Reduction of FP32 partials: each of the pk tiles of a block owns 1/pk of its output."""
    part = area / pk
    table = np.empty((area.size, 6))
    table[:, 0] = (pk - 1) * part
    table[:, 1] = 2 * pk * part * PARTIAL_BYTES
    table[:, 2] = table[:, 3] = (pk - 1) * part * PARTIAL_BYTES
    table[:, 4:] = 0.0
    return table


@plan_cache(maxsize=1024)
def _matmul_dealt(m, k, n, dt, T, pm, pn, pk, acc):
    """Dealt per-tile tables (pass, reduction or None) of one pass of an (m x k) @ (k x n)
    matmul on grid (pm, pn, pk), read-only: memoised, since the same shape and grid recur
    (Q, K, V and the output projection; the rounds of ``plan_step``; steps of one table)."""
    table, area = _matmul_pass(m, k, n, dt, T, pm, pn, pk, acc)
    per = deal(table, T)
    red = deal(_reduce_table(area, pk), T) if pk > 1 else None
    for a in (per, red):
        if a is not None:
            a.flags.writeable = False
    return per, red


def map_matmul(
    op: Op,
    c: TileChip,
    dt: int,
    tied: bool = False,
    live_bytes: float = 0.0,
    budget: float | None = None,
) -> OpPlan:
    """Matmul: the planner's grid of blocks (one per tile) in serial passes (see ``_plan_matmul``).

    ``live_bytes``: the op's input held per tile while it runs (beside the working set);
    ``budget``: bytes per tile for the working set (default ``budget_bytes(c)``).

    The plan is memoised on these values (the same shapes recur: the steps of a decode table
    share their batch, a chip's steps their weights) and read-only: every array it holds is
    shared with the callers handed the same plan (tests/test_tileplan_memo.py)."""
    budget = budget_bytes(c) if budget is None else budget
    return _map_matmul(op, c, dt, bool(tied), float(live_bytes), float(budget))


@plan_cache(maxsize=128)  # copies of the layouts below: a few hundred bytes each
def _map_matmul(op: Op, c: TileChip, dt: int, tied: bool, live_bytes: float, budget: float):
    pl = _plan_matmul(op.m, op.k, op.n, dt, c, 0, "k", budget)
    return _matmul_layout(op, c, dt, tied, live_bytes, pl).with_budget(budget)


# a plan holds a few per-tile arrays: about 50 kB on 1,472 tiles; with the copies above keeping
# theirs alive, at most 256 layouts (13 MB) are held, as 256 plans were before the split
@plan_cache(maxsize=128)
def _matmul_layout(op: Op, c: TileChip, dt: int, tied: bool, live_bytes: float, pl: MatmulPlan):
    """``map_matmul``'s plan for the planner's choice ``pl``, whatever budget it was chosen
    under (the budget is only written down in the plan): the steps of a table whose budgets
    differ but whose plans do not share one layout."""
    m, k, n, T = op.m, op.k, op.n, c.tiles
    pm, pn, pk, axis, P = pl.pm, pl.pn, pl.pk, pl.axis, pl.passes
    dims = {"m": m, "k": k, "n": n}
    per_size, phases = {}, []
    # Storage layout: every instance's k x n weights spread evenly over all tiles, whatever
    # the compute grid (a batch whose grid uses few tiles does not pile weights onto them);
    # each pass gathers its blocks from there (``_weight_remote``). Tied weights are the
    # embedding table, stored by ``map_embedding``.
    weights = np.full(T, 0.0 if tied else op.count * k * n * dt / T)
    # passes of one size are one Phase object repeated; the first dim % P passes are one
    # larger than the rest (``_splits``)
    if P == 1:
        runs = [(0, 1)]
    else:
        q, r = divmod(dims[axis], P)
        runs = [(v, t) for v, t in ((q + 1, r), (q, P - r)) if t]
    for size, times in runs:
        if size not in per_size:
            d = dict(dims)
            if P > 1:
                d[axis] = size
            per, red = _matmul_dealt(
                d["m"], d["k"], d["n"], dt, T, pm, pn, pk, axis == "k" and P > 1
            )
            per_size[size] = (
                dealt_phase(op.name, "matmul", True, per, dt),
                per,
                red if red is None else dealt_phase(op.name, "reduce", False, red),
                red,
            )
        ph, per, rph, red = per_size[size]
        # a reduction after every pass, or after the last one only for passes over k
        phases += [ph] * times if rph is None or axis == "k" else [ph, rph] * times
    if rph is not None and axis == "k":
        phases.append(rph)
    work = np.max(
        [per[:, 4] + (0.0 if red is None else red[:, 2]) for _, per, _, red in per_size.values()],
        axis=0,
    )
    live = live_bytes + (m * n * dt / T if axis in ("m", "n") and P > 1 else 0.0)
    part = f"m/{pm} x n/{pn} x k/{pk} on {pm * pn * pk} tiles"
    if P > 1:
        part += f", {P} passes over {axis}"
    sub = {a: -(-dims[a] // (P if a == axis else 1)) for a in dims}
    block = (-(-sub["m"] // pm), -(-sub["k"] // pk), -(-sub["n"] // pn))
    plan = OpPlan(
        op,
        part,
        pm * pn * pk,
        phases,
        weights,
        work + live,
        over_budget=not pl.fits,
        passes=P,
        pass_axis=axis,
        block=block,
        working_set_bytes=float(work.max()),
    )
    plan.stream_bytes = 0.0 if tied else op.weight_bytes / op.count
    plan.freeze()
    return plan
