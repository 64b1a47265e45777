"""The memory wall: roofline bounds, capacity checks and the energy of moving bytes.

A roofline bound is a *lower* bound on time: an op needs at least
``max(flops / peak_flops, bytes / bandwidth)`` on a machine, where ``bytes`` are the
bytes that must cross the memory level the operands live in. It ignores every overhead
(sync, exchange, launch, imbalance); the simulators in ``tiles`` and ``gpu`` add those.
"""

from __future__ import annotations

from dataclasses import dataclass

from .hardware import GpuChip, TileChip, chip as _chip
from .workloads import Op, Step


def memory_levels(c: TileChip | GpuChip) -> dict[str, float]:
    """Bandwidth of each memory level of a chip, bytes/s, fastest first."""
    c = _chip(c)
    if isinstance(c, TileChip):
        levels = {
            "tile SRAM": c.sram_bandwidth_bytes_per_s,
            "exchange": c.exchange_bandwidth_bytes_per_s,
        }
        if c.offchip_bandwidth_bytes_per_s > 0:
            levels["streaming DRAM"] = c.offchip_bandwidth_bytes_per_s
    else:
        levels = {"HBM": c.hbm_bandwidth_bytes_per_s}
    if c.link_bandwidth_bytes_per_s > 0:
        levels["chip-to-chip link"] = c.link_bandwidth_bytes_per_s
    return levels


def main_memory_bandwidth(c: TileChip | GpuChip, *, weights_on_chip: bool = True) -> float:
    """Bandwidth of the memory a model's tensors live in, bytes/s.

    A tile chip keeps everything in tile SRAM when it fits (``weights_on_chip``); otherwise
    weights stream from off-chip DRAM. A GPU's tensors live in HBM.
    """
    c = _chip(c)
    if isinstance(c, TileChip):
        if weights_on_chip or c.offchip_bandwidth_bytes_per_s == 0:
            return c.sram_bandwidth_bytes_per_s
        return c.offchip_bandwidth_bytes_per_s
    return c.hbm_bandwidth_bytes_per_s


def attainable_flops(c: TileChip | GpuChip, intensity: float, bandwidth: float | None = None) -> float:
    """Roofline: attainable FLOP/s at ``intensity`` FLOP/byte, ``min(peak, intensity x bw)``."""
    c = _chip(c)
    bw = main_memory_bandwidth(c) if bandwidth is None else bandwidth
    return min(c.peak_flops, intensity * bw)


@dataclass(frozen=True)
class OpBound:
    """Roofline lower bound of one op on one chip."""

    op: str
    kind: str
    compute_s: float  # flops / peak
    memory_s: float  # bytes / bandwidth of the level the op's bytes come from
    bound: str  # "compute" or "memory"

    @property
    def time_s(self) -> float:
        return max(self.compute_s, self.memory_s)


def op_bound(c: TileChip | GpuChip, op: Op, *, weights_on_chip: bool = True) -> OpBound:
    """Lower-bound time of ``op`` on chip ``c``.

    On a tile chip whose weights stream from off-chip DRAM, the weight bytes cross the
    DRAM link and the activations stay in SRAM; the two overlap at best.
    """
    c = _chip(c)
    compute = op.flops / c.peak_flops
    if isinstance(c, TileChip) and not weights_on_chip and c.offchip_bandwidth_bytes_per_s > 0:
        act = (op.bytes - op.weight_bytes) / c.sram_bandwidth_bytes_per_s
        memory = max(op.weight_bytes / c.offchip_bandwidth_bytes_per_s, act)
    else:
        memory = op.bytes / main_memory_bandwidth(c)
    return OpBound(op.name, op.kind, compute, memory, "compute" if compute >= memory else "memory")


def step_bounds(c: TileChip | GpuChip, s: Step, *, weights_on_chip: bool | None = None) -> list[OpBound]:
    """Per-op lower bounds of a step. ``weights_on_chip`` defaults to "do they fit?"."""
    c = _chip(c)
    if weights_on_chip is None:
        weights_on_chip = fits_on_chip(c, s)
    return [op_bound(c, o, weights_on_chip=weights_on_chip) for o in s.ops]


def step_time_s(c: TileChip | GpuChip, s: Step, *, weights_on_chip: bool | None = None) -> float:
    """Lower bound on the time of a whole step: the sum of its ops' bounds, seconds."""
    return float(sum(b.time_s for b in step_bounds(c, s, weights_on_chip=weights_on_chip)))


def fits_on_chip(c: TileChip | GpuChip, s: Step) -> bool:
    """Do the step's weights and its largest op's activations fit in the chip's fast memory?

    For a tile chip that is the SRAM left after code; for a GPU it is HBM.
    """
    c = _chip(c)
    model_bytes = s.model.weight_bytes(s.dtype_bytes)
    live_act = max((o.act_read_bytes + o.act_write_bytes) / o.count for o in s.ops)
    kv = s.model.kv_bytes_per_token(s.dtype_bytes) * float(s.lengths.sum()) if s.phase in ("prefill", "decode") else 0.0
    need = model_bytes + live_act + kv
    cap = c.data_bytes if isinstance(c, TileChip) else c.hbm_bytes
    return need <= cap
