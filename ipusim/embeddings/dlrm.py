"""A DLRM-style training step on a cluster: embedding gathers (``machines``) plus the dense MLPs.

The dense part of DLRM (facebookresearch/dlrm, DLRM-REF, Criteo Terabyte configuration): a
bottom MLP 13-512-256-128 on the dense features and a top MLP 479-1024-1024-512-256-1 on the
pairwise dot products of the 27 vectors (26 pooled embeddings + the bottom MLP's output) with
the bottom output. Each chip runs the MLPs on its share of the batch (data parallel, FP16):

* tile chip: every layer as ``tiles.matmul`` (BSP supersteps on the tiles);
* GPU: every layer as one GEMM kernel of 128 x 128 output tiles in waves (``gpu.simulate_kernel``);

a training step runs each layer three times (forward and two backward GEMMs of the same shape,
as ``gpu`` does for training) and all-reduces the MLP gradients over the chips' fabric
(``collectives.fabric(...).all_reduce_s``: ring in a node, hierarchical across nodes). ASSUMPTIONS: the interaction's dot products
(about 4 % of the MLP FLOPs) and the optimizer's dense update are not costed; the MLPs' SRAM on a
tile chip is not charged against the embedding tables' (the fit state is the embeddings').
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import collectives as _collectives
from .. import gpu as _gpu
from .. import tiles as _tiles
from .._validate import positive
from ..hardware import TileChip
from ..hardware import chip as _chip
from .machines import EmbeddingResult, simulate
from .workload import Workload

BOTTOM_MLP = (13, 512, 256, 128)  # DLRM-REF ln_bot (Criteo Terabyte)
TOP_MLP = (479, 1024, 1024, 512, 256, 1)  # DLRM-REF ln_top (Criteo Terabyte)
DENSE_BYTES = 2  # FP16 activations, weights and gradients in the MLPs (mixed precision)
GEMM_TILE = 128  # output tile of a GPU GEMM block (as gpu.GEMM_TILES' largest)


def _layers():
    for mlp in (BOTTOM_MLP, TOP_MLP):
        yield from zip(mlp[:-1], mlp[1:], strict=True)


def mlp_params() -> int:
    """Weights of both MLPs (biases included)."""
    return sum(k * n + n for k, n in _layers())


def dense_time_s(chip, batch: int, *, training: bool = True) -> float:
    """Seconds for both MLPs on ``batch`` samples on one chip (x3 GEMMs per layer in training)."""
    c = _chip(chip)
    m = positive("batch", batch, integer=True)
    total = 0.0
    for k, n in _layers():
        if isinstance(c, TileChip):
            t = _tiles.matmul(c, m, k, n, dtype_bytes=DENSE_BYTES).result.time_s
        else:
            blocks = math.ceil(m / GEMM_TILE) * math.ceil(n / GEMM_TILE)
            hbm = (m * k + k * n + m * n) * DENSE_BYTES / blocks
            t = _gpu.simulate_kernel(c, blocks, 2.0 * GEMM_TILE * GEMM_TILE * k, hbm, blocks_per_sm=2).time_s
        total += t * (3 if training else 1)
    return total


@dataclass(frozen=True)
class DlrmStep:
    """One DLRM training step on ``chips`` chips; times in seconds."""

    embedding: EmbeddingResult
    dense_s: float
    allreduce_s: float

    @property
    def time_s(self) -> float:
        return self.embedding.time_s + self.dense_s + self.allreduce_s

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
        return {"embedding": self.embedding.time_s, "dense": self.dense_s, "allreduce": self.allreduce_s}

    def to_dict(self) -> dict:
        return {"chip": self.embedding.chip, "chips": self.embedding.chips, "time_s": self.time_s,
                "split_s": self.split, "fit": self.fit, "samples_per_s": self.samples_per_s,
                "power_w": self.power_w, "samples_per_s_per_w": self.samples_per_s_per_w}

    def __repr__(self):
        e = self.embedding
        if not e.fits:
            return f"DlrmStep({e.chips} x {e.chip}, batch {e.batch}: DOES NOT FIT)"
        parts = ", ".join(f"{k} {v / self.time_s:.0%}" for k, v in self.split.items())
        return (f"DlrmStep({e.chips} x {e.chip}, batch {e.batch}: {self.time_s * 1e3:,.3f} ms ({parts}); "
                f"{self.samples_per_s:,.0f} samples/s, {self.samples_per_s_per_w:,.0f} samples/s/W; {self.fit})")


def training_step(chip, w: Workload, *, chips: int = 1, seed: int = 0, **kwargs) -> DlrmStep:
    """A DLRM training step: ``w``'s embeddings (forced to training) on ``chips`` chips plus the MLPs."""
    c = _chip(chip)
    chips = positive("chips", chips, integer=True)
    if w.batch % chips:
        raise ValueError(f"batch ({w.batch}) must divide evenly over {chips} chips")
    emb = simulate(c, w.replace(training=True), chips=chips, seed=seed, **kwargs)
    dense = dense_time_s(c, w.batch // chips)
    ar = _collectives.fabric(c, chips).all_reduce_s(mlp_params() * DENSE_BYTES, chips) if chips > 1 else 0.0
    return DlrmStep(emb, dense, ar)
