"""The training memory wall: bytes per parameter and activations per layer, per chip.

Mixed-precision Adam (Micikevicius et al. 2018; Rajbhandari et al. 2020, "ZeRO", §3.1):
16-bit weights (2 B) and gradients (2 B), and FP32 master weights, first and second
moments (4 + 4 + 4 B): 16 bytes per parameter before any sharding.

Activations stored for the backward pass, per transformer layer, 16-bit, from Korthikanti
et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", §4 (eq. 1-2,
Table 2), with ``s`` tokens per sequence, ``b`` sequences per micro-batch, hidden size ``h``,
``a`` heads and tensor-parallel degree ``t`` with sequence parallelism:

* ``"none"`` (store everything):    ``s b h (34 + 5 a s / h) / t`` bytes
* ``"selective"`` (recompute the attention core, as FlashAttention does): ``34 s b h / t``
* ``"full"`` (keep each layer's input only, recompute the layer): ``2 s b h / t``

The 34 counts GPT-style blocks (LayerNorm, GELU, dropout masks); it is applied to every
preset (Llama's SwiGLU and missing dropout shift it by some tens of percent either way).
Arrays work element-wise so that the placement search evaluates many candidates at once.
"""

from __future__ import annotations

import numpy as np

BYTES_WEIGHT = 2.0  # bytes/param, FP16/BF16 working weights
BYTES_GRAD = 2.0  # bytes/param, FP16/BF16 gradients
BYTES_OPTIMIZER = 12.0  # bytes/param, FP32 master copy + Adam first and second moments
BYTES_PER_PARAM = BYTES_WEIGHT + BYTES_GRAD + BYTES_OPTIMIZER  # 16 (ZeRO §3.1)
OPTIMIZER_TRAFFIC_BYTES_PER_PARAM = 2 * BYTES_OPTIMIZER + BYTES_GRAD + BYTES_WEIGHT
"""Bytes the Adam update moves per parameter: read and write master + moments, read the
gradient, write the new 16-bit weight (28 B)."""
ADAM_FLOPS_PER_PARAM = 14.0
"""FP32 operations of one parameter's Adam update, counted from Kingma & Ba 2015, Algorithm 1:
first moment 3 (two products, a sum), second moment 4 (a square, two products, a sum), the two
bias corrections 2 (scalar divisors fixed per step), and the step 5 (square root, add epsilon,
divide, scale by the learning rate, subtract)."""

RECOMPUTE = ("none", "selective", "full")
SHARDING = (0, 1, 2, 3)
"""Optimizer-state sharding over the data-parallel replicas: 0 none, 1 optimizer state,
2 + gradients, 3 + weights (ZeRO stages 1-3, Rajbhandari et al. 2020; on tile chips the
same split is Graphcore's replicated tensor sharding)."""

GPU_USABLE_FRACTION = 0.9
"""Share of HBM a training run may fill. ASSUMPTION: the CUDA context, NCCL buffers and
allocator fragmentation take the rest (a few GB on an 80 GB part)."""


def activation_bytes_per_layer(seq_len, micro_batch, d_model, heads, t, recompute: str):
    """Bytes of activations one layer stores for one micro-batch on one chip (Korthikanti
    et al. 2022, see the module docstring); element-wise over array arguments."""
    s, b, h, a, t = (
        np.asarray(x, dtype=np.float64) for x in (seq_len, micro_batch, d_model, heads, t)
    )
    if recompute == "full":
        return 2.0 * s * b * h / t
    if recompute == "selective":
        return 34.0 * s * b * h / t
    if recompute == "none":
        return s * b * h * (34.0 + 5.0 * a * s / h) / t
    raise ValueError(f"unknown recompute {recompute!r}; valid: {', '.join(RECOMPUTE)}")


def layer_working_bytes(seq_len, micro_batch, d_model, t):
    """Bytes one layer needs live while it runs on one micro-batch (its full activation set
    without the attention scores, which a fused/online-softmax kernel never holds whole)."""
    return 34.0 * np.asarray(seq_len, float) * micro_batch * d_model / np.asarray(t, float)


def logits_bytes(seq_len, micro_batch, vocab, t):
    """FP32 logits and their softmax for the loss on the last stage (Korthikanti §4.2: 4 s b V / t)."""
    return 4.0 * np.asarray(seq_len, float) * micro_batch * vocab / np.asarray(t, float)


def state_bytes(params_per_chip, d, sharding):
    """Weights, gradients and optimizer state on one chip, bytes, as a dict of arrays.

    ``params_per_chip`` is the parameters of the chip's pipeline stage divided by its
    tensor-parallel degree; ``sharding`` (0-3, see ``SHARDING``) divides the states over
    the ``d`` data-parallel replicas."""
    p = np.asarray(params_per_chip, float)
    d = np.asarray(d, float)
    z = np.asarray(sharding)
    return {
        "weights": p * BYTES_WEIGHT / np.where(z >= 3, d, 1.0),
        "gradients": p * BYTES_GRAD / np.where(z >= 2, d, 1.0),
        "optimizer": p * BYTES_OPTIMIZER / np.where(z >= 1, d, 1.0),
    }
