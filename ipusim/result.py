"""What one step costs on a machine, and the one fit rule every module uses.

This is a leaf module (it imports nothing from the machine models), so ``tiles``, ``gpu``,
``machine``, serving and the checklist can all share ``StepResult`` and the fit states.

The fit rule has three states, decided by the machine models and read everywhere:

* ``on_chip``: everything the step needs lives in the chip's own memory (tile SRAM on a
  tile chip; HBM on a GPU), with the machine model's per-unit limits respected.
* ``streams``: it runs only because weights (or tables) are brought in from off-chip
  Streaming Memory while it runs; the time includes those copies.
* ``does_not_fit``: no honest time exists; ``time_s = inf``.

A byte count (total bytes <= total SRAM) is necessary for ``on_chip``, not sufficient: the
tile model also holds each tile to its own SRAM.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

ON_CHIP, STREAMS, DOES_NOT_FIT = "on_chip", "streams", "does_not_fit"
FIT_STATES = (ON_CHIP, STREAMS, DOES_NOT_FIT)


def fit_state(fits: bool, streamed: bool = False) -> str:
    """The fit state of a step: ``does_not_fit`` unless it fits, then ``streams`` if weights
    come from off-chip memory, else ``on_chip``."""
    if not fits:
        return DOES_NOT_FIT
    return STREAMS if streamed else ON_CHIP


@dataclass(frozen=True)
class StepResult:
    """Time (and where it goes) of one step on one chip. Times in seconds, memory in bytes.

    ``split`` adds up to ``time_s``: for a tile chip the keys are "compute", "sync",
    "exchange" (and "streaming" when weights come from off-chip DRAM); for a GPU they
    are "compute", "memory" (time an HBM-bound kernel waits beyond its compute) and
    "launch".

    The fit rule (both kinds follow it; consumers rely on it):

    * ``fits=True``: the step fits (tile chip: on chip, or by streaming weights and
      whatever else does not fit from off-chip DRAM; GPU: in HBM). ``time_s`` is finite.
    * ``fits=False``: the step fits nowhere. ``time_s = math.inf`` (and so
      ``energy_j = inf`` and the throughputs are 0): no honest time exists.
      ``fit_message`` says what does not fit, by how much, and what would fit (the
      largest batch that fits, or "none"). ``split``, ``op_time_s`` and ``op_split``
      hold the diagnostic estimate as if memory were unlimited (they do NOT sum to
      ``time_s``); that estimate's total is ``extra["time_if_unlimited_s"]``.
    * ``simulate`` never raises for a step that does not fit: callers test ``fits``
      (or ``math.isfinite(time_s)``) and refuse or mask the cell.

    Energy, joules. ``energy_split`` maps a level to the dynamic energy of what the simulation
    did there (``ipusim.energy``: Horowitz 45 nm pJ per FLOP scaled to the chip's node, per byte, HBM2 3.9 pJ/bit):
    for a tile chip "flops", "sram" (tile SRAM loads), "exchange" (bytes sent and received
    between tiles), "streaming" (Streaming Memory bytes) and "link" (IPU-Link bytes); for a
    GPU "flops", "hbm", "l2" and "smem", plus "link" (NVLink and inter-node bytes) on several
    chips (``ipusim.placement``). ``energy_j`` is its sum: the energy of the work and of
    every byte the simulated machine moves, without static (leakage, idle) power, which no
    source splits out for these chips; FLOPs at the chip's process node, bytes at 45 nm or
    per-bit prices (``ipusim.energy``), so an estimate for comparing where the bytes come
    from, not a meter reading. ``board_energy_j`` = board power (TDP, sourced in
    ``ipusim.hardware``) x time is the upper bound, static power included, for throughput-per-
    watt uses. A step that does not fit has ``energy_j = board_energy_j = inf``; its
    ``energy_split`` then holds the as-if-unlimited estimate, like ``split``.
    """

    chip: str
    kind: str  # "tile" or "gpu"
    model: str
    phase: str
    batch: int
    real_tokens: int
    tokens: int
    time_s: float
    split: dict  # category -> seconds, sums to time_s
    op_names: tuple  # per op (in step order)
    op_time_s: np.ndarray  # per op, seconds (all instances)
    op_split: dict  # category -> per-op seconds array
    unit_busy_s: np.ndarray  # per tile / per SM busy seconds over the step
    unit_memory_bytes: np.ndarray  # per tile peak bytes (tile chip) or per SM shared memory (GPU)
    memory_limit_bytes: float  # per unit limit the line above is held to
    fits: bool
    fit_message: str = ""  # what does not fit, by how much, and what would make it fit
    energy_j: float = float("nan")
    extra: dict = field(default_factory=dict)
    energy_split: dict = field(
        default_factory=dict
    )  # level -> joules (see ``energy_j``); empty if not modelled
    board_power_w: float = float("nan")  # W, the chip's board power (``board_energy_j``)
    placement: object = None  # a multi-chip placement (None: one chip)

    @property
    def fit(self) -> str:
        """The fit state, one of ``FIT_STATES`` (see ``fit_state``)."""
        return fit_state(self.fits, self.extra.get("weights") == "streamed")

    @property
    def board_energy_j(self) -> float:
        """Board power x time, joules: an upper bound on the step's energy (static power
        included); ``inf`` for a step that does not fit."""
        return self.board_power_w * self.time_s

    @property
    def data_energy_j(self) -> float:
        """Joules of ``energy_split`` spent moving data (every level but "flops"); ``inf`` for a
        step that does not fit."""
        if not np.isfinite(self.time_s):
            return float("inf")
        return float(sum(v for k, v in self.energy_split.items() if k != "flops"))

    @property
    def throughput_seq_per_s(self) -> float:
        """Sequences per second (0 for a step that does not fit)."""
        return self.batch / self.time_s

    @property
    def throughput_tokens_per_s(self) -> float:
        """Real (non-padding) tokens per second (0 for a step that does not fit)."""
        return self.real_tokens / self.time_s

    @property
    def utilization(self) -> float:
        """Mean busy fraction of the units (tiles or SMs) over the step."""
        return float(np.mean(self.unit_busy_s) / self.time_s) if self.time_s > 0 else 0.0

    def to_dict(self) -> dict:
        return {
            "chip": self.chip,
            "kind": self.kind,
            "model": self.model,
            "phase": self.phase,
            "batch": self.batch,
            "real_tokens": self.real_tokens,
            "tokens": self.tokens,
            "time_s": self.time_s,
            "split_s": dict(self.split),
            "fit": self.fit,
            "fits": self.fits,
            "fit_message": self.fit_message,
            "energy_j": self.energy_j,
            "energy_split": dict(self.energy_split),
            "board_energy_j": self.board_energy_j,
            "placement": self.placement.to_dict()
            if hasattr(self.placement, "to_dict")
            else self.placement,
            "throughput_seq_per_s": self.throughput_seq_per_s,
            "memory_per_unit_max_bytes": float(np.max(self.unit_memory_bytes))
            if self.unit_memory_bytes.size
            else 0.0,
            "memory_per_unit_mean_bytes": float(np.mean(self.unit_memory_bytes))
            if self.unit_memory_bytes.size
            else 0.0,
            "memory_limit_bytes": self.memory_limit_bytes,
            "ops": [
                {"op": n, "time_s": float(t)}
                for n, t in zip(self.op_names, self.op_time_s, strict=True)
            ],
            **self.extra,
        }

    def __repr__(self):
        if not np.isfinite(self.time_s):
            t = self.extra.get("time_if_unlimited_s", float("nan"))
            return (
                f"StepResult({self.chip}, {self.model} {self.phase}, batch {self.batch}: DOES NOT FIT, "
                f"time inf (as if memory were unlimited: {t * 1e3:,.3f} ms))"
            )
        parts = ", ".join(
            f"{k} {v / self.time_s:.0%}" for k, v in self.split.items() if self.time_s
        )
        fit = self.fit
        return (
            f"StepResult({self.chip}, {self.model} {self.phase}, batch {self.batch}: "
            f"{self.time_s * 1e3:,.3f} ms ({parts}); {self.throughput_seq_per_s:,.0f} seq/s; {fit})"
        )
