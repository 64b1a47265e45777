"""Published training runs the model is checked against. None of them sets a parameter: every op
of a training step is timed by the machine model (``training.ops``), whose parameters are set from
inference measurements and microbenchmarks (``ipusim.gpu.params``, ``ipusim.tile_calibration``), and
the links from datasheets and JIA-FT's measured IPU-Link rate (``ipusim.collectives``).

* GPU: Megatron-LM's GPT-3 175B on 1,024 A100s, 140 TFLOP/s per GPU with recomputation counted,
  about 45% of the 312 TFLOP/s peak (NARAYANAN2021, Table 1: tensor 8, pipeline 16, data 8, batch
  1,536 of 2,048 tokens); the same paper estimates 34 days for 300B tokens (§5.1, ``8 T P / (n X)``).
* GPU: Llama 2 pre-training on A100-80GB for 2T tokens (TOUVRON2023, Table 2): 7B 184,320,
  13B 368,640, 70B 1,720,320 GPU-hours.
* Tile chip: Graphcore's published Bow Pod16 pre-training throughput (GC-PERF-CN, facts §6.3 and
  the Bow Pod16 table): BERT-base phase 1 (length 128, batch 65,536) 16,391 sequences/s and
  BERT-large phase 2 (length 384, batch 16,384) 1,470 sequences/s.

Tolerances are written here, before any comparison, and the tests assert them.
"""

from __future__ import annotations

from .. import workloads
from .step import Placement

MEGATRON_175B = {
    "model": "gpt-3-175b",
    "chip": "a100-80gb",
    "chips": 1024,
    "seq_len": 2048,
    "global_batch": 1536,
    "placement": Placement(8, 8, 16, 1, "full", 0),
    "tflops_per_gpu": 140.0,
    "days_300b_tokens": 34.0,
    "source": "NARAYANAN2021, Table 1 and §5.1",
}
"""Megatron-LM's run. Micro-batch 1 is Megatron-LM's setting for GPT-3 175B (ASSUMPTION: the table
does not print it)."""

LLAMA2_GPU_HOURS = {"llama-2-7b": 184_320, "llama-2-13b": 368_640, "llama-2-70b": 1_720_320}
"""A100-80GB GPU-hours for 2T tokens, TOUVRON2023 Table 2."""
LLAMA2_TOKENS = 2e12
LLAMA2_CHIPS = 2048  # ASSUMPTION: the paper gives no GPU count per model; 2,048 is the CLI example

LLAMA2_13B = workloads.TransformerConfig(
    "llama-2-13b",
    "decoder",
    40,
    5120,
    40,
    13824,
    32000,
    4096,
    gated_mlp=True,
    learned_positions=False,
    tied_embeddings=False,
    biases=False,
    published_params=13.0e9,
    source="Touvron et al. 2023 (Llama 2), model card: 13B, 40 layers, d 5120, 40 heads",
)

BOW_POD16_BERT_BASE = {
    "model": "bert-base",
    "chip": "bow",
    "chips": 16,
    "seq_len": 128,
    "global_batch": 65_536,
    "seq_per_s": 16_391.0,
    "source": "GC-PERF-CN (facts §6.3): BERT-base phase 1, PopART, SDK 3.1",
}
BOW_POD16_BERT_LARGE = {
    "model": "bert-large",
    "chip": "bow",
    "chips": 16,
    "seq_len": 384,
    "global_batch": 16_384,
    "seq_per_s": 1_470.0,
    "source": "GC-PERF-CN (facts §6.3, Bow Pod16 table): BERT-large phase 2, PopART, pre-SDK 2.5",
}
GRAPHCORE_ROWS = (BOW_POD16_BERT_BASE, BOW_POD16_BERT_LARGE)

# Tolerances, fixed before comparing.
TOL_MEGATRON_TFLOPS = (
    0.15  # the search's best placement: hardware TFLOP/s per GPU within 15% of 140
)
TOL_MEGATRON_DAYS = (
    0.15  # restricted to the paper's set-up: full recomputation (its §3.5), no sharding
)
TOL_LLAMA2_GPU_HOURS = 0.25
TOL_BOW_SEQ_PER_S = (
    0.25  # the search's best placement on the Pod16: sequences/s within 25% of Graphcore's
)


def graphcore_seq_per_s(row: dict) -> float:
    """Sequences/s of the search's best placement for a published Graphcore row."""
    from .search import best_placement

    r = best_placement(
        row["model"],
        row["chip"],
        row["chips"],
        seq_len=row["seq_len"],
        global_batch=row["global_batch"],
        explain=False,
    )
    return r.tokens_per_s / row["seq_len"]


def _row(
    run: str, quantity: str, published: float, predicted: float, tol: float, source: str, step
) -> dict:
    ratio = predicted / published
    return {
        "run": run,
        "quantity": quantity,
        "published": published,
        "predicted": predicted,
        "ratio": ratio,
        "tolerance": tol,
        "within": abs(ratio - 1.0) <= tol,
        "source": source,
        "step": step,
    }


def published_table() -> list[dict]:
    """Every published training row the project cites, predicted vs published: a dict per row with
    ``run, quantity, published, predicted, ratio`` (predicted / published), ``tolerance`` (relative,
    fixed above), ``within``, ``source`` and ``step`` (the ``TrainingStep`` behind the prediction)."""
    from .search import best_placement

    m = MEGATRON_175B
    meg = best_placement(
        m["model"],
        m["chip"],
        m["chips"],
        seq_len=m["seq_len"],
        global_batch=m["global_batch"],
        explain=False,
    )
    meg21 = best_placement(
        m["model"],
        m["chip"],
        m["chips"],
        seq_len=m["seq_len"],
        global_batch=m["global_batch"],
        recompute=("full",),
        sharding=(0,),
        explain=False,
    )
    rows = [
        _row(
            "GPT-3 175B, 1,024 A100-80GB",
            "TFLOP/s per GPU",
            m["tflops_per_gpu"],
            meg.hardware_flops_per_chip / 1e12,
            TOL_MEGATRON_TFLOPS,
            m["source"],
            meg,
        ),
        _row(
            "GPT-3 175B, 1,024 A100-80GB (full recompute, no sharding)",
            "days for 300B tokens",
            m["days_300b_tokens"],
            meg21.run(3e11).days,
            TOL_MEGATRON_DAYS,
            m["source"],
            meg21,
        ),
    ]
    for name, hours in LLAMA2_GPU_HOURS.items():
        r = best_placement(
            LLAMA2_13B if name == "llama-2-13b" else name,
            "a100-80gb",
            LLAMA2_CHIPS,
            seq_len=4096,
            global_batch=1024,
            explain=False,
        )
        rows.append(
            _row(
                f"{name}, {LLAMA2_CHIPS:,} A100-80GB",
                "A100-hours for 2T tokens",
                float(hours),
                r.run(LLAMA2_TOKENS).chip_hours,
                TOL_LLAMA2_GPU_HOURS,
                "TOUVRON2023, Table 2",
                r,
            )
        )
    for g in GRAPHCORE_ROWS:
        r = best_placement(
            g["model"],
            g["chip"],
            g["chips"],
            seq_len=g["seq_len"],
            global_batch=g["global_batch"],
            explain=False,
        )
        rows.append(
            _row(
                f"{g['model']}, SL {g['seq_len']}, Bow Pod16",
                "sequences/s",
                g["seq_per_s"],
                r.tokens_per_s / g["seq_len"],
                TOL_BOW_SEQ_PER_S,
                g["source"],
                r,
            )
        )
    return rows
