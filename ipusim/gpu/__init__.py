"""GPU machine: each op of a step runs as a kernel of thread blocks, in waves over SMs sharing HBM.

The model, one kernel at a time (``simulate`` runs the whole step):

* A kernel is a list of thread blocks. A matmul is cut into output tiles (``GEMM_TILES``,
  optionally split along k); fused attention runs one block per (head, sequence) up to 512
  keys, as TensorRT's BERT kernel does, and per (head, sequence, query tile) beyond;
  element-wise kernels (layer norm, softmax, activation, embedding) one block per
  ``ELEMENTWISE_BLOCK_ELEMENTS`` outputs.
* ``blocks_per_sm`` blocks fit on an SM at once (shared memory and registers), so a wave holds
  ``sms x blocks_per_sm`` blocks and a kernel takes ``ceil(blocks / (sms x blocks_per_sm))``
  waves. The last wave may be nearly empty: the wave-quantization tail.
* A wave lasts ``max(slowest SM, wave HBM bytes / shared bandwidth)`` plus a pipeline fill
  (``WAVE_FILL_CYCLES``). An SM's time is the
  larger of its blocks' tensor (or CUDA-core) math and their L2-to-SM traffic. The HBM
  bandwidth is shared by the active SMs; a few active SMs cannot draw all of it (each pulls
  at most ``L2_BYTES_PER_CYCLE_PER_SM``).
* HBM bytes per kernel count L2 reuse: an operand that fits in the usable L2 is read once;
  one that does not is read again by every wave that needs it.
* Each kernel pays the chip's launch overhead once.
* With ``fusion="tensorrt"`` (the default) the kernels are those of TensorRT's BERT
  (``TENSORRT_KERNELS``): attention scores, softmax and context run as one fused kernel whose
  ``l x l`` scores never reach HBM, and the activation rides in the up-projection's epilogue.
  Matmul tiles are picked per shape as an autotuner does (the fastest candidate).
* Training steps run every kernel three times (forward, and two backward GEMMs of the same
  shape per forward GEMM); a simplification.

The package, one idea a module:

* ``params``: the efficiencies, tile shapes and block sizes (set once for every chip and model).
* ``waves``: the per-block, per-wave loop, the Numba kernel ``_waves`` (the same loop in plain
  Python is ``tests/gpu_reference.py``, which the tests and the benchmark compare against it).
* ``kernels``: the thread blocks of each op and the plan that fuses ops into kernels.
* ``autotune``: each kernel's fastest candidate, matmul and element-wise picks memoised.
* ``simulation``: ``simulate_kernel`` (one kernel) and ``simulate`` (a whole step).
* ``varlen``: padding removed as FasterTransformer and ByteTransformer do it (``remove_padding``).
* ``calibration``: the model against published latencies and speed-ups.

All times in seconds, sizes in bytes, work in FLOP.
"""

from __future__ import annotations

from .calibration import (
    CALIBRATION_SOURCES,
    CALIBRATION_TOLERANCE,
    FT_BATCH1_TOLERANCE,
    FT_BERT_BASE_A100_80GB_FP16_MS,
    FT_TOLERANCE,
    LAUNCH_BOUNDS_S,
    PADDING_REMOVAL_SPEEDUPS,
    PADDING_REMOVED_MS,
    PADDING_REMOVED_TOLERANCE,
    TENSOR_EFFICIENCY_BOUNDS,
    TRT_BERT_BASE_A100_40GB_FP16_MS,
    calibration_table,
    fit_calibration,
    fit_tensor_efficiency,
    format_rows,
    padding_removal_table,
    padding_removed_table,
    spread_lengths,
    wave_staircase,
)
from .params import (
    ATTENTION_K_TILE,
    ATTENTION_Q_STAGE,
    ATTENTION_Q_TILE,
    ATTENTION_WHOLE_SEQUENCE_MAX_LEN,
    ELEMENTWISE_BLOCK_ELEMENTS,
    ELEMENTWISE_BLOCKS_PER_SM,
    FUSIONS,
    GEMM_K_TILE,
    GEMM_SPLIT_K,
    GEMM_STAGES,
    GEMM_TILES,
    HBM_EFFICIENCY,
    L2_BYTES_PER_CYCLE_PER_SM,
    L2_REUSE_FRACTION,
    MAX_BLOCKS_PER_SM,
    MMA_GRANULE,
    OPTIONS,
    REGISTER_FILE_BYTES_PER_SM,
    TENSOR_EFFICIENCY,
    TENSORRT_KERNELS,
    WAVE_FILL_CYCLES,
)
from .simulation import (
    KernelResult,
    check_efficiency,
    elementwise_kernel_s,
    simulate,
    simulate_kernel,
    step_time_s,
    step_times,
)
from .varlen import (
    FT_FUSED_MHA_MAX_LEN,
    HOST_SYNC_S,
    SYSTEMS,
    fastertransformer_padded,
    remove_padding,
)

__all__ = [
    "ATTENTION_K_TILE",
    "ATTENTION_Q_STAGE",
    "ATTENTION_Q_TILE",
    "ATTENTION_WHOLE_SEQUENCE_MAX_LEN",
    "CALIBRATION_SOURCES",
    "CALIBRATION_TOLERANCE",
    "ELEMENTWISE_BLOCKS_PER_SM",
    "ELEMENTWISE_BLOCK_ELEMENTS",
    "FT_BATCH1_TOLERANCE",
    "FT_BERT_BASE_A100_80GB_FP16_MS",
    "FT_TOLERANCE",
    "FT_FUSED_MHA_MAX_LEN",
    "HOST_SYNC_S",
    "FUSIONS",
    "GEMM_K_TILE",
    "GEMM_SPLIT_K",
    "GEMM_STAGES",
    "GEMM_TILES",
    "HBM_EFFICIENCY",
    "L2_BYTES_PER_CYCLE_PER_SM",
    "L2_REUSE_FRACTION",
    "LAUNCH_BOUNDS_S",
    "MAX_BLOCKS_PER_SM",
    "MMA_GRANULE",
    "OPTIONS",
    "PADDING_REMOVAL_SPEEDUPS",
    "PADDING_REMOVED_MS",
    "PADDING_REMOVED_TOLERANCE",
    "REGISTER_FILE_BYTES_PER_SM",
    "SYSTEMS",
    "TENSORRT_KERNELS",
    "TENSOR_EFFICIENCY",
    "TENSOR_EFFICIENCY_BOUNDS",
    "TRT_BERT_BASE_A100_40GB_FP16_MS",
    "WAVE_FILL_CYCLES",
    "KernelResult",
    "calibration_table",
    "check_efficiency",
    "elementwise_kernel_s",
    "fit_calibration",
    "fit_tensor_efficiency",
    "fastertransformer_padded",
    "format_rows",
    "padding_removal_table",
    "padding_removed_table",
    "remove_padding",
    "simulate",
    "simulate_kernel",
    "spread_lengths",
    "step_time_s",
    "step_times",
    "wave_staircase",
]
