"""A DLRM training step on a cluster, with the parts TorchRec's published run does.

The model is DLRM (facebookresearch/dlrm, DLRM-REF; TorchRec's ``DLRM`` in TORCHREC-DLRM): a
bottom MLP 13-512-256-128 on the dense features, the pairwise dot products of the 27 vectors
(26 pooled embeddings and the bottom MLP's output: 351 products, plus the bottom output: 479
inputs) and a top MLP 479-1024-1024-512-256-1. One step of data-parallel MLPs and model-parallel
tables (TorchRec's ``DistributedModelParallel``) is:

1. **embeddings** (``machines.simulate`` with ``training=True``): the gathers, the pooled
   vectors' all-to-all to the chips that own the samples and, in the backward pass, the
   gradients' all-to-all back (``split["all_to_all"]``) and the fused sparse SGD update of every
   row looked up (FBGEMM's table-batched embedding backward with its optimizer in the kernel);
2. **dense**: each MLP layer's forward GEMM and its two backward GEMMs (input and weight
   gradients, the forward's shape), plus the bias/ReLU forward, ReLU backward and bias-gradient
   kernels of each layer;
3. **interaction**: concatenation, batched dot products, the lower-triangle gather and their
   backward (memory-bound kernels);
4. **all-reduce** of the MLP gradients over the chips' fabric (``collectives.fabric``);
5. **optimizer**: the dense SGD update (one kernel per parameter tensor, read weight and
   gradient, write weight);
6. **host**: ``HOST_STEP_S``, the per-step cost of the framework on the host (see there).

Precision: TorchRec's example trains in FP32 (no mixed precision in ``dlrm_main.py``); GEMMs
run on tensor cores in TF32 on GPUs (``TF32_RATE_FRACTION``) and at the FP32 rate on tile chips
(``tiles.matmul`` with 4-byte values).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import collectives as _collectives
from .. import gpu as _gpu
from .. import published as _published
from .. import tiles as _tiles
from .._validate import positive
from ..hardware import TileChip
from ..hardware import chip as _chip
from .machines import EmbeddingResult, simulate
from .workload import Workload

BOTTOM_MLP = (
    13,
    512,
    256,
    128,
)  # DLRM-REF ln_bot; TORCHREC-DLRM --dense_arch_layer_sizes 512,256,128
TOP_MLP = (
    479,
    1024,
    1024,
    512,
    256,
    1,
)  # DLRM-REF ln_top; TORCHREC-DLRM --over_arch_layer_sizes 1024,1024,512,256,1
SPARSE_FEATURES = 26  # pooled embedding vectors per sample (Criteo's 26 categorical features)
DENSE_BYTES = 4  # FP32 weights, activations and gradients (TORCHREC-DLRM's dlrm_main.py: no AMP)
GEMM_TILE = 128  # output tile of a GPU GEMM block (as gpu.GEMM_TILES' largest)

TF32_RATE_FRACTION = 0.5
"""TF32 tensor-core rate over the FP16 rate: A100 156 / 312 TFLOP/s, H100 SXM 494.7 / 989.4
(NVIDIA's A100 and H100 datasheets, NV-DATASHEETS). ASSUMPTION that the run's FP32 GEMMs took
the TF32 path: PyTorch allowed TF32 in cuBLAS matmuls by default from 1.7 to 1.11
(``torch.backends.cuda.matmul.allow_tf32``; PYTORCH-TF32) and the TorchRec run is from January
2022 (the log in TORCHREC-DLRM), before 1.12 turned the default off."""

TORCHREC_ROWS = tuple(
    (r["chips"], r["batch"], r["value"], "in" if r["use"] == "calibration" else "out")
    for r in _published.rows(source="TORCHREC-DLRM")
)
# (GPUs, local batch, records/s, sample), rows of the registry ipusim/data/published.csv
"""TorchRec's DLRM on Criteo 1TB, A100 40GB GPUs of p4d.24xlarge nodes (TORCHREC-DLRM, "Preliminary
Training Results"; records/s = it/s x local batch x GPUs). "in": the row sets ``HOST_STEP_S``;
"out": checks only. The 1-GPU row (91 GB of tables on one 40 GB GPU, so TorchRec keeps them in
host memory behind a cache) is left out: the model does not price host-memory tables."""

HOST_STEP_S = 6.12e-3
"""Seconds per step the framework spends beyond the simulated device work (Python, the
KeyedJaggedTensor batch and its splits, hundreds of small kernel launches and their waits, the
data loader), the same for every batch size and chip kind.

Calibrated (in-sample) on one row: TorchRec's 8 GPUs x 256 samples (``TORCHREC_ROWS``), whose
step (7.20 ms) is about seven times its simulated device work (1.08 ms). Rule:
published step time minus the simulated step without it, rounded to 0.01 ms
(``fit_host_step_s`` reproduces it; a test checks). The other rows are out-of-sample checks.
ASSUMPTION that a tile chip's framework (PopTorch) costs the same per step: no published
figure; charging both kinds alike keeps the comparison from favouring either."""


def _layers():
    for mlp in (BOTTOM_MLP, TOP_MLP):
        yield from zip(mlp[:-1], mlp[1:], strict=True)


def mlp_params() -> int:
    """Weights of both MLPs (biases included)."""
    return sum(k * n + n for k, n in _layers())


def _stream_s(
    c, read_bytes: float, write_bytes: float, elements: float, flops: float = 0.0
) -> float:
    """One memory-bound kernel: a GPU kernel in waves, or one tile-chip compute set (sync + SRAM)."""
    if isinstance(c, TileChip):
        per_s = c.sram_bandwidth_bytes_per_s
        return c.sync_s + (read_bytes + write_bytes) / per_s
    blocks = max(1, math.ceil(max(elements, 1.0) / _gpu.ELEMENTWISE_BLOCK_ELEMENTS))
    return _gpu.simulate_kernel(
        c,
        blocks,
        0.0,
        (read_bytes + write_bytes) / blocks,
        blocks_per_sm=_gpu.ELEMENTWISE_BLOCKS_PER_SM,
    ).time_s


def _gemm_s(c, m: int, k: int, n: int) -> float:
    if isinstance(c, TileChip):
        return _tiles.matmul(c, m, k, n, dtype_bytes=DENSE_BYTES).result.time_s
    blocks = math.ceil(m / GEMM_TILE) * math.ceil(n / GEMM_TILE)
    hbm = (m * k + k * n + m * n) * DENSE_BYTES / blocks
    return _gpu.simulate_kernel(
        c,
        blocks,
        2.0 * GEMM_TILE * GEMM_TILE * k,
        hbm,
        blocks_per_sm=2,
        tensor_efficiency=_gpu.TENSOR_EFFICIENCY * TF32_RATE_FRACTION,
    ).time_s


def dense_time_s(chip, batch: int, *, training: bool = True) -> float:
    """Seconds for both MLPs on ``batch`` samples on one chip: per layer the GEMM (three in
    training: forward, input and weight gradients) and its bias/ReLU kernels (forward; in
    training also the ReLU backward and the bias gradient)."""
    c = _chip(chip)
    m = positive("batch", batch, integer=True)
    total = 0.0
    for k, n in _layers():
        out = m * n * DENSE_BYTES
        total += _gemm_s(c, m, k, n) * (3 if training else 1)
        total += _stream_s(c, out, out, m * n)  # bias + ReLU
        if training:
            total += _stream_s(c, 2 * out, out, m * n) + _stream_s(c, out, n * DENSE_BYTES, n)
    return total


def interaction_time_s(chip, batch: int, *, dim: int = 128, training: bool = True) -> float:
    """Seconds for the pairwise-dot interaction of ``batch`` samples on one chip (and its backward).

    Kernels as PyTorch runs ``torchrec.models.dlrm.InteractionArch``: concatenation of the 27
    vectors, a batched matmul with its own transpose, the lower-triangle gather, concatenation
    with the dense vector; backward: the split, the scatter into the square, two batched matmuls
    and their sum, and the split of the concatenation. Bytes in FP32; memory-bound.
    """
    c = _chip(chip)
    b = positive("batch", batch, integer=True)
    f = SPARSE_FEATURES + 1
    p = f * (f - 1) // 2
    fd, ff, out = f * dim, f * f, p + dim
    # (elements read, elements written) per sample, one entry per kernel
    kernels = [(fd, fd), (fd, ff), (ff, p), (p + dim, out)]
    if training:
        kernels += [(out, p + dim), (p, ff), (ff + fd, fd), (ff + fd, fd), (2 * fd, fd), (fd, fd)]
    return sum(_stream_s(c, r * b * DENSE_BYTES, w * b * DENSE_BYTES, w * b) for r, w in kernels)


def optimizer_time_s(chip) -> float:
    """Seconds for the dense SGD update: one kernel per weight and bias tensor (read weight and
    gradient, write weight), as ``torch.optim.SGD`` without ``foreach``."""
    c = _chip(chip)
    return sum(
        _stream_s(c, 2 * size * DENSE_BYTES, size * DENSE_BYTES, size)
        for k, n in _layers()
        for size in (k * n, n)
    )


@dataclass(frozen=True)
class DlrmStep:
    """One DLRM training step on ``chips`` chips; times in seconds (see the module docstring)."""

    embedding: EmbeddingResult
    dense_s: float
    interaction_s: float
    allreduce_s: float
    optimizer_s: float
    host_s: float

    @property
    def time_s(self) -> float:
        return sum(self.split.values())

    @property
    def device_s(self) -> float:
        """The step without the framework's host cost."""
        return self.time_s - self.host_s

    @property
    def fit(self) -> str:
        return self.embedding.fit

    @property
    def samples_per_s(self) -> float:
        return self.embedding.batch / self.time_s

    @property
    def power_w(self) -> float:
        return self.embedding.power_w

    @property
    def samples_per_s_per_w(self) -> float:
        return self.samples_per_s / self.power_w

    @property
    def split(self) -> dict:
        e = self.embedding
        a2a = e.split.get("links", 0.0)
        return {
            "embedding": e.time_s - a2a,
            "all_to_all": a2a,
            "dense": self.dense_s,
            "interaction": self.interaction_s,
            "allreduce": self.allreduce_s,
            "optimizer": self.optimizer_s,
            "host": self.host_s,
        }

    def to_dict(self) -> dict:
        return {
            "chip": self.embedding.chip,
            "chips": self.embedding.chips,
            "time_s": self.time_s,
            "device_s": self.device_s,
            "split_s": self.split,
            "fit": self.fit,
            "samples_per_s": self.samples_per_s,
            "power_w": self.power_w,
            "samples_per_s_per_w": self.samples_per_s_per_w,
        }

    def __repr__(self):
        e = self.embedding
        if not e.fits:
            return f"DlrmStep({e.chips} x {e.chip}, batch {e.batch}: DOES NOT FIT)"
        parts = ", ".join(f"{k} {v / self.time_s:.0%}" for k, v in self.split.items())
        return (
            f"DlrmStep({e.chips} x {e.chip}, batch {e.batch}: {self.time_s * 1e3:,.3f} ms ({parts}); "
            f"{self.samples_per_s:,.0f} samples/s, {self.samples_per_s_per_w:,.0f} samples/s/W; {self.fit})"
        )


def training_step(
    chip, w: Workload, *, chips: int = 1, seed: int = 0, host_step_s: float = HOST_STEP_S, **kwargs
) -> DlrmStep:
    """A DLRM training step: ``w``'s embeddings (forced to training) on ``chips`` chips, the MLPs,
    the interaction, the all-reduce, the optimizer and ``host_step_s`` of framework time."""
    c = _chip(chip)
    chips = positive("chips", chips, integer=True)
    host = positive("host_step_s", host_step_s, allow_zero=True)
    if w.batch % chips:
        raise ValueError(f"batch ({w.batch}) must divide evenly over {chips} chips")
    emb = simulate(c, w.replace(training=True), chips=chips, seed=seed, **kwargs)
    local = w.batch // chips
    dim = w.tables[0].dim
    dense = dense_time_s(c, local)
    inter = interaction_time_s(c, local, dim=dim)
    ar = (
        _collectives.fabric(c, chips).all_reduce_s(mlp_params() * DENSE_BYTES, chips)
        if chips > 1
        else 0.0
    )
    return DlrmStep(emb, dense, inter, ar, optimizer_time_s(c), host)


def torchrec_table(**kwargs) -> list[dict]:
    """Predicted vs published step time for each ``TORCHREC_ROWS`` row (A100 40GB, the
    ``torchrec-criteo`` tables). Rows: gpus, local_batch, published_ms, predicted_ms, ratio
    (predicted / published), sample ("in" or "out")."""
    from .workload import preset

    rows = []
    for n, local, rec, sample in TORCHREC_ROWS:
        pub = n * local / rec
        r = training_step(
            "a100-40gb", preset("torchrec-criteo", batch=n * local), chips=n, **kwargs
        )
        rows.append(
            {
                "gpus": n,
                "local_batch": local,
                "published_ms": pub * 1e3,
                "predicted_ms": r.time_s * 1e3,
                "ratio": r.time_s / pub,
                "sample": sample,
            }
        )
    return rows


def fit_host_step_s() -> float:
    """The rule that sets ``HOST_STEP_S``: the in-sample row's published step minus the simulated
    step without host time, rounded to 0.01 ms."""
    from .workload import preset

    n, local, rec, _ = next(r for r in TORCHREC_ROWS if r[3] == "in")
    dev = training_step(
        "a100-40gb", preset("torchrec-criteo", batch=n * local), chips=n, host_step_s=0.0
    )
    return round(n * local / rec - dev.time_s, 5)
