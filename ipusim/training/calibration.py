"""Published training runs the model is checked against, and the one rule that sets a parameter.

* In sample (sets ``model.GPU_MATMUL_EFFICIENCY``): Megatron-LM's GPT-3 175B on 1,024 A100s,
  140 TFLOP/s per GPU with recomputation counted, about 45% of the 312 TFLOP/s peak
  (NARAYANAN2021, Table 1: tensor 8, pipeline 16, data 8, batch 1,536 of 2,048 tokens); the
  same paper estimates 34 days for 300B tokens (§5.1, ``8 T P / (n X)``).
* Out of sample (never used to set anything): Llama 2 pre-training on A100-80GB for 2T
  tokens (TOUVRON2023, Table 2): 7B 184,320, 13B 368,640, 70B 1,720,320 GPU-hours.
* Tile chip, out of sample: BERT-base phase-1 pre-training (length 128) on a Bow Pod16,
  16,391 sequences/s (GC-PERF-CN, facts §6.3); ``model.TILE_MATMUL_EFFICIENCY`` comes from a
  measured GEMM (JIA-FT, facts §1.5), not from this figure.

Tolerances are written here, before any comparison, and the tests assert them.
"""

from __future__ import annotations

import numpy as np

from .. import workloads
from . import model as _model
from .step import Placement, simulate

MEGATRON_175B = {
    "model": "gpt-3-175b", "chip": "a100-80gb", "chips": 1024, "seq_len": 2048, "global_batch": 1536,
    "placement": Placement(8, 8, 16, 1, "full", 0),
    "tflops_per_gpu": 140.0, "days_300b_tokens": 34.0, "source": "NARAYANAN2021, Table 1 and §5.1",
}
"""The in-sample run. Micro-batch 1 is Megatron-LM's setting for GPT-3 175B (ASSUMPTION: the table
does not print it)."""

LLAMA2_GPU_HOURS = {"llama-2-7b": 184_320, "llama-2-13b": 368_640, "llama-2-70b": 1_720_320}
"""A100-80GB GPU-hours for 2T tokens, TOUVRON2023 Table 2 (out of sample)."""
LLAMA2_TOKENS = 2e12
LLAMA2_CHIPS = 2048  # ASSUMPTION: the paper gives no GPU count per model; 2,048 is the CLI example

LLAMA2_13B = workloads.TransformerConfig(
    "llama-2-13b", "decoder", 40, 5120, 40, 13824, 32000, 4096, gated_mlp=True, learned_positions=False,
    tied_embeddings=False, biases=False, published_params=13.0e9,
    source="Touvron et al. 2023 (Llama 2), model card: 13B, 40 layers, d 5120, 40 heads",
)

BOW_POD16_BERT_BASE = {"model": "bert-base", "chip": "bow", "chips": 16, "seq_len": 128,
                       "seq_per_s": 16_391.0, "source": "GC-PERF-CN (facts §6.3)"}

# Tolerances, fixed before comparing.
TOL_MEGATRON_TFLOPS = 0.15  # the search's best placement: hardware TFLOP/s per GPU within 15% of 140
TOL_MEGATRON_DAYS = 0.15  # restricted to the paper's set-up: full recomputation (its §3.5), no sharding
TOL_LLAMA2_GPU_HOURS = 0.25  # out of sample
TOL_BOW_BERT_FACTOR = 2.0  # out of sample, one sourced efficiency and an assumed Streaming Memory rate

EFFICIENCY_GRID = tuple(round(0.30 + 0.01 * i, 2) for i in range(71))


def megatron_tflops(efficiency: float) -> float:
    """Hardware TFLOP/s per GPU of the model at Megatron's published placement, for a given
    ``GPU_MATMUL_EFFICIENCY``."""
    old = _model.GPU_MATMUL_EFFICIENCY
    try:
        _model.GPU_MATMUL_EFFICIENCY = efficiency
        r = simulate(MEGATRON_175B["model"], MEGATRON_175B["chip"], MEGATRON_175B["placement"],
                     seq_len=MEGATRON_175B["seq_len"], global_batch=MEGATRON_175B["global_batch"])
    finally:
        _model.GPU_MATMUL_EFFICIENCY = old
    return r.hardware_flops_per_chip / 1e12


def fit_gpu_matmul_efficiency(grid=EFFICIENCY_GRID) -> float:
    """The grid value whose Megatron-placement TFLOP/s per GPU is closest (in log) to 140."""
    errs = [abs(np.log(megatron_tflops(e) / MEGATRON_175B["tflops_per_gpu"])) for e in grid]
    return float(grid[int(np.argmin(errs))])
