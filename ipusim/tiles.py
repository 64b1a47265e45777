"""Tile machine (IPU style): map each op of a step onto the tiles, run it as BSP supersteps.

The model, in the order a step is simulated:

1. **Mapping.** Every op of one layer is cut into *pieces* (a block of a matmul, a chunk of
   query rows of one head of one sequence, a row of a layer norm, one token's embedding
   rows) and the pieces are dealt to tiles in order, piece ``i`` to tile
   ``i * tiles // pieces`` (Poplar also maps work statically, at compile time). When the
   pieces do not divide evenly some tiles get one more piece than others, or are idle:
   that is the load imbalance the model shows.
2. **Memory.** A tile can touch only its own SRAM (facts §1.4, GC-PGKR). Each tile holds
   *always-live* bytes (a code budget, its share of every layer's weights, the embedding
   rows it owns, the KV cache) and, while an op runs, *temporary* bytes (its input and
   output blocks, gathered weight blocks, attention scores). Peak = always-live + the
   largest temporary. More than ``sram_per_tile_bytes`` is an out-of-memory error, reported
   with the tile, the excess and what would make it fit; nothing is placed silently. A step
   that fits neither on chip nor by streaming its weights has ``fits=False`` and
   ``time_s = inf`` (the fit rule in ``machine.StepResult``).
3. **Supersteps.** A superstep is sync, then the exchange that brings an op its inputs,
   then the op's compute (read cyclically, this is Graphcore's compute -> sync -> exchange
   order, facts §1.4 GC-MPO2). Compute cycles per tile are ``vertex overhead x pieces +
   max(FLOPs / FLOP-rate, SRAM bytes / SRAM rate)``; exchange cycles per tile are the larger
   of its received bytes over the per-tile exchange rate and the bytes sent by all tiles on
   its exchange bus over the bus's rate (``TILES_PER_EXCHANGE_BUS`` x the per-tile rate, so
   that all tiles together keep the chip's 8 TB/s; ASSUMPTION on how the bus is shared).
   Sent bytes are each input byte once (one send reaches every tile that needs it:
   multicast, ASSUMPTION), spread evenly over the tiles that hold the input.
   An op's inputs are taken to be spread evenly over all tiles by the op before it, so a
   tile already holds 1/tiles of what it needs and receives the rest (ASSUMPTION).
   A superstep lasts ``sync + max over tiles (exchange) + max over tiles (compute)``: the
   slowest tile sets the pace.
   Three calibrated parameters (``ipusim.tile_calibration``, each set once from measured IPU
   microbenchmarks) enter here: the exchange runs at ``EXCHANGE_EFFICIENCY`` of its rate, and
   an AMP (matmul) compute phase costs ``AMP_PHASE_OVERHEAD_CYCLES`` more plus the rearranging
   of the bytes the tile received, at ``REARRANGE_BYTES_PER_CYCLE``.
4. **Layers.** The ops of one layer are simulated once and multiplied by ``Op.count``;
   the trace in ``TileProfile`` shows one instance of each op in program order.
5. **Streaming.** When the weights do not fit (``weights="auto"``), they stay in off-chip
   Streaming Memory; each op instance first copies its weights in at
   ``offchip_bandwidth_bytes_per_s``, not overlapped with compute (ASSUMPTION: no double
   buffering; Poplar's copies are explicit program steps, facts §1.2 GC-PG). The copy lands
   in the layout the weights are stored in on chip, so a matmul still pays its weight gather
   in the exchange (ASSUMPTION). The embedding rows a batch needs are streamed likewise.

6. **Energy.** ``energy_split`` prices what the supersteps did (``ipusim.energy.tile_split``):
   FLOPs, SRAM loads and rearranged bytes, exchange bytes sent and received, streamed bytes.

Constants from facts §1.4 are named below with their source. Assumptions are marked.
Only forward, prefill and decode steps are mapped (training is left to a later module).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from numba import njit

from . import energy as _energy
from . import tile_calibration as _cal
from ._validate import choice
from .hardware import TileChip
from .hardware import chip as _chip
from .result import StepResult
from .workloads import Op, Step

AVAILABLE_MEMORY_PROPORTION = 0.6  # share of tile SRAM a matmul plan may use for temporaries (POPLIBS-OPT)
TILES_PER_EXCHANGE_BUS = 2  # tiles sharing one exchange bus for sending (UNATTR-IPU21, conf. L)
PARTIAL_BYTES = 4  # ASSUMPTION: k-split matmul partial sums kept in FP32 (AMP accumulates in FP32)
# ASSUMPTION: non-matmul ops (softmax, norms, GELU, reductions) run on the vector unit at the
# FP32 rate (fp32_flops_per_cycle_per_tile); matmuls and attention products use the AMP FP16 rate.
WEIGHT_MODES = ("auto", "on_chip", "stream")
ENGINES = ("numba", "python")


# ------------------------------------------------------------------------------------------
# Kernels (flat loops) and their plain-Python references
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


@njit(cache=True)
def _superstep_cycles(flops, load, vertices, recv, send, flop_rate, sram_rate, x_rate,
                      vertex_cycles, bus, out_comp, out_exch, out_max):
    """Per-tile compute and exchange cycles of S supersteps over T tiles.

    Preconditions: ``flops, load, vertices, recv, send, out_comp, out_exch`` are (S, T)
    float64; ``flop_rate`` is (S,) FLOP/cycle/tile, all > 0; ``sram_rate, x_rate > 0``;
    ``bus >= 1``; ``out_max`` is (S, 2): column 0 the slowest tile's compute, 1 its exchange.
    """
    S, T = flops.shape
    for s in range(S):
        mc = 0.0
        mx = 0.0
        for t in range(T):
            c = 0.0
            if vertices[s, t] > 0.0:
                c = max(flops[s, t] / flop_rate[s], load[s, t] / sram_rate)
                c += vertices[s, t] * vertex_cycles
            b0 = (t // bus) * bus
            sent = 0.0
            for u in range(b0, min(b0 + bus, T)):
                sent += send[s, u]
            x = max(recv[s, t], sent / (min(b0 + bus, T) - b0)) / x_rate
            out_comp[s, t] = c
            out_exch[s, t] = x
            mc = max(mc, c)
            mx = max(mx, x)
        out_max[s, 0] = mc
        out_max[s, 1] = mx


def _superstep_cycles_reference(flops, load, vertices, recv, send, flop_rate, sram_rate, x_rate,
                                vertex_cycles, bus):
    """Plain-Python reference of ``_superstep_cycles``; returns (comp, exch, max)."""
    S, T = flops.shape
    comp, exch, mx = np.zeros((S, T)), np.zeros((S, T)), np.zeros((S, 2))
    for s in range(S):
        for t in range(T):
            c = 0.0
            if vertices[s][t] > 0:
                c = max(flops[s][t] / flop_rate[s], load[s][t] / sram_rate) + vertices[s][t] * vertex_cycles
            b0 = (t // bus) * bus
            sent = sum(send[s][u] for u in range(b0, min(b0 + bus, T)))
            comp[s][t], exch[s][t] = c, max(recv[s][t], sent / (min(b0 + bus, T) - b0)) / x_rate
        mx[s] = comp[s].max(), exch[s].max()
    return comp, exch, mx


# ------------------------------------------------------------------------------------------
# Mapping: ops -> pieces -> per-tile arrays
# ------------------------------------------------------------------------------------------

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
    pieces: int
    phases: list
    weights: np.ndarray  # always-live weight bytes, all instances
    temp: np.ndarray  # peak temporary bytes while one instance runs
    stream_bytes: float = 0.0  # bytes copied from off-chip DRAM per instance (streaming mode)
    over_budget: bool = False  # temporaries exceed availableMemoryProportion

    @property
    def exchange_bytes(self) -> np.ndarray:
        """Bytes each tile receives per instance."""
        return sum(p.recv for p in self.phases)


def _deal(pieces: np.ndarray, n_tiles: int, reference: bool) -> np.ndarray:
    pieces = np.ascontiguousarray(pieces, dtype=np.float64)
    if reference:
        return _distribute_reference(pieces, n_tiles)
    out = np.zeros((n_tiles, pieces.shape[1] + 1))
    _distribute(pieces, n_tiles, out)
    return out


def _phase(op, label, amp, per_tile) -> Phase:
    """A superstep from dealt per-tile sums; sends are spread evenly over all tiles (the
    op's input is spread over all of them)."""
    f, ld, rv, sd = (per_tile[:, i] for i in range(4))
    return Phase(op, label, amp, f, ld, per_tile[:, -1], rv, np.full(sd.size, sd.sum() / sd.size))


def _splits(n: int, parts: int) -> np.ndarray:
    """Balanced split of n into ``parts`` integers (floor/ceil): the remainder imbalance."""
    return n // parts + (np.arange(parts) < n % parts)


def _candidates(dim: int, cap: int, small: int = 32, factors=(1, 3, 23)) -> np.ndarray:
    """Split counts tried for one matmul dimension: every count up to ``small``, then
    ``factors`` times powers of two (1,472 = 64 x 23), and the whole dimension."""
    top = min(dim, cap)
    c = set(range(1, min(small, top) + 1)) | {top}
    for f in factors:
        p = f
        while p <= top:
            c.add(p)
            p *= 2
    return np.array(sorted(c))


@lru_cache(maxsize=4096)
def _plan_matmul_grid(m, k, n, dt, c: TileChip):
    """Choose the (pm, pn, pk) split of an (m x k) @ (k x n) matmul over the tiles.

    Costs per tile (closed form on the largest block, vectorised over candidate grids):
    compute ``2 mb kb nb / FLOP-rate``; exchange: the input block (sent once, received by
    the ``pn`` tiles that need it: multicast, ASSUMPTION), the weight block gathered from
    the ``pm`` tiles that share it (each stores 1/pm), and for ``pk > 1`` a reduction
    superstep over FP32 partials. Temporaries (input, gathered weights, output/partials)
    must stay within ``availableMemoryProportion`` of the tile (POPLIBS-OPT); if no grid
    does, the grid with the least temporaries is taken and flagged.
    """
    T = c.tiles
    pm = _candidates(m, T)[:, None, None]  # broadcast over a 3-D grid of candidates
    pn = _candidates(n, T)[None, :, None]
    pk = _candidates(k, T, small=4, factors=(1, 3))[None, None, :]
    mb, kb, nb = -(-m // pm), -(-k // pk), -(-n // pn)
    x = c.exchange_bytes_per_cycle_per_tile
    red = pk > 1
    out_b = np.where(red, PARTIAL_BYTES, dt)
    recv = mb * kb * (dt * (T - 1) / T) + kb * nb * dt * (pm - 1) / pm
    part = (pk - 1) / pk * (mb * nb)
    cycles = (c.vertex_overhead_cycles + (2.0 / c.fp16_flops_per_cycle_per_tile) * (mb * kb) * nb
              + recv / x + c.sync_cycles
              + red * (c.sync_cycles + part * (PARTIAL_BYTES / x + 1.0 / c.fp32_flops_per_cycle_per_tile)))
    temp = (mb * kb) * dt + kb * nb * dt + (mb * nb) * out_b + red * part * PARTIAL_BYTES
    budget = AVAILABLE_MEMORY_PROPORTION * c.sram_per_tile_bytes
    valid = (pm * pn) * pk <= T
    feasible = valid & (temp <= budget)
    if feasible.any():
        i = np.unravel_index(np.argmin(np.where(feasible, cycles, np.inf)), feasible.shape)
    else:
        i = np.unravel_index(np.argmin(np.where(valid, temp, np.inf)), valid.shape)
    pm, pn, pk = pm[i[0], 0, 0], pn[0, i[1], 0], pk[0, 0, i[2]]
    return int(pm), int(pn), int(pk), not bool(feasible.any())


def _map_matmul(op: Op, c: TileChip, dt: int, ref: bool, tied=False) -> OpPlan:
    """Matmul: blocks of a (pm, pn, pk) grid, one block per tile (see ``_plan_matmul_grid``)."""
    m, k, n = op.m, op.k, op.n
    pm, pn, pk, over = _plan_matmul_grid(m, k, n, dt, c)
    T = c.tiles
    mi, kl, nj = np.meshgrid(_splits(m, pm), _splits(k, pk), _splits(n, pn), indexing="ij")
    mi, kl, nj = mi.ravel().astype(float), kl.ravel().astype(float), nj.ravel().astype(float)
    P = mi.size
    send = (m * k * dt * (T - 1) / T + k * n * dt * (pm > 1)) / P  # each byte leaves its owner once (multicast)
    out_b = PARTIAL_BYTES if pk > 1 else dt
    table = np.column_stack([
        2 * mi * kl * nj, (mi * kl + kl * nj) * dt,
        mi * kl * dt * (T - 1) / T + kl * nj * dt * (pm - 1) / pm, np.full(P, send),
        mi * kl * dt + kl * nj * dt + mi * nj * out_b,
        np.zeros(P) if tied else op.count * kl * nj * dt / pm,
    ])
    per = _deal(table, T, ref)
    phases = [_phase(op.name, "matmul", True, per)]
    temp = per[:, 4].copy()
    if pk > 1:  # reduce FP32 partials: each of the pk tiles owns 1/pk of the output block
        part = mi * nj / pk
        red = np.column_stack([(pk - 1) * part, 2 * pk * part * PARTIAL_BYTES,
                               (pk - 1) * part * PARTIAL_BYTES, (pk - 1) * part * PARTIAL_BYTES,
                               np.zeros(P), np.zeros(P)])
        rper = _deal(red, T, ref)
        phases.append(_phase(op.name, "reduce", False, rper))
        temp += rper[:, 2]
    plan = OpPlan(op, f"m/{pm} x n/{pn} x k/{pk} on {P} tiles", P, phases, per[:, 5], temp,
                  over_budget=over)
    plan.stream_bytes = 0.0 if tied else op.weight_bytes / op.count
    return plan


def _query_chunks(s: Step):
    """(rows, keys) per sequence of one head: query rows and key count under the step's layout."""
    if s.phase == "decode":
        return np.ones(s.batch), s.lengths.astype(float)
    L = np.full(s.batch, s.row_len, float) if s.row_len else s.lengths.astype(float)
    return L, L


def _attention_table(s: Step, r: int, which: str, n_tiles: int):
    """Piece table of attention scores/context/softmax with every (sequence, head) cut in r chunks.

    Forward/prefill chunks query rows; decode (one query) chunks the keys (ASSUMPTION: the
    partial-softmax merge of split keys is not costed). Each piece receives the K (or V)
    rows of its head and its query rows; it keeps its block of scores for the softmax.
    """
    cfg, dt = s.model, s.dtype_bytes
    hd, h = cfg.head_dim, cfg.heads
    remote = (n_tiles - 1) / n_tiles
    rows, keys = _query_chunks(s)
    rows, keys = np.repeat(rows, h * r), np.repeat(keys, h * r)
    if s.phase == "decode":
        kc, qc = keys / r, rows
    else:
        kc, qc = keys, rows / r
    area = qc * kc
    z = np.zeros_like(area)
    if which == "attn_scores":
        recv = (qc + kc) * hd * dt * remote
        sent = (qc + kc / r) * hd * dt * remote  # query rows once, K once per head (multicast)
        return np.column_stack([2 * area * hd, recv, recv, sent, recv + area * dt, z])
    if which == "attn_context":
        recv = kc * hd * dt * remote
        return np.column_stack([2 * area * hd, area * dt + recv, recv, recv / r,  # V once per head
                                area * dt + recv + qc * hd * dt, z])
    return np.column_stack([5 * area, 2 * area * dt, z, z, 2 * area * dt, z])  # softmax in place


def _map_attention(op: Op, s: Step, c: TileChip, ref: bool, r_fixed=None) -> tuple[OpPlan, int]:
    """Attention products and softmax: pieces are chunks of one head of one sequence.

    The chunk count r is chosen (from a few candidates near ``tiles / (heads x batch)``) to
    minimise the slowest tile's cycles within the temporaries budget; the softmax reuses the
    score layout so it needs no exchange.
    """
    G = s.model.heads * s.batch
    span = int(_query_chunks(s)[1 if s.phase == "decode" else 0].max())
    base = max(1, c.tiles // G)
    cands = sorted({min(span, v) for v in (1, base, base + 1, 2 * base, 4 * base, 8 * base)})
    if r_fixed is not None:
        cands = [r_fixed]
    rate = c.fp16_flops_per_cycle_per_tile if op.kind == "attention" else c.fp32_flops_per_cycle_per_tile
    best = None
    budget = AVAILABLE_MEMORY_PROPORTION * c.sram_per_tile_bytes
    for r in cands:
        per = _deal(_attention_table(s, r, op.name, c.tiles), c.tiles, ref)
        cyc = (per[:, 0] / rate).max() + (per[:, 2] / c.exchange_bytes_per_cycle_per_tile).max()
        key = (per[:, 4].max() > budget, cyc)
        if best is None or key < best[0]:
            best = (key, r, per)
    (over, _), r, per = best
    label = "attention" if op.kind == "attention" else op.kind
    plan = OpPlan(op, f"{G} head-sequences x {r} chunks", G * r,
                  [_phase(op.name, label, op.kind == "attention", per)], per[:, 5], per[:, 4],
                  over_budget=bool(over))
    return plan, r


def _map_rows(op: Op, s: Step, c: TileChip, ref: bool, width: int, exchange: bool) -> OpPlan:
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
    table = np.tile([fl, (reads + 1) * w * dt, recv, recv, (reads + 1) * w * dt, 0.0], (P, 1))
    per = _deal(table, c.tiles, ref)
    return OpPlan(op, f"{rows} rows x {chunks} chunks", P, [_phase(op.name, op.kind, False, per)],
                  per[:, 5], per[:, 4])


def _map_embedding(op: Op, s: Step, c: TileChip, ref: bool, seed: int) -> OpPlan:
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
        send += np.bincount(np.unique(idx) * T // nrows, minlength=T)[:T] * d * dt
        owned += np.bincount(np.arange(nrows) * T // nrows, minlength=T)[:T] * d * dt
    k = len(tables)
    table = np.tile([op.flops / ntok, (k + 1) * d * dt, k * d * dt, 0.0, (k + 1) * d * dt, 0.0], (ntok, 1))
    per = _deal(table, T, ref)
    plan = OpPlan(op, f"{ntok} tokens; {k} tables row-split", ntok,
                  [_phase(op.name, "embedding", False, per)], owned, per[:, 4])
    plan.phases[0].send = send
    plan.stream_bytes = float(ntok * k * d * dt)
    return plan


def _tile_chip(c, fn: str) -> TileChip:
    """``c`` as a TileChip, or a ValueError naming the function and the chip."""
    c = _chip(c)
    if not isinstance(c, TileChip):
        raise ValueError(f"tiles.{fn} needs a tile chip, got {c.name!r} ({type(c).__name__}); "
                         "use ipusim.machine.simulate for any chip")
    return c


def _step_arg(s) -> Step:
    if not isinstance(s, Step):
        raise ValueError(f"s must be a workloads.Step (from ipusim.step(...)), got {type(s).__name__}")
    return s


def map_step(c, s: Step, *, seed: int = 0, engine: str = "numba") -> list[OpPlan]:
    """Lay every op of ``s`` out over the tiles of ``c`` (one ``OpPlan`` per op)."""
    c = _tile_chip(c, "map_step")
    _step_arg(s)
    choice("engine", engine, ENGINES)
    ref = engine == "python"
    cfg, dt = s.model, s.dtype_bytes
    plans, r = [], None
    for op in s.ops:
        if op.kind == "matmul":
            tied = op.name == "lm_head" and cfg.tied_embeddings
            plans.append(_map_matmul(op, c, dt, ref, tied=tied))
        elif op.kind == "attention" or op.kind == "softmax":
            plan, r = _map_attention(op, s, c, ref, r_fixed=None if op.name == "attn_scores" else r)
            plans.append(plan)
        elif op.kind == "norm":
            plans.append(_map_rows(op, s, c, ref, cfg.d_model, exchange=True))
        elif op.kind == "activation":
            plans.append(_map_rows(op, s, c, ref, op.m // s.tokens, exchange=False))
        elif op.kind == "embedding":
            plans.append(_map_embedding(op, s, c, ref, seed))
        else:  # pragma: no cover - OP_KINDS is closed
            raise ValueError(f"op kind {op.kind!r} is not mapped")
    return plans


# ------------------------------------------------------------------------------------------
# BSP execution of the mapped program
# ------------------------------------------------------------------------------------------

@dataclass
class Program:
    """The supersteps of one instance of each op, run through the cycle kernel.

    ``comp`` and ``exch`` are (S, T) cycles per tile; ``slowest`` is (S, 2) the slowest
    tile's compute and exchange; ``op_index`` maps each superstep to its plan; ``count`` is
    how many times it runs in the step (the op's layer count).
    """

    phases: list
    comp: np.ndarray
    exch: np.ndarray
    slowest: np.ndarray
    op_index: np.ndarray
    count: np.ndarray
    sync_cycles: float

    @property
    def superstep_cycles(self) -> np.ndarray:
        """Cycles of each superstep: sync + slowest exchange + slowest compute."""
        return self.sync_cycles + self.slowest[:, 0] + self.slowest[:, 1]


def run_program(c: TileChip, plans: list, engine: str = "numba") -> Program:
    """Time the supersteps of ``plans`` on chip ``c`` (per-tile compute and exchange cycles)."""
    phases, idx, cnt = [], [], []
    for i, p in enumerate(plans):
        for ph in p.phases:
            phases.append(ph)
            idx.append(i)
            cnt.append(p.op.count)
    S, T = len(phases), c.tiles
    arr = {k: np.ascontiguousarray(np.vstack([getattr(ph, k) for ph in phases]), dtype=np.float64)
           for k in ("flops", "load", "vertices", "recv", "send")}
    vec = c.fp32_flops_per_cycle_per_tile
    # Calibrated (ipusim.tile_calibration): the exchange runs at EXCHANGE_EFFICIENCY of its rate;
    # an AMP compute phase costs AMP_PHASE_OVERHEAD_CYCLES more, plus rearranging the bytes it
    # received into the AMP's layout at REARRANGE_BYTES_PER_CYCLE.
    amp = np.array([ph.amp for ph in phases])
    rate = np.where(amp, c.fp16_flops_per_cycle_per_tile, vec)
    args = (arr["flops"], arr["load"], arr["vertices"], arr["recv"], arr["send"], rate,
            c.sram_bytes_per_cycle_per_tile, c.exchange_bytes_per_cycle_per_tile * _cal.EXCHANGE_EFFICIENCY,
            c.vertex_overhead_cycles, TILES_PER_EXCHANGE_BUS)
    if engine == "python":
        comp, exch, mx = _superstep_cycles_reference(*args)
    else:
        comp, exch, mx = np.empty((S, T)), np.empty((S, T)), np.empty((S, 2))
        _superstep_cycles(*args, comp, exch, mx)
    on = amp[:, None] & (arr["vertices"] > 0)
    comp += np.where(on, _cal.AMP_PHASE_OVERHEAD_CYCLES + arr["recv"] / _cal.REARRANGE_BYTES_PER_CYCLE, 0.0)
    mx[:, 0] = comp.max(axis=1)
    return Program(phases, comp, exch, mx, np.array(idx), np.array(cnt, float), c.sync_cycles)


def energy_split(prog: Program, plans: list, streamed: bool, link_bytes: float = 0.0) -> dict:
    """Energy by level (``energy.tile_split``, joules) of the supersteps of ``prog``, each run
    as many times as its op's count: AMP and vector FLOPs, SRAM loads (and a read and a write of
    every byte an AMP phase rearranges), exchange bytes sent and received, Streaming Memory
    bytes (when ``streamed``) and ``link_bytes`` over IPU-Links."""
    amp = vec = load = sent = recv = 0.0
    for ph, n in zip(prog.phases, prog.count, strict=True):
        f = float(ph.flops.sum()) * n
        amp, vec = (amp + f, vec) if ph.amp else (amp, vec + f)
        got = float(ph.recv.sum()) * n
        load += float(ph.load.sum()) * n + (2.0 * got if ph.amp else 0.0)  # AMP operands rearranged: read + write
        sent += float(ph.send.sum()) * n
        recv += got
    stream = sum(p.stream_bytes * p.op.count for p in plans) if streamed else 0.0
    return _energy.tile_split(amp_flops=amp, vector_flops=vec, sram_read_bytes=load, exchange_sent_bytes=sent,
                              exchange_received_bytes=recv, streamed_bytes=stream, link_bytes=link_bytes)


@dataclass
class TileProfile:
    """Everything the tile simulation knows about one step: the views PopVision would show.

    Memory arrays are bytes per tile; ``always_live`` holds the code budget, weights, KV
    cache and other parameters, ``temporary`` the largest per-op temporaries (plus the
    residual stream); ``peak_op`` names the op behind each tile's temporary peak.
    """

    chip: TileChip
    step: Step
    plans: list
    program: Program
    weights: str  # "on-chip" or "streamed"
    always_live: np.ndarray
    temporary: np.ndarray
    peak_op: np.ndarray
    result: StepResult = field(repr=False, default=None)
    weight_bytes: np.ndarray = None  # per tile, part of always_live (zero when streamed)

    def memory_breakdown(self) -> dict:
        """Max and mean bytes per tile by category: code budget, weights, other always-live
        (biases, norms, KV cache), temporaries, and the peak total."""
        w = np.zeros_like(self.always_live) if self.weight_bytes is None else self.weight_bytes
        code = np.full_like(self.always_live, self.chip.code_bytes_per_tile)
        parts = {"code": code, "weights": w, "other_always_live": self.always_live - code - w,
                 "temporary": self.temporary, "peak": self.memory}
        return {k: {"max": float(v.max()), "mean": float(v.mean())} for k, v in parts.items()}

    @property
    def memory(self) -> np.ndarray:
        """Peak bytes per tile."""
        return self.always_live + self.temporary

    @property
    def idle_s(self) -> np.ndarray:
        """Seconds each tile waits (at syncs, for the slowest tile) over the step (for a step
        that does not fit: over its as-if-unlimited-memory time)."""
        return self.result.extra.get("time_if_unlimited_s", self.result.time_s) - self.result.unit_busy_s

    def fullest_tiles(self, n: int = 5) -> list[dict]:
        """The ``n`` tiles with the most bytes: tile, bytes, always-live, temporary, op at peak."""
        order = np.argsort(-self.memory, kind="stable")[:n]
        return [{"tile": int(t), "bytes": float(self.memory[t]), "always_live": float(self.always_live[t]),
                 "temporary": float(self.temporary[t]), "op": self.plans[self.peak_op[t]].op.name}
                for t in order]

    def op_table(self) -> list[dict]:
        """Per op: partition, tiles used, seconds by phase, bytes received per tile (max)."""
        r = self.result
        return [{"op": p.op.name, "partition": p.partition, "pieces": p.pieces,
                 "time_s": float(r.op_time_s[i]),
                 **{k: float(v[i]) for k, v in r.op_split.items()},
                 "exchange_bytes_max": float(p.exchange_bytes.max())}
                for i, p in enumerate(self.plans)]

    def __repr__(self):
        return f"TileProfile({self.result!r})"


def _memory(c: TileChip, s: Step, plans: list):
    """Per-tile bytes: (code + other params + KV, placed weights, temporaries, op at the peak).

    Biases and norm parameters are spread evenly; the KV cache (prefill, decode) too; the
    residual stream (tokens x d_model) is live throughout, spread over all tiles.
    """
    cfg, dt, T = s.model, s.dtype_bytes, c.tiles
    placed = sum(p.weights for p in plans)
    other = max(0.0, cfg.params * dt - placed.sum()) / T
    kv = 0.0
    if s.phase in ("prefill", "decode"):
        kv = cfg.kv_bytes_per_token(dt) * float(s.lengths.sum() if s.phase == "decode" else s.tokens) / T
    temps = np.vstack([p.temp for p in plans])
    resid = s.tokens * cfg.d_model * dt / T
    base = c.code_bytes_per_tile + other + kv
    return base, placed, temps.max(axis=0) + resid, temps.argmax(axis=0)


def largest_batch_that_fits(c, s: Step, *, weights_on_chip: bool = True, seed: int = 0) -> int:
    """Most sequences of ``s`` (its first ones, same padding) whose step fits the tiles; 0 if none.

    Bisection over the batch, mapping each candidate (temporaries do not scale linearly with
    tokens, because the planner changes partitions).
    """
    c = _tile_chip(c, "largest_batch_that_fits")
    _step_arg(s)

    def fits(b):
        sb = _sub_step(s, b)
        base, placed, temp, _ = _memory(c, sb, map_step(c, sb, seed=seed))
        return (base + (placed if weights_on_chip else 0.0) + temp).max() <= c.sram_per_tile_bytes

    lo, hi = 0, s.batch
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _sub_step(s: Step, b: int) -> Step:
    from .workloads import step as make_step

    return make_step(s.model, s.lengths[:b], phase=s.phase, pad_to=s.row_len or None, dtype_bytes=s.dtype_bytes)


def _fit_message(c: TileChip, s: Step, prof: TileProfile, stream_s: float) -> str:
    mem, sram = prof.memory, c.sram_per_tile_bytes
    t = int(np.argmax(mem))
    op = prof.plans[prof.peak_op[t]].op.name
    lines = [f"Out of memory on tile {t}: {mem[t]:,.0f} bytes used but tiles only have {sram:,} "
             f"bytes ({mem[t] - sram:,.0f} over; always-live {prof.always_live[t]:,.0f}, "
             f"temporaries {prof.temporary[t]:,.0f} at op {op})."]
    best = largest_batch_that_fits(c, s, weights_on_chip=prof.weights == "on-chip") if s.batch > 1 else 0
    if best:
        lines.append(f"Would fit with {best} sequences per batch or fewer "
                     f"({_sub_step(s, best).tokens:,} tokens; now {s.batch}, {s.tokens:,} tokens).")
    else:
        lines.append("No batch of these sequences fits on one chip.")
    need = s.model.weight_bytes(s.dtype_bytes) + (mem - prof.always_live).sum()
    lines.append(f"Splitting over at least {max(2, math.ceil(need / c.data_bytes))} chips (layers pipelined) "
                 "gives it room.")
    if prof.weights == "on-chip" and c.offchip_bytes > 0:
        stream_peak = (mem - prof.always_live).max() + c.code_bytes_per_tile
        verdict = ("then it fits" if stream_peak <= sram else
                   f"not enough alone: temporaries and code still need {stream_peak:,.0f} bytes on a tile")
        lines.append(f"Streaming weights from off-chip DRAM adds about {stream_s * 1e3:,.2f} ms per step "
                     f"({verdict}).")
    return " ".join(lines)


def profile(c, s: Step, *, weights: str = "auto", seed: int = 0, engine: str = "numba",
            explain: bool = True) -> TileProfile:
    """Map and run step ``s`` on tile chip ``c``; return the full per-tile profile.

    ``weights``: "auto" keeps weights on chip if the step fits, else streams them from
    off-chip DRAM (when the chip has any); "on_chip" never streams (a model that does not fit
    is reported as such); "stream" always streams. ``seed`` draws the embedding token ids.
    ``engine``: "numba" (default) or "python" (the plain reference loops, for tests).
    ``explain=False`` skips the out-of-memory explanation of a step that does not fit (it
    searches the largest batch that fits); callers that only read ``fits`` and ``time_s``
    (the serving tables) save that search.
    """
    c = _tile_chip(c, "simulate")
    _step_arg(s)
    choice("weights", weights, WEIGHT_MODES)
    choice("engine", engine, ENGINES)
    if s.phase == "train":
        raise ValueError("tiles maps forward, prefill and decode steps; phase 'train' is not modelled")
    if weights == "stream" and c.offchip_bytes < s.model.weight_bytes(s.dtype_bytes):
        raise ValueError(f"chip {c.name!r} has {c.offchip_bytes / 1e9:g} GB of off-chip DRAM, too little to "
                         f"stream {s.model.name}'s {s.model.weight_bytes(s.dtype_bytes) / 1e9:.2f} GB of weights from")
    cfg, dt, T = s.model, s.dtype_bytes, c.tiles
    plans = map_step(c, s, seed=seed, engine=engine)
    prog = run_program(c, plans, engine)

    base, placed, temporary, peak_op = _memory(c, s, plans)
    onchip_peak = (base + placed + temporary).max()
    stream_bytes = sum(p.stream_bytes * p.op.count for p in plans)
    stream_s_if = stream_bytes / c.offchip_bandwidth_bytes_per_s if c.offchip_bytes else 0.0
    mode = weights
    if weights == "auto":  # stream only when that is what makes the step fit
        stream_fits = (base + temporary).max() <= c.sram_per_tile_bytes
        can_stream = c.offchip_bytes >= cfg.weight_bytes(dt)
        if onchip_peak > c.sram_per_tile_bytes and stream_fits and can_stream:
            mode = "stream"
        else:  # fits on chip, or fits nowhere (then time_s = inf below)
            mode = "on_chip"
    streamed = mode == "stream"
    always = np.full(T, base) + (0.0 if streamed else placed)

    # Time
    cyc_comp = prog.slowest[:, 0] * prog.count
    cyc_exch = prog.slowest[:, 1] * prog.count
    cyc_sync = prog.sync_cycles * prog.count
    n_ops, hz = len(plans), c.clock_hz
    op_split = {
        "compute": np.bincount(prog.op_index, cyc_comp, n_ops) / hz,
        "sync": np.bincount(prog.op_index, cyc_sync, n_ops) / hz,
        "exchange": np.bincount(prog.op_index, cyc_exch, n_ops) / hz,
    }
    if streamed:
        op_split["streaming"] = np.array([p.stream_bytes * p.op.count for p in plans]) / c.offchip_bandwidth_bytes_per_s
    op_time = sum(op_split.values())
    split = {k: float(v.sum()) for k, v in op_split.items()}
    time_if_unlimited = float(op_time.sum())
    busy = ((prog.comp + prog.exch) * prog.count[:, None]).sum(axis=0) / hz

    prof = TileProfile(c, s, plans, prog, "streamed" if streamed else "on-chip", always, temporary, peak_op,
                       weight_bytes=np.zeros(T) if streamed else placed)
    mem = always + temporary
    fits = bool(mem.max() <= c.sram_per_tile_bytes)
    # The fit rule (machine.StepResult): a step that fits nowhere has no honest time.
    time_s = time_if_unlimited if fits else math.inf
    if not fits:
        msg = _fit_message(c, s, prof, stream_s_if) if explain else "does not fit (explanation not asked for)"
    elif streamed:
        msg = (f"Weights do not fit on chip ({onchip_peak:,.0f} bytes on the fullest tile); they stream "
               f"from off-chip DRAM, adding {split['streaming'] * 1e3:,.2f} ms per step.")
    else:
        msg = ""
    over = [p.op.name for p in plans if p.over_budget]
    if over:
        msg += (" " if msg else "") + (f"Temporaries of {', '.join(over)} exceed availableMemoryProportion "
                                       f"{AVAILABLE_MEMORY_PROPORTION} of a tile.")
    esplit = energy_split(prog, plans, streamed)
    prof.result = StepResult(
        chip=c.name, kind="tile", model=cfg.name, phase=s.phase, batch=s.batch,
        real_tokens=s.real_tokens, tokens=s.tokens, time_s=time_s, split=split,
        op_names=tuple(p.op.name for p in plans), op_time_s=op_time, op_split=op_split,
        unit_busy_s=busy, unit_memory_bytes=mem, memory_limit_bytes=float(c.sram_per_tile_bytes),
        fits=fits, fit_message=msg, energy_j=sum(esplit.values()) if fits else math.inf,
        energy_split=esplit, board_power_w=c.power_w,
        extra={"weights": prof.weights, "cycles": time_s * hz, "time_if_unlimited_s": time_if_unlimited,
               "supersteps": int(prog.count.sum()),
               "memory_always_live_max_bytes": float(always.max()),
               "memory_temporary_max_bytes": float(temporary.max())},
    )
    return prof


def simulate(c, s: Step, **kwargs) -> StepResult:
    """Simulate step ``s`` on tile chip ``c``; a ``machine.StepResult`` (see ``profile``)."""
    return profile(c, s, **kwargs).result


def matmul(c, m: int, k: int, n: int, *, dtype_bytes: int = 2, engine: str = "numba") -> TileProfile:
    """One (m x k) @ (k x n) matmul on the chip's tiles, as a one-op program (for lessons).

    Weights count as always-live; the result's split has compute, sync and exchange.
    """
    from ._validate import positive
    from .workloads import _matmul

    c = _tile_chip(c, "matmul")
    m, k, n = (positive(nm, v, integer=True) for nm, v in (("m", m), ("k", k), ("n", n)))
    dtype_bytes = positive("dtype_bytes", dtype_bytes, integer=True)
    choice("engine", engine, ENGINES)
    op = _matmul("matmul", 1, m, k, n, dtype_bytes)
    plan = _map_matmul(op, c, dtype_bytes, engine == "python")
    prog = run_program(c, [plan], engine)
    esplit = energy_split(prog, [plan], False)
    hz = c.clock_hz
    split = {"compute": prog.slowest[:, 0].sum() / hz, "sync": len(prog.phases) * c.sync_cycles / hz,
             "exchange": prog.slowest[:, 1].sum() / hz}
    t_unlimited = float(sum(split.values()))
    always = c.code_bytes_per_tile + plan.weights
    mem = always + plan.temp
    fits = bool(mem.max() <= c.sram_per_tile_bytes)
    t = t_unlimited if fits else math.inf  # the fit rule (machine.StepResult)
    msg = "" if fits else (f"Out of memory: {mem.max():,.0f} bytes on the fullest tile, tiles have "
                           f"{c.sram_per_tile_bytes:,}; a smaller m, k or n (or more chips) would fit.")
    res = StepResult(
        chip=c.name, kind="tile", model=f"matmul {m}x{k}x{n}", phase="forward", batch=1,
        real_tokens=m, tokens=m, time_s=t, split=split, op_names=("matmul",),
        op_time_s=np.array([t_unlimited]), op_split={k_: np.array([v]) for k_, v in split.items()},
        unit_busy_s=(prog.comp + prog.exch).sum(axis=0) / hz,
        unit_memory_bytes=mem, memory_limit_bytes=float(c.sram_per_tile_bytes),
        fits=fits, fit_message=msg, energy_j=sum(esplit.values()) if fits else math.inf,
        energy_split=esplit, board_power_w=c.power_w,
        extra={"partition": plan.partition, "cycles": t * hz, "time_if_unlimited_s": t_unlimited})
    return TileProfile(c, None, [plan], prog, "on-chip", always, plan.temp,
                       np.zeros(c.tiles, int), res)
