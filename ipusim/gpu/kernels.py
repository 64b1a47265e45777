"""The thread blocks of each op: GEMM tile and split-k candidates, fused and unfused attention,
element-wise kernels, and the plan that groups a step's ops into kernels (TensorRT fusion or one
kernel per op). Times in seconds, sizes in bytes, work in FLOP.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..hardware import GpuChip
from ..hardware import chip as _chip
from ..workloads import Op, Step
from .params import (
    ATTENTION_K_TILE,
    ATTENTION_Q_STAGE,
    ATTENTION_Q_TILE,
    ATTENTION_WHOLE_SEQUENCE_MAX_LEN,
    ELEMENTWISE_BLOCK_ELEMENTS,
    ELEMENTWISE_BLOCKS_PER_SM,
    GEMM_K_TILE,
    GEMM_SPLIT_K,
    GEMM_STAGES,
    GEMM_TILES,
    L2_BYTES_PER_CYCLE_PER_SM,
    L2_REUSE_FRACTION,
    MAX_BLOCKS_PER_SM,
    MMA_GRANULE,
    REGISTER_FILE_BYTES_PER_SM,
    TENSORRT_KERNELS,
    WAVE_FILL_CYCLES,
)


@dataclass
class Kernel:
    """One kernel instance: its blocks (as groups) and what it is made of."""

    name: str
    ops: tuple  # op names it computes
    groups: list  # [(count, compute_s, l2_s, hbm_bytes per block), ...] in dispatch order
    blocks_per_sm: int
    smem_per_block: float  # bytes of shared memory one block holds
    flops: float  # tensor-core FLOP one instance performs (padded tiles included)
    hbm_bytes: float  # HBM bytes one instance moves
    tile: str = ""
    simt_flops: float = (
        0.0  # CUDA-core FLOP one instance performs (epilogues, softmax, element-wise)
    )
    stages_smem: bool = True  # blocks stage their L2 operands in shared memory (GEMM, attention)


@dataclass(frozen=True)
class Rates:
    sms: int
    tensor_s_per_flop: float  # seconds per tensor FLOP on one SM (efficiency included)
    simt_s_per_flop: float  # seconds per CUDA-core FLOP on one SM
    sm_bw: float  # bytes/s one SM pulls from L2
    hbm_bw: float  # bytes/s of HBM, efficiency included
    l2_reuse_bytes: float  # operand size still read once from HBM
    smem_per_sm: int
    fill_s: float  # seconds each wave spends filling and draining pipelines


@functools.lru_cache(maxsize=32)
def _preset(name: str):
    return _chip(name)


def resolve(c):
    """A chip object from a preset name (cached: presets are frozen) or a chip object."""
    return _preset(c.lower()) if isinstance(c, str) else _chip(c)


def rates(c: GpuChip, tensor_eff: float, hbm_eff: float) -> Rates:
    """The per-SM rates of chip ``c`` at these efficiencies: one ``Rates`` object per equal chip
    and efficiencies (remembered, the last 64), so that the autotuner's memo, keyed on the
    rates, finds its picks by identity rather than comparing every rate."""
    key = (c, tensor_eff, hbm_eff)
    try:
        r = _RATES.get(key)
    except TypeError:  # a chip object with an unhashable field: not remembered
        return _rates(c, tensor_eff, hbm_eff)
    if r is None:
        r = _rates(c, tensor_eff, hbm_eff)
        if len(_RATES) >= 64:
            _RATES.clear()
        _RATES[key] = r
    return r


_RATES: dict = {}


def _rates(c: GpuChip, tensor_eff: float, hbm_eff: float) -> Rates:
    sm_flops = c.fp16_flops_per_cycle_per_sm * c.clock_hz * tensor_eff
    return Rates(
        sms=c.sms,
        tensor_s_per_flop=1.0 / sm_flops,
        simt_s_per_flop=c.sms / c.fp32_flops_per_s,
        sm_bw=L2_BYTES_PER_CYCLE_PER_SM * c.clock_hz,
        hbm_bw=c.hbm_bandwidth_bytes_per_s * hbm_eff,
        l2_reuse_bytes=c.l2_bytes * L2_REUSE_FRACTION,
        smem_per_sm=c.smem_per_sm_bytes,
        fill_s=WAVE_FILL_CYCLES / c.clock_hz,
    )


def _ceil(a, b):
    return -(-int(a) // int(b))


def _merge(groups):
    """Merge consecutive identical block groups (same cost), keeping dispatch order."""
    out = []
    n, cost = 0, None  # the open group: its block count so far and its cost fields
    last = None  # the group merged last: attention repeats one group object for equal shapes
    for g in groups:
        if g[0] <= 0:
            continue
        if g is last:
            n += g[0]
            continue
        rest = g[1:]
        if cost is not None and cost == rest:  # a tuple's fields (a list group never merges)
            n, cost = n + g[0], tuple(rest)  # the latest group's fields, as merging kept them
        else:
            if cost is not None:
                out.append((n, *cost))
            n, cost = g[0], tuple(rest)
        last = g if type(g) is tuple else None
    if cost is not None:
        out.append((n, *cost))
    return out


@functools.lru_cache(maxsize=64, typed=True)
def _gemm_tiles(dt, smem_per_sm: int) -> tuple:
    """Per GEMM tile at ``dt`` bytes per element: (rows, columns, shared memory one block holds,
    blocks per SM, the tile's label for each split-k factor), fixed for a chip and dtype."""
    out = []
    for tm, tn in GEMM_TILES:
        smem = (tm + tn) * GEMM_K_TILE * dt * GEMM_STAGES
        by_regs = REGISTER_FILE_BYTES_PER_SM // (
            2 * tm * tn * 4
        )  # FP32 accumulators ~ half the registers
        bps = int(max(1, min(smem_per_sm // smem, by_regs, MAX_BLOCKS_PER_SM)))
        shape = f"{tm}x{tn}"
        labels = {
            split: shape if split == 1 else f"{shape} split-k {split}" for split in GEMM_SPLIT_K
        }
        out.append((tm, tn, smem, bps, labels))
    return tuple(out)


def _gemm_candidates(
    name, ops, m, k, n, dt, r: Rates, *, epilogue_flops_per_elem=0.0, batch=1, a_shared=False
):
    """Every (tile, split-k) way to run ``batch`` GEMMs of (m x k) by (k x n) as one kernel."""
    out = []
    a_bytes, b_bytes, c_bytes = (
        m * k * dt * batch,
        k * n * dt * (1 if a_shared else batch),
        m * n * dt * batch,
    )
    mi, ki, ni = int(m), int(k), int(n)
    sms, reuse, sm_bw = r.sms, r.l2_reuse_bytes, r.sm_bw
    t_flop, s_flop = r.tensor_s_per_flop, r.simt_s_per_flop
    b_once = b_bytes <= reuse
    for tm, tn, smem, bps, labels in _gemm_tiles(dt, r.smem_per_sm):
        gm, gn = -(-mi // tm), -(-ni // tn)
        slots = sms * bps
        a_once = tm * k * dt <= reuse
        for split in GEMM_SPLIT_K:
            if split > 1 and (k < split * 2 * GEMM_K_TILE or gm * gn * batch >= slots):
                continue
            kp = -(-ki // split)
            blocks = gm * gn * split * batch
            waves = -(-blocks // slots)
            flops_blk = 2.0 * tm * tn * kp
            simt_blk = epilogue_flops_per_elem * tm * tn / split
            partial = 4.0 * tm * tn if split > 1 else 0.0  # FP32 partial tile written and re-read
            l2_blk = (tm + tn) * kp * dt + tm * tn * dt / split + 2 * partial
            b_traffic = b_bytes if b_once else b_bytes * min(waves, gm)
            a_traffic = a_bytes if a_once else a_bytes * min(waves, gn)
            part_total = 2 * partial * blocks
            hbm = a_traffic + b_traffic + c_bytes + (part_total if part_total > reuse else 0.0)
            comp = flops_blk * t_flop + simt_blk * s_flop
            out.append(
                Kernel(
                    name,
                    ops,
                    [(blocks, comp, l2_blk / sm_bw, hbm / blocks)],
                    bps,
                    smem,
                    flops_blk * blocks,
                    hbm,
                    labels[split],
                    simt_blk * blocks,
                )
            )
    return out


def _seq_shapes(s: Step):
    """Per sequence (query rows, key rows) as the attention kernels see them."""
    lens = s.lengths.astype(np.int64)
    if s.phase == "decode":
        return np.ones_like(lens), lens
    if s.row_len:
        full = np.full_like(lens, s.row_len)
        return full, full
    return lens, lens


def _fused_attention(name, ops, s: Step, r: Rates, dt):
    """Fused multi-head attention; the ``l x l`` scores stay on chip.

    One block per (head, sequence) when the keys fit ``ATTENTION_WHOLE_SEQUENCE_MAX_LEN`` or
    when decoding (TensorRT / FasterTransformer), else one per (head, sequence, query tile).
    """
    cfg = s.model
    h, hd = cfg.heads, cfg.head_dim
    kv_share = cfg.n_kv_heads / cfg.heads  # K/V of a head group are read from HBM once
    q_rows, k_rows = _seq_shapes(s)
    kv_write = s.phase == "prefill"
    whole = s.phase == "decode" or int(k_rows.max()) <= ATTENTION_WHOLE_SEQUENCE_MAX_LEN
    groups, flops, hbm, simt_total = [], 0.0, 0.0, 0.0
    g = MMA_GRANULE
    seen = {}  # (query rows, key rows) -> its block groups and their totals: batches repeat shapes
    for q, kk in zip(q_rows.tolist(), k_rows.tolist(), strict=True):
        parts = seen.get((q, kk))
        if parts is None:
            parts = seen[(q, kk)] = []
            tile = q if whole else ATTENTION_Q_TILE
            nq = _ceil(q, tile)
            kc = _ceil(kk, g) * g
            for rows, cnt in ((tile, nq - 1), (q - (nq - 1) * tile, 1)):
                if cnt <= 0:
                    continue
                rc = _ceil(rows, g) * g
                f = 4.0 * rc * kc * hd
                simt = 5.0 * rows * kk
                l2 = (2 * rows + 2 * kk) * hd * dt
                b = (2 * rows * hd + 2 * kk * hd * kv_share / nq) * dt
                if kv_write:
                    b += 2 * rows * hd * kv_share * dt
                comp = f * r.tensor_s_per_flop + simt * r.simt_s_per_flop
                parts.append(
                    ((cnt * h, comp, l2 / r.sm_bw, b), f * cnt * h, simt * cnt * h, b * cnt * h)
                )
        for group, f_total, s_total, b_total in parts:  # summed in sequence order, as before
            groups.append(group)
            flops += f_total
            simt_total += s_total
            hbm += b_total
    if whole:
        qmax, kmax = int(q_rows.max()), int(k_rows.max())
        smem = min((2 * kmax + min(qmax, ATTENTION_Q_STAGE)) * hd * dt, r.smem_per_sm)
        tile = "head x sequence"
    else:
        smem = (ATTENTION_Q_TILE + 2 * ATTENTION_K_TILE) * hd * dt * 2
        tile = f"q{ATTENTION_Q_TILE}"
    bps = int(max(1, min(r.smem_per_sm // smem, 4)))
    return Kernel(
        name, ops, _merge(groups), bps, smem, flops, hbm, tile=tile, simt_flops=simt_total
    )


def _unfused_attention(op: Op, s: Step, r: Rates, dt):
    """Scores (or context) as a batched GEMM per sequence and head, 64x64 tiles, through HBM."""
    cfg = s.model
    h, hd = cfg.heads, cfg.head_dim
    q_rows, k_rows = _seq_shapes(s)
    tm = tn = 64
    smem = (tm + tn) * GEMM_K_TILE * dt * GEMM_STAGES
    bps = int(max(1, min(r.smem_per_sm // smem, 8)))
    groups, flops, hbm = [], 0.0, 0.0
    scores = op.name == "attn_scores"
    seen = {}  # (query rows, key rows) -> its block group and totals: batches repeat shapes
    for q, kk in zip(q_rows.tolist(), k_rows.tolist(), strict=True):
        part = seen.get((q, kk))
        if part is None:
            # scores: (q x hd) @ (hd x kk); context: (q x kk) @ (kk x hd)
            m_, k_, n_ = (q, hd, kk) if scores else (q, kk, hd)
            blocks = _ceil(m_, tm) * _ceil(n_, tn)
            f = 2.0 * tm * tn * k_
            io = (m_ * k_ + k_ * n_ + m_ * n_) * dt
            l2 = (tm + tn) * k_ * dt + tm * tn * dt
            group = (blocks * h, f * r.tensor_s_per_flop, l2 / r.sm_bw, io / blocks)
            part = seen[(q, kk)] = (group, f * blocks * h, io * h)
        groups.append(part[0])
        flops += part[1]  # summed in sequence order, as before
        hbm += part[2]
    return Kernel(op.name, (op.name,), _merge(groups), bps, smem, flops, hbm, tile="64x64")


def elementwise_kernel(name, ops, flops, bytes_, elements, r: Rates):
    """A memory-streaming kernel: ``elements`` outputs, ``bytes_`` moved, ``flops`` on CUDA cores."""
    blocks = max(1, _ceil(max(elements, 1), ELEMENTWISE_BLOCK_ELEMENTS))
    b = bytes_ / blocks
    groups = [(blocks, flops / blocks * r.simt_s_per_flop, b / r.sm_bw, b)]
    return Kernel(
        name,
        ops,
        groups,
        ELEMENTWISE_BLOCKS_PER_SM,
        0.0,
        0.0,
        bytes_,
        tile="elementwise",
        simt_flops=flops,
        stages_smem=False,
    )


def op_kernel_candidates(ops: list[Op], name: str, s: Step, r: Rates, fusion: str):
    """Candidate kernels for one fused group of ops (instance = one layer)."""
    dt = s.dtype_bytes
    first = ops[0]  # m, k, n and the name are the same per instance
    if first.kind == "matmul":
        epi = 0.0
        for o in ops[1:]:  # fused epilogue (activation): CUDA-core work per output element
            epi += o.flops / o.count / max(first.m * first.n, 1)  # per-instance FLOP
        return _gemm_candidates(
            name,
            tuple(o.name for o in ops),
            first.m,
            first.k,
            first.n,
            dt,
            r,
            epilogue_flops_per_elem=epi,
        )
    if first.kind == "attention":
        if fusion == "tensorrt":
            return [_fused_attention(name, tuple(o.name for o in ops), s, r, dt)]
        return [_unfused_attention(first, s, r, dt)]
    # element-wise (norm, softmax, activation, embedding): one instance of each op, its figures
    # divided by its count as ``Op.per_instance`` divides them (no Op built for it)
    flops = sum(o.flops / o.count for o in ops)
    bytes_ = sum(
        o.weight_bytes / o.count
        + o.act_read_bytes / o.count
        + o.act_write_bytes / o.count
        + o.kv_bytes / o.count
        for o in ops
    )
    elements = first.act_write_bytes / first.count / dt
    return [elementwise_kernel(name, tuple(o.name for o in ops), flops, bytes_, elements, r)]


def kernel_plan(s: Step, fusion: str):
    """Group the step's ops into kernels: [(kernel name, (ops, ...))] in step order."""
    ops = s.ops
    return [
        (kname, tuple([ops[i] for i in idx]))
        for kname, idx in _plan(tuple([o.name for o in ops]), fusion)
    ]


@functools.lru_cache(maxsize=256)
def _plan(names: tuple, fusion: str) -> tuple:
    """``kernel_plan`` for ops named ``names``, as ((kernel name, op indices), ...): it depends
    on the names only, which every step of a model shares."""
    if fusion == "none":
        return tuple((n, (i,)) for i, n in enumerate(names))
    by_name = {n: i for i, n in enumerate(names)}
    plan, used = [], set()
    for kname, members in TENSORRT_KERNELS:
        present = tuple(by_name[m] for m in members if m in by_name)
        if present:
            plan.append((kname, present))
            used.update(names[i] for i in present)
    plan += [(n, (i,)) for i, n in enumerate(names) if n not in used]
    order = {n: i for i, n in enumerate(names)}
    plan.sort(key=lambda p: order[names[p[1][0]]])
    return tuple(plan)
