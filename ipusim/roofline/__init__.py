"""The memory wall: roofline bounds, capacity checks and the energy of moving bytes.

A roofline bound is a *lower* bound on time: an op needs at least
``max(flops / peak_flops, bytes / bandwidth)`` on a machine, where ``bytes`` are the
bytes that must cross the memory level the operands live in. It ignores every overhead
(sync, exchange, launch, imbalance); the simulators in ``tiles`` and ``gpu`` add those.

Two bounds, and which simulator each one bounds:

* **unfused** (``fused=False``, the default): every op of ``workloads.step`` reads its
  inputs from and writes its output to memory, including the ``l x l`` attention scores
  and the activation (GELU) output. It is a lower bound of ``tiles.simulate`` in the same
  weight placement (a tile chip runs every op as its own superstep) and of an unfused GPU
  (``gpu.simulate(..., fusion="none")``), NOT of the default fused GPU simulator.
* **fused** (``fused=True``): attention scores, softmax and context form one kernel whose
  scores never leave the chip (FlashAttention, TensorRT's fused MHA) and the activation
  rides in the up-projection's epilogue; each fused group is bounded as one kernel,
  ``max(sum of FLOPs / peak, bytes that must cross memory / bandwidth)``. It is a lower
  bound of the default (fused) ``gpu.simulate`` and, being no larger than the unfused
  bound, of ``tiles.simulate`` too.

Where an op's bytes come from (``op_bytes_by_level``, placement by ``placement``):

* GPU: everything from HBM (each byte once: perfect on-chip reuse).
* Tile chip whose step fits in tile SRAM: everything from tile SRAM.
* Tile chip whose step does not fit (with off-chip DRAM): weights stream from off-chip
  DRAM; the KV cache too when it does not fit in SRAM beside the live activations, and
  the activations too when they alone do not fit. What crosses DRAM and what stays in SRAM
  overlap at best, so the bound is the slower of the two transfers.
* Tile chip with no off-chip DRAM whose step does not fit: bounded as if it fit (it cannot
  run at all; ``fits_on_chip`` says so).

The package, one idea a module: ``levels`` (memory levels and the roofline), ``bounds`` (op
and step bounds, fit, energy), ``analysis`` (``StepRoofline``), ``sizing`` (``capacity``) and
``grid`` (``sweep``).

Public entry points: ``memory_levels``, ``memory_capacities``, ``arithmetic_intensity``,
``attainable_flops``, ``attainable_flops_by_level``, ``op_bound``, ``step_bounds``,
``step_time_s``, ``fits_on_chip``, ``analyze`` (all of it for one step, as an object),
``capacity`` (where a model lives and how many chips it needs), ``step_energy`` and
``sweep`` (a Numba grid of step bounds over batch x sequence length x chip).
"""

from __future__ import annotations

from .analysis import StepRoofline, analyze
from .bounds import (
    FUSED_GROUPS,
    OpBound,
    fits_on_chip,
    live_act_bytes,
    op_bound,
    op_bytes_by_level,
    op_live_bytes,
    placement,
    step_bounds,
    step_energy,
    step_need_bytes,
    step_time_s,
)
from .grid import BoundGrid, step_coefficients, sweep
from .levels import (
    arithmetic_intensity,
    attainable_flops,
    attainable_flops_by_level,
    main_memory_bandwidth,
    memory_capacities,
    memory_levels,
    ridge_points,
)
from .sizing import Capacity, capacity

__all__ = [
    "BoundGrid",
    "Capacity",
    "FUSED_GROUPS",
    "OpBound",
    "StepRoofline",
    "analyze",
    "arithmetic_intensity",
    "attainable_flops",
    "attainable_flops_by_level",
    "capacity",
    "fits_on_chip",
    "live_act_bytes",
    "main_memory_bandwidth",
    "memory_capacities",
    "memory_levels",
    "op_bound",
    "op_bytes_by_level",
    "op_live_bytes",
    "placement",
    "ridge_points",
    "step_bounds",
    "step_coefficients",
    "step_energy",
    "step_need_bytes",
    "step_time_s",
    "sweep",
]
