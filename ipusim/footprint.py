"""The memory of training: bytes per parameter, activations per layer per chip, and a whole
step's footprint (``training_footprint``). Below the machine models, which size a training
step with it (``gpu``, ``roofline``), and the ``training`` package, which places one.

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

from dataclasses import dataclass

import numpy as np

from ._validate import positive
from .workloads import TransformerConfig, model, step

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


@dataclass(frozen=True)
class TrainingFootprint:
    """Memory and FLOPs of training ``model`` on ``tokens_per_step`` tokens of length ``seq_len``."""

    model: TransformerConfig
    seq_len: int
    tokens_per_step: int
    weight_bytes: float  # working copy of the weights (dtype_bytes each)
    gradient_bytes: float  # one gradient per weight (dtype_bytes each)
    optimizer_bytes: float  # Adam: FP32 master weights + two moments (12 bytes/param)
    activation_bytes: float  # stored for the backward pass
    flops_per_token: float  # forward + backward

    @property
    def total_bytes(self) -> float:
        return (
            self.weight_bytes + self.gradient_bytes + self.optimizer_bytes + self.activation_bytes
        )

    def flops_for(self, tokens: float) -> float:
        """FLOPs to train on ``tokens`` tokens."""
        return self.flops_per_token * tokens

    def __repr__(self):
        return (
            f"TrainingFootprint({self.model.name}: {self.total_bytes / 1e9:,.1f} GB = weights "
            f"{self.weight_bytes / 1e9:,.1f} + grads {self.gradient_bytes / 1e9:,.1f} + optimizer "
            f"{self.optimizer_bytes / 1e9:,.1f} + activations {self.activation_bytes / 1e9:,.1f}; "
            f"{self.flops_per_token / 1e9:,.2f} GFLOP/token)"
        )


def training_footprint(
    model_or_name,
    *,
    seq_len: int,
    tokens_per_step: int,
    dtype_bytes: int = 2,
    recompute: bool = False,
) -> TrainingFootprint:
    """Memory and FLOPs of one mixed-precision Adam training step.

    * Weights and gradients in ``dtype_bytes``; Adam keeps FP32 master weights and two
      FP32 moments: 12 bytes per parameter (16 in all with FP16 weights and gradients,
      as in Rajbhandari et al. 2020, "ZeRO", §3.1).
    * Activations per layer per token: ``d (34 + 5 heads l / d)`` bytes with 16-bit
      activations and no recomputation, or ``2 d`` bytes with full recomputation
      (Korthikanti et al. 2022, "Reducing Activation Recomputation", §4.1 and §5):
      ``activation_bytes_per_layer``'s "none" and "full" on one chip, per token of the step.
    * FLOPs per token: 3x the forward pass (backward = 2x forward), i.e. about ``6 N``.
    """
    cfg = model(model_or_name)
    seq_len = positive("seq_len", seq_len, integer=True)
    tokens_per_step = positive("tokens_per_step", tokens_per_step, integer=True)
    dtype_bytes = positive("dtype_bytes", dtype_bytes, integer=True)
    if seq_len > cfg.max_positions:
        raise ValueError(
            f"seq_len={seq_len} exceeds {cfg.name}'s max_positions {cfg.max_positions}"
        )
    p = float(cfg.params)
    d = cfg.d_model
    per_token_layer = 2.0 * d if recompute else d * (34.0 + 5.0 * cfg.heads * seq_len / d)
    act = per_token_layer * cfg.layers * tokens_per_step * dtype_bytes / 2.0
    per_token = step(cfg, [seq_len], phase="train").flops / seq_len
    return TrainingFootprint(
        cfg,
        seq_len,
        tokens_per_step,
        weight_bytes=p * dtype_bytes,
        gradient_bytes=p * dtype_bytes,
        optimizer_bytes=BYTES_OPTIMIZER * p,
        activation_bytes=act,
        flops_per_token=per_token,
    )
