"""Energy of computing and of moving bytes: a cited pJ/FLOP and pJ/byte table.

Sources are keys of ``docs/facts.md`` §3. The table is Horowitz's
45 nm figures (ISSCC 2014) plus one HBM figure; which value we pick and why is written
next to each entry.

Process node, plainly: the chips we compare are 16 nm (GC2), 7 nm (GC200, Bow, A100) and
TSMC 4N (H100, H200), not 45 nm. Arithmetic energy has shrunk several-fold since 45 nm, SRAM
access energy less (it is dominated by wires), and off-chip DRAM/HBM energy per bit least (it
is I/O and DRAM-array energy; the HBM figure here is already for a 2017 part). FLOPs are
therefore priced at each chip's node (``flop_scale``, Stillmaker & Baas's scaling fits: 0.124x
at 7 nm), without which a 4 nm GPU's FLOPs alone would draw more than its board power; bytes
keep one table for every chip, so that comparisons of data movement isolate *where the bytes
come from*, not the process node (the byte figures are upper bounds at 7 nm).

Two energy estimates exist in ipusim, on purpose, and they are not the same number:

* the bottom-up estimate of the *work* (this table): ``roofline.step_energy`` prices a step's
  FLOPs and its compulsory (unfused) bytes per level; ``tile_split`` and ``gpu_split`` price
  every byte the machine simulations actually move (tile SRAM reads, exchange, Streaming
  Memory, IPU-Links; GPU HBM, L2 and shared memory) and every FLOP they run. That is
  ``StepResult.energy_j`` and ``StepResult.energy_split``: dynamic energy (FLOPs at the chip's
  node, bytes at the table's prices), with no static (leakage, idle) power, because no source
  gives that split for these chips; its average power stays within the board power (a test
  holds every preset to it);
* ``StepResult.board_energy_j`` = board power (``chip.power_w``, sourced in ``ipusim.hardware``)
  x simulated time: an upper bound (a chip rarely draws its full board power) that includes
  static power, for throughput-per-watt uses.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PJ = 1e-12  # joules per picojoule


@dataclass(frozen=True)
class EnergyCost:
    """Energy of one unit of work: a FLOP or a byte read from one memory level."""

    pj: float  # picojoules per unit
    unit: str  # "FLOP" or "byte"
    source: str  # source key and how the number was derived


# Per FP16 FLOP: one multiply-add is 2 FLOP and costs a FP16 multiply (1.1 pJ) plus a FP16
# add (0.4 pJ) at 45 nm (GIST-HOROWITZ, ESIM): 1.5 pJ / 2 FLOP.
FLOP_FP16 = EnergyCost(
    (1.1 + 0.4) / 2,
    "FLOP",
    "GIST-HOROWITZ 45 nm: FP16 mult 1.1 pJ + FP16 add 0.4 pJ per multiply-add (2 FLOP)",
)
FLOP_FP32 = EnergyCost(
    (3.7 + 0.9) / 2,
    "FLOP",
    "GIST-HOROWITZ 45 nm: FP32 mult 3.7 pJ + FP32 add 0.9 pJ per multiply-add (2 FLOP)",
)

# Process-node scaling of arithmetic energy: Stillmaker & Baas (2017) fit the energy of a CMOS
# operation at each node as a quadratic in the supply voltage, E(V) = a V^2 + b V + c, normalised
# alike across nodes (STILLMAKER2017; high-performance process fits, energy columns). The nodes
# below 45 nm the presets need; 45 nm is Horowitz's. Their fits end at 7 nm.
STILLMAKER_ENERGY_FIT = {
    45.0: (1.018, -0.3107, 0.1539),
    16.0: (0.2958, -0.1241, 0.03024),
    7.0: (0.1776, -0.09097, 0.02447),
}
SCALING_VDD = 0.9  # V: Horowitz's supply voltage, held at every node (ASSUMPTION, see flop_scale)


def flop_scale(process_nm: float) -> float:
    """Factor from Horowitz's 45 nm FLOP energies to a chip built at ``process_nm``:
    E(node, 0.9 V) / E(45 nm, 0.9 V) from Stillmaker & Baas's fits (``STILLMAKER_ENERGY_FIT``):
    0.226 at 16 nm, 0.124 at 7 nm. Rules, each an ASSUMPTION: the voltage is held at Horowitz's
    0.9 V (real parts run lower, so this is an upper bound on the energy); a node between two
    fitted ones takes the coarser node's factor, a node below 7 nm the 7 nm factor (the fits end
    there; again an upper bound); a node above 45 nm is not scaled. Only arithmetic is scaled:
    SRAM, wire, DRAM, HBM and link energies keep their 45 nm or per-bit figures (wires shrink
    least, DRAM and link figures are already I/O energies), so bytes stay priced as the table says."""
    if not process_nm > 0:
        raise ValueError(f"process_nm must be > 0 nm, got {process_nm!r}")
    node = min((n for n in STILLMAKER_ENERGY_FIT if n >= process_nm), default=45.0)
    a, b, c = STILLMAKER_ENERGY_FIT[node]
    a45, b45, c45 = STILLMAKER_ENERGY_FIT[45.0]
    v = SCALING_VDD
    return (a * v * v + b * v + c) / (a45 * v * v + b45 * v + c45)


# Per byte read from each memory level. Keys are the level names of roofline.memory_levels.
BYTE = {
    # A tile's 624 KiB is built of 16-32 KiB memory elements (GC-LV memory map: 8 x 16 KiB +
    # 4 x 32 KiB on GC2), so one access hits a ~32 KB array: Horowitz's 32 KB 64-bit access,
    # 20 pJ / 8 bytes. (The 1 MB figure, 12.5 pJ/byte, is the class of a GPU L2.)
    "tile SRAM": EnergyCost(
        20.0 / 8,
        "byte",
        "GIST-HOROWITZ 45 nm: 32 KB SRAM, 64-bit access 20 pJ (tile banks are 16-32 KiB, GC-LV)",
    ),
    # HBM2 device access ~3.9 pJ/bit (O'Connor et al. MICRO-50 2017, via FGDRAM notes; conf. M,
    # value L). Unattributed notes put HBM3 at 3-5 pJ/bit, so one figure serves A100 (HBM2e)
    # and H100/H200 (HBM3/3e).
    "HBM": EnergyCost(
        3.9 * 8, "byte", "FGDRAM (O'Connor et al. 2017, as quoted): HBM2 ~3.9 pJ/bit"
    ),
    # Streaming Memory is DDR4 DIMMs. Horowitz: DRAM 64-bit access 1.3-2.6 nJ = 20-41 pJ/bit
    # (45 nm era, the only high-confidence DRAM figure). We take the LOW end, 20 pJ/bit: the
    # high end is older DRAM, and a lower-confidence note (HBM 2-2.4x better than DDR4) would
    # put DDR4 near 8-9 pJ/bit, so 20 is already unfavourable to the tile chip. See the
    # notebook's energy section for the sensitivity.
    "streaming DRAM": EnergyCost(
        20.0 * 8,
        "byte",
        "GIST-HOROWITZ: DRAM 64-bit access 1.3-2.6 nJ = 20-41 pJ/bit; low end taken",
    ),
    # ASSUMPTION: the exchange reads a byte at the sender's SRAM and writes it at the
    # receiver's (2 x 2.5 pJ); the wire energy across the die is not in the facts sheet, so
    # this is a floor.
    "exchange": EnergyCost(
        2 * 20.0 / 8,
        "byte",
        "ASSUMPTION: one tile-SRAM read + one write (GIST-HOROWITZ 32 KB); die wires not counted",
    ),
}
# A chip-to-chip link byte (IPU-Link, NVLink; the inter-node links too, as a floor). No sourced
# pJ/bit for IPU-Links or NVLink exists (facts §3.3); ``ipusim.placement`` charges every byte its
# collectives and stage-to-stage sends put on the links at this price.
LINK = EnergyCost(
    2.0 * 8,
    "byte",
    "ASSUMPTION: 2 pJ/bit for transmitter + receiver; published 40-80 Gb/s wireline transceivers of "
    "the 28-45 nm era draw about 0.4-1.1 pJ/bit on each side (RAZAVI-WL); channel and switch not counted",
)
# A byte read from a GPU's L2 into an SM: the L2 is tens of MB, so Horowitz's largest array,
# 1 MB, is a floor for it.
L2 = EnergyCost(
    100.0 / 8,
    "byte",
    "GIST-HOROWITZ 45 nm: 1 MB SRAM, 64-bit access 100 pJ (a floor for a 40-50 MB L2)",
)
# A byte read or written in an SM's shared memory (up to 164-228 KB in 32 banks): priced as a tile's
# SRAM bank, so that the two machines differ only in where bytes come from.
SMEM = EnergyCost(
    20.0 / 8, "byte", "GIST-HOROWITZ 45 nm: 32 KB SRAM, 64-bit access 20 pJ (as a tile SRAM bank)"
)
# ASSUMPTION: a GEMM or fused-attention block reads each operand byte it stages in shared memory
# twice (a 2 x 2 grid of warps: every A row panel is read by two warps, every B column panel by
# two) after writing it once: 3 shared-memory accesses per staged byte. Element-wise kernels
# stream through registers and touch no shared memory.
SMEM_ACCESSES_PER_STAGED_BYTE = 3.0

TILE_LEVELS = ("flops", "sram", "exchange", "streaming", "link")
"""Keys of a tile chip's ``StepResult.energy_split``."""
GPU_LEVELS = ("flops", "hbm", "l2", "smem")
"""Keys of a GPU's ``StepResult.energy_split``."""
DATA_LEVELS = ("sram", "exchange", "streaming", "link", "hbm", "l2", "smem")
"""Levels that are data movement (every key of an energy split except "flops")."""


@dataclass(frozen=True)
class Energy:
    """Energy of some work: compute plus bytes moved per memory level. Joules."""

    compute_j: float
    movement_j: dict = field(default_factory=dict)  # level -> joules

    @property
    def data_j(self) -> float:
        """Joules spent moving bytes, all levels."""
        return float(sum(self.movement_j.values()))

    @property
    def total_j(self) -> float:
        return self.compute_j + self.data_j

    @property
    def data_share(self) -> float:
        """Fraction of the energy spent moving data."""
        return self.data_j / self.total_j if self.total_j else 0.0

    def __add__(self, other: Energy) -> Energy:
        mv = dict(self.movement_j)
        for k, v in other.movement_j.items():
            mv[k] = mv.get(k, 0.0) + v
        return Energy(self.compute_j + other.compute_j, mv)

    def to_dict(self) -> dict:
        return {
            "compute_j": self.compute_j,
            "data_j": self.data_j,
            "total_j": self.total_j,
            "data_share": self.data_share,
            "movement_j": dict(self.movement_j),
        }

    def __repr__(self):
        mv = ", ".join(f"{k} {v:.3g} J" for k, v in self.movement_j.items())
        return (
            f"Energy({self.total_j:.3g} J: compute {self.compute_j:.3g} J, data {self.data_j:.3g} J"
            f" [{mv}], {self.data_share:.0%} moving data)"
        )


def energy(flops: float, bytes_by_level: dict, *, flop_cost: EnergyCost = FLOP_FP16) -> Energy:
    """Energy of ``flops`` FLOPs and of reading ``bytes_by_level`` (level -> bytes), joules."""
    mv = {}
    for level, b in bytes_by_level.items():
        if level not in BYTE:
            raise ValueError(
                f"no energy figure for memory level {level!r}; priced: {', '.join(BYTE)}"
            )
        mv[level] = float(b) * BYTE[level].pj * PJ
    return Energy(float(flops) * flop_cost.pj * PJ, mv)


def table() -> list[dict]:
    """The energy table as rows: item, pJ per unit, unit, source."""
    rows = [
        {"item": "FP16 FLOP", "pj": FLOP_FP16.pj, "unit": "FLOP", "source": FLOP_FP16.source},
        {"item": "FP32 FLOP", "pj": FLOP_FP32.pj, "unit": "FLOP", "source": FLOP_FP32.source},
    ]
    rows += [{"item": k, "pj": v.pj, "unit": v.unit, "source": v.source} for k, v in BYTE.items()]
    rows += [
        {"item": k, "pj": v.pj, "unit": v.unit, "source": v.source}
        for k, v in (("GPU L2", L2), ("GPU shared memory", SMEM), ("chip-to-chip link", LINK))
    ]
    return rows


def _nonneg(name, v) -> float:
    v = float(v)
    if not v >= 0.0:
        raise ValueError(f"{name} must be a number >= 0, got {v!r}")
    return v


def tile_split(
    *,
    amp_flops: float,
    vector_flops: float,
    sram_read_bytes: float,
    exchange_sent_bytes: float,
    exchange_received_bytes: float,
    streamed_bytes: float = 0.0,
    link_bytes: float = 0.0,
    flop_scale: float = 1.0,
) -> dict:
    """Energy of what a tile simulation did, by level, joules (keys ``TILE_LEVELS``).

    * "flops": AMP (matmul) FLOPs at the FP16 price, vector-unit FLOPs at the FP32 price, both
      times ``flop_scale`` (the chip's node, ``flop_scale(process_nm)``; 1 = 45 nm);
    * "sram": bytes the compute phases load from their tile's SRAM (32 KB-bank price);
    * "exchange": each byte sent is read once from the sender's SRAM and each byte received is
      written once into the receiver's (a multicast byte is read once, written at every
      receiver); the wires across the die are not counted, so this is a floor (see
      ``BYTE["exchange"]``, the same 5 pJ for one read plus one write);
    * "streaming": bytes copied in from Streaming Memory at the DRAM price;
    * "link": bytes over IPU-Links at ``LINK`` (0 for one chip).
    """
    sram = BYTE["tile SRAM"].pj
    return {
        "flops": (
            _nonneg("amp_flops", amp_flops) * FLOP_FP16.pj
            + _nonneg("vector_flops", vector_flops) * FLOP_FP32.pj
        )
        * _nonneg("flop_scale", flop_scale)
        * PJ,
        "sram": _nonneg("sram_read_bytes", sram_read_bytes) * sram * PJ,
        "exchange": (
            _nonneg("exchange_sent_bytes", exchange_sent_bytes)
            + _nonneg("exchange_received_bytes", exchange_received_bytes)
        )
        * sram
        * PJ,
        "streaming": _nonneg("streamed_bytes", streamed_bytes) * BYTE["streaming DRAM"].pj * PJ,
        "link": _nonneg("link_bytes", link_bytes) * LINK.pj * PJ,
    }


def gpu_split(
    *,
    tensor_flops: float,
    simt_flops: float,
    hbm_bytes: float,
    l2_bytes: float,
    smem_staged_bytes: float,
    flop_scale: float = 1.0,
) -> dict:
    """Energy of what a GPU simulation did, by level, joules (keys ``GPU_LEVELS``).

    * "flops": tensor-core FLOPs (padded tiles included) at the FP16 price, CUDA-core FLOPs at
      the FP32 price, both times ``flop_scale`` (the chip's node; 1 = 45 nm);
    * "hbm": bytes moved between HBM and the chip (``BYTE["HBM"]``);
    * "l2": bytes SMs pull from L2 (``L2``);
    * "smem": ``SMEM_ACCESSES_PER_STAGED_BYTE`` accesses per byte a block stages in shared
      memory (``SMEM``).
    """
    return {
        "flops": (
            _nonneg("tensor_flops", tensor_flops) * FLOP_FP16.pj
            + _nonneg("simt_flops", simt_flops) * FLOP_FP32.pj
        )
        * _nonneg("flop_scale", flop_scale)
        * PJ,
        "hbm": _nonneg("hbm_bytes", hbm_bytes) * BYTE["HBM"].pj * PJ,
        "l2": _nonneg("l2_bytes", l2_bytes) * L2.pj * PJ,
        "smem": _nonneg("smem_staged_bytes", smem_staged_bytes)
        * SMEM_ACCESSES_PER_STAGED_BYTE
        * SMEM.pj
        * PJ,
    }


def data_j(split: dict) -> float:
    """Joules of an energy split spent moving data (every level but "flops")."""
    return float(sum(v for k, v in split.items() if k != "flops"))
