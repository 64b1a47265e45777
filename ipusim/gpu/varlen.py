"""Padding removed on a GPU as the published systems do it: FasterTransformer's "Effective
FasterTransformer" and ByteTransformer, each with the kernels it adds around the unpadded work.

``remove_padding(chip, lengths, input_len, system)`` is the unpadded step of ``simulate`` (matmuls
over the real tokens, fused attention per sequence) plus what the system spends to get there:

* **offsets and a host sync**: a one-block prefix-sum kernel over the mask builds the token
  offsets, and the count of real tokens is copied to the host before the GEMMs can be sized
  (FasterTransformer's ``invokeGetPaddingOffset`` copies the token count to pinned host memory
  and waits for it, FT-CODE; ByteTransformer ``build_sequence_length_padding_offset_kernelLauncher``, which launches
  ``parallel_prefix<<<1, ...>>>`` and returns ``valid_word_num`` to the host). The sync empties
  the GPU's queue: ``HOST_SYNC_S`` each time.
* **compress and restore**: a gather of the real tokens out of the padded input and a scatter
  back into a padded output (``invokeRemovePadding`` / ``invokeRebuildPadding``;
  ``compressBertInput_kernelLauncher`` / ``add_bias_input_layernorm_restore_output``, whose
  output is the padded ``batch x input_len`` tensor). FasterTransformer does both once per
  forward (its ``Bert`` runs all layers in one call); ByteTransformer's op is one layer, called
  once per layer by its benchmark (``bert_transformer_test.py``), so it pays offsets, sync,
  compress and restore in every layer (BT-CODE).
* **attention**: ByteTransformer runs fused attention on the real lengths at every length up to
  1,024 (a WMMA kernel up to 128 tokens, a CUTLASS grouped-GEMM kernel beyond; BT-README).
  FasterTransformer uses its fused variable-length MHA only for FP16, head size 64 and an input
  length of at most ``FT_FUSED_MHA_MAX_LEN``; otherwise (``getAttentionType``) it rebuilds the
  padding of Q, K and V, runs the unfused batched GEMMs and softmax through HBM on the padded
  ``input_len`` rows, and removes the padding of the context again, in every layer.

Times in seconds, sizes in bytes.
"""

from __future__ import annotations

import numpy as np

from .._validate import choice, positive
from ..hardware import GpuChip
from ..result import StepResult
from ..workloads import model as _model
from ..workloads import step as _step
from .kernels import resolve
from .params import ELEMENTWISE_BLOCK_ELEMENTS, ELEMENTWISE_BLOCKS_PER_SM
from .simulation import simulate, simulate_kernel

SYSTEMS = ("fastertransformer", "bytetransformer")

HOST_SYNC_S = 10e-6
"""Seconds a device-to-host copy of one integer and the wait for it cost the step: the GPU's
queue drains, the copy crosses PCIe and comes back, and the next kernel waits for its launch.
ASSUMPTION: a PCIe round trip plus driver work, several microseconds on PCIe Gen4 hosts; no
published figure is in docs/facts.md. Set once, not fitted to any row."""

FT_FUSED_MHA_MAX_LEN = 384
"""Longest input FasterTransformer's fused (TensorRT) MHA takes on sm80: its ``getAttentionType``
picks the fused kernel for FP16, head size 64 and ``max_seq_len <= 384``, else the unfused path
(FT-CODE: ``src/fastertransformer/layers/attention_layers/BaseAttentionLayer.h``)."""


def _stream_s(c: GpuChip, read_bytes: float, write_bytes: float, elements: float) -> float:
    """One memory-streaming kernel (gather, scatter, copy): ``elements`` outputs, bytes moved."""
    blocks = max(1, int(np.ceil(max(elements, 1.0) / ELEMENTWISE_BLOCK_ELEMENTS)))
    return simulate_kernel(
        c, blocks, 0.0, (read_bytes + write_bytes) / blocks, blocks_per_sm=ELEMENTWISE_BLOCKS_PER_SM
    ).time_s


def _offsets_s(c: GpuChip, batch: int, input_len: int, dt: int) -> float:
    """The one-block prefix sum over the mask and the host sync that reads its token count."""
    return simulate_kernel(c, 1, 0.0, float(batch * input_len * dt)).time_s + HOST_SYNC_S


def _ft_fused(cfg, dt: int, input_len: int) -> bool:
    """FasterTransformer's ``getAttentionType``: fused MHA for FP16, head size 64, input <= 384."""
    return dt == 2 and cfg.head_dim == 64 and input_len <= FT_FUSED_MHA_MAX_LEN


def _unfused_minus_fused_s(c, cfg, batch: int, input_len: int, dt: int, base) -> float:
    """Unfused attention kernels on ``batch`` padded rows of ``input_len`` minus ``base``'s fused ones."""
    padded = simulate(
        c, _step(cfg, [input_len] * batch, pad_to=input_len, dtype_bytes=dt), fusion="none"
    )
    unfused = sum(
        k["time_s"]
        for k in padded.extra["kernels"]
        if k["kernel"] in ("attn_scores", "softmax", "attn_context")
    )
    return unfused - sum(k["time_s"] for k in base.extra["kernels"] if k["kernel"] == "fused_mha")


def fastertransformer_padded(
    chip, batch: int, input_len: int, *, model="bert-base", dtype_bytes: int = 2
) -> StepResult:
    """FasterTransformer's padded forward of ``batch`` rows of ``input_len``: ``simulate``'s padded
    step, its attention unfused (through HBM) where ``getAttentionType`` refuses the fused kernel."""
    c = resolve(chip)
    cfg = _model(model)
    B = positive("batch", batch, integer=True)
    L = positive("input_len", input_len, integer=True)
    base = simulate(c, _step(cfg, [L] * B, pad_to=L, dtype_bytes=dtype_bytes))
    if _ft_fused(cfg, base.extra.get("dtype_bytes", dtype_bytes), L):
        return base
    import dataclasses

    added = _unfused_minus_fused_s(c, cfg, B, L, dtype_bytes, base)
    split = dict(base.split)
    split["unfused_attention"] = added
    return dataclasses.replace(base, time_s=base.time_s + added, split=split)


def remove_padding(
    chip,
    lengths,
    input_len: int | None = None,
    system: str = "bytetransformer",
    *,
    model="bert-base",
    dtype_bytes: int = 2,
) -> StepResult:
    """A forward step of ``model`` over ``lengths`` with padding removed by ``system``.

    ``input_len`` is the padded length of the input tensor the system receives (default: the
    longest of ``lengths``). The result is ``simulate``'s unpadded step with ``time_s``,
    ``split`` (a "padding_removal" part added) and ``extra["padding_removal"]`` (seconds by
    cost: offsets and syncs, compress and restore, padded attention) changed.
    """
    c = resolve(chip)
    if not isinstance(c, GpuChip):
        raise ValueError(f"remove_padding needs a GPU chip, got {c.kind} chip {c.name!r}")
    system = choice("system", system, SYSTEMS)
    cfg = _model(model)
    s = _step(cfg, lengths, dtype_bytes=dtype_bytes)
    L = (
        int(s.lengths.max())
        if input_len is None
        else positive("input_len", input_len, integer=True)
    )
    if L < int(s.lengths.max()):
        raise ValueError(
            f"input_len ({L}) must be at least the longest sequence ({int(s.lengths.max())})"
        )
    base = simulate(c, s)
    B, T, d, dt, layers = s.batch, s.real_tokens, cfg.d_model, s.dtype_bytes, cfg.layers
    compress = _stream_s(c, T * d * dt, T * d * dt, T * d)
    restore = _stream_s(c, T * d * dt, B * L * d * dt, B * L * d)
    offsets = _offsets_s(c, B, L, dt)
    extra = {
        "offsets_and_sync_s": offsets,
        "compress_and_restore_s": compress + restore,
        "padded_attention_s": 0.0,
    }
    if system == "bytetransformer":
        extra = {k: v * layers for k, v in extra.items()}
    else:
        if not _ft_fused(
            cfg, dt, L
        ):  # rebuild padding of Q, K, V; unfused attention on padded rows; remove it
            q = cfg.q_dim + 2 * cfg.kv_dim
            per_layer = _stream_s(c, T * q * dt, B * L * q * dt, B * L * q) + _stream_s(
                c, B * L * cfg.q_dim * dt, T * cfg.q_dim * dt, T * cfg.q_dim
            )
            extra["padded_attention_s"] = (
                _unfused_minus_fused_s(c, cfg, B, L, dt, base) + per_layer * layers
            )
    added = float(sum(extra.values()))
    split = dict(base.split)
    split["padding_removal"] = added
    info = dict(base.extra)
    info["padding_removal"] = {"system": system, "input_len": L, **extra}
    import dataclasses

    return dataclasses.replace(base, time_s=base.time_s + added, split=split, extra=info)
