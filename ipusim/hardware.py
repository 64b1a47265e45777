"""Chip specifications: a tile chip (IPU style) and a shared-memory chip (GPU style).

Every number in a preset names its source key; ``docs/sources.md`` says where each
key points (the keys and section numbers are those of the project's sourced facts
sheet, which also grades each figure's confidence H/M/L). Values marked ASSUMPTION were not found in
any source; they are stated so that a user can change them.

All quantities are SI: bytes, seconds, hertz, watts. "FLOP" means a floating
point operation (a multiply-add is 2).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field
from types import MappingProxyType

from ._validate import positive

KiB = 1024
MiB = 1024**2
GB = 1e9


def _check_fields(obj, *, integer=(), allow_zero=()):
    """Validate every numeric field of a spec dataclass (finite, > 0, whole where needed)."""
    cls = type(obj).__name__
    if not isinstance(obj.name, str) or not obj.name:
        raise ValueError(f"{cls}.name must be a non-empty string, got {obj.name!r}")
    for f in dataclasses.fields(obj):
        if f.name in ("name", "sources", "notes"):
            continue
        try:
            positive(
                f"{cls}.{f.name}",
                getattr(obj, f.name),
                integer=f.name in integer,
                allow_zero=f.name in allow_zero,
            )
        except ValueError as err:
            raise ValueError(f"{err} (chip {obj.name!r})") from None


class _ChipSpec:
    """What both chip kinds share: field validation, read-only sources, ``replace``, chip-wide rates."""

    def _validate(self, *, integer=(), allow_zero=()):
        """Check every numeric field (``_check_fields``) and freeze ``sources`` (called by __post_init__)."""
        _check_fields(self, integer=integer, allow_zero=allow_zero)
        object.__setattr__(self, "sources", MappingProxyType(dict(self.sources)))

    def _chip_wide(self, per_cycle_per_unit: float) -> float:
        """A per-cycle, per-unit (tile or SM) figure summed over the chip's units at its clock, per second."""
        return self.units * per_cycle_per_unit * self.clock_hz

    def replace(self, **changes):
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class TileChip(_ChipSpec):
    """A chip of many tiles, each with its own SRAM and nothing shared (IPU style).

    Execution is bulk synchronous: compute on local memory, a chip-wide sync,
    then an exchange phase that moves data between tiles.
    """

    name: str
    tiles: int  # tiles (cores) per chip
    sram_per_tile_bytes: int  # bytes of SRAM per tile (holds code and data)
    clock_hz: float  # tile clock, Hz
    fp16_flops_per_cycle_per_tile: float  # FLOP/cycle/tile, FP16 in FP16 out (AMP)
    fp32_flops_per_cycle_per_tile: float  # FLOP/cycle/tile, FP32
    sram_bytes_per_cycle_per_tile: float  # bytes/cycle/tile the tile can load from its SRAM
    exchange_bytes_per_cycle_per_tile: float  # bytes/cycle/tile over the on-chip exchange
    sync_cycles: float  # cycles of one chip-wide BSP sync
    vertex_overhead_cycles: float  # cycles to launch one vertex (per tile per compute phase)
    code_bytes_per_tile: int  # bytes of each tile's SRAM reserved for code and runtime
    offchip_bytes: float  # bytes of off-chip (Streaming Memory) DRAM per chip; 0 = none
    offchip_bandwidth_bytes_per_s: float  # bytes/s between off-chip DRAM and the chip
    link_bandwidth_bytes_per_s: float  # bytes/s chip-to-chip (all links, one chip)
    power_w: float  # W, board power per chip
    process_nm: float = 45.0  # nm, the logic process node (prices FLOPs, ``energy.flop_scale``)
    sources: MappingProxyType = field(default_factory=dict, compare=False, repr=False)
    notes: str = field(default="", compare=False, repr=False)

    kind = "tile"
    units = property(lambda self: self.tiles, doc="Tiles: the units chip-wide rates sum over.")

    def __post_init__(self):
        self._validate(
            integer=("tiles", "sram_per_tile_bytes", "code_bytes_per_tile"),
            allow_zero=(
                "offchip_bytes",
                "offchip_bandwidth_bytes_per_s",
                "link_bandwidth_bytes_per_s",
            ),
        )
        if self.code_bytes_per_tile >= self.sram_per_tile_bytes:
            raise ValueError(
                f"TileChip.sram_per_tile_bytes ({self.sram_per_tile_bytes}) must exceed "
                f"code_bytes_per_tile ({self.code_bytes_per_tile}): a tile needs room for its "
                f"code and some data (chip {self.name!r})"
            )
        if (self.offchip_bytes > 0) != (self.offchip_bandwidth_bytes_per_s > 0):
            raise ValueError(
                "TileChip.offchip_bytes and offchip_bandwidth_bytes_per_s must both be 0 "
                f"(no off-chip DRAM) or both > 0 (chip {self.name!r})"
            )

    # Derived quantities (chip-wide)
    @property
    def peak_flops(self) -> float:
        """Peak FP16 FLOP/s of the whole chip."""
        return self._chip_wide(self.fp16_flops_per_cycle_per_tile)

    def amp_flops_per_cycle_per_tile(self, dtype_bytes: int) -> float:
        """FLOP/cycle/tile of the matmul unit (AMP) for operands of ``dtype_bytes``: the FP16 rate
        for 2-byte (or smaller) operands, the FP32 rate for 4-byte ones (the AMP's FP32 rate is
        the chip's FP32 peak: 32 FLOP/cycle/tile on Mk2, UNATTR-IPU21; 31.1 TFLOP/s on GC2, APAD2)."""
        return (
            self.fp16_flops_per_cycle_per_tile
            if dtype_bytes <= 2
            else self.fp32_flops_per_cycle_per_tile
        )

    @property
    def sram_bytes(self) -> int:
        """Total on-chip SRAM, bytes."""
        return self.tiles * self.sram_per_tile_bytes

    @property
    def data_bytes(self) -> int:
        """On-chip SRAM left for data after the per-tile code reserve, bytes."""
        return self.tiles * (self.sram_per_tile_bytes - self.code_bytes_per_tile)

    @property
    def sram_bandwidth_bytes_per_s(self) -> float:
        """Aggregate SRAM load bandwidth summed over tiles, bytes/s."""
        return self._chip_wide(self.sram_bytes_per_cycle_per_tile)

    @property
    def exchange_bandwidth_bytes_per_s(self) -> float:
        """Aggregate on-chip exchange bandwidth, bytes/s."""
        return self._chip_wide(self.exchange_bytes_per_cycle_per_tile)

    @property
    def sync_s(self) -> float:
        """Time of one chip-wide sync, seconds."""
        return self.sync_cycles / self.clock_hz

    def __repr__(self):
        return (
            f"TileChip({self.name!r}: {self.tiles} tiles x {self.sram_per_tile_bytes / KiB:.0f} KiB "
            f"= {self.sram_bytes / MiB:.0f} MiB SRAM, {self.clock_hz / 1e9:.3g} GHz, "
            f"{self.peak_flops / 1e12:.1f} TFLOP/s FP16, SRAM {self.sram_bandwidth_bytes_per_s / 1e12:.1f} TB/s, "
            f"exchange {self.exchange_bandwidth_bytes_per_s / 1e12:.1f} TB/s, {self.power_w:.0f} W)"
        )


@dataclass(frozen=True)
class GpuChip(_ChipSpec):
    """A chip of streaming multiprocessors (SMs) that share one off-chip HBM (GPU style)."""

    name: str
    sms: int  # streaming multiprocessors
    clock_hz: float  # SM clock used for tensor throughput, Hz
    fp16_flops_per_cycle_per_sm: float  # dense FP16 tensor-core FLOP/cycle/SM
    fp32_flops_per_s: float  # non-tensor FP32 FLOP/s, whole chip
    hbm_bytes: float  # HBM capacity, bytes
    hbm_bandwidth_bytes_per_s: float  # HBM bandwidth, bytes/s
    l2_bytes: int  # L2 cache, bytes
    smem_per_sm_bytes: int  # largest shared memory per SM, bytes
    kernel_launch_s: float  # fixed cost of one kernel launch, seconds
    link_bandwidth_bytes_per_s: float  # NVLink bandwidth per GPU, bytes/s
    power_w: float  # W, TDP
    process_nm: float = 45.0  # nm, the logic process node (prices FLOPs, ``energy.flop_scale``)
    sources: MappingProxyType = field(default_factory=dict, compare=False, repr=False)
    notes: str = field(default="", compare=False, repr=False)

    kind = "gpu"
    units = property(lambda self: self.sms, doc="SMs: the units chip-wide rates sum over.")

    def __post_init__(self):
        self._validate(
            integer=("sms", "l2_bytes", "smem_per_sm_bytes"),
            allow_zero=("link_bandwidth_bytes_per_s", "kernel_launch_s"),
        )

    @property
    def peak_flops(self) -> float:
        """Peak dense FP16 tensor FLOP/s of the whole chip."""
        return self._chip_wide(self.fp16_flops_per_cycle_per_sm)

    @property
    def ridge_flop_per_byte(self) -> float:
        """Arithmetic intensity (FLOP/byte of HBM traffic) where HBM stops being the limit."""
        return self.peak_flops / self.hbm_bandwidth_bytes_per_s

    def __repr__(self):
        return (
            f"GpuChip({self.name!r}: {self.sms} SMs, {self.clock_hz / 1e9:.3g} GHz, "
            f"{self.peak_flops / 1e12:.0f} TFLOP/s FP16, {self.hbm_bytes / GB:.0f} GB HBM at "
            f"{self.hbm_bandwidth_bytes_per_s / 1e12:.2f} TB/s, L2 {self.l2_bytes / MiB:.0f} MiB, "
            f"{self.power_w:.0f} W)"
        )


Chip = TileChip | GpuChip


# --------------------------------------------------------------------------------------------
# Presets. Source keys: docs/sources.md.
# --------------------------------------------------------------------------------------------

SRAM_BYTES_PER_CYCLE_PER_TILE = 16.0
"""Bytes a tile loads from its SRAM per cycle, one rule for every tile preset: one 128-bit load
per cycle, Jia's theoretical 31.1 TB/s on a GC2 (LOUW §IV), which hand-written assembly attains
at 30.70 TB/s (JIA-FT, facts §1.5). The vendors' aggregates (45 TB/s GC2, 47.5 TB/s GC200) are
not measured; they imply the same ~23-24 B/cycle/tile on both generations, so the per-tile load
width did not change from Mk1 to Mk2, and the measured Mk1 width is applied to GC200 and Bow
(ASSUMPTION that Mk2 tiles load 128 bits per cycle, as Mk1 tiles do)."""

_SRAM_SOURCE = (
    "one rule for all tile presets (SRAM_BYTES_PER_CYCLE_PER_TILE): a 128-bit load per cycle, "
    "31.1 TB/s on a GC2 (Jia via LOUW §IV), 30.70 TB/s measured in assembly (JIA-FT)"
)

JIA_FT_TILE_LATENCY_S = 98e-9
"""Worst tile-to-tile latency on an idle GC2, seconds (JIA-FT, facts §1.5; 37-59 ns within a tile
column): the measured time of one whole minimal transfer."""

SYNC_CYCLES = 156.0
"""Cycles of one chip-wide sync, one rule for every tile preset: a minimal transfer as Poplar runs it
is a sync followed by an exchange (every exchange follows a sync, facts §1.4 GC-MPO2), so JIA-FT's
measured worst idle latency, 98 ns = 156.8 cycles at 1.6 GHz, is taken to be that whole (ASSUMPTION:
the measured latency includes the sync). Less the one cycle the simulator charges for the exchange
of the 4-byte word sent (4 B / (4.1 B/cycle x 0.96), ``tile_calibration.EXCHANGE_EFFICIENCY``), the
sync is 156 cycles. The largest on-chip sync delay of a public cost model, 126 cycles (UNATTR-IPU21,
conf. L), fits inside it; the same model's ``getGlobalSyncCycles`` = 600 would alone take 4x the
measured whole transfer, so it is not used. Mk2 chips: the same cycles (ASSUMPTION: the sync and the
exchange fabric are clocked with the tiles; no Mk2 latency was measured)."""

_SYNC_SOURCE = (
    "JIA-FT: worst idle tile-to-tile latency 98 ns on GC2 (157 cycles at 1.6 GHz) is one whole "
    "sync + minimal exchange (ASSUMPTION: the measurement includes the sync), less 1 cycle of "
    "exchange = 156 (SYNC_CYCLES); UNATTR-IPU21's sync delay of 126 cycles fits inside it"
)

_IPU_COMMON_SOURCES = {
    "sync_cycles": _SYNC_SOURCE + "; ASSUMPTION: the same cycles on Mk2 (no Mk2 latency measured)",
    "vertex_overhead_cycles": "POPLIBS-EST, newer PerformanceEstimation.cpp: 11 cycles (older: 198)",
    "code_bytes_per_tile": "ASSUMPTION: 48 KiB code/runtime reserve per tile; Poplar's real code size "
    "varies by program (GC-OOM shows code can overflow a tile)",
}


def _gc2() -> TileChip:
    tiles, clock = 1216, 1.6e9
    return TileChip(
        name="gc2",
        tiles=tiles,
        sram_per_tile_bytes=256 * KiB,
        clock_hz=clock,
        fp16_flops_per_cycle_per_tile=64.0,
        fp32_flops_per_cycle_per_tile=16.0,
        sram_bytes_per_cycle_per_tile=SRAM_BYTES_PER_CYCLE_PER_TILE,
        exchange_bytes_per_cycle_per_tile=8e12 / (tiles * clock),
        sync_cycles=SYNC_CYCLES,
        vertex_overhead_cycles=11.0,
        code_bytes_per_tile=48 * KiB,
        offchip_bytes=0.0,
        offchip_bandwidth_bytes_per_s=0.0,
        link_bandwidth_bytes_per_s=192e9,
        power_w=150.0,
        process_nm=16.0,
        sources={
            "tiles": "JIA-N, IPUG, LOUW: 1,216 tiles",
            "sram_per_tile_bytes": "GC-LV tileMemory 262144; JIA-N",
            "clock_hz": "JIA-T, IPUG: 1.6 GHz",
            "fp16_flops_per_cycle_per_tile": "derived: 124.5 TFLOPS (APAD2) / (1216 x 1.6 GHz)",
            "fp32_flops_per_cycle_per_tile": "derived: 31.1 TFLOPS (APAD2) / (1216 x 1.6 GHz)",
            "sram_bytes_per_cycle_per_tile": _SRAM_SOURCE,
            "exchange_bytes_per_cycle_per_tile": "LOUW §II: exchange 'theoretically 8 TB/s'",
            "offchip_bytes": "C2 PCIe card has no Streaming Memory DIMMs (GC-LEGACY); host memory not modelled",
            "offchip_bandwidth_bytes_per_s": "0: no Streaming Memory on the C2 card (GC-LEGACY), so no bandwidth",
            "link_bandwidth_bytes_per_s": "GC-LEGACY: 192 GB/s between the two IPUs of a C2 card",
            "power_w": "IPUG, LOUW: 150 W TDP per IPU",
            "process_nm": "STH, CAMBRIAN: TSMC 16 nm (facts §1.1)",
            **_IPU_COMMON_SOURCES,
            "sync_cycles": _SYNC_SOURCE,
        },
    )


def _gc200() -> TileChip:
    tiles, clock = 1472, 1.325e9
    return TileChip(
        name="gc200",
        tiles=tiles,
        sram_per_tile_bytes=638_976,
        clock_hz=clock,
        fp16_flops_per_cycle_per_tile=128.0,
        fp32_flops_per_cycle_per_tile=32.0,
        sram_bytes_per_cycle_per_tile=SRAM_BYTES_PER_CYCLE_PER_TILE,
        exchange_bytes_per_cycle_per_tile=8e12 / (tiles * clock),
        sync_cycles=SYNC_CYCLES,
        vertex_overhead_cycles=11.0,
        code_bytes_per_tile=48 * KiB,
        offchip_bytes=448e9 / 4,
        offchip_bandwidth_bytes_per_s=64e9,
        link_bandwidth_bytes_per_s=320e9,
        power_w=300.0,
        process_nm=7.0,
        sources={
            "tiles": "CBLAKE, EENEWS-MK2, GC-M2000DS (5,888 cores / 4 IPUs)",
            "sram_per_tile_bytes": "GC-OOM: 'tiles only have 638976 bytes' (624 KiB)",
            "clock_hz": "EENEWS-MK2 (Hot Chips 33): 1.325 GHz",
            "fp16_flops_per_cycle_per_tile": "derived: 250 TFLOPS (CBLAKE, GC-M2000DS) / (1472 x 1.325 GHz)",
            "fp32_flops_per_cycle_per_tile": "derived: 62.5 TFLOPS (CAMBRIAN) / (1472 x 1.325 GHz)",
            "sram_bytes_per_cycle_per_tile": _SRAM_SOURCE
            + "; the vendor's 47.5 TB/s (IOTECH, CBLAKE) is not used",
            "exchange_bytes_per_cycle_per_tile": "CBLAKE: exchange '8 TB/s using any communication "
            "pattern' (GC-MPO2 says 47 TB/s; facts §9: we take CBLAKE)",
            "offchip_bytes": "CAMBRIAN: up to 448 GB Streaming Memory per M2000 (4 IPUs), split evenly",
            "offchip_bandwidth_bytes_per_s": "ASSUMPTION: Streaming Memory bandwidth not found (facts §1.2); "
            "we use the PCIe Gen4 host-link figure 64 GB/s (CBLAKE) as an optimistic stand-in",
            "link_bandwidth_bytes_per_s": "CBLAKE: 10 IPU-Links, 320 GB/s",
            "power_w": "EENEWS-MK2: 300 W per chip",
            "process_nm": "CONVERGE, EENEWS-MK2: TSMC 7 nm (facts §1.1)",
            **_IPU_COMMON_SOURCES,
        },
    )


def _bow() -> TileChip:
    tiles, clock = 1472, 1.85e9
    return TileChip(
        name="bow",
        tiles=tiles,
        sram_per_tile_bytes=638_976,
        clock_hz=clock,
        fp16_flops_per_cycle_per_tile=128.0,
        fp32_flops_per_cycle_per_tile=32.0,
        sram_bytes_per_cycle_per_tile=SRAM_BYTES_PER_CYCLE_PER_TILE,
        exchange_bytes_per_cycle_per_tile=8e12 / (tiles * 1.325e9),
        sync_cycles=SYNC_CYCLES,
        vertex_overhead_cycles=11.0,
        code_bytes_per_tile=48 * KiB,
        offchip_bytes=256e9 / 4,
        offchip_bandwidth_bytes_per_s=64e9,
        link_bandwidth_bytes_per_s=320e9,
        power_w=1250.0 / 4,
        process_nm=7.0,
        sources={
            "tiles": "EENEWS-BOW, GC-BOW2000 (5,888 / 4)",
            "sram_per_tile_bytes": "POPSUM-BOW: 624.0 kB per tile, as GC200",
            "clock_hz": "PIEX, POPSUM-BOW: 1.85 GHz",
            "fp16_flops_per_cycle_per_tile": "derived: 128 as GC200 (1472 x 1.85 GHz x 128 = 348.6 TFLOPS "
            "vs 350 TFLOPS, CONVERGE24, GC-BOW2000)",
            "fp32_flops_per_cycle_per_tile": "ASSUMPTION: same tile as GC200 (no Bow FP32 figure found)",
            "sram_bytes_per_cycle_per_tile": _SRAM_SOURCE,
            "exchange_bytes_per_cycle_per_tile": "ASSUMPTION: GC200's per-cycle rate, scaled by clock",
            "offchip_bytes": "GC-BOW2000: up to 256 GB Streaming Memory per Bow-2000 (4 IPUs), split evenly",
            "offchip_bandwidth_bytes_per_s": "ASSUMPTION: as GC200 (no figure found)",
            "link_bandwidth_bytes_per_s": "ASSUMPTION: as GC200 (Bow is Mk2-compatible)",
            "power_w": "EENEWS-BOW: Bow-2000 averages 1.25 kW for 4 IPUs",
            "process_nm": "ASSUMPTION: the GC200's 7 nm logic die (Bow adds a power-delivery wafer, ELFORU)",
            **_IPU_COMMON_SOURCES,
        },
    )


KERNEL_LAUNCH_S = 4.9e-6
"""Seconds every GPU kernel costs besides its waves (launch, and the dependency wait between
back-to-back kernels): fitted once, with ``gpu.TENSOR_EFFICIENCY``, on the eight TensorRT
BERT-base rows of facts §6.1 (TRT-BERT, A100 40GB) by ``gpu.fit_calibration()``; the same value
for every GPU preset (ASSUMPTION for Hopper, where no published row constrains it)."""

_GPU_LAUNCH = (
    "fitted once on TRT-BERT (facts §6.1) by gpu.fit_calibration(), with the tensor "
    "efficiency; ASSUMPTION: the same per-kernel cost on every GPU"
)


def _a100(hbm_gb: int) -> GpuChip:
    big = hbm_gb == 80
    return GpuChip(
        name=f"a100-{hbm_gb}gb",
        sms=108,
        clock_hz=1.41e9,
        fp16_flops_per_cycle_per_sm=312e12 / (108 * 1.41e9),
        fp32_flops_per_s=19.5e12,
        hbm_bytes=hbm_gb * GB,
        hbm_bandwidth_bytes_per_s=2.039e12 if big else 1.555e12,
        l2_bytes=41_943_040,
        smem_per_sm_bytes=164 * KiB,
        kernel_launch_s=KERNEL_LAUNCH_S,
        link_bandwidth_bytes_per_s=600e9,
        power_w=400.0,
        process_nm=7.0,
        sources={
            "sms": "PC2 deviceQuery '(108) Multiprocessors'; GKW-A100",
            "clock_hz": "PC2, FT-GUIDE: boost 1,410 MHz",
            "fp16_flops_per_cycle_per_sm": "derived: 312 TFLOPS dense FP16 tensor (GKW-A100, PC2) / (108 x 1.41 GHz)",
            "fp32_flops_per_s": "PC2: 19.5 TFLOPS",
            "hbm_bytes": f"GKW-A100, THUNDER: {hbm_gb} GB",
            "hbm_bandwidth_bytes_per_s": (
                "GKW-A100: 2,039 GB/s (80 GB SXM4)" if big else "THUNDER, PC2: 1,555 GB/s"
            ),
            "l2_bytes": "PC2 deviceQuery 41,943,040 B; TPU-A100",
            "smem_per_sm_bytes": "AMPERE-TG: up to 164 KB shared memory per SM (NVIDIA KB = KiB: 167,936 B)",
            "kernel_launch_s": _GPU_LAUNCH,
            "link_bandwidth_bytes_per_s": "THUNDER: NVLink 600 GB/s",
            "power_w": "PC2, THUNDER: 400 W",
            "process_nm": "NV-A100-WP: TSMC 7 nm N7",
        },
    )


def _hopper(name: str, hbm_bytes: float, hbm_bw: float) -> GpuChip:
    h200 = name == "h200"
    return GpuChip(
        name=name,
        sms=132,
        clock_hz=1.83e9,
        fp16_flops_per_cycle_per_sm=989.4e12 / (132 * 1.83e9),
        fp32_flops_per_s=67e12,
        hbm_bytes=hbm_bytes,
        hbm_bandwidth_bytes_per_s=hbm_bw,
        l2_bytes=50 * MiB,
        smem_per_sm_bytes=228 * KiB,
        kernel_launch_s=KERNEL_LAUNCH_S,
        link_bandwidth_bytes_per_s=900e9,
        power_w=700.0,
        process_nm=4.0,
        sources={
            "sms": "HPCTECH (NVIDIA table), GKW-H100" + ("; GENTIC, SAUL for H200" if h200 else ""),
            "clock_hz": "GKW-H100: 1.83 GHz tensor boost"
            + ("; ASSUMPTION: same die for H200" if h200 else ""),
            "fp16_flops_per_cycle_per_sm": "derived: 989.4 TFLOPS dense FP16 (GKW-H100, HPCTECH; "
            "1,979 is with sparsity) / (132 x 1.83 GHz)",
            "fp32_flops_per_s": "HPCTECH: 67 TFLOPS",
            "hbm_bytes": "MLPERF-H200, AIWIKI: 141 GB (GKW says 144 GB physical; facts §9)"
            if h200
            else "HPCTECH: 80 GB HBM3",
            "hbm_bandwidth_bytes_per_s": "LZW, AIWIKI: 4.8 TB/s" if h200 else "HPCTECH: 3,350 GB/s",
            "l2_bytes": (
                "ASSUMPTION: 50 MB as H100 (same GH100 die; facts conf. L)"
                if h200
                else "HPCTECH: 50 MB"
            ),
            "smem_per_sm_bytes": "HPCTECH: up to 228 KB per SM (NVIDIA KB = KiB: 233,472 B)",
            "kernel_launch_s": _GPU_LAUNCH,
            "link_bandwidth_bytes_per_s": "HPCTECH, MLPERF-H200: NVLink 900 GB/s",
            "power_w": "MLPERF-H200: TGP 700 W" if h200 else "HPCTECH: 700 W",
            "process_nm": "NV-H100-WP: TSMC 4N"
            + ("; ASSUMPTION: same GH100 die for H200" if h200 else ""),
        },
    )


_PRESETS = {
    "gc2": _gc2,
    "gc200": _gc200,
    "bow": _bow,
    "a100-40gb": lambda: _a100(40),
    "a100-80gb": lambda: _a100(80),
    "h100-sxm": lambda: _hopper("h100-sxm", 80 * GB, 3.35e12),
    "h200": lambda: _hopper("h200", 141 * GB, 4.8e12),
}

TILE_PRESETS = ("gc2", "gc200", "bow")
GPU_PRESETS = ("a100-40gb", "a100-80gb", "h100-sxm", "h200")
PRESETS = TILE_PRESETS + GPU_PRESETS


def chip(name: str | TileChip | GpuChip) -> TileChip | GpuChip:
    """The preset chip called ``name``, or the chip in the file ``name`` (.toml/.json, see
    ``ipusim.specfiles``); a chip object is returned unchanged.

    >>> chip("gc200").tiles
    1472
    """
    if isinstance(name, (TileChip, GpuChip)):
        return name
    key = str(name).lower()
    if key not in _PRESETS:
        from . import specfiles  # a chip file (.toml/.json): ipusim.specfiles

        if specfiles.is_spec_path(name):
            return specfiles.load_chip(name, {"tile": TileChip, "gpu": GpuChip})
        raise ValueError(
            f"unknown chip preset {name!r}; valid: {', '.join(PRESETS)}, or a chip file "
            f"(.toml/.json; python -m ipusim schema chip)"
        )
    return _preset(key)


@functools.cache
def _preset(key: str) -> TileChip | GpuChip:
    """Build (and validate) a preset once; chips are immutable, so one object serves all."""
    return _PRESETS[key]()


def all_chips() -> list[TileChip | GpuChip]:
    """Every preset chip, tile chips first."""
    return [chip(n) for n in PRESETS]


def describe_sources(c: TileChip | GpuChip) -> str:
    """One line per field: value and where it comes from."""
    lines = [f"{c.name} ({c.kind} chip)"]
    for f in dataclasses.fields(c):
        if f.name in ("name", "sources", "notes"):
            continue
        v = getattr(c, f.name)
        vs = f"{v:.6g}" if isinstance(v, float) and not math.isnan(v) else str(v)
        lines.append(f"  {f.name:36s} {vs:>14s}  {c.sources.get(f.name, '(user value)')}")
    return "\n".join(lines)
