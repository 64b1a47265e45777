"""Attention planning: chunks of query rows per (sequence, head), key blocks with an online softmax.

The pieces of the three attention ops (scores, softmax, context) are chunks of one head of one
sequence; forward and prefill run over ``key_blocks`` blocks of keys with an online softmax
(running max and sum per query row, the FP32 context accumulator rescaled after the first
block), decode splits its keys over tiles. ``plan_attention`` picks the chunk count and the
fewest key blocks that fit the budget, costing each candidate with the ``_attention_cost_kernel``
(its reference, costing the whole dealt tables, is in ``tests/tileplan_reference.py``);
``map_attention`` lays one op out.

Units: bytes, FLOP, cycles; per-tile arrays.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .. import tile_params as _cal
from ..hardware import TileChip
from ..workloads import Op, Step
from .base import PARTIAL_BYTES, OpPlan, budget_bytes, deal, dealt_phase
from .search import candidates, fewest

RESCALE_FLOPS_PER_ROW = (
    3  # ASSUMPTION: per query row and key block: new max, exp(old - new), sum update
)


def _query_chunks(s: Step):
    """(rows, keys) per sequence of one head: query rows and key count under the step's layout."""
    if s.phase == "decode":
        return np.ones(s.batch), s.lengths.astype(float)
    L = np.full(s.batch, s.row_len, float) if s.row_len else s.lengths.astype(float)
    return L, L


def attention_tables(
    s: Step, r: int, key_blocks: int, which: str, n_tiles: int, first_only: bool = False
):
    """Piece tables (first key block, each later key block) of ``which`` with every
    (sequence, head) cut in ``r`` chunks and its keys in ``key_blocks`` blocks.

    Forward/prefill chunks query rows; decode (one query) chunks the keys over tiles and has
    one key block. Per key block a scores piece receives its K block (and, in the first
    block, its query rows); a context piece receives its V block. With more than one key
    block each piece keeps an FP32 context accumulator (rows x head_dim) and a running max
    and sum per row (2 x 4 bytes), and the softmax of every block after the first rescales
    the accumulator (``head_dim + RESCALE_FLOPS_PER_ROW`` FLOPs per row).
    """
    return [
        np.repeat(t, s.model.heads * r, axis=0)
        for t in _attention_seq_tables(s, r, key_blocks, which, n_tiles, first_only)
    ]


def _attention_seq_tables(
    s: Step, r: int, key_blocks: int, which: str, n_tiles: int, first_only: bool = False
):
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
    acc = online * (
        qc * hd * PARTIAL_BYTES + 2 * qc * PARTIAL_BYTES
    )  # accumulator and running max/sum
    out = []
    for first in (True,) if first_only else (True, False):
        if which == "attn_scores":
            recv = (first * qc + kb) * hd * dt * remote
            sent = (
                (first * qc + kb / r) * hd * dt * remote
            )  # query rows once, K once per head (multicast)
            t = _columns(
                [
                    2 * area * hd,
                    (qc + kb) * hd * dt,
                    recv,
                    sent,
                    (qc + kb) * hd * dt + area * dt + acc,
                    z,
                ]
            )
        elif which == "attn_context":
            recv = kb * hd * dt * remote
            out_b = qc * hd * (PARTIAL_BYTES if online else dt)
            t = _columns(
                [
                    2 * area * hd,
                    area * dt + kb * hd * dt,
                    recv,
                    recv / r,  # V once per head
                    area * dt + kb * hd * dt + out_b + (acc - online * qc * hd * PARTIAL_BYTES),
                    z,
                ]
            )
        else:  # softmax in place on the score block; rescale the accumulator after the first block
            rescale = (not first) * online * qc * (hd + RESCALE_FLOPS_PER_ROW)
            t = _columns(
                [
                    5 * area + rescale,
                    2 * area * dt + (not first) * online * 2 * qc * hd * PARTIAL_BYTES,
                    z,
                    z,
                    2 * area * dt + acc,
                    z,
                ]
            )
        out.append(t)
    return out


def _columns(cols: list) -> np.ndarray:
    """``np.column_stack(cols)`` of equal-length 1-D float columns, written into one table."""
    out = np.empty((cols[0].size, len(cols)))
    for i, col in enumerate(cols):
        out[:, i] = col
    return out


def _key_block_counts(keys: int) -> list:
    return [int(p) for p in candidates(keys, keys, small=16, factors=(1, 3))]


_ATT_OPS = ("attn_scores", "softmax", "attn_context")


@njit(cache=True, error_model="numpy")
def _attention_cost_kernel(
    rows,
    keys,
    decode,
    r,
    nb,
    hd,
    dt,
    remote,
    rep,
    n_tiles,
    amp_rate,
    vector_rate,
    sram_rate,
    vertex,
    amp_overhead,
    rearrange,
    x,
    sync,
):
    """``_attention_cost_tables`` without its tables: (cycles, largest working set) of the three
    attention ops for ``r`` chunks and ``nb`` key blocks, from the per-sequence ``rows`` and
    ``keys`` (``_query_chunks``), each sequence's row repeated ``rep`` = heads x r times.

    Per op (0 scores, 1 softmax, 2 context; the order of ``_ATT_OPS``) and key block (the
    first, then each later one): the columns of ``_attention_seq_tables`` the cost reads
    (FLOP, load, received, working set) per sequence into ``tab`` (4 a row), scalar by scalar, each
    expression in the same order as there; then the pieces (row ``i // rep`` for piece ``i``)
    dealt as ``_distribute`` deals them (a tile's pieces are consecutive; its sums are
    accumulated in piece order from zero, as there) and costed as the dealt tables are:
    the slowest tile's compute, the slowest exchange and a sync per superstep. A tile whose
    pieces are as many copies of one row as one of the last two such tiles' of a row of equal
    values (consecutive equal rows are one run) has its sums, so adds nothing to the maxima: it is
    skipped (a padded batch deals thousands of alike tiles; the result is the same bits). One kernel,
    no callees: each kernel Numba compiles costs a newcomer's first run a fixed share.
    Preconditions: rows, keys float64 of one size B >= 1; r, nb, rep >= 1."""
    B = rows.size
    P = B * rep
    online = nb > 1
    # row b at 4 b, its run id at 4 B + b (every entry written before it is read); np.empty
    # with dtype=, the one float allocation the kernels compile (np.zeros would add three
    # overloads to a newcomer's first run)
    tab = np.empty(5 * B, dtype=np.float64)
    cyc, work = 0.0, 0.0
    for k in range(6):
        which, first = k // 2, k % 2 == 0
        times = 1 if first else nb - 1
        if times == 0:
            continue
        for b in range(B):
            if decode:
                kc, qc = keys[b] / r, rows[b]
            else:
                kc, qc = keys[b], rows[b] / r
            kb = kc / nb
            area = qc * kb
            acc = qc * hd * PARTIAL_BYTES + 2 * qc * PARTIAL_BYTES if online else 0.0
            if which == 0:
                fq = qc if first else 0.0
                tab[4 * b + 0] = 2 * area * hd
                tab[4 * b + 1] = (qc + kb) * hd * dt
                tab[4 * b + 2] = (fq + kb) * hd * dt * remote
                tab[4 * b + 3] = (qc + kb) * hd * dt + area * dt + acc
            elif which == 2:
                oq = qc if online else 0.0
                tab[4 * b + 0] = 2 * area * hd
                tab[4 * b + 1] = area * dt + kb * hd * dt
                tab[4 * b + 2] = kb * hd * dt * remote
                out_b = qc * hd * (PARTIAL_BYTES if online else dt)
                tab[4 * b + 3] = area * dt + kb * hd * dt + out_b + (acc - oq * hd * PARTIAL_BYTES)
            else:
                later = (not first) and online
                lq = qc if later else 0.0
                tab[4 * b + 0] = 5 * area + lq * (hd + RESCALE_FLOPS_PER_ROW)
                tab[4 * b + 1] = 2 * area * dt + (2 * qc if later else 0.0) * hd * PARTIAL_BYTES
                tab[4 * b + 2] = 0.0
                tab[4 * b + 3] = 2 * area * dt + acc
        amp = which != 1
        rate = amp_rate if amp else vector_rate
        cmax, xmax = 0.0, 0.0  # a tile with no piece costs 0; every column is >= 0
        # run id of each row (tab[4 B + b]): a row equal to the one before it shares its id
        for b in range(B):
            same = b > 0
            for q in range(4):
                same = same and tab[4 * b + q] == tab[4 * (b - 1) + q]
            tab[4 * B + b] = tab[4 * B + b - 1] if same else b
        # the last two tiles whose pieces are all of one run of rows: (run id, pieces) each;
        # two, as a tile's piece count alternates between two values
        mb0 = -1.0
        mb1 = -1.0
        mn0 = 0
        mn1 = 0
        slot = 0
        # tile t holds pieces ceil(t P / T) .. ceil((t + 1) P / T) - 1 (those with i T // P = t):
        # one piece each when P <= T, else every tile some; piece i is copy j of row b
        # (with t P = T t q + t rem: the end is t q + t rem // T + (t rem % T > 0), stepped
        # without a division: fl = t q + t rem // T, fr = t rem % T)
        q = P // n_tiles
        rem = P % n_tiles
        i = 0
        b = 0
        j = 0
        fl = 0
        fr = 0
        while i < P:
            if P <= n_tiles:
                end = i + 1
            else:
                fl += q
                fr += rem
                if fr >= n_tiles:
                    fr -= n_tiles
                    fl += 1
                end = fl + 1 if fr > 0 else fl
            n = end - i
            run = tab[4 * B + b]
            last = b if j + n <= rep else b + (j + n - 1) // rep  # the row of the tile's last piece
            if tab[4 * B + last] == run:  # one run of equal rows: sums as any tile of n of them
                if (n == mn0 and run == mb0) or (n == mn1 and run == mb1):
                    # a tile like one costed, whose maxima are taken: skip it
                    i = end
                    j += n
                    b += j // rep
                    j = j % rep
                    if P <= n_tiles:  # one piece a tile: the rest of the run is alike too
                        while b < B and tab[4 * B + b] == run:
                            b += 1
                        i = b * rep
                        j = 0
                    elif mb0 == run and (rem == 0 or (mb1 == run and mn0 + mn1 == 2 * q + 1)):
                        # both piece counts of this run seen: every tile up to the one holding
                        # the run's last piece is alike; go to that one
                        bb = b
                        while bb < B and tab[4 * B + bb] == run:
                            bb += 1
                        tl = ((bb * rep - 1) * n_tiles) // P
                        tl_fl = tl * q + (tl * rem) // n_tiles
                        tl_fr = (tl * rem) % n_tiles
                        start = tl_fl + 1 if tl_fr > 0 else tl_fl
                        if start > i:
                            fl = tl_fl
                            fr = tl_fr
                            i = start
                            b = i // rep
                            j = i - b * rep
                    continue
                if slot == 0:
                    mb0 = run
                    mn0 = n
                else:
                    mb1 = run
                    mn1 = n
                slot = 1 - slot
            f, ld, rv, w, cnt = 0.0, 0.0, 0.0, 0.0, 0.0
            while i < end:
                row = 4 * b
                f += tab[row]
                ld += tab[row + 1]
                rv += tab[row + 2]
                w += tab[row + 3]
                cnt += 1.0
                i += 1
                j += 1
                if j == rep:
                    j = 0
                    b += 1
            comp = max(f / rate, ld / sram_rate) + cnt * vertex
            if amp:
                comp = comp + (amp_overhead + rv / rearrange)
            cmax = max(cmax, comp)
            xmax = max(xmax, rv / x)
            work = max(work, w)
        cyc += times * (sync + cmax + xmax)
    return cyc, work


def _attention_phases(s, c, r, nb, which):
    """Dealt per-tile tables of the first key block and of each later one (the same array
    when there is one key block): ``deal`` of ``attention_tables``, each sequence's row dealt
    ``heads x r`` times (``deal``'s ``rep``)."""
    out = [
        deal(t, c.tiles, rep=s.model.heads * r)
        for t in _attention_seq_tables(s, r, nb, which, c.tiles, first_only=nb == 1)
    ]
    return out[0], out[-1]


def _step_inputs(s, c) -> tuple:
    """The kernel's inputs of step ``s`` on chip ``c`` that no candidate changes: (rows,
    keys, decode, head_dim, dtype bytes, remote share, heads, tiles, then the rates and the
    calibration from the AMP rate on)."""
    rows, keys = _query_chunks(s)
    T = c.tiles
    return (
        np.ascontiguousarray(rows, dtype=np.float64),
        np.ascontiguousarray(keys, dtype=np.float64),
        s.phase == "decode",
        s.model.head_dim,
        s.dtype_bytes,
        (T - 1) / T,
        s.model.heads,
        T,
        float(c.amp_flops_per_cycle_per_tile(s.dtype_bytes)),
        float(c.fp32_flops_per_cycle_per_tile),
        float(c.sram_bytes_per_cycle_per_tile),
        float(c.vertex_overhead_cycles),
        float(_cal.AMP_PHASE_OVERHEAD_CYCLES),
        float(_cal.REARRANGE_BYTES_PER_CYCLE),
        c.exchange_bytes_per_cycle_per_tile * _cal.EXCHANGE_EFFICIENCY,
        float(c.sync_cycles),
    )


def _attention_cost(s, c, r, nb, inputs=None):
    """(cycles of the three attention ops, largest working set on a tile) for r chunks, nb
    key blocks: per superstep the slowest tile's compute plus the slowest exchange, plus a sync.
    ``inputs``: ``_step_inputs(s, c)`` when the caller has it (``plan_attention`` works it out
    once for all its candidates)."""
    if inputs is None:
        inputs = _step_inputs(s, c)
    rows, keys, decode, hd, dt, remote, heads, T, *rates = inputs
    return _attention_cost_kernel(rows, keys, decode, r, nb, hd, dt, remote, heads * r, T, *rates)


def plan_attention(s: Step, c: TileChip, budget: float | None = None) -> tuple:
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
    inputs = _step_inputs(s, c)  # what no candidate changes, once
    for r in sorted({min(span, v) for v in (1, base, base + 1, 2 * base, 4 * base, 8 * base)}):

        def cost(nb, r=r):
            cyc, work = _attention_cost(s, c, r, nb, inputs)
            return cyc, nb, work, bool(work <= budget)

        found = fewest(counts, cost)
        if found is not None and (best is None or found[0] < best[0]):
            best = (found[0], r, found[1])
        if found is None:
            w = cost(counts[-1])[2]
            if least is None or w < least[0]:
                least = (w, r, counts[-1])
    if best is not None:
        return best[1], best[2], True, budget
    return least[1], least[2], False, budget


def map_attention(
    op: Op, s: Step, c: TileChip, r: int, key_blocks: int, fits: bool, budget: float
) -> OpPlan:
    """Attention products and softmax: pieces are chunks of one head of one sequence, run
    over ``key_blocks`` passes (see ``attention_tables``); the softmax reuses the score
    layout so it needs no exchange. Q, K and V (the qkv output) are held while it runs."""
    G = s.model.heads * s.batch
    label = "attention" if op.kind == "attention" else op.kind
    amp = op.kind == "attention"
    first, rest = _attention_phases(s, c, r, key_blocks, op.name)
    phases = [dealt_phase(op.name, label, amp, first, s.dtype_bytes)]
    if key_blocks > 1:
        p_rest = dealt_phase(op.name, label, amp, rest, s.dtype_bytes)
        phases += [p_rest] * (key_blocks - 1)
    work = np.maximum(first[:, 4], rest[:, 4])
    live = attention_live_bytes(s, c.tiles)
    rows, keys = _query_chunks(s)
    q = float(rows.max()) if s.phase == "decode" else float(rows.max()) / r
    kk = float(keys.max()) / (r if s.phase == "decode" else key_blocks)
    part = f"{G} head-sequences x {r} chunks" + (
        f", {key_blocks} key blocks (online softmax)" if key_blocks > 1 else ""
    )
    return OpPlan(
        op,
        part,
        G * r,
        phases,
        first[:, 5],
        work + live,
        over_budget=not fits,
        passes=key_blocks,
        pass_axis="keys" if key_blocks > 1 else "",
        block=(q, kk),
        working_set_bytes=float(work.max()),
        budget_bytes=float(budget),
    )


def attention_live_bytes(s: Step, T: int) -> float:
    """Bytes per tile of Q, K and V of the batch, spread over ``T`` tiles, held while attention
    runs: ``tokens x (q_dim + 2 kv_dim)`` (a tensor-parallel shard's ``q_dim`` is its own heads'
    width, not ``d_model``)."""
    return s.tokens * (s.model.q_dim + 2 * s.model.kv_dim) * s.dtype_bytes / T
