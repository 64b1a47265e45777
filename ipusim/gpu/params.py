"""GPU model parameters: efficiencies, tile shapes, block sizes and the TensorRT kernel fusion.

Each is set ONCE for every chip, model and batch; none is fitted per calibration row. Change them
here (or per call through ``simulate`` options) to see how much each one matters.
"""

from __future__ import annotations

TENSOR_EFFICIENCY = 0.70
"""Fraction of the dense FP16 tensor peak a GEMM main loop sustains on an SM.

One of the two constants set from published latencies, together with the per-kernel cost
``hardware.KERNEL_LAUNCH_S`` (every GPU preset's ``kernel_launch_s``), by one stated rule
(``fit_calibration`` reproduces both; a test checks that it still gives these values):

* in-sample: the eight rows of docs/facts.md §6.1 (TensorRT 8.4.3 BERT-base FP16 on an
  A100 40GB, 128 and 384 tokens, batch 1, 8, 32, 128);
* rule: ``calibration.least_squares`` (bounded least squares, the same rule ``ipusim calibrate``
  applies to a user's measurements): the pair that minimises the sum over those rows of
  ``log(simulated / published)**2``, every other constant at its default (0.704 and 4.95 us,
  kept to two significant figures);
* out of sample (never used to set anything): FasterTransformer's absolute BERT-base FP16
  latencies on an A100 80GB (§4.2, FT-GUIDE), in ``calibration_table(sources="FT-GUIDE")``,
  and every H100/H200 prediction.

The tensor efficiency is what large batches pin down; the per-kernel cost is what batch 1
pins down (about 86 kernels of a few microseconds of work each).

Plausibility (not used to set it): tuned cuBLAS/CUTLASS FP16 GEMMs on large square shapes reach
roughly 75-90% of the A100's 312 TFLOP/s; BERT-base's narrow shapes and sustained-load clocks
below the 1.41 GHz boost do worse. Tile quantization, waves and launches are modelled
separately and are not part of this number.
"""

HBM_EFFICIENCY = 0.85
"""Fraction of the HBM peak bandwidth a streaming kernel sustains.

ASSUMPTION: STREAM-like copy kernels on A100 typically reach 80-90% of the datasheet
bandwidth (row refresh, page misses, read/write turnaround); not in docs/facts.md.
"""

L2_BYTES_PER_CYCLE_PER_SM = 5120 / 108
"""Bytes per SM clock one SM can pull from L2 (the most a lone SM draws from HBM, too).

NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020): L2 read bandwidth 5,120 bytes/clk
for the chip, here divided evenly over its 108 SMs (not in docs/facts.md). ASSUMPTION: the
same per-SM rate for Hopper (no figure at hand).
"""

L2_REUSE_FRACTION = 0.5
"""Share of the L2 an operand may occupy and still be counted as read from HBM only once.

ASSUMPTION: A100's L2 is split in two partitions and also holds the streamed operand and the
outputs, so about half of it is usable for a resident operand.
"""

WAVE_FILL_CYCLES = 1000
"""SM cycles every wave spends filling and draining its blocks' pipelines (memory latency).

ASSUMPTION: one HBM round trip (several hundred cycles on recent GPUs) before the first
operand tile arrives, plus the epilogue's stores; about 0.7 us at 1.41 GHz. It is what keeps a
one-wave, few-microsecond kernel from reaching its roofline time. Counted as "memory" time.
"""

REGISTER_FILE_BYTES_PER_SM = 256 * 1024
"""Registers per SM, bytes. docs/facts.md §2 (HPCTECH: 256 KB per SM on H100);
ASSUMPTION: the same on A100 (figure not retrieved there)."""

GEMM_TILES = ((128, 128), (128, 64), (64, 64), (16, 256))
"""Output tiles (rows, columns) a GEMM may use: CUTLASS's usual FP16 threadblock shapes, and a
16-row tile (one MMA fragment high) for the skinny GEMMs of decoding."""

GEMM_SPLIT_K = (1, 2, 4, 8, 16)
"""Split-k factors a GEMM may use. Split-k is tried only when the unsplit grid leaves SMs idle
(fewer blocks than one wave holds), as a library heuristic would."""

GEMM_K_TILE = 32
"""k depth of the operand tiles staged in shared memory per pipeline stage.

ASSUMPTION (the smaller of the two depths NVIDIA's own A100 FP16 GEMMs use). CUTLASS's default
sm80 FP16 tensor-op configuration stages k = 64 (``GemmShape<128, 256, 64>``, NVIDIA/cutlass
include/cutlass/gemm/device/default_gemm_configuration.h); cuBLAS's A100 kernels use 32 or 64
(kernel names seen in public profiles: ``ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_tn``,
``..._stages_64x3_tn``). Here it only sets a block's shared memory and so how many blocks share
an SM (``blocks_per_sm``); the register limit binds first for the 128 x 128 tile."""
GEMM_STAGES = 3
"""Pipeline stages of the shared-memory operand buffer: CUTLASS's default for sm80 tensor-op
GEMMs (``kStages = 3`` in default_gemm_configuration.h, as above). cuBLAS kernels use 3 to 6
(names as above); with ``GEMM_K_TILE`` = 32 this is the smallest footprint of those, an
ASSUMPTION that favours more resident blocks per SM."""
ATTENTION_WHOLE_SEQUENCE_MAX_LEN = 512
"""Up to this many keys, fused attention runs one block per (head, sequence) that keeps the
whole sequence's K and V in shared memory and loops over the queries: TensorRT's BERT fused
MHA launches a grid of (heads, batch) with 49,152 B (s = 128) or 114,688 B (s = 384) of
shared memory per block on sm80 (NVIDIA/TensorRT plugin/bertQKVToContextPlugin/
fused_multihead_attention.h), which is (2 x keys + 128 staged queries) x head_dim x 2 bytes.
Decoding does the same (one block per head and sequence; FasterTransformer's
decoder_masked_multihead_attention.cu: "The grid has size (1, B, H)")."""
ATTENTION_Q_TILE = 64  # longer sequences: query rows per block (ASSUMPTION, FlashAttention-2 style)
ATTENTION_K_TILE = 64  # longer sequences: key rows staged per step (ASSUMPTION, FlashAttention-2)
ATTENTION_Q_STAGE = 128  # query rows a whole-sequence block stages at a time (TensorRT, see above)
MMA_GRANULE = 16
"""Rows (and key columns) a fused-attention block's tensor-core work is padded to.

The FP16 tensor-core instruction on sm80/sm90 is ``mma.sync.aligned.m16n8k16`` (PTX ISA,
"Warp-level matrix multiply-accumulate instructions": shapes m16n8k8 and m16n8k16 for .f16);
CUTLASS's sm80 default ``InstructionShape`` is ``GemmShape<16, 8, 16>``
(default_gemm_configuration.h). Its m and k are 16; padding the n side to 16 as well (two
m16n8 instructions side by side) is an ASSUMPTION (a warp tile is at least that wide)."""
ELEMENTWISE_BLOCK_ELEMENTS = 4096  # outputs per element-wise block: 256 threads x 16 (ASSUMPTION)
ELEMENTWISE_BLOCKS_PER_SM = 8
"""Resident element-wise blocks per SM: 2,048 resident threads per SM (CUDA C++ Programming
Guide, "Technical Specifications per Compute Capability": maximum resident threads per SM
2,048 for compute capability 8.0 (A100) and 9.0 (H100, H200)) / 256 threads per block (the
ASSUMPTION of ``ELEMENTWISE_BLOCK_ELEMENTS``)."""
MAX_BLOCKS_PER_SM = 32
"""Most thread blocks resident on one SM: CUDA C++ Programming Guide, "Technical
Specifications per Compute Capability": maximum resident blocks per SM 32 for compute
capability 8.0 (A100) and 9.0 (H100, H200)."""

FUSIONS = ("tensorrt", "none")

TENSORRT_KERNELS = (
    ("embedding", ("embedding",)),  # embLayerNorm plugin (gather + layer norm)
    ("qkv", ("qkv",)),
    ("fused_mha", ("attn_scores", "softmax", "attn_context")),  # fused multi-head attention
    ("attn_out", ("attn_out",)),
    ("norm_attn", ("norm_attn",)),  # skipLayerNorm plugin (residual add + layer norm)
    ("ffn_up", ("ffn_up", "activation")),  # GELU in the GEMM epilogue
    ("ffn_down", ("ffn_down",)),
    ("norm_ffn", ("norm_ffn",)),
)
"""How TensorRT's BERT fuses the op list into kernels (NVIDIA/TensorRT demo/BERT plugins:
embLayerNormPlugin, the fused MHA plugin, skipLayerNormPlugin, GEMM + bias + GELU).
Ops not listed (pooler, final norm, LM head) run as kernels of their own."""

OPTIONS = ("fusion", "tensor_efficiency", "hbm_efficiency", "launch_s")
