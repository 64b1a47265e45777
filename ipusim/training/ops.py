"""The ops of one training step on one chip, timed by the machine model inference uses.

Per chip and micro-batch of ``b`` sequences of ``s`` tokens, for the tensor-parallel shard of
one transformer layer (``workloads.shard``), every op runs through ``machine.simulate``: the
tile simulator (planner, exchange, sync, per-tile memory, serial passes, streamed weights) on
tile chips, the GPU model (kernels in waves over SMs sharing HBM) on GPUs. Nothing here has an
efficiency of its own.

* **forward**: ``workloads.step(shard, [s] * b)``, the ops inference runs.
* **backward**: for each matmul ``Y = X W`` (``m x k @ k x n``) its input gradient
  ``dX = dY W^T`` (``m x n @ n x k``, the weight read again) and its weight gradient
  ``dW = X^T dY`` (``k x m @ m x n``, both operands activations) are ops of their own; each
  norm, the activation and the embedding run again, reading the stored input and the incoming
  gradient (``reads = 2``). They form one step, simulated like any other.
  The attention core's backward is four products of the forward's shapes (``dP = dO V^T`` like
  the scores; ``dV = P^T dO``, ``dQ = dS K``, ``dK = dS^T Q`` like the context) against the
  forward's two, and a softmax backward: it is charged ``ATTENTION_BACKWARD`` times the simulated
  forward attention core (scores, softmax, context).
* **recomputation**: another forward of the layer (``full``) or of its attention core
  (``selective``), at the forward's simulated times.
* **optimizer update**: Adam over the chip's shard of the parameters, an element-wise op
  (``optimizer_s``): on a GPU one memory-streaming kernel over HBM; on a tile chip one superstep
  in place over the tiles, its FP32 state streamed in and out of Streaming Memory when it lives
  there.

The embedding and the head (pooler or LM head) are timed apart, as a step of their ops only,
forward and backward alike, and added to the first and last pipeline stage.

On a tile chip the training state that stays on chip (weights, gradients, optimizer state,
stored activations of the micro-batches in flight: ``reserved_bytes``), spread evenly over the
tiles, is always-live beside the op being run: the layer is simulated on the chip with each
tile's SRAM reduced by its share (rounded up to ``RESERVE_GRANULE_BYTES``), so the planner works
in the room a training step really leaves and a step that overflows a tile does not fit.
"""

from __future__ import annotations

import dataclasses
import functools
import math

from .. import footprint as mem
from .. import workloads
from ..hardware import chip as _chip

ATTENTION_BACKWARD = 2.0
"""Backward of the attention core / its forward: four products of the forward's shapes against
its two (Dao et al. 2022, "FlashAttention", Algorithm 4: dV, dP, dQ, dK). The factor is applied to
the whole simulated core, softmax included: the softmax backward reads the probabilities and their
gradient and writes one (about 1.5x its forward's traffic), so it is over-counted by up to half of
the forward softmax."""

GPU_FUSION = "none"
"""Kernels of a GPU training step (``ipusim.gpu`` fusion): one kernel per op, the attention scores
through HBM, as a framework's training kernels without a fused (FlashAttention-style) attention."""

RESERVE_GRANULE_BYTES = 8 * 1024
"""Per-tile reserve for the training state is rounded up to this (bytes), so that placements whose
training state differs by a few bytes per tile share one simulation (conservative: rounded up)."""

_HEAD_OPS = ("embedding", "pooler", "final_norm", "lm_head")
_ATTENTION_KINDS = ("attention", "softmax")


def backward_ops(ops, dtype_bytes: int = 2) -> tuple:
    """The backward ops of ``ops`` (a step's ops, ``dtype_bytes`` per element) other than the
    attention core (see the module docstring)."""
    out, dt = [], dtype_bytes
    for o in ops:
        if o.kind == "matmul":
            w = o.weight_bytes > 0
            out.append(workloads.matmul_op(f"{o.name}.dx", o.count, o.m, o.n, o.k, dt, weights=w))
            out.append(
                workloads.matmul_op(f"{o.name}.dw", o.count, o.k, o.m, o.n, dt, weights=False)
            )
        elif o.kind in _ATTENTION_KINDS:
            continue
        else:
            out.append(
                dataclasses.replace(o, name=f"{o.name}.bwd", act_read_bytes=2.0 * o.act_read_bytes)
            )
    return tuple(out)


def _sub_step(cfg, seq_len: int, micro_batch: int, ops=None) -> workloads.Step:
    s = workloads.step(cfg, [int(seq_len)] * int(micro_batch))
    if ops is None:
        return s
    return workloads.Step(cfg, "forward", s.lengths, 0, s.dtype_bytes, tuple(ops))


def _reserved_chip(c, reserved_bytes: float):
    """Tile chip ``c`` with each tile's SRAM cut by its share of ``reserved_bytes`` (rounded up to
    ``RESERVE_GRANULE_BYTES``); ``None`` when no room is left beside the code."""
    per_tile = (
        math.ceil(max(0.0, reserved_bytes) / c.tiles / RESERVE_GRANULE_BYTES)
        * RESERVE_GRANULE_BYTES
    )
    left = c.sram_per_tile_bytes - per_tile
    if left <= c.code_bytes_per_tile:
        return None
    return dataclasses.replace(c, sram_per_tile_bytes=int(left)) if per_tile else c


@dataclasses.dataclass(frozen=True)
class LayerTimes:
    """Seconds of one layer's (or the embedding and head's) ops for one micro-batch on one chip."""

    forward_s: float  # the forward ops (inf: does not fit)
    backward_s: (
        float  # input- and weight-gradient matmuls, element-wise backward, attention backward
    )
    attention_s: float  # the forward attention core (what selective recomputation repeats)
    split: dict  # machine-model category -> seconds over forward and backward (compute, exchange, sync, ...)
    fits: bool


_INF = LayerTimes(math.inf, math.inf, math.inf, {}, False)
_NONE = LayerTimes(0.0, 0.0, 0.0, {}, True)


def _time(c, step, weights):
    """``machine.simulate``'s time, fit, split and per-op times of ``step`` on one chip ``c``
    (``one_chip.step_times``: the same values, without the rest of the result)."""
    from .. import one_chip

    kw = {"weights": weights} if c.kind == "tile" else {"fusion": GPU_FUSION}
    return one_chip.step_times(c, step, **kw)


@functools.lru_cache(maxsize=4096)
def layer_times(
    c, cfg, seq_len: int, micro_batch: int, tensor: int, part: str = "layer", weights: str = "auto"
) -> LayerTimes:
    """Forward and backward seconds of one micro-batch on one chip ``c`` (a chip object) for
    ``part``: "layer" (one transformer layer of the ``tensor``-way shard) or "ends" (the
    embedding, final norm and head of the shard). ``weights`` goes to the tile simulator
    ("auto", "on_chip" or "stream")."""
    if part == "layer":
        sh = workloads.shard(cfg, tensor=tensor, layers=1, first=False, last=False)
        fwd_step = _sub_step(sh, seq_len, micro_batch)
    else:
        sh = workloads.shard(cfg, tensor=tensor, layers=1, first=True, last=True)
        ops = [o for o in _sub_step(sh, seq_len, micro_batch).ops if o.name in _HEAD_OPS]
        if not ops:
            return _NONE
        fwd_step = _sub_step(sh, seq_len, micro_batch, ops)
    fwd = _time(c, fwd_step, weights)
    if not fwd.fits:
        return _INF
    bwd = _time(
        c,
        _sub_step(sh, seq_len, micro_batch, backward_ops(fwd_step.ops, fwd_step.dtype_bytes)),
        weights,
    )
    if not bwd.fits:
        return _INF
    kinds = {o.name: o.kind for o in fwd_step.ops}
    att = float(
        sum(
            t
            for n, t in zip(fwd.op_names, fwd.op_time_s, strict=True)
            if kinds[n] in _ATTENTION_KINDS
        )
    )
    split = {
        k: fwd.split.get(k, 0.0)
        + bwd.split.get(k, 0.0)
        + (ATTENTION_BACKWARD * att if k == "compute" else 0.0)
        for k in dict.fromkeys([*fwd.split, *bwd.split, "compute"])  # in order, not a set's
    }
    return LayerTimes(fwd.time_s, bwd.time_s + ATTENTION_BACKWARD * att, att, split, True)


def chip_layer_times(
    chip,
    cfg,
    seq_len: int,
    micro_batch: int,
    tensor: int,
    *,
    reserved_bytes: float = 0.0,
    stream: bool = False,
    ends: bool = True,
) -> tuple[LayerTimes, LayerTimes]:
    """(one layer, embedding and head) for one micro-batch on one chip, with ``reserved_bytes`` of
    training state always-live on a tile chip (ignored on a GPU, whose HBM fit is checked by
    ``footprint``) and its weights streamed from Streaming Memory when ``stream``.
    ``ends=False`` leaves the embedding and head out (zero seconds: for lower bounds)."""
    c = _chip(chip)
    if c.kind == "tile":
        rc = _reserved_chip(c, reserved_bytes)
        if rc is None:
            return _INF, _INF
        c = rc
        weights = "stream" if stream else "on_chip"
    else:
        weights = "auto"
    layer = layer_times(c, cfg, int(seq_len), int(micro_batch), int(tensor), "layer", weights)
    if not ends:
        return layer, _NONE
    return layer, layer_times(c, cfg, int(seq_len), int(micro_batch), int(tensor), "ends", weights)


def forward_time_s(
    model,
    chip,
    seq_len: int,
    micro_batch: int,
    *,
    tensor: int = 1,
    reserved_bytes: float | None = None,
) -> float:
    """Seconds of the whole model's forward for one micro-batch on one chip as the training step
    prices it: ``layers x`` one layer plus the embedding and head. ``reserved_bytes`` defaults to
    the 16-bit weights of everything but the layer (what ``machine.simulate`` of the whole forward
    holds on chip beside the layer it runs)."""
    cfg = workloads.model(model)
    c = _chip(chip)
    if reserved_bytes is None:
        reserved_bytes = (cfg.weight_bytes(2) - cfg.layer_params * 2.0) / tensor
    layer, ends = chip_layer_times(
        c, cfg, seq_len, micro_batch, tensor, reserved_bytes=reserved_bytes
    )
    return cfg.layers * layer.forward_s + ends.forward_s


STREAMED_UPDATE_BYTES = (0.0, 2 * mem.BYTES_OPTIMIZER, mem.OPTIMIZER_TRAFFIC_BYTES_PER_PARAM)
"""Bytes per parameter the update moves through Streaming Memory at each level of
``training.model.LEVELS``: none (all on chip); the FP32 master weights and moments read and
written back; those and the gradient read and the 16-bit weight written (all states streamed)."""


@functools.lru_cache(maxsize=4096)
def optimizer_s(c, params: int, level: int = 0) -> float:
    """Seconds of the Adam update of ``params`` parameters on one chip ``c`` (a chip object), an
    element-wise op of ``footprint.ADAM_FLOPS_PER_PARAM`` FP32 operations and
    ``footprint.OPTIMIZER_TRAFFIC_BYTES_PER_PARAM`` bytes per parameter: on a GPU one kernel
    streaming HBM (``gpu.elementwise_kernel_s``); on a tile chip one superstep in place over the
    tiles (``tiles.elementwise_s``), with ``STREAMED_UPDATE_BYTES[level]`` per parameter copied
    through Streaming Memory."""
    if params <= 0:
        return 0.0
    if c.kind == "gpu":
        from .. import gpu

        return gpu.elementwise_kernel_s(
            c,
            params,
            params * mem.OPTIMIZER_TRAFFIC_BYTES_PER_PARAM,
            params * mem.ADAM_FLOPS_PER_PARAM,
        )
    from .. import tiles

    return tiles.elementwise_s(
        c,
        params,
        flops_per_element=mem.ADAM_FLOPS_PER_PARAM,
        load_bytes_per_element=mem.OPTIMIZER_TRAFFIC_BYTES_PER_PARAM,
        stream_bytes_per_element=STREAMED_UPDATE_BYTES[level],
    )


def clear_cache() -> None:
    """Forget the cached op times (benchmarks time a cold search with it)."""
    layer_times.cache_clear()
    optimizer_s.cache_clear()


__all__ = [
    "ATTENTION_BACKWARD",
    "STREAMED_UPDATE_BYTES",
    "RESERVE_GRANULE_BYTES",
    "LayerTimes",
    "backward_ops",
    "chip_layer_times",
    "clear_cache",
    "forward_time_s",
    "layer_times",
    "optimizer_s",
]
