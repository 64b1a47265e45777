"""Tile memory planner: each op of a step cut into pieces, dealt to tiles, run in serial passes.

1. **Pieces.** An op is cut into pieces (a block of a matmul, a chunk of query rows of one
   head of one sequence, a row of a layer norm, one token's embedding rows) and piece ``i``
   goes to tile ``i * tiles // pieces`` (Poplar maps work statically, at compile time). When
   the pieces do not divide evenly some tiles get one more piece than others, or are idle.
2. **Temporary budget.** While an op runs, a tile holds its *working set*: gathered input
   and weight blocks, output blocks or FP32 partial sums, attention score blocks. The
   planner keeps the working set within ``AVAILABLE_MEMORY_PROPORTION`` of the tile's SRAM
   (Poplar's ``availableMemoryProportion``, POPLIBS-OPT).
3. **Serial passes.** A matmul whose working set does not fit in one pass (one block per
   tile) runs as ``passes`` serial passes over blocks of ``k`` (FP32 partial sums accumulate
   across passes), of ``m`` or of ``n``: along each axis the fewest passes that fit, and of
   those and the one-pass plan (when it fits) the fastest, ranked with the calibrated costs
   (``ipusim.tile_calibration``). Each pass is a superstep (sync, exchange of its input and
   weight blocks, compute), plus a reduction superstep for a grid split over ``k`` (once at the end
   for passes over ``k``, after every pass otherwise). Weights are gathered again in every
   pass that needs them. Weights are *stored* spread evenly over all tiles, a layout
   independent of the compute grid (ASSUMPTION: Poplar may lay a weight out for its
   matmul, but an even spread keeps a small batch, whose grid uses few tiles, from piling
   weights onto them); each pass's exchange gathers its weight blocks from that layout.
4. **Online softmax.** Attention (forward, prefill) runs over ``key_blocks`` blocks of keys
   with an online softmax (running max and sum per query row, the FP32 context accumulator
   rescaled for every block after the first, Milakov & Gimelshein 2018; Dao et al. 2022), so
   the scores are never held whole. Each key block is a pass of each of the three attention
   ops (scores, softmax, context), each a superstep. Decode (one query row) splits its keys
   over tiles instead (ASSUMPTION: the merge of split keys' partial softmaxes is not costed).
5. **Live inputs.** Besides its working set an op holds its input activation, spread over
   all tiles, when that input is not the residual stream (which ``tiles`` counts as live
   throughout): attention holds Q, K and V; ``attn_out`` the context; ``ffn_down`` the
   activation. Passes over ``m`` or ``n`` also hold the output finished so far.

Every op's plan (``OpPlan``) says its partition, passes and block shape; its ``temp`` is the
per-tile temporary peak (working set + live inputs), which ``tiles`` adds to the always-live
bytes. ASSUMPTIONs are marked.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

import numpy as np
from numba import njit

from . import tile_calibration as _cal
from ._validate import choice, positive
from .hardware import TileChip
from .hardware import chip as _chip
from .workloads import Op, Step

AVAILABLE_MEMORY_PROPORTION = 0.6  # share of tile SRAM an op's working set may use (POPLIBS-OPT)
PARTIAL_BYTES = 4  # ASSUMPTION: matmul partial sums and the attention accumulator in FP32 (AMP accumulates in FP32)
RESCALE_FLOPS_PER_ROW = 3  # ASSUMPTION: per query row and key block: new max, exp(old - new), sum update
PASS_AXES = ("m", "n", "k")
ENGINES = ("numba", "python")
_FAST = True  # False inside ``exhaustive()``: the searches before their kernels, for tests and benchmarks
# ASSUMPTION: non-matmul ops (softmax, norms, GELU, reductions) run on the vector unit at the
# FP32 rate (fp32_flops_per_cycle_per_tile); matmuls and attention products use the AMP FP16 rate.


# ------------------------------------------------------------------------------------------
# Dealing pieces to tiles: kernel and plain-Python reference
# ------------------------------------------------------------------------------------------

@njit(cache=True)
def _distribute(work, n_tiles, out):
    """Deal pieces to tiles in order: piece i goes to tile (i * n_tiles) // P; sum per tile.

    Preconditions: ``work`` is (P, K) float64 with P >= 1; ``out`` is (n_tiles, K + 1) zeros;
    the last column of ``out`` receives the number of pieces per tile.
    """
    P, K = work.shape
    for i in range(P):
        t = (i * n_tiles) // P
        for j in range(K):
            out[t, j] += work[i, j]
        out[t, K] += 1.0


def _distribute_reference(work, n_tiles):
    """Plain-Python reference of ``_distribute``; returns the (n_tiles, K + 1) array."""
    P, K = work.shape
    out = np.zeros((n_tiles, K + 1))
    for i in range(P):
        t = (i * n_tiles) // P
        for j in range(K):
            out[t, j] += work[i, j]
        out[t, K] += 1.0
    return out


def _deal_same(row, P: int, n_tiles: int, reference: bool) -> np.ndarray:
    """``_deal`` of ``P`` identical pieces ``row`` (a count per tile times the row; the
    reference deals the P rows one at a time)."""
    row = np.asarray(row, dtype=np.float64)
    if reference:
        return _deal(np.tile(row, (P, 1)), n_tiles, True)
    counts = np.bincount(np.arange(P, dtype=np.int64) * n_tiles // P, minlength=n_tiles).astype(np.float64)
    return np.column_stack([counts[:, None] * row[None, :], counts])


def _deal(pieces: np.ndarray, n_tiles: int, reference: bool) -> np.ndarray:
    pieces = np.ascontiguousarray(pieces, dtype=np.float64)
    if reference:
        return _distribute_reference(pieces, n_tiles)
    out = np.zeros((n_tiles, pieces.shape[1] + 1))
    _distribute(pieces, n_tiles, out)
    return out


# Columns of a piece table: what one piece costs and needs.
_COLS = ("flops", "load", "recv", "send", "temp", "weights")


@dataclass
class Phase:
    """One superstep of one op instance: per-tile arrays of length ``tiles``."""

    op: str
    label: str  # "matmul", "reduce", "attention", ...
    amp: bool  # True: matmul unit (AMP) FP16 rate; False: vector rate
    flops: np.ndarray  # FLOP per tile
    load: np.ndarray  # SRAM bytes streamed per tile
    vertices: np.ndarray  # pieces (vertices) per tile
    recv: np.ndarray  # bytes received in the exchange before the compute
    send: np.ndarray  # bytes sent in that exchange


@dataclass
class OpPlan:
    """How one op is laid out over the tiles. Byte arrays are per tile."""

    op: Op
    partition: str  # human-readable partition
    pieces: int  # pieces per pass
    phases: list  # supersteps of one instance, in order (all passes)
    weights: np.ndarray  # always-live weight bytes, all instances
    temp: np.ndarray  # peak temporary bytes while one instance runs (working set + live inputs)
    stream_bytes: float = 0.0  # bytes copied from off-chip DRAM per instance (streaming mode)
    over_budget: bool = False  # working set exceeds availableMemoryProportion even at the most passes tried
    passes: int = 1  # serial passes per instance
    pass_axis: str = ""  # "m", "n", "k" (matmul), "keys" (attention) or "" (one pass)
    block: tuple = ()  # largest per-tile block: (m, k, n) rows x contraction x columns; attention (rows, keys)
    working_set_bytes: float = 0.0  # largest per-tile working set (held to the budget)
    budget_bytes: float = 0.0  # the working-set budget the planner held this op to, per tile

    @property
    def exchange_bytes(self) -> np.ndarray:
        """Bytes each tile receives per instance (all passes)."""
        return sum(p.recv for p in self.phases)

    @property
    def temp_bytes(self) -> float:
        """Largest per-tile temporary bytes of one instance."""
        return float(self.temp.max())


def _phase(op, label, amp, per_tile) -> Phase:
    """A superstep from dealt per-tile sums; sends are spread evenly over all tiles (the
    op's input is spread over all of them)."""
    f, ld, rv, sd = (per_tile[:, i] for i in range(4))
    return Phase(op, label, amp, f, ld, per_tile[:, -1], rv, np.full(sd.size, sd.sum() / sd.size))


def _splits(n: int, parts: int) -> np.ndarray:
    """Balanced split of n into ``parts`` integers (floor/ceil): the remainder imbalance."""
    return n // parts + (np.arange(parts) < n % parts)


@lru_cache(maxsize=8192)
def _candidates(dim: int, cap: int, small: int = 32, factors=(1, 3, 23)) -> np.ndarray:
    """Split counts tried for one dimension: every count up to ``small``, then ``factors``
    times powers of two (1,472 = 64 x 23), and the whole dimension. Ascending int64,
    read-only (memoised: the same dimensions recur in every layer and step)."""
    top = min(dim, cap)
    c = set(range(1, min(small, top) + 1)) | {top}
    for f in factors:
        p = f
        while p <= top:
            c.add(p)
            p *= 2
    out = np.array(sorted(c), dtype=np.int64)
    out.flags.writeable = False
    return out


def budget_bytes(c: TileChip) -> float:
    """Bytes of one tile an op's working set may use: ``AVAILABLE_MEMORY_PROPORTION`` x SRAM."""
    return AVAILABLE_MEMORY_PROPORTION * c.sram_per_tile_bytes


# ------------------------------------------------------------------------------------------
# Matmul: grid of blocks x serial passes
# ------------------------------------------------------------------------------------------

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


def _grid_cost(m, k, n, dt, c: TileChip, acc: bool, pm, pn, pk):
    """One pass of an (m x k) @ (k x n) matmul on grids (pm, pn, pk) (broadcast arrays).

    Returns (pass cycles, reduction cycles, working-set bytes) per grid, on the largest
    block: compute ``2 mb kb nb / FLOP-rate`` plus a vertex; exchange of the input block
    (sent once, multicast, ASSUMPTION) and of the weight block gathered from the ``pm`` tiles
    that share it; for ``pk > 1`` a reduction superstep over FP32 partials. ``acc``: the
    output block is an FP32 accumulator (passes over k).
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
    cycles = (c.vertex_overhead_cycles + (2.0 / c.fp16_flops_per_cycle_per_tile) * (mb * kb) * nb
              + _cal.AMP_PHASE_OVERHEAD_CYCLES + recv / _cal.REARRANGE_BYTES_PER_CYCLE
              + recv / x + c.sync_cycles)
    red_cycles = red * (c.sync_cycles + part * (PARTIAL_BYTES / x + 1.0 / c.fp32_flops_per_cycle_per_tile))
    temp = (mb * kb) * dt + kb * nb * dt + (mb * nb) * out_b + red * part * PARTIAL_BYTES
    return cycles, red_cycles, temp


@njit(cache=True)
def _grid_search(sm, sk, sn, dt, T, cm, cn, ck, acc, passes, reductions, held, budget,
                 in_share, vertex, two_per_flop, amp_overhead, rearrange, x, sync, red_per_elem):
    """Best grid of one pass count: ``_grid_cost`` of every candidate (pm, pn, pk) of the
    ascending ``cm x cn x ck`` with ``pm pn pk <= T``, in C order, one at a time.

    Returns (pm, pn, pk, total cycles, working set, fits): the first grid of least total
    among those whose working set (plus ``held`` bytes) is within ``budget``, else the first
    of least working set. Preconditions: candidates ascending and >= 1. The arithmetic is
    ``_grid_cost``'s, term for term in the same order, so the result equals
    ``_best_grid_numpy`` bit for bit (``in_share`` = dt (T-1)/T, ``two_per_flop`` =
    2 / AMP rate, ``red_per_elem`` = PARTIAL_BYTES / x + 1 / vector rate, computed by the caller).
    Since candidates ascend, the loops stop at the first product over ``T`` (the rest are over too).
    """
    best_total, best_temp, bi, bj, bl = np.inf, 0.0, -1, -1, -1
    least_total, least_temp, li, lj, ll = 0.0, np.inf, -1, -1, -1
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
            for d in range(ck.size):
                pk = ck[d]
                if pm * pn * pk > T:
                    break
                kb = -(-sk // pk)
                red = pk > 1
                out_b = PARTIAL_BYTES if (red or acc) else dt
                recv = mb * kb * in_share + kb * nb * dt * (1.0 - (pm * pn * pk) / (T * pm))
                part = (pk - 1) / pk * (mb * nb)
                cyc = (vertex + two_per_flop * (mb * kb) * nb + amp_overhead + recv / rearrange
                       + recv / x + sync)
                red_cyc = sync + part * red_per_elem if red else 0.0
                temp = (mb * kb) * dt + kb * nb * dt + (mb * nb) * out_b + (part * PARTIAL_BYTES if red else 0.0)
                temp = temp + held
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
    sub = {"m": m, "k": k, "n": n}
    if passes > 1:
        sub[axis] = -(-sub[axis] // passes)
    return sub["m"], sub["k"], sub["n"]


def _best_grid(m, k, n, dt, c: TileChip, axis: str, passes: int, budget: float) -> MatmulPlan:
    """Fastest grid for ``passes`` passes over ``axis`` (``_grid_search`` over all candidate
    grids); the one with the least working set when none fits ``budget``."""
    if not _FAST:
        return _best_grid_numpy(m, k, n, dt, c, axis, passes, budget)
    T = c.tiles
    sm, sk, sn = _sub_dims(m, k, n, axis, passes)
    x = c.exchange_bytes_per_cycle_per_tile * _cal.EXCHANGE_EFFICIENCY  # as _grid_cost
    held = m * n * dt / T if axis in ("m", "n") and passes > 1 else 0.0  # output finished so far
    pm, pn, pk, total, temp, fits = _grid_search(
        sm, sk, sn, dt, T, _candidates(sm, T), _candidates(sn, T), _candidates(sk, T, small=4, factors=(1, 3)),
        axis == "k" and passes > 1, passes, 1 if axis == "k" or passes == 1 else passes, float(held),
        float(budget), dt * (T - 1) / T, float(c.vertex_overhead_cycles), 2.0 / c.fp16_flops_per_cycle_per_tile,
        float(_cal.AMP_PHASE_OVERHEAD_CYCLES), float(_cal.REARRANGE_BYTES_PER_CYCLE), x, float(c.sync_cycles),
        PARTIAL_BYTES / x + 1.0 / c.fp32_flops_per_cycle_per_tile)
    return MatmulPlan(int(pm), int(pn), int(pk), axis if passes > 1 else "", passes, float(total), float(temp), bool(fits))


def _best_grid_numpy(m, k, n, dt, c: TileChip, axis: str, passes: int, budget: float) -> MatmulPlan:
    """``_best_grid`` vectorised with NumPy over every candidate grid at once (the planner
    before the kernel; the exhaustive search the tests and benchmarks hold the kernel to)."""
    T = c.tiles
    sub = {"m": m, "k": k, "n": n}
    if passes > 1:
        sub[axis] = -(-sub[axis] // passes)
    sm, sk, sn = sub["m"], sub["k"], sub["n"]
    cm, cn, ck = _candidates(sm, T), _candidates(sn, T), _candidates(sk, T, small=4, factors=(1, 3))
    # one block per tile: only grids that fit the tiles, in C order of (pm, pn, pk)
    im, jn, lk = np.nonzero((cm[:, None, None] * cn[None, :, None]) * ck[None, None, :] <= T)
    pm, pn, pk = cm[im], cn[jn], ck[lk]
    cyc, red, temp = _grid_cost(sm, sk, sn, dt, c, axis == "k" and passes > 1, pm, pn, pk)
    reductions = 1 if axis == "k" or passes == 1 else passes
    total = passes * cyc + reductions * red
    if axis in ("m", "n") and passes > 1:
        temp = temp + m * n * dt / T  # output finished so far, spread over the tiles
    feasible = temp <= budget
    i = int(np.argmin(np.where(feasible, total, np.inf)) if feasible.any() else np.argmin(temp))
    return MatmulPlan(int(pm[i]), int(pn[i]), int(pk[i]), axis if passes > 1 else "", passes,
                      float(total[i]), float(temp[i]), bool(feasible.any()))


def _best_grid_reference(m, k, n, dt, c: TileChip, axis: str, passes: int, budget: float) -> MatmulPlan:
    """Plain-Python reference of ``_best_grid``: the same search, one candidate at a time."""
    T = c.tiles
    sub = {"m": m, "k": k, "n": n}
    if passes > 1:
        sub[axis] = -(-sub[axis] // passes)
    sm, sk, sn = sub["m"], sub["k"], sub["n"]
    acc = axis == "k" and passes > 1
    reductions = 1 if axis == "k" or passes == 1 else passes
    best = least = None
    for pm in _candidates(sm, T):
        for pn in _candidates(sn, T):
            for pk in _candidates(sk, T, small=4, factors=(1, 3)):
                if pm * pn * pk > T:
                    continue
                cyc, red, temp = (float(v) for v in _grid_cost(sm, sk, sn, dt, c, acc, pm, pn, pk))
                total = passes * cyc + reductions * red
                if axis in ("m", "n") and passes > 1:
                    temp += m * n * dt / T
                row = (int(pm), int(pn), int(pk), total, temp)
                if temp <= budget and (best is None or total < best[3]):
                    best = row
                if least is None or temp < least[4]:
                    least = row
    pick = best or least
    return MatmulPlan(pick[0], pick[1], pick[2], axis if passes > 1 else "", passes, pick[3], pick[4], best is not None)


def _pass_counts(dim: int) -> list:
    """Pass counts tried along one axis, ascending: 2..16, then 3 and 1 times powers of two,
    and the whole dimension."""
    return [int(p) for p in _candidates(dim, dim, small=16, factors=(1, 3)) if p > 1]


@lru_cache(maxsize=4096)
def _plan_matmul(m, k, n, dt, c: TileChip, passes: int = 0, axis: str = "k", budget: float = -1.0) -> MatmulPlan:
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
        plan = _fewest(_pass_counts(dim), lambda p, ax=ax: _best_grid(m, k, n, dt, c, ax, p, budget))
        if plan is not None and (best is None or plan.cycles < best.cycles):
            best = plan
    return best or one


def clear_plan_cache() -> None:
    """Forget cached matmul plans (``tile_calibration.overrides`` calls it: plans are ranked
    with the calibrated costs, so a changed parameter can change the plan)."""
    _plan_matmul.cache_clear()
    _matmul_dealt.cache_clear()


@contextmanager
def exhaustive():
    """Plan with the searches the kernels replaced (``_best_grid_numpy``, the attention costs
    from whole piece tables), the plan cache cleared on entry and exit: for the tests that
    hold the fast planner to them, bit for bit, and for the benchmarks that time both."""
    global _FAST
    old, _FAST = _FAST, False
    clear_plan_cache()
    try:
        yield
    finally:
        _FAST = old
        clear_plan_cache()


def _fewest(counts: list, plan_for):
    """The plan for the smallest count in ascending ``counts`` whose plan fits (bisection:
    a plan's working set shrinks as the count grows); None if even the largest does not."""
    if not counts:
        return None
    first = plan_for(counts[0])
    if first[-1]:
        return first
    lo, hi, found = 1, len(counts) - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        plan = plan_for(counts[mid])
        if plan[-1]:
            found, hi = plan, mid - 1
        else:
            lo = mid + 1
    return found


def plan_matmul(c, m: int, k: int, n: int, *, dtype_bytes: int = 2, passes: int | None = None,
                axis: str = "k", budget: float | None = None) -> MatmulPlan:
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
    weights column is zero: weights are stored spread over all tiles, see ``map_matmul``)."""
    mi, kl, nj = np.meshgrid(_splits(m, pm), _splits(k, pk), _splits(n, pn), indexing="ij")
    mi, kl, nj = mi.ravel().astype(float), kl.ravel().astype(float), nj.ravel().astype(float)
    P = mi.size
    remote_w = _weight_remote(T, pm, pn, pk)
    # each byte leaves its owner once (multicast); with pm = 1 only the bytes off their reader
    send = (m * k * dt * (T - 1) / T + k * n * dt * (1.0 if pm > 1 else remote_w)) / P
    out_b = PARTIAL_BYTES if (pk > 1 or acc) else dt
    table = np.column_stack([
        2 * mi * kl * nj, (mi * kl + kl * nj) * dt,
        mi * kl * dt * (T - 1) / T + kl * nj * dt * remote_w, np.full(P, send),
        mi * kl * dt + kl * nj * dt + mi * nj * out_b, np.zeros(P),
    ])
    return table, mi * nj


def _reduce_table(area, pk):
    """Reduction of FP32 partials: each of the pk tiles of a block owns 1/pk of its output."""
    part = area / pk
    z = np.zeros(area.size)
    return np.column_stack([(pk - 1) * part, 2 * pk * part * PARTIAL_BYTES, (pk - 1) * part * PARTIAL_BYTES,
                            (pk - 1) * part * PARTIAL_BYTES, z, z])


@lru_cache(maxsize=1024)
def _matmul_dealt(m, k, n, dt, T, pm, pn, pk, acc, ref):
    """Dealt per-tile tables (pass, reduction or None) of one pass of an (m x k) @ (k x n)
    matmul on grid (pm, pn, pk), read-only: memoised, since the same shape and grid recur
    (Q, K, V and the output projection; the rounds of ``plan_step``; steps of one table)."""
    table, area = _matmul_pass(m, k, n, dt, T, pm, pn, pk, acc)
    per = _deal(table, T, ref)
    red = _deal(_reduce_table(area, pk), T, ref) if pk > 1 else None
    for a in (per, red):
        if a is not None:
            a.flags.writeable = False
    return per, red


def map_matmul(op: Op, c: TileChip, dt: int, ref: bool, tied: bool = False, live_bytes: float = 0.0,
               budget: float | None = None) -> OpPlan:
    """Matmul: the planner's grid of blocks (one per tile) in serial passes (see ``_plan_matmul``).

    ``live_bytes``: the op's input held per tile while it runs (beside the working set);
    ``budget``: bytes per tile for the working set (default ``budget_bytes(c)``)."""
    m, k, n, T = op.m, op.k, op.n, c.tiles
    budget = budget_bytes(c) if budget is None else budget
    pl = _plan_matmul(m, k, n, dt, c, 0, "k", float(budget))
    pm, pn, pk, axis, P = pl.pm, pl.pn, pl.pk, pl.axis, pl.passes
    dims = {"m": m, "k": k, "n": n}
    sizes = _splits(dims[axis], P) if P > 1 else np.array([0])
    per_size, phases = {}, []
    # Storage layout: every instance's k x n weights spread evenly over all tiles, whatever
    # the compute grid (a batch whose grid uses few tiles does not pile weights onto them);
    # each pass gathers its blocks from there (``_weight_remote``). Tied weights are the
    # embedding table, stored by ``map_embedding``.
    weights = np.full(T, 0.0 if tied else op.count * k * n * dt / T)
    for i, size in enumerate(sizes):
        size = int(size)
        if size not in per_size:
            d = dict(dims)
            if P > 1:
                d[axis] = size
            per, red = _matmul_dealt(d["m"], d["k"], d["n"], dt, T, pm, pn, pk, axis == "k" and P > 1, ref)
            per_size[size] = (_phase(op.name, "matmul", True, per), per,
                              red if red is None else _phase(op.name, "reduce", False, red), red)
        ph, per, rph, red = per_size[size]
        phases.append(ph)
        if rph is not None and (axis != "k" or i == len(sizes) - 1):
            phases.append(rph)
    work = np.max([per[:, 4] + (0.0 if red is None else red[:, 2]) for _, per, _, red in per_size.values()], axis=0)
    live = live_bytes + (m * n * dt / T if axis in ("m", "n") and P > 1 else 0.0)
    part = f"m/{pm} x n/{pn} x k/{pk} on {pm * pn * pk} tiles"
    if P > 1:
        part += f", {P} passes over {axis}"
    sub = {a: -(-dims[a] // (P if a == axis else 1)) for a in dims}
    block = (-(-sub["m"] // pm), -(-sub["k"] // pk), -(-sub["n"] // pn))
    plan = OpPlan(op, part, pm * pn * pk, phases, weights, work + live, over_budget=not pl.fits,
                  passes=P, pass_axis=axis, block=block, working_set_bytes=float(work.max()),
                  budget_bytes=float(budget))
    plan.stream_bytes = 0.0 if tied else op.weight_bytes / op.count
    return plan


# ------------------------------------------------------------------------------------------
# Attention: chunks of query rows per (sequence, head), key blocks with an online softmax
# ------------------------------------------------------------------------------------------

def _query_chunks(s: Step):
    """(rows, keys) per sequence of one head: query rows and key count under the step's layout."""
    if s.phase == "decode":
        return np.ones(s.batch), s.lengths.astype(float)
    L = np.full(s.batch, s.row_len, float) if s.row_len else s.lengths.astype(float)
    return L, L


def attention_tables(s: Step, r: int, key_blocks: int, which: str, n_tiles: int, first_only: bool = False):
    """Piece tables (first key block, each later key block) of ``which`` with every
    (sequence, head) cut in ``r`` chunks and its keys in ``key_blocks`` blocks.

    Forward/prefill chunks query rows; decode (one query) chunks the keys over tiles and has
    one key block. Per key block a scores piece receives its K block (and, in the first
    block, its query rows); a context piece receives its V block. With more than one key
    block each piece keeps an FP32 context accumulator (rows x head_dim) and a running max
    and sum per row (2 x 4 bytes), and the softmax of every block after the first rescales
    the accumulator (``head_dim + RESCALE_FLOPS_PER_ROW`` FLOPs per row).
    """
    return [np.repeat(t, s.model.heads * r, axis=0) for t in _attention_seq_tables(s, r, key_blocks, which, n_tiles, first_only)]


def _attention_seq_tables(s: Step, r: int, key_blocks: int, which: str, n_tiles: int, first_only: bool = False):
    """``attention_tables`` before the repeat: one row per sequence, since the ``heads x r``
    pieces of a sequence are alike (``np.repeat(row, heads * r)`` gives the piece table; the
    columns are element-wise in the rows, so repeating before or after is the same, bit for bit)."""
    cfg, dt = s.model, s.dtype_bytes
    hd = cfg.head_dim
    remote = (n_tiles - 1) / n_tiles
    rows, keys = _query_chunks(s)
    if s.phase == "decode":
        kc, qc = keys / r, rows
    else:
        kc, qc = keys, rows / r
    nb = key_blocks
    kb = kc / nb
    area = qc * kb  # scores of one key block
    z = np.zeros_like(area)
    online = nb > 1
    acc = online * (qc * hd * PARTIAL_BYTES + 2 * qc * PARTIAL_BYTES)  # accumulator and running max/sum
    out = []
    for first in ((True,) if first_only else (True, False)):
        if which == "attn_scores":
            recv = (first * qc + kb) * hd * dt * remote
            sent = (first * qc + kb / r) * hd * dt * remote  # query rows once, K once per head (multicast)
            t = np.column_stack([2 * area * hd, (qc + kb) * hd * dt, recv, sent,
                                 (qc + kb) * hd * dt + area * dt + acc, z])
        elif which == "attn_context":
            recv = kb * hd * dt * remote
            out_b = qc * hd * (PARTIAL_BYTES if online else dt)
            t = np.column_stack([2 * area * hd, area * dt + kb * hd * dt, recv, recv / r,  # V once per head
                                 area * dt + kb * hd * dt + out_b + (acc - online * qc * hd * PARTIAL_BYTES), z])
        else:  # softmax in place on the score block; rescale the accumulator after the first block
            rescale = (not first) * online * qc * (hd + RESCALE_FLOPS_PER_ROW)
            t = np.column_stack([5 * area + rescale, 2 * area * dt + (not first) * online * 2 * qc * hd * PARTIAL_BYTES,
                                 z, z, 2 * area * dt + acc, z])
        out.append(t)
    return out


def _key_block_counts(keys: int) -> list:
    return [int(p) for p in _candidates(keys, keys, small=16, factors=(1, 3))]


_ATT_OPS = ("attn_scores", "softmax", "attn_context")


@njit(cache=True)
def _distribute_repeated(rows, rep, n_tiles, out):
    """``_distribute`` of ``np.repeat(rows, rep, axis=0)`` without building it: piece i is row
    ``i // rep``. Preconditions as ``_distribute`` (``rows`` (B, K) float64, B, rep >= 1)."""
    B, K = rows.shape
    P = B * rep
    for i in range(P):
        t = (i * n_tiles) // P
        row = i // rep
        for j in range(K):
            out[t, j] += rows[row, j]
        out[t, K] += 1.0


@njit(cache=True)
def _attention_pass_max(rows, rep, n_tiles, rate, sram_rate, vertex, amp, amp_overhead, rearrange, x):
    """(largest compute cycles, largest exchange cycles, largest working set) over the tiles
    of one attention superstep whose pieces are ``np.repeat(rows, rep, axis=0)``, dealt as
    ``_distribute`` deals them (a tile's pieces are consecutive; its sums are accumulated
    in piece order from zero, as there) and costed as ``_attention_cost_tables`` costs
    them. Preconditions: ``rows`` (B, 6) float64 of non-negative columns, B, rep >= 1."""
    B = rows.shape[0]
    P = B * rep
    cmax, xmax, wmax = 0.0, 0.0, 0.0  # a tile with no piece costs 0; every column is >= 0
    i = 0
    while i < P:
        t = (i * n_tiles) // P
        f, ld, rv, w, cnt = 0.0, 0.0, 0.0, 0.0, 0.0
        while i < P and (i * n_tiles) // P == t:
            row = i // rep
            f += rows[row, 0]
            ld += rows[row, 1]
            rv += rows[row, 2]
            w += rows[row, 4]
            cnt += 1.0
            i += 1
        comp = max(f / rate, ld / sram_rate) + cnt * vertex
        if amp:
            comp = comp + (amp_overhead + rv / rearrange)
        cmax = max(cmax, comp)
        xmax = max(xmax, rv / x)
        wmax = max(wmax, w)
    return cmax, xmax, wmax


@njit(cache=True)
def _attention_rows(rows, keys, decode, r, nb, hd, dt, remote, which, first, tab):
    """``_attention_seq_tables`` of op ``which`` (0 scores, 1 softmax, 2 context) into ``tab``
    (B, 6), scalar by scalar, each expression in the same order as there (columns 3 and 5,
    which the cost does not read, are left at zero). Preconditions: ``tab`` (B, 6) zeros."""
    online = nb > 1
    for b in range(rows.size):
        if decode:
            kc, qc = keys[b] / r, rows[b]
        else:
            kc, qc = keys[b], rows[b] / r
        kb = kc / nb
        area = qc * kb
        acc = qc * hd * PARTIAL_BYTES + 2 * qc * PARTIAL_BYTES if online else 0.0
        if which == 0:
            fq = qc if first else 0.0
            tab[b, 0] = 2 * area * hd
            tab[b, 1] = (qc + kb) * hd * dt
            tab[b, 2] = (fq + kb) * hd * dt * remote
            tab[b, 4] = (qc + kb) * hd * dt + area * dt + acc
        elif which == 2:
            oq = qc if online else 0.0
            tab[b, 0] = 2 * area * hd
            tab[b, 1] = area * dt + kb * hd * dt
            tab[b, 2] = kb * hd * dt * remote
            out_b = qc * hd * (PARTIAL_BYTES if online else dt)
            tab[b, 4] = area * dt + kb * hd * dt + out_b + (acc - oq * hd * PARTIAL_BYTES)
        else:
            later = (not first) and online
            lq = qc if later else 0.0
            tab[b, 0] = 5 * area + lq * (hd + RESCALE_FLOPS_PER_ROW)
            tab[b, 1] = 2 * area * dt + (2 * qc if later else 0.0) * hd * PARTIAL_BYTES
            tab[b, 2] = 0.0
            tab[b, 4] = 2 * area * dt + acc


@njit(cache=True)
def _attention_cost_kernel(rows, keys, decode, r, nb, hd, dt, remote, rep, n_tiles, amp_rate, vector_rate,
                           sram_rate, vertex, amp_overhead, rearrange, x, sync):
    """``_attention_cost_tables`` without its tables: (cycles, largest working set) of the three
    attention ops for ``r`` chunks and ``nb`` key blocks, from the per-sequence ``rows`` and
    ``keys`` (``_query_chunks``), each sequence's row repeated ``rep`` = heads x r times.
    Preconditions: rows, keys float64 of one size B >= 1; r, nb, rep >= 1."""
    tab = np.zeros((rows.size, 6))
    cyc, work = 0.0, 0.0
    for which in range(3):  # the order of _ATT_OPS: scores, softmax, context
        amp = which != 1
        rate = amp_rate if amp else vector_rate
        for first in (True, False):
            times = 1 if first else nb - 1
            if not first and times == 0:
                continue
            _attention_rows(rows, keys, decode, r, nb, hd, dt, remote, which, first, tab)
            cmax, xmax, wmax = _attention_pass_max(tab, rep, n_tiles, rate, sram_rate, vertex, amp,
                                                   amp_overhead, rearrange, x)
            cyc += times * (sync + cmax + xmax)
            work = max(work, wmax)
    return cyc, work


def _attention_phases(s, c, r, nb, which, ref):
    """Dealt per-tile tables of the first key block and of each later one (the same array
    when there is one key block)."""
    if ref or not _FAST:
        tables = [_deal(t, c.tiles, ref) for t in attention_tables(s, r, nb, which, c.tiles, first_only=nb == 1)]
        return tables[0], tables[-1]
    out = []
    for t in _attention_seq_tables(s, r, nb, which, c.tiles, first_only=nb == 1):
        per = np.zeros((c.tiles, t.shape[1] + 1))
        _distribute_repeated(np.ascontiguousarray(t, dtype=np.float64), s.model.heads * r, c.tiles, per)
        out.append(per)
    return out[0], out[-1]


def _attention_cost_tables(s, c, r, nb, ref):
    """``_attention_cost`` from the dealt per-tile tables (the reference of the kernel path)."""
    cyc, work = 0.0, np.zeros(c.tiles)
    x = c.exchange_bytes_per_cycle_per_tile * _cal.EXCHANGE_EFFICIENCY  # calibrated as in run_program
    for which in _ATT_OPS:
        amp = which != "softmax"
        rate = c.fp16_flops_per_cycle_per_tile if amp else c.fp32_flops_per_cycle_per_tile
        first, rest = _attention_phases(s, c, r, nb, which, ref)
        for per, times in ((first, 1), (rest, nb - 1)):
            if times:
                comp = np.maximum(per[:, 0] / rate, per[:, 1] / c.sram_bytes_per_cycle_per_tile) \
                    + per[:, -1] * c.vertex_overhead_cycles
                if amp:  # an AMP phase's calibrated overhead and rearranging (tile_calibration)
                    comp = comp + np.where(per[:, -1] > 0, _cal.AMP_PHASE_OVERHEAD_CYCLES
                                           + per[:, 2] / _cal.REARRANGE_BYTES_PER_CYCLE, 0.0)
                cyc += times * (c.sync_cycles + comp.max() + (per[:, 2] / x).max())
        work = np.maximum(work, np.maximum(first[:, 4], rest[:, 4]))
    return cyc, float(work.max())


def _attention_cost(s, c, r, nb, ref):
    """(cycles of the three attention ops, largest working set on a tile) for r chunks, nb
    key blocks: per superstep the slowest tile's compute plus the slowest exchange, plus a sync."""
    if ref or not _FAST:
        return _attention_cost_tables(s, c, r, nb, ref)
    rows, keys = _query_chunks(s)
    T = c.tiles
    return _attention_cost_kernel(
        np.ascontiguousarray(rows, dtype=np.float64), np.ascontiguousarray(keys, dtype=np.float64),
        s.phase == "decode", r, nb, s.model.head_dim, s.dtype_bytes, (T - 1) / T, s.model.heads * r, T,
        float(c.fp16_flops_per_cycle_per_tile), float(c.fp32_flops_per_cycle_per_tile),
        float(c.sram_bytes_per_cycle_per_tile), float(c.vertex_overhead_cycles),
        float(_cal.AMP_PHASE_OVERHEAD_CYCLES), float(_cal.REARRANGE_BYTES_PER_CYCLE),
        c.exchange_bytes_per_cycle_per_tile * _cal.EXCHANGE_EFFICIENCY, float(c.sync_cycles))


def plan_attention(s: Step, c: TileChip, ref: bool = False, budget: float | None = None) -> tuple:
    """(query chunks r, key blocks, fits the budget) for the step's attention.

    Chunk counts near ``tiles / (heads x batch)`` are tried; for each, the fewest key blocks
    whose working set fits ``budget`` bytes per tile (default ``budget_bytes(c)``); the
    fastest of those is taken (the one with the least working set when none fits). Returns
    (r, key blocks, fits, budget)."""
    G = s.model.heads * s.batch
    rows, keys = _query_chunks(s)
    span = int((keys if s.phase == "decode" else rows).max())
    base = max(1, c.tiles // G)
    budget = budget_bytes(c) if budget is None else budget
    best, least = None, None
    counts = [1] if s.phase == "decode" else _key_block_counts(int(keys.max()))
    for r in sorted({min(span, v) for v in (1, base, base + 1, 2 * base, 4 * base, 8 * base)}):
        def cost(nb, r=r):
            cyc, work = _attention_cost(s, c, r, nb, ref)
            return cyc, nb, work, bool(work <= budget)

        found = _fewest(counts, cost)
        if found is not None and (best is None or found[0] < best[0]):
            best = (found[0], r, found[1])
        if found is None:
            w = cost(counts[-1])[2]
            if least is None or w < least[0]:
                least = (w, r, counts[-1])
    if best is not None:
        return best[1], best[2], True, budget
    return least[1], least[2], False, budget


def map_attention(op: Op, s: Step, c: TileChip, ref: bool, r: int, key_blocks: int, fits: bool,
                  budget: float) -> OpPlan:
    """Attention products and softmax: pieces are chunks of one head of one sequence, run
    over ``key_blocks`` passes (see ``attention_tables``); the softmax reuses the score
    layout so it needs no exchange. Q, K and V (the qkv output) are held while it runs."""
    G = s.model.heads * s.batch
    label = "attention" if op.kind == "attention" else op.kind
    amp = op.kind == "attention"
    first, rest = _attention_phases(s, c, r, key_blocks, op.name, ref)
    phases = [_phase(op.name, label, amp, first)]
    if key_blocks > 1:
        p_rest = _phase(op.name, label, amp, rest)
        phases += [p_rest] * (key_blocks - 1)
    work = np.maximum(first[:, 4], rest[:, 4])
    live = attention_live_bytes(s, c.tiles)
    rows, keys = _query_chunks(s)
    q = float(rows.max()) if s.phase == "decode" else float(rows.max()) / r
    kk = float(keys.max()) / (r if s.phase == "decode" else key_blocks)
    part = f"{G} head-sequences x {r} chunks" + (f", {key_blocks} key blocks (online softmax)" if key_blocks > 1 else "")
    return OpPlan(op, part, G * r, phases, first[:, 5], work + live, over_budget=not fits,
                  passes=key_blocks, pass_axis="keys" if key_blocks > 1 else "", block=(q, kk),
                  working_set_bytes=float(work.max()), budget_bytes=float(budget))


# ------------------------------------------------------------------------------------------
# Row-wise ops and the embedding look-up
# ------------------------------------------------------------------------------------------

def map_rows(op: Op, s: Step, c: TileChip, ref: bool, width: int, exchange: bool) -> OpPlan:
    """Row-wise element ops (layer norm, activation): ``op.m // width`` rows of ``width``.

    A norm needs whole rows, which the previous matmul left in column blocks, so its rows
    are gathered (``exchange``); the activation runs in place on the up-projection output.
    Rows are cut into chunks when there are fewer rows than tiles (activation only).
    """
    dt = s.dtype_bytes
    rows = op.m // width
    chunks = 1 if exchange else max(1, min(width, c.tiles // max(rows, 1)))
    P = rows * chunks
    w = width / chunks
    reads = op.act_read_bytes / op.count / (op.m * dt)
    fl = op.flops / op.count / op.m * w
    recv = w * dt * (c.tiles - 1) / c.tiles if exchange else 0.0
    per = _deal_same([fl, (reads + 1) * w * dt, recv, recv, (reads + 1) * w * dt, 0.0], P, c.tiles, ref)
    return OpPlan(op, f"{rows} rows x {chunks} chunks", P, [_phase(op.name, op.kind, False, per)],
                  per[:, 5], per[:, 4], block=(w,), working_set_bytes=float(per[:, 4].max()))


def _distinct(idx: np.ndarray, n: int) -> np.ndarray:
    """``np.unique(idx)`` for integers in ``[0, n)``, by a presence mask (linear, no sort)."""
    if idx.size == 0 or idx.min() < 0 or idx.max() >= n:
        return np.unique(idx)
    present = np.zeros(n, dtype=bool)
    present[idx] = True
    return np.flatnonzero(present)


@lru_cache(maxsize=64)
def _rows_per_tile(nrows: int, T: int) -> np.ndarray:
    """Rows of an ``nrows``-row table each of ``T`` tiles owns (spread evenly), read-only."""
    out = np.bincount(np.arange(nrows) * T // nrows, minlength=T)[:T]
    out.flags.writeable = False
    return out


def map_embedding(op: Op, s: Step, c: TileChip, ref: bool, seed: int) -> OpPlan:
    """Embedding look-up: table rows are spread over tiles; each token's row is sent to its tile.

    Token ids are drawn uniformly from the vocabulary with ``seed`` (ASSUMPTION: real text is
    Zipf-like, which would load a few tiles more); padding positions use id 0 ([PAD]).
    Position (and token-type) rows come from tables spread the same way. A tile sends each
    distinct row it owns once, multicast to every tile that needs it (the same ASSUMPTION as
    for matmul inputs), so a row many tokens share costs one send.
    """
    cfg, dt, T = s.model, s.dtype_bytes, c.tiles
    d = cfg.d_model
    rng = np.random.default_rng(seed)
    ntok = s.tokens
    if s.phase == "decode":
        pos = s.lengths - 1
    elif s.row_len:
        pos = np.tile(np.arange(s.row_len), s.batch)
    else:
        pos = np.concatenate([np.arange(n) for n in s.lengths])
    ids = rng.integers(1, cfg.vocab, size=ntok)
    if s.row_len and s.phase != "decode":
        ids[(pos >= np.repeat(s.lengths, s.row_len))] = 0
    tables = [(ids, cfg.vocab)]
    if cfg.learned_positions:
        tables.append((pos, cfg.max_positions))
    if cfg.type_vocab:
        tables.append((np.zeros(ntok, np.int64), cfg.type_vocab))
    send, owned = np.zeros(T), np.zeros(T)
    for idx, nrows in tables:
        send += np.bincount(_distinct(idx, nrows) * T // nrows, minlength=T)[:T] * d * dt
        owned += _rows_per_tile(nrows, T) * d * dt
    k = len(tables)
    per = _deal_same([op.flops / ntok, (k + 1) * d * dt, k * d * dt, 0.0, (k + 1) * d * dt, 0.0], ntok, T, ref)
    plan = OpPlan(op, f"{ntok} tokens; {k} tables row-split", ntok,
                  [_phase(op.name, "embedding", False, per)], owned, per[:, 4],
                  working_set_bytes=float(per[:, 4].max()))
    plan.phases[0].send = send
    plan.stream_bytes = float(ntok * k * d * dt)
    return plan


# ------------------------------------------------------------------------------------------
# A whole step
# ------------------------------------------------------------------------------------------

_HOLDS_INPUT = ("attn_out", "ffn_down")  # matmuls whose input is not the residual stream


def _room(c: TileChip, s: Step, op: Op) -> float:
    """Bytes per tile left beside the always-live bytes while ``op`` runs, estimated with
    every parameter spread evenly: code, parameters (or, if they cannot stay on chip, the
    op's own weights copied in), KV cache and residual stream."""
    cfg, dt, T = s.model, s.dtype_bytes, c.tiles
    base = _room_base(c, s)
    params = cfg.weight_bytes(dt) / T
    if base + params < c.sram_per_tile_bytes:
        return c.sram_per_tile_bytes - base - params
    return c.sram_per_tile_bytes - base - op.weight_bytes / op.count / T


def op_budget(c: TileChip, s: Step, op: Op, live_bytes: float) -> float:
    """Working-set budget of ``op`` per tile: ``availableMemoryProportion`` of the tile, or
    less when the always-live bytes and the op's held inputs leave less room (then the
    planner serialises sooner); never below a tenth of ``budget_bytes(c)`` (a step that
    tight does not fit, and the out-of-memory report says so)."""
    room = _room(c, s, op) - live_bytes
    return float(max(0.1 * budget_bytes(c), min(budget_bytes(c), room)))


def plan_step(c: TileChip, s: Step, *, seed: int = 0, engine: str = "numba", unlimited: bool = False) -> list[OpPlan]:
    """Lay every op of ``s`` out over the tiles of ``c`` (one ``OpPlan`` per op).

    Each op's working-set budget starts from ``op_budget`` (parameters spread evenly); since
    a tile's real share of the weights depends on the plans, an op whose peak then overflows
    some tile is planned again with its budget cut by that overflow (a few rounds).
    ``unlimited``: no budget (every op in one pass; for the cost of the passes).
    ``c`` must be a ``TileChip`` and ``s`` a forward, prefill or decode ``Step`` (``tiles``
    checks both for its public functions)."""
    choice("engine", engine, ENGINES)
    ref = engine == "python"
    T = c.tiles
    att_ops = [i for i, op in enumerate(s.ops) if op.kind in ("attention", "softmax")]
    live = [_live_bytes(op, s, T) for op in s.ops]
    if unlimited:
        return _plan_ops(c, s, ref, seed, [float("inf")] * len(s.ops), live, att_ops, [None] * len(s.ops))
    budgets = [op_budget(c, s, op, lv) for op, lv in zip(s.ops, live, strict=True)]
    plans = _plan_ops(c, s, ref, seed, budgets, live, att_ops, [None] * len(s.ops))
    on_chip = _on_chip_estimate(c, s)
    floor = 0.1 * budget_bytes(c)
    for _ in range(4):
        placed = sum(p.weights for p in plans)
        always = c.code_bytes_per_tile + always_live_other_bytes(c, s, placed) + (placed if on_chip else 0.0)
        redo = []
        for i, p in enumerate(plans):
            if p.op.kind not in ("matmul", "attention", "softmax"):
                continue
            landed = 0.0 if on_chip or p.op.kind != "matmul" else p.weights / p.op.count
            over = float((always + p.temp + landed).max()) - c.sram_per_tile_bytes
            if over > 0 and budgets[i] > floor:
                redo.append(i)
                budgets[i] = max(floor, budgets[i] - over - 1024.0)
        if not redo:
            break
        if any(i in att_ops for i in redo):  # the three attention ops share one layout
            b = min(budgets[i] for i in att_ops)
            for i in att_ops:
                budgets[i] = b
            redo = sorted(set(redo) | set(att_ops))
        plans = _plan_ops(c, s, ref, seed, budgets, live, att_ops, [None if i in redo else p for i, p in enumerate(plans)])
    return plans


def attention_live_bytes(s: Step, T: int) -> float:
    """Bytes per tile of Q, K and V of the batch, spread over ``T`` tiles, held while attention
    runs: ``tokens x (q_dim + 2 kv_dim)`` (a tensor-parallel shard's ``q_dim`` is its own heads'
    width, not ``d_model``)."""
    return s.tokens * (s.model.q_dim + 2 * s.model.kv_dim) * s.dtype_bytes / T


def _live_bytes(op: Op, s: Step, T: int) -> float:
    """The op's input held per tile while it runs, when it is not the residual stream."""
    if op.kind in ("attention", "softmax"):
        return attention_live_bytes(s, T)
    if op.name in _HOLDS_INPUT:
        return op.m * op.k * s.dtype_bytes / T
    return 0.0


def _on_chip_estimate(c: TileChip, s: Step) -> bool:
    """Whether the parameters, spread evenly, leave room on a tile (else they will stream)."""
    return _room_base(c, s) + s.model.weight_bytes(s.dtype_bytes) / c.tiles < c.sram_per_tile_bytes


def _room_base(c: TileChip, s: Step) -> float:
    """Code budget, KV cache (prefill, decode) and residual stream per tile, spread evenly."""
    cfg, dt = s.model, s.dtype_bytes
    kv = 0.0
    if s.phase in ("prefill", "decode"):
        kv = cfg.kv_bytes_per_token(dt) * float(s.lengths.sum() if s.phase == "decode" else s.tokens)
    return c.code_bytes_per_tile + (kv + s.tokens * cfg.d_model * dt) / c.tiles


def always_live_other_bytes(c: TileChip, s: Step, placed: np.ndarray) -> float:
    """Always-live bytes per tile besides code and placed weights: other parameters (biases,
    norms) spread evenly, the KV cache and the residual stream."""
    cfg, dt = s.model, s.dtype_bytes
    other = max(0.0, cfg.params * dt - placed.sum()) / c.tiles
    return other + _room_base(c, s) - c.code_bytes_per_tile


def _plan_ops(c, s, ref, seed, budgets, live, att_ops, keep) -> list[OpPlan]:
    cfg, dt = s.model, s.dtype_bytes
    plans, att = [], None
    for i, op in enumerate(s.ops):
        if keep[i] is not None:
            plans.append(keep[i])
        elif op.kind == "matmul":
            tied = op.name == "lm_head" and cfg.tied_embeddings
            plans.append(map_matmul(op, c, dt, ref, tied=tied, live_bytes=live[i], budget=budgets[i]))
        elif op.kind in ("attention", "softmax"):
            if att is None:
                att = plan_attention(s, c, ref, budgets[i])
            plans.append(map_attention(op, s, c, ref, *att))
        elif op.kind == "norm":
            plans.append(map_rows(op, s, c, ref, cfg.d_model, exchange=True))
        elif op.kind == "activation":
            plans.append(map_rows(op, s, c, ref, op.m // s.tokens, exchange=False))
        elif op.kind == "embedding":
            plans.append(map_embedding(op, s, c, ref, seed))
        else:  # pragma: no cover - OP_KINDS is closed
            raise ValueError(f"op kind {op.kind!r} is not mapped")
    return plans
