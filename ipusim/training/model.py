"""One training step on N chips: the machine model's ops per chip, the pipeline and the collectives.

The per-candidate bookkeeping is element-wise over NumPy arrays of placements, so the search
(``ipusim.training.search``) times thousands of placements in one call; the ops themselves are
timed by the machine model inference uses (``ipusim.training.ops``: the tile simulator on tile
chips, the GPU model on GPUs), once per (chip, model, micro-batch, sequence, tensor degree and,
on a tile chip, the room the training state leaves per tile), since a layer's cost does not
depend on the data or pipeline degree.

Per micro-batch the busiest stage runs ``ceil(layers / p)`` layers' forward, backward and
recomputation and, on the first or last stage, the embedding and head. The pipeline runs 1F1B:
a step is ``(m + p - 1)`` micro-batch slots of the busiest stage, so the idle share is the bubble
``(p - 1) / (m + p - 1)`` (Narayanan et al. 2021, §2.2). Tensor-parallel all-reduces (two per
layer forward, two backward, Shoeybi et al. 2019), pipeline sends, the data-parallel gradient
reduction and ZeRO-3's weight gathers use ``ipusim.collectives`` over the fabric a system of that
size has, and are not overlapped with compute. Gradients are reduced once per step after
accumulation over the micro-batches (sharding stages 0 and 1); with sharded gradients (stages 2
and 3) every micro-batch's gradients are reduce-scattered. The Adam update of the chip's shard
is an element-wise op of the machine model (``ops.optimizer_s``: a kernel streaming HBM on a
GPU; a superstep over the tiles, its state streamed through Streaming Memory where it lives).

Excluded: the host and data path. A BERT pre-training sequence of 128 tokens carries about
2.5 KB of input (ids, positions, segments, mask and labels as 32-bit integers), some 40 MB/s
at 16,000 sequences/s, against host links of tens of GB/s: well under 1% of a step.
"""

from __future__ import annotations

import functools

import numpy as np

from .. import collectives
from .. import footprint as mem
from . import ops as _ops

LEVELS = ("on_chip", "optimizer_streamed", "states_streamed")
"""Where a tile chip keeps the training state: everything in tile SRAM; the FP32 master
weights and Adam moments in Streaming Memory (brought in for the update); or all weights,
gradients and optimizer state in Streaming Memory, each layer's weights brought in per
phase (forward, backward, recompute) for every micro-batch and its gradients accumulated there."""


def stage_params(cfg, p):
    """Parameters of the busiest pipeline stage (first or last), element-wise over ``p``."""
    p = np.asarray(p, float)
    lp = np.ceil(cfg.layers / p)
    layer = lp * cfg.layer_params
    head_extra = cfg.head_params + (
        cfg.vocab * cfg.d_model if cfg.tied_embeddings and cfg.kind == "decoder" else 0
    )
    first = layer + cfg.embedding_params
    last = layer + cfg.head_params + np.where(p > 1, head_extra - cfg.head_params, 0.0)
    both = cfg.params + 0.0 * p
    return np.where(p > 1, np.maximum(first, last), both)


def evaluate_memory(cfg, chip, seq_len, global_batch, d, t, p, b, recompute, sharding):
    """Memory per chip by category and the level index (``LEVELS``; -1: does not fit), arrays."""
    d, t, p, b, rc, z = np.broadcast_arrays(
        *(np.asarray(x) for x in (d, t, p, b, recompute, sharding))
    )
    d, t, p, b = (x.astype(float) for x in (d, t, p, b))
    s = float(seq_len)
    m = global_batch / (d * b)
    lp = np.ceil(cfg.layers / p)
    rc_sel, rc_full = rc == 1, rc == 2
    # ---- memory per chip -------------------------------------------------------------
    params_chip = stage_params(cfg, p) / t
    st = mem.state_bytes(params_chip, d, z)
    act_layer = np.select(
        [rc_full, rc_sel],
        [
            mem.activation_bytes_per_layer(s, b, cfg.d_model, cfg.heads, t, "full"),
            mem.activation_bytes_per_layer(s, b, cfg.d_model, cfg.heads, t, "selective"),
        ],
        mem.activation_bytes_per_layer(s, b, cfg.d_model, cfg.heads, t, "none"),
    )
    in_flight = np.minimum(p, m)
    logits = mem.logits_bytes(s, b, cfg.vocab, t) if cfg.kind == "decoder" else 0.0 * b
    act = np.maximum(act_layer * lp * in_flight, act_layer * lp + logits)
    working = mem.layer_working_bytes(s, b, cfg.d_model, t)
    states = st["weights"] + st["gradients"] + st["optimizer"]
    total = states + act + working

    if chip.kind == "gpu":
        fit0 = total <= mem.GPU_USABLE_FRACTION * chip.hbm_bytes
        fit1 = fit2 = np.zeros_like(fit0)
        level = np.where(fit0, 0, -1)
    else:
        sram, dram = float(chip.data_bytes), float(chip.offchip_bytes)
        # Streamed states come in one matmul at a time, double-buffered (weights and gradients).
        biggest = max(
            cfg.d_model * (cfg.d_model + 2 * cfg.kv_dim),
            (2 if cfg.gated_mlp else 1) * cfg.d_model * cfg.d_ff,
        )
        layer_buf = 2.0 * (biggest / t) * (mem.BYTES_WEIGHT + mem.BYTES_GRAD)
        fit0 = total <= sram
        fit1 = (total - st["optimizer"] <= sram) & (st["optimizer"] <= dram)
        fit2 = (act + working + layer_buf <= sram) & (states <= dram)
        level = np.select([fit0, fit1, fit2], [0, 1, 2], -1)

    return {
        "level": level,
        "levels_fit": (fit0, fit1, fit2),
        "params_chip": params_chip,
        "states": st,
        "memory": {
            "weights": st["weights"],
            "gradients": st["gradients"],
            "optimizer": st["optimizer"],
            "activations": act,
            "working": working,
        },
        "memory_total": total,
    }


def _reserved_bytes(cfg, chip, t, level, mr):
    """Bytes of training state a tile chip holds always-live beside the layer being simulated:
    the states kept on chip at ``level`` and the stored activations, less the simulated layer's
    own weights (which the tile simulator places itself)."""
    st = mr["states"]
    on_chip = np.select(
        [level == 0, level == 1],
        [st["weights"] + st["gradients"] + st["optimizer"], st["weights"] + st["gradients"]],
        0.0,
    )
    own = np.where(level < 2, cfg.layer_params * mem.BYTES_WEIGHT / t, 0.0)
    return np.maximum(0.0, on_chip + mr["memory"]["activations"] - own)


def _stage_times(cfg, chip, s, d, t, p, b, rc, z, mr, bound=False):
    """Per micro-batch on the busiest stage, from the machine model (``training.ops``): the ops'
    seconds (forward, backward, recomputation, and on a tile chip with its states in Streaming
    Memory the gradients accumulated there), the recomputation's share, the ops' split by the
    machine model's categories, whether every op fits its chip, and the level (``LEVELS``) the
    states live at. ``bound``: time every layer
    with no training state reserved on a tile chip and leave the embedding and head out (more room
    never makes an op slower, so this is a lower bound; the search uses it to skip placements that
    cannot win)."""
    level = mr["level"]
    lp = np.ceil(cfg.layers / p)
    n = level.size
    t_mb, t_rc, ok = np.full(n, np.inf), np.zeros(n), np.zeros(n, bool)
    used = level.copy()
    split: dict = {}
    tile = chip.kind == "tile"
    units = chip.tiles if tile else 1
    g = _ops.RESERVE_GRANULE_BYTES
    quanta = [
        np.ceil(_reserved_bytes(cfg, chip, t, np.full(n, lv), mr) / units / g)
        if tile and not bound
        else np.zeros(n)
        for lv in range(len(LEVELS))
    ]
    rows: dict = {}
    for i in np.flatnonzero(level >= 0):
        # The lowest level whose states fit the chip in total; on a tile chip, if a tile then
        # overflows, the next level that moves more state off chip (the bound keeps the first).
        for lv in range(int(level.flat[i]), len(LEVELS)):
            if not mr["levels_fit"][lv].flat[i]:
                continue
            key = (int(t.flat[i]), int(b.flat[i]), float(quanta[lv].flat[i]), lv == 2)
            if key not in rows:
                rows[key] = _ops.chip_layer_times(
                    chip,
                    cfg,
                    int(s),
                    key[1],
                    key[0],
                    reserved_bytes=key[2] * g * units,
                    stream=key[3],
                    ends=not bound,
                )
            layer, ends = rows[key]
            if (layer.fits and ends.fits) or bound:
                break
        if not (layer.fits and ends.fits):
            continue
        used.flat[i] = lv
        r = int(rc.flat[i])
        recompute = layer.forward_s if r == 2 else (layer.attention_s if r == 1 else 0.0)
        grads = 0.0
        if key[
            3
        ]:  # gradients accumulated in Streaming Memory: read and written back per micro-batch
            grads = (
                2.0
                * mr["params_chip"].flat[i]
                * mem.BYTES_GRAD
                / chip.offchip_bandwidth_bytes_per_s
            )
        lpi = float(lp.flat[i])
        base = lpi * (layer.forward_s + layer.backward_s) + ends.forward_s + ends.backward_s
        t_mb[i] = base + lpi * recompute + grads
        t_rc[i] = lpi * recompute
        ok[i] = True
        for k in dict.fromkeys([*layer.split, *ends.split]):  # in their order, not a set's
            split.setdefault(k, np.zeros(n))[i] = lpi * layer.split.get(k, 0.0) + ends.split.get(
                k, 0.0
            )
        if grads:
            split.setdefault("streaming", np.zeros(n))[i] += grads
    return t_mb, t_rc, split, ok, used


def evaluate(
    cfg, chip, chips, seq_len, global_batch, d, t, p, b, recompute, sharding, *, bound=False
):
    """Time and memory of a training step for arrays of placements (all broadcastable).

    ``recompute`` is an integer array indexing ``footprint.RECOMPUTE``; ``sharding`` holds 0-3.
    Returns a dict of arrays: ``step_time_s`` (inf where it does not fit), the time split,
    the memory categories per chip, ``level`` (index into ``LEVELS``; -1: does not fit) and
    FLOP counts. The caller checks that ``d * t * p == chips`` and ``global_batch`` divides
    into ``d * b``. ``bound=True`` gives a lower bound on each step time (see ``_stage_times``).
    """
    d, t, p, b, rc, z = np.broadcast_arrays(
        *(np.asarray(x) for x in (d, t, p, b, recompute, sharding))
    )
    d, t, p, b = (x.astype(float) for x in (d, t, p, b))
    s = float(seq_len)
    m = global_batch / (d * b)  # micro-batches per replica per step
    lp = np.ceil(cfg.layers / p)
    rc_sel, rc_full = rc == 1, rc == 2

    mr = evaluate_memory(cfg, chip, seq_len, global_batch, d, t, p, b, rc, z)
    level, params_chip = mr["level"], mr["params_chip"]

    # ---- ops per micro-batch on the busiest stage (the machine model, ``training.ops``) ---------
    t_mb, t_rc, split_ops, ok, level = _stage_times(cfg, chip, s, d, t, p, b, rc, z, mr, bound)
    fab = _fabric(chip, int(np.max(d * t * p)) if np.size(d) else chips)
    # ---- tensor-parallel collectives (per layer per micro-batch) -------------------------
    tp_bytes = 2.0 * b * s * cfg.d_model  # one activation all-reduce, bytes
    n_ar = 4.0 + 2.0 * rc_full  # two forward, two backward, two more when the forward is recomputed
    t_tp = n_ar * _group_all_reduce(fab, tp_bytes, t, 1.0)
    t_mb = t_mb + lp * t_tp
    overflow = (level >= 0) & ~ok  # fits the chip's memory in total, but some tile overflows
    level = np.where(ok, level, -1)
    t_mb = np.where(ok, t_mb, 0.0)  # placements that do not fit get step_time_s = inf below
    t_slot = t_mb

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
    # Gradients accumulate over the m micro-batches on each replica and are reduced once per step
    # (stages 0 and 1); with the gradients sharded (stages 2 and 3) a replica keeps only its
    # 1/d shard, so each micro-batch's gradients are reduce-scattered as they are made (m per step).
    scatters = np.where(z >= 2, m, 1.0)
    t_dp = np.where(
        z >= 1,
        scatters * _group_reduce_scatter(fab, grad_bytes, d, stride)
        + _group_all_gather(fab, w_bytes, d, stride),
        _group_all_reduce(fab, grad_bytes, d, stride),
    )
    gathers = np.where(z >= 3, m * (2.0 + rc_full), 0.0)
    t_dp = t_dp + gathers * _group_all_gather(fab, w_bytes, d, stride)

    # ---- optimizer update (an element-wise op of the machine model, ``training.ops``) ----
    upd_params = np.rint(params_chip / np.where(z >= 1, d, 1.0))
    t_opt = _optimizer_s(chip, upd_params, level)

    bubble = (p - 1.0) * t_mb
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
        "tile_overflow": overflow,
        "micro_batches": m,
        "split": {
            **{f"ops_{k}": np.where(fits, m * v, np.nan) for k, v in split_ops.items()},
            "recompute": np.where(fits, m * t_rc, np.nan),
            "tensor_parallel": np.where(fits, m * lp * t_tp, np.nan),
            "pipeline_bubble": np.where(fits, bubble, np.nan),
            "pipeline_p2p": np.where(fits, t_p2p, np.nan),
            "data_parallel": np.where(fits, t_dp, np.nan),
            "optimizer": np.where(fits, t_opt, np.nan),
        },
        "memory": mr["memory"],
        "memory_total": mr["memory_total"],
        "model_flops": np.full(step.shape, model_flops),
        "hardware_flops": model_flops + hw_extra,
    }


@functools.lru_cache(maxsize=256)
def _model_flops_per_token(cfg, seq_len):
    """Model FLOPs per token of training (forward + backward, no recompute), as ``workloads.step``."""
    from .. import workloads

    return workloads.step(cfg, [int(seq_len)], phase="train").flops / seq_len


def _optimizer_s(chip, params, level):
    """``ops.optimizer_s`` element-wise over arrays of parameter counts and levels (0 where the
    placement does not fit: its step is inf anyway)."""
    params, level = np.broadcast_arrays(np.asarray(params, float), np.asarray(level))
    out = np.zeros(params.shape)
    for i in np.ndindex(params.shape):
        if level[i] >= 0:
            out[i] = _ops.optimizer_s(chip, max(1, int(params[i])), int(level[i]))
    return out


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
        nbytes, size, stride = np.broadcast_arrays(
            np.asarray(nbytes, float), np.asarray(size, float), np.asarray(stride, float)
        )
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
        out[i] = collectives.point_to_point_s(
            float(nbytes[i]), fab.inter if cross[i] else fab.intra
        )
    return out


def bubble_fraction(m, p):
    """Idle share of a 1F1B pipeline step: ``(p - 1) / (m + p - 1)`` (Narayanan et al. 2021, §2.2)."""
    if m < 1 or p < 1:
        raise ValueError(f"micro-batches and stages must be >= 1, got m={m}, p={p}")
    return (p - 1) / (m + p - 1)


__all__ = ["LEVELS", "bubble_fraction", "evaluate", "evaluate_memory", "stage_params"]
