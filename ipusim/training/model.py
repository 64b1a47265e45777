"""One training step on N chips: the per-chip roofline of each layer, the pipeline and the collectives.

Everything is element-wise over NumPy arrays of candidate placements, so the search
(``ipusim.training.search``) times thousands of placements in one call.

Per chip and micro-batch, each op of a layer costs ``max(FLOPs / (peak x efficiency),
bytes / level bandwidth)`` (a roofline per op, ops not overlapped), where the level is the
one the op's bytes live in (tile SRAM, Streaming Memory DRAM, HBM). The backward pass of an
op costs twice its forward FLOPs and reads what the forward read and wrote (the stored input
and the incoming gradient) and writes a gradient of its input; weight gradients are written
(and read back to accumulate over micro-batches). Recomputation adds a forward of the layer
(``full``) or of the attention core (``selective``). The pipeline runs 1F1B: a step is
``(m + p - 1)`` micro-batch slots of the busiest stage, so the idle share is the bubble
``(p - 1) / (m + p - 1)`` (Narayanan et al. 2021, §2.2). Tensor-parallel all-reduces (two per
layer forward, two backward, Shoeybi et al. 2019), pipeline sends, the data-parallel gradient
reduction and ZeRO-3's weight gathers use ``ipusim.collectives`` at the published link rates
and are not overlapped with compute. The Adam update streams 28 bytes per parameter of the
chip's shard through the level that holds the optimizer state.

Efficiency parameters (global, set once; see ``ipusim.training.calibration``):
``GPU_MATMUL_EFFICIENCY`` and ``TILE_MATMUL_EFFICIENCY``. Element-wise ops and HBM traffic
use ``ipusim.gpu.HBM_EFFICIENCY``; tile SRAM traffic runs at the chip's SRAM bandwidth.
"""

from __future__ import annotations

import functools

import numpy as np

from .. import collectives
from .. import gpu as _gpu
from . import memory as mem

GPU_MATMUL_EFFICIENCY = 0.55
"""Fraction of the dense FP16 peak that a GPU's training matmuls sustain (forward and backward).

In sample: Megatron-LM's GPT-3 175B on 1,024 A100s, 140 TFLOP/s per GPU (Narayanan et al.
2021, Table 1: t = 8, p = 16, d = 8, global batch 1,536, full recomputation). Rule: the value
on the grid 0.30, 0.31, ..., 1.00 that brings this model's hardware FLOP/s per GPU at that
placement (micro-batch 1) closest to 140 TFLOP/s; ``calibration.fit_gpu_matmul_efficiency``
reproduces it and a test checks it. Out of sample: the Llama-2 pre-training GPU-hours
(Touvron et al. 2023, Table 2). It lumps what the model leaves out (kernel launches, unfused
bias/dropout kernels, clocks under load, stragglers)."""

TILE_MATMUL_EFFICIENCY = 0.473
"""Fraction of the AMP peak a tile chip's matmuls sustain: JIA-FT's measured mixed-precision
GEMM on one GC2, 58.9 of 124.5 TFLOPS (facts §1.5), applied to every tile chip. Sourced, not
fitted to any training figure; Graphcore's BERT-base pre-training throughput on a Bow Pod16
(facts §6.3) is held out to check it."""

LEVELS = ("on_chip", "optimizer_streamed", "states_streamed")
"""Where a tile chip keeps the training state: everything in tile SRAM; the FP32 master
weights and Adam moments in Streaming Memory (brought in for the update); or all weights,
gradients and optimizer state in Streaming Memory, each layer's weights brought in per
phase (forward, backward, recompute) for every micro-batch and its gradients accumulated there."""


def layer_ops(cfg, seq_len, micro_batch, t, recompute_none):
    """Per-chip FLOPs and bytes of one layer's forward for one micro-batch, by op.

    Returns a list of ``(name, kind, flops, weight_bytes, act_read_bytes, act_write_bytes)``
    of arrays. ``kind`` is "matmul", "attention" or "elementwise". Matmuls follow
    ``workloads.step``'s shapes split over ``t`` chips (column-parallel qkv and ffn_up,
    row-parallel attn_out and ffn_down); ``recompute_none`` (bool array) marks candidates
    that store the attention scores (an unfused attention), the others run it fused.
    """
    s = float(seq_len)
    b = np.asarray(micro_batch, float)
    t = np.asarray(t, float)
    T = b * s
    d, f, kvd = cfg.d_model, cfg.d_ff, cfg.kv_dim
    up = (2 if cfg.gated_mlp else 1) * f
    ops = []
    for name, k, n, row in (("qkv", d, d + 2 * kvd, False), ("attn_out", d, d, True),
                            ("ffn_up", d, up, False), ("ffn_down", f, d, True)):
        ops.append((name, "matmul", 2.0 * T * k * n / t, 2.0 * k * n / t,
                    2.0 * T * k / (t if row else 1.0), 2.0 * T * n / (1.0 if row else t)))
    area = b * s * s  # sum of l_q * l_k over the micro-batch (full square, as workloads.step)
    att_flops = 4.0 * cfg.heads * cfg.head_dim * area / t
    qkv_bytes = 2.0 * T * (d + 2 * kvd) / t
    scores = cfg.heads * area / t  # score elements on this chip
    unfused = np.asarray(recompute_none, bool)
    # Unfused: scores written (2 B), softmax read+written, dropout mask (1 B), read by the context.
    att_read = qkv_bytes + np.where(unfused, 2.0 * 2.0 * scores, 0.0)
    att_write = 2.0 * T * d / t + np.where(unfused, 5.0 * scores, 0.0)
    ops.append(("attention", "attention", att_flops, 0.0 * T, att_read, att_write))
    # Two norms (read x and residual, write), the MLP activation (gated reads two inputs);
    # sequence parallelism splits them over t.
    ops.append(("norms", "elementwise", 16.0 * T * d / t, 0.0 * T, 2 * 2.0 * 2.0 * T * d / t, 2 * 2.0 * T * d / t))
    reads = 2.0 if cfg.gated_mlp else 1.0
    ops.append(("activation", "elementwise", 8.0 * T * f / t, 0.0 * T, reads * 2.0 * T * f / t, 2.0 * T * f / t))
    return ops


def head_ops(cfg, seq_len, micro_batch, t):
    """Per-chip FLOPs and bytes of the output head (LM head or pooler) for one micro-batch."""
    b = np.asarray(micro_batch, float)
    t = np.asarray(t, float)
    T = b * float(seq_len)
    d = cfg.d_model
    if cfg.kind == "encoder":
        rows, n = b, d  # pooler on the first token of each sequence
    else:
        rows, n = T, cfg.vocab
    return ("head", "matmul", 2.0 * rows * d * n / t, 2.0 * d * n / t, 2.0 * rows * d, 2.0 * rows * n / t)


def _op_time(flops, byts, peak_eff, bw):
    return np.maximum(flops / peak_eff, byts / bw)


def _chip_rates(chip):
    """(matmul FLOP/s, element-wise FLOP/s, bandwidth of the level activations live in)."""
    if chip.kind == "gpu":
        return (chip.peak_flops * GPU_MATMUL_EFFICIENCY, chip.peak_flops * GPU_MATMUL_EFFICIENCY,
                chip.hbm_bandwidth_bytes_per_s * _gpu.HBM_EFFICIENCY)
    return (chip.peak_flops * TILE_MATMUL_EFFICIENCY, chip.peak_flops * TILE_MATMUL_EFFICIENCY,
            chip.sram_bandwidth_bytes_per_s)


def stage_params(cfg, p):
    """Parameters of the busiest pipeline stage (first or last), element-wise over ``p``."""
    p = np.asarray(p, float)
    lp = np.ceil(cfg.layers / p)
    layer = lp * cfg.layer_params
    head_extra = cfg.head_params + (cfg.vocab * cfg.d_model if cfg.tied_embeddings and cfg.kind == "decoder" else 0)
    first = layer + cfg.embedding_params
    last = layer + cfg.head_params + np.where(p > 1, head_extra - cfg.head_params, 0.0)
    both = cfg.params + 0.0 * p
    return np.where(p > 1, np.maximum(first, last), both)


def evaluate_memory(cfg, chip, seq_len, global_batch, d, t, p, b, recompute, sharding):
    """Memory per chip by category and the level index (``LEVELS``; -1: does not fit), arrays."""
    d, t, p, b, rc, z = np.broadcast_arrays(*(np.asarray(x) for x in (d, t, p, b, recompute, sharding)))
    d, t, p, b = (x.astype(float) for x in (d, t, p, b))
    s = float(seq_len)
    m = global_batch / (d * b)
    lp = np.ceil(cfg.layers / p)
    rc_sel, rc_full = rc == 1, rc == 2
    # ---- memory per chip -------------------------------------------------------------
    params_chip = stage_params(cfg, p) / t
    st = mem.state_bytes(params_chip, d, z)
    act_layer = np.select([rc_full, rc_sel], [mem.activation_bytes_per_layer(s, b, cfg.d_model, cfg.heads, t, "full"),
                                              mem.activation_bytes_per_layer(s, b, cfg.d_model, cfg.heads, t, "selective")],
                          mem.activation_bytes_per_layer(s, b, cfg.d_model, cfg.heads, t, "none"))
    in_flight = np.minimum(p, m)
    logits = mem.logits_bytes(s, b, cfg.vocab, t) if cfg.kind == "decoder" else 0.0 * b
    act = np.maximum(act_layer * lp * in_flight, act_layer * lp + logits)
    working = mem.layer_working_bytes(s, b, cfg.d_model, t)
    states = st["weights"] + st["gradients"] + st["optimizer"]
    total = states + act + working

    if chip.kind == "gpu":
        level = np.where(total <= mem.GPU_USABLE_FRACTION * chip.hbm_bytes, 0, -1)
    else:
        sram, dram = float(chip.data_bytes), float(chip.offchip_bytes)
        # Streamed states come in one matmul at a time, double-buffered (weights and gradients).
        biggest = max(cfg.d_model * (cfg.d_model + 2 * cfg.kv_dim), (2 if cfg.gated_mlp else 1) * cfg.d_model * cfg.d_ff)
        layer_buf = 2.0 * (biggest / t) * (mem.BYTES_WEIGHT + mem.BYTES_GRAD)
        fit0 = total <= sram
        fit1 = (total - st["optimizer"] <= sram) & (st["optimizer"] <= dram)
        fit2 = (act + working + layer_buf <= sram) & (states <= dram)
        level = np.select([fit0, fit1, fit2], [0, 1, 2], -1)

    return {"level": level, "params_chip": params_chip, "states": st,
            "memory": {"weights": st["weights"], "gradients": st["gradients"], "optimizer": st["optimizer"],
                       "activations": act, "working": working},
            "memory_total": total}


def evaluate(cfg, chip, chips, seq_len, global_batch, d, t, p, b, recompute, sharding):
    """Time and memory of a training step for arrays of placements (all broadcastable).

    ``recompute`` is an integer array indexing ``memory.RECOMPUTE``; ``sharding`` holds 0-3.
    Returns a dict of arrays: ``step_time_s`` (inf where it does not fit), the time split,
    the memory categories per chip, ``level`` (index into ``LEVELS``; -1: does not fit) and
    FLOP counts. The caller checks that ``d * t * p == chips`` and ``global_batch`` divides
    into ``d * b``.
    """
    d, t, p, b, rc, z = np.broadcast_arrays(*(np.asarray(x) for x in (d, t, p, b, recompute, sharding)))
    d, t, p, b = (x.astype(float) for x in (d, t, p, b))
    s = float(seq_len)
    m = global_batch / (d * b)  # micro-batches per replica per step
    lp = np.ceil(cfg.layers / p)
    rc_none, rc_sel, rc_full = rc == 0, rc == 1, rc == 2

    mr = evaluate_memory(cfg, chip, seq_len, global_batch, d, t, p, b, rc, z)
    level, params_chip = mr["level"], mr["params_chip"]

    # ---- compute per micro-batch on the busiest stage ---------------------------------
    mm_rate, ew_rate, bw = _chip_rates(chip)
    accumulate = np.where(m > 1, 3.0, 2.0)  # weight-gradient bytes: write (+ read back to accumulate)
    tf = tb = trc = 0.0
    flops_fwd_layer = 0.0
    for name, kind, fl, wb, ar, aw in layer_ops(cfg, s, b, t, rc_none):
        rate = ew_rate if kind == "elementwise" else mm_rate
        fwd = _op_time(fl, wb + ar + aw, rate, bw)
        bwd = _op_time(2.0 * fl, accumulate * wb + (ar + aw) + ar, rate, bw)
        tf = tf + fwd
        tb = tb + bwd
        if kind != "elementwise":
            flops_fwd_layer = flops_fwd_layer + fl
        if name == "attention":
            trc = trc + np.where(rc_sel | rc_full, fwd, 0.0)
        else:
            trc = trc + np.where(rc_full, fwd, 0.0)
    _, _, hf, hw, har, haw = head_ops(cfg, s, b, t)
    t_head = _op_time(hf, hw + har + haw, mm_rate, bw) + _op_time(2 * hf, accumulate * hw + har + haw + har, mm_rate, bw)

    # ---- tensor-parallel collectives (per layer per micro-batch) -------------------------
    fab = _fabric(chip, int(np.max(d * t * p)) if np.size(d) else chips)
    tp_bytes = 2.0 * b * s * cfg.d_model  # one activation all-reduce, bytes
    n_ar = 4.0 + 2.0 * rc_full  # two forward, two backward, two more when the forward is recomputed
    t_tp = n_ar * _group_all_reduce(fab, tp_bytes, t, 1.0)

    t_mb = lp * (tf + tb + trc + t_tp) + t_head
    # Tile chip with states in Streaming Memory: each layer's weights come in per phase and its
    # gradients are accumulated there; prefetching overlaps the copies with compute.
    if chip.kind == "tile" and chip.offchip_bandwidth_bytes_per_s > 0:
        w_stage = params_chip * mem.BYTES_WEIGHT
        phases = 2.0 + rc_full
        stream = (phases * w_stage + 2.0 * params_chip * mem.BYTES_GRAD) / chip.offchip_bandwidth_bytes_per_s
        t_stream_mb = np.where(level == 2, stream, 0.0)
    else:
        t_stream_mb = 0.0 * t_mb
    t_slot = np.maximum(t_mb, t_stream_mb)

    # ---- pipeline: 1F1B over m micro-batches, p stages -----------------------------------
    slots = m + p - 1.0
    t_pipe = slots * t_slot
    p2p_bytes = 2.0 * b * s * cfg.d_model / t
    cross = t * p > fab.chips_per_node
    t_p2p = np.where(p > 1, slots * 2.0 * _p2p(fab, p2p_bytes, cross), 0.0)

    # ---- data parallel: gradients reduced, (sharded) weights gathered --------------------
    grad_bytes = params_chip * mem.BYTES_GRAD
    w_bytes = params_chip * mem.BYTES_WEIGHT
    stride = t * p
    t_dp = np.where(z >= 1,
                    _group_reduce_scatter(fab, grad_bytes, d, stride) + _group_all_gather(fab, w_bytes, d, stride),
                    _group_all_reduce(fab, grad_bytes, d, stride))
    gathers = np.where(z >= 3, m * (2.0 + rc_full), 0.0)
    t_dp = t_dp + gathers * _group_all_gather(fab, w_bytes, d, stride)

    # ---- optimizer update ----------------------------------------------------------------
    upd_params = params_chip / np.where(z >= 1, d, 1.0)
    if chip.kind == "gpu":
        t_opt = upd_params * mem.OPTIMIZER_TRAFFIC_BYTES_PER_PARAM / bw
    else:
        big = 2 * mem.BYTES_OPTIMIZER
        small = mem.OPTIMIZER_TRAFFIC_BYTES_PER_PARAM - big
        dram_bw = chip.offchip_bandwidth_bytes_per_s or bw
        t_opt = np.where(level >= 1, upd_params * big / dram_bw, upd_params * big / bw) + upd_params * small / bw

    compute = slots * t_mb - (p - 1.0) * t_mb  # m busy slots
    bubble = (p - 1.0) * t_mb
    streaming = slots * (t_slot - t_mb)
    step = t_pipe + t_p2p + t_dp + t_opt
    fits = level >= 0
    step = np.where(fits, step, np.inf)

    # FLOPs: model FLOPs (forward + backward, no recompute) and hardware FLOPs (with recompute).
    tokens = global_batch * s
    model_flops = _model_flops_per_token(cfg, s) * tokens
    att_fwd = 4.0 * cfg.heads * cfg.head_dim * s * s * cfg.layers  # attention core, one sequence
    layer_fwd_tok = 2.0 * cfg.nonembedding_matmul_params + att_fwd / s
    hw_extra = np.select([rc_full, rc_sel], [layer_fwd_tok * tokens, att_fwd / s * tokens], 0.0)
    return {
        "step_time_s": step,
        "fits": fits,
        "level": level,
        "micro_batches": m,
        "split": {
            "compute": np.where(fits, compute - m * lp * t_tp, np.nan),
            "tensor_parallel": np.where(fits, m * lp * t_tp, np.nan),
            "pipeline_bubble": np.where(fits, bubble, np.nan),
            "streaming": np.where(fits, streaming, np.nan),
            "pipeline_p2p": np.where(fits, t_p2p, np.nan),
            "data_parallel": np.where(fits, t_dp, np.nan),
            "optimizer": np.where(fits, t_opt, np.nan),
        },
        "memory": mr["memory"],
        "memory_total": mr["memory_total"],
        "model_flops": np.full(step.shape, model_flops),
        "hardware_flops": model_flops + hw_extra,
        "flops_fwd_layer_chip": flops_fwd_layer,
    }


@functools.lru_cache(maxsize=256)
def _model_flops_per_token(cfg, seq_len):
    """Model FLOPs per token of training (forward + backward, no recompute), as ``workloads.step``."""
    from .. import workloads

    return workloads.step(cfg, [int(seq_len)], phase="train").flops / seq_len


@functools.lru_cache(maxsize=64)
def _fabric(chip, chips):
    return collectives.fabric(chip, chips)


# ---- collectives on strided groups (data-parallel replicas sit t*p chips apart) --------------
def _split(fab, size, stride):
    """(peers inside one node, nodes spanned) of a group of ``size`` chips ``stride`` apart."""
    per_node = max(1, fab.chips_per_node // int(stride)) if stride < fab.chips_per_node else 1
    per_node = min(per_node, int(size))
    return per_node, max(1, int(size) // per_node)


def _vec(fn):
    def wrapped(fab, nbytes, size, stride, *rest):
        nbytes, size, stride = np.broadcast_arrays(np.asarray(nbytes, float), np.asarray(size, float),
                                                   np.asarray(stride, float))
        out = np.empty(nbytes.shape)
        cache = {}
        for i in np.ndindex(nbytes.shape):
            key = (float(nbytes[i]), int(size[i]), int(stride[i]))
            if key not in cache:
                cache[key] = fn(fab, *key, *rest)
            out[i] = cache[key]
        return out
    return wrapped


@_vec
def _group_all_reduce(fab, n, size, stride):
    if size == 1:
        return 0.0
    g, k = _split(fab, size, stride)
    if k == 1:
        return collectives.all_reduce_s(n, g, fab.intra)
    if g == 1:
        return collectives.all_reduce_s(n, k, fab.inter)
    return collectives.hierarchical_all_reduce_s(n, g, k, fab.intra, fab.inter)


def _two_level(collective, fab, n, size, stride):
    """A reduce-scatter or all-gather (``collective``) over a group: inside the node on ``n`` bytes,
    then across nodes on the node's 1/g share."""
    if size == 1:
        return 0.0
    g, k = _split(fab, size, stride)
    return collective(n, g, fab.intra) + (collective(n / g, k, fab.inter) if k > 1 else 0.0)


@_vec
def _group_reduce_scatter(fab, n, size, stride):
    return _two_level(collectives.reduce_scatter_s, fab, n, size, stride)


@_vec
def _group_all_gather(fab, n, size, stride):
    return _two_level(collectives.all_gather_s, fab, n, size, stride)


def _p2p(fab, nbytes, cross):
    nbytes, cross = np.broadcast_arrays(np.asarray(nbytes, float), np.asarray(cross, bool))
    out = np.empty(nbytes.shape)
    for i in np.ndindex(nbytes.shape):
        out[i] = collectives.point_to_point_s(float(nbytes[i]), fab.inter if cross[i] else fab.intra)
    return out


def bubble_fraction(m, p):
    """Idle share of a 1F1B pipeline step: ``(p - 1) / (m + p - 1)`` (Narayanan et al. 2021, §2.2)."""
    if m < 1 or p < 1:
        raise ValueError(f"micro-batches and stages must be >= 1, got m={m}, p={p}")
    return (p - 1) / (m + p - 1)


__all__ = ["GPU_MATMUL_EFFICIENCY", "LEVELS", "TILE_MATMUL_EFFICIENCY", "bubble_fraction", "evaluate",
           "head_ops", "layer_ops", "stage_params"]
