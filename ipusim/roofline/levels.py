"""Memory levels of a chip and the roofline itself: bandwidth and capacity per level,
arithmetic intensity, attainable FLOP/s and ridge points. Bytes, bytes/s, FLOP/s."""

from __future__ import annotations

import math

import numpy as np

from .._validate import positive
from ..hardware import GpuChip, TileChip
from ..hardware import chip as _chip
from ..workloads import Op, Step


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


def memory_capacities(c: TileChip | GpuChip) -> dict[str, float]:
    """Bytes one chip can hold in each level that stores tensors, fastest first.

    Tile SRAM counts only the data room left after each tile's code reserve.
    """
    c = _chip(c)
    if isinstance(c, TileChip):
        caps = {"tile SRAM": float(c.data_bytes)}
        if c.offchip_bytes > 0:
            caps["streaming DRAM"] = float(c.offchip_bytes)
        return caps
    return {"HBM": float(c.hbm_bytes)}


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


def arithmetic_intensity(x, bytes_: float | None = None) -> float:
    """FLOP per byte of an ``Op`` or ``Step`` (or of ``x`` FLOPs over ``bytes_`` bytes).

    Zero bytes give infinity (nothing to wait for).
    """
    if isinstance(x, (Op, Step)):
        flops, b = x.flops, x.bytes
    else:
        flops = positive("flops", x, allow_zero=True)
        b = positive("bytes", bytes_, allow_zero=True)
    return flops / b if b else math.inf


def attainable_flops(c: TileChip | GpuChip, intensity, bandwidth: float | None = None):
    """Roofline: attainable FLOP/s at ``intensity`` FLOP/byte, ``min(peak, intensity x bw)``.

    ``intensity`` may be a number or an array; ``bandwidth`` defaults to the main memory.
    """
    c = _chip(c)
    bw = main_memory_bandwidth(c) if bandwidth is None else positive("bandwidth", bandwidth)
    if np.ndim(intensity):
        a = np.asarray(intensity, dtype=np.float64)
        if np.any(np.isnan(a)) or np.any(a < 0):
            raise ValueError(
                "intensity must hold numbers >= 0 FLOP/byte (inf allowed), got NaN or a negative"
            )
        return np.minimum(c.peak_flops, a * bw)
    try:
        x = float(intensity)
    except (TypeError, ValueError):
        raise ValueError(f"intensity must be a number >= 0 FLOP/byte, got {intensity!r}") from None
    if math.isnan(x) or x < 0:
        raise ValueError(
            f"intensity must be a number >= 0 FLOP/byte (inf allowed), got {intensity!r}"
        )
    return min(c.peak_flops, x * bw)


def attainable_flops_by_level(c: TileChip | GpuChip, intensity) -> dict[str, float]:
    """Attainable FLOP/s at ``intensity`` (FLOP per byte crossing that level), per memory level."""
    c = _chip(c)
    return {lvl: attainable_flops(c, intensity, bw) for lvl, bw in memory_levels(c).items()}


def ridge_points(c: TileChip | GpuChip) -> dict[str, float]:
    """Intensity (FLOP/byte) where each level stops limiting: ``peak / bandwidth``."""
    c = _chip(c)
    return {lvl: c.peak_flops / bw for lvl, bw in memory_levels(c).items()}
