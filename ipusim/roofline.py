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

Public entry points: ``memory_levels``, ``memory_capacities``, ``arithmetic_intensity``,
``attainable_flops``, ``attainable_flops_by_level``, ``op_bound``, ``step_bounds``,
``step_time_s``, ``fits_on_chip``, ``analyze`` (all of it for one step, as an object),
``capacity`` (where a model lives and how many chips it needs), ``step_energy`` and
``sweep`` (a Numba grid of step bounds over batch x sequence length x chip).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from . import energy as _energy
from . import workloads
from ._validate import choice, positive
from .hardware import GpuChip, TileChip
from .hardware import chip as _chip
from .workloads import Op, Step

# ---------------------------------------------------------------------------------------------
# Memory levels and the roofline itself
# ---------------------------------------------------------------------------------------------


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
            raise ValueError("intensity must hold numbers >= 0 FLOP/byte (inf allowed), got NaN or a negative")
        return np.minimum(c.peak_flops, a * bw)
    try:
        x = float(intensity)
    except (TypeError, ValueError):
        raise ValueError(f"intensity must be a number >= 0 FLOP/byte, got {intensity!r}") from None
    if math.isnan(x) or x < 0:
        raise ValueError(f"intensity must be a number >= 0 FLOP/byte (inf allowed), got {intensity!r}")
    return min(c.peak_flops, x * bw)


def attainable_flops_by_level(c: TileChip | GpuChip, intensity) -> dict[str, float]:
    """Attainable FLOP/s at ``intensity`` (FLOP per byte crossing that level), per memory level."""
    c = _chip(c)
    return {lvl: attainable_flops(c, intensity, bw) for lvl, bw in memory_levels(c).items()}


def ridge_points(c: TileChip | GpuChip) -> dict[str, float]:
    """Intensity (FLOP/byte) where each level stops limiting: ``peak / bandwidth``."""
    c = _chip(c)
    return {lvl: c.peak_flops / bw for lvl, bw in memory_levels(c).items()}


# ---------------------------------------------------------------------------------------------
# Bounds of ops and steps
# ---------------------------------------------------------------------------------------------


def placement(c: TileChip | GpuChip, s: Step, *, weights_on_chip: bool | None = None,
              kv_on_chip: bool | None = None, activations_on_chip: bool | None = None) -> dict[str, bool]:
    """Which of a step's tensors a roofline bound keeps on chip: ``{"weights", "kv",
    "activations"} -> bool`` (True: tile SRAM, or HBM on a GPU).

    Tile chip with off-chip DRAM whose step does not fit: the weights go off chip first,
    then the KV cache if it still does not fit beside the largest op's live activations,
    then the activations if they alone exceed the SRAM. ``weights_on_chip`` forces the
    weights' place; forced on chip, everything stays on chip (the "it was sharded" view).
    ``kv_on_chip`` and ``activations_on_chip`` force those (e.g. activations spread over
    many chips while the weights stream); ``None`` means "decide as above".
    """
    c = _chip(c)
    on = {"weights": True, "kv": True, "activations": True}
    if isinstance(c, GpuChip) or c.offchip_bandwidth_bytes_per_s <= 0:
        return on
    fits = fits_on_chip(c, s)
    woc = fits if weights_on_chip is None else bool(weights_on_chip)
    if woc:
        place = dict(on)
    else:
        live, kv = _live_act_bytes(s), _kv_need_bytes(s)
        place = {"weights": False, "kv": kv == 0 or live + kv <= c.data_bytes, "activations": live <= c.data_bytes}
    for k, v in (("kv", kv_on_chip), ("activations", activations_on_chip)):
        if v is not None:
            place[k] = bool(v)
    return place


def op_bytes_by_level(c: TileChip | GpuChip, op: Op, *, weights_on_chip: bool = True,
                      kv_on_chip: bool = True, activations_on_chip: bool = True) -> dict[str, float]:
    """Bytes ``op`` reads and writes at each memory level of chip ``c`` (compulsory traffic only).

    On a tile chip with off-chip DRAM, the weights, the KV cache and the other activations
    each cross the DRAM link when their flag says they are not on chip.
    """
    c = _chip(c)
    if isinstance(c, GpuChip):
        return {"HBM": op.bytes}
    if c.offchip_bandwidth_bytes_per_s > 0 and not (weights_on_chip and kv_on_chip and activations_on_chip):
        act = op.act_read_bytes + op.act_write_bytes
        off = ((0.0 if weights_on_chip else op.weight_bytes) + (0.0 if kv_on_chip else op.kv_bytes)
               + (0.0 if activations_on_chip else act))
        return {"streaming DRAM": off, "tile SRAM": op.bytes - off}
    return {"tile SRAM": op.bytes}


FUSED_GROUPS = (
    ("fused_attention", ("attn_scores", "softmax", "attn_context")),
    ("ffn_up+activation", ("ffn_up", "activation")),
)
"""Ops the fused bound runs as one kernel (TensorRT's fused MHA and GEMM + GELU epilogue,
NVIDIA/TensorRT demo/BERT plugins; FlashAttention, Dao et al. 2022, keeps the scores on chip)."""


def _fused_group_bytes(ops: list[Op]) -> list[Op]:
    """The ops of one fused group with the bytes that stay on chip removed: the attention
    scores (written by attn_scores, read and written by softmax, read by attn_context) and
    the activation's input and output (it runs in the up-projection's epilogue)."""
    import dataclasses

    by = {o.name: o for o in ops}
    out = []
    scores = by["attn_scores"].act_write_bytes if "attn_scores" in by else 0.0
    for o in ops:
        if o.name == "attn_scores":
            o = dataclasses.replace(o, act_write_bytes=0.0)
        elif o.name in ("softmax", "activation"):
            o = dataclasses.replace(o, act_read_bytes=0.0, act_write_bytes=0.0)
        elif o.name == "attn_context":
            o = dataclasses.replace(o, act_read_bytes=max(0.0, o.act_read_bytes - scores))
        out.append(o)
    return out


@dataclass(frozen=True)
class OpBound:
    """Roofline lower bound of one op on one chip. Seconds, FLOP, bytes."""

    op: str
    kind: str
    compute_s: float  # flops / peak
    memory_s: float  # bytes / bandwidth of the level the op's bytes come from (slowest level)
    bound: str  # "compute" or "memory"
    flops: float = 0.0  # FLOPs of the op, all instances
    bytes: float = 0.0  # bytes the op touches, all instances
    level: str = ""  # memory level that sets memory_s

    @property
    def time_s(self) -> float:
        return max(self.compute_s, self.memory_s)

    @property
    def intensity(self) -> float:
        """FLOP per byte touched."""
        return self.flops / self.bytes if self.bytes else math.inf

    @property
    def attained_flops(self) -> float:
        """FLOP/s the op reaches if it runs exactly at its bound."""
        return self.flops / self.time_s if self.time_s > 0 else 0.0

    def to_dict(self) -> dict:
        return {"op": self.op, "kind": self.kind, "flops": self.flops, "bytes": self.bytes,
                "flop_per_byte": self.intensity, "compute_s": self.compute_s,
                "memory_s": self.memory_s, "time_s": self.time_s, "bound": self.bound,
                "level": self.level}


def _group_bound(c, name: str, kind: str, ops: list[Op], moved: list[Op], place: dict) -> OpBound:
    """One kernel running ``ops`` (with ``moved``'s bytes crossing memory): compute is all
    their FLOPs at peak, memory the slowest level's bytes over its bandwidth."""
    flops = sum(o.flops for o in ops)
    compute = flops / c.peak_flops
    bws = memory_levels(c)
    per_level: dict[str, float] = {}
    for o in moved:
        for lvl, b in op_bytes_by_level(c, o, weights_on_chip=place["weights"], kv_on_chip=place["kv"],
                                        activations_on_chip=place["activations"]).items():
            per_level[lvl] = per_level.get(lvl, 0.0) + b
    memory, level = 0.0, ""
    for lvl, b in per_level.items():
        t = b / bws[lvl]
        if t > memory or not level:
            memory, level = t, lvl
    return OpBound(name, kind, compute, memory, "compute" if compute >= memory else "memory",
                   flops=flops, bytes=float(sum(o.bytes for o in moved)), level=level)


def op_bound(c: TileChip | GpuChip, op: Op, *, weights_on_chip: bool = True, kv_on_chip: bool = True,
             activations_on_chip: bool = True) -> OpBound:
    """Lower-bound time of ``op`` on chip ``c`` (unfused: all its bytes cross memory).

    On a tile chip whose weights (or KV cache, or activations) live in off-chip DRAM, those
    bytes cross the DRAM link and the rest stay in SRAM; the two overlap at best.
    """
    c = _chip(c)
    place = {"weights": weights_on_chip, "kv": kv_on_chip, "activations": activations_on_chip}
    return _group_bound(c, op.name, op.kind, [op], [op], place)


def step_bounds(c: TileChip | GpuChip, s: Step, *, weights_on_chip: bool | None = None,
                fused: bool = False, kv_on_chip: bool | None = None,
                activations_on_chip: bool | None = None) -> list[OpBound]:
    """Lower bounds of a step, op by op (``fused=False``: one per op, step order) or kernel
    by kernel (``fused=True``: the ``FUSED_GROUPS`` as one bound each, in place of their
    first op, every other op as itself). Placement of weights, KV cache and activations by
    ``placement`` (``weights_on_chip`` defaults to "does the step fit?"; ``kv_on_chip`` and
    ``activations_on_chip`` override it for those tensors).
    """
    c = _chip(c)
    place = placement(c, s, weights_on_chip=weights_on_chip, kv_on_chip=kv_on_chip,
                      activations_on_chip=activations_on_chip)
    if not fused:
        return [_group_bound(c, o.name, o.kind, [o], [o], place) for o in s.ops]
    by = {o.name: o for o in s.ops}
    first = {}
    for gname, members in FUSED_GROUPS:
        if all(m in by for m in members):
            for m in members:
                first[m] = (gname, members, m == members[0])
    out = []
    for o in s.ops:
        if o.name not in first:
            out.append(_group_bound(c, o.name, o.kind, [o], [o], place))
        elif first[o.name][2]:
            gname, members = first[o.name][:2]
            ops = [by[m] for m in members]
            out.append(_group_bound(c, gname, ops[0].kind, ops, _fused_group_bytes(ops), place))
    return out


def step_time_s(c: TileChip | GpuChip, s: Step, *, weights_on_chip: bool | None = None,
                fused: bool = False, kv_on_chip: bool | None = None,
                activations_on_chip: bool | None = None) -> float:
    """Lower bound on the time of a whole step: the sum of its ops' (or fused kernels')
    bounds, seconds. ``fused=False`` bounds ``tiles.simulate`` and an unfused GPU;
    ``fused=True`` bounds the default (fused) ``gpu.simulate`` and everything else."""
    return float(sum(b.time_s for b in step_bounds(c, s, weights_on_chip=weights_on_chip, fused=fused,
                                                   kv_on_chip=kv_on_chip, activations_on_chip=activations_on_chip)))


def _live_act_bytes(s: Step) -> float:
    """Activation bytes the largest op of one instance (one layer) must hold at once: its
    input and output; for the attention ops (scores, softmax, context) Q, K, V and the
    context, not the scores, which an online softmax holds one key block at a time
    (``ipusim.tileplan`` plans attention so). A lower bound on what any machine holds, so
    that a step the tile rule puts on chip also passes this byte count."""
    return float(max(_op_live_bytes(o, s) for o in s.ops))


def _op_live_bytes(o: Op, s: Step) -> float:
    """Activation bytes one instance of ``o`` holds at once (see ``_live_act_bytes``)."""
    if o.kind in ("attention", "softmax"):
        return float(s.tokens * (2 * s.model.q_dim + 2 * s.model.kv_dim) * s.dtype_bytes)  # Q, K, V, context
    return (o.act_read_bytes + o.act_write_bytes) / o.count


def _kv_need_bytes(s: Step) -> float:
    """KV cache a prefill/decode step holds, bytes (0 for other phases)."""
    if s.phase not in ("prefill", "decode"):
        return 0.0
    return float(s.model.kv_bytes_per_token(s.dtype_bytes) * float(s.lengths.sum()))


def step_need_bytes(s: Step) -> float:
    """Bytes a step must hold at once: weights + the largest op's live activations (one
    layer; attention scores held per key block, not whole) + the KV cache of prefill/decode.
    Necessary, not sufficient: on a tile chip the per-tile rule (``StepResult.fit``) decides."""
    return float(s.model.weight_bytes(s.dtype_bytes)) + _live_act_bytes(s) + _kv_need_bytes(s)


def fits_on_chip(c: TileChip | GpuChip, s: Step) -> bool:
    """Do the step's weights and its largest op's activations fit in the chip's fast memory?

    For a tile chip that is the SRAM left after code; for a GPU it is HBM.
    """
    c = _chip(c)
    cap = c.data_bytes if isinstance(c, TileChip) else c.hbm_bytes
    return step_need_bytes(s) <= cap


def step_energy(c: TileChip | GpuChip, s: Step, *, weights_on_chip: bool | None = None) -> _energy.Energy:
    """Energy of a step's FLOPs and compulsory (unfused) bytes, joules: the bottom-up
    estimate from the pJ table in ``ipusim.energy``. (``StepResult.energy_j`` is the other,
    top-down estimate: board power x simulated time, an upper bound.)"""
    c = _chip(c)
    place = placement(c, s, weights_on_chip=weights_on_chip)
    total = _energy.Energy(0.0, {})
    for o in s.ops:
        total = total + _energy.energy(o.flops, op_bytes_by_level(
            c, o, weights_on_chip=place["weights"], kv_on_chip=place["kv"],
            activations_on_chip=place["activations"]))
    return total


# ---------------------------------------------------------------------------------------------
# One step, all of it: the object the CLI, the widget and scripts print
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepRoofline:
    """Roofline analysis of one step on one chip: per-op bounds, total, fit and energy."""

    chip: TileChip | GpuChip
    step: Step
    bounds: tuple  # OpBound per op, step order
    fits: bool  # weights + live activations (+ KV) fit in tile SRAM / HBM
    need_bytes: float  # what must be held at once, bytes
    capacity_bytes: float  # tile SRAM data room or HBM, bytes
    energy: _energy.Energy = field(repr=False)
    placement: dict = field(default_factory=lambda: {"weights": True, "kv": True, "activations": True})
    fused: bool = False  # bounds are per fused kernel (see the module docstring)

    @property
    def time_s(self) -> float:
        """Lower bound on the step time, seconds."""
        return float(sum(b.time_s for b in self.bounds))

    @property
    def compute_s(self) -> float:
        """The step's FLOPs at peak, seconds (the time bound if nothing waited for memory)."""
        return self.step.flops / self.chip.peak_flops

    @property
    def memory_bound_share(self) -> float:
        """Share of the bound spent in memory-bound ops."""
        t = self.time_s
        return sum(b.time_s for b in self.bounds if b.bound == "memory") / t if t else 0.0

    @property
    def attained_flops(self) -> float:
        return self.step.flops / self.time_s if self.time_s else 0.0

    @property
    def where(self) -> str:
        """Where the weights are read from."""
        if isinstance(self.chip, GpuChip):
            return "HBM"
        return "tile SRAM" if self.placement["weights"] else "streaming DRAM"

    @property
    def offchip(self) -> tuple:
        """Tensors read from off-chip DRAM on a tile chip (weights, kv, activations)."""
        if isinstance(self.chip, GpuChip):
            return ()
        return tuple(k for k, on in self.placement.items() if not on)

    @property
    def tokens_per_s(self) -> float:
        return self.step.real_tokens / self.time_s

    @property
    def seq_per_s(self) -> float:
        return self.step.batch / self.time_s

    def to_dict(self) -> dict:
        s = self.step
        return {
            "chip": self.chip.name, "model": s.model.name, "phase": s.phase, "batch": s.batch,
            "row_len": s.row_len, "real_tokens": s.real_tokens, "tokens": s.tokens,
            "flops": s.flops, "bytes": s.bytes, "time_s": self.time_s, "compute_s": self.compute_s,
            "memory_bound_share": self.memory_bound_share, "attained_flops": self.attained_flops,
            "peak_flops": self.chip.peak_flops, "tokens_per_s": self.tokens_per_s,
            "seq_per_s": self.seq_per_s, "fits": self.fits, "weights_in": self.where,
            "offchip": list(self.offchip), "fused": self.fused,
            "need_bytes": self.need_bytes, "capacity_bytes": self.capacity_bytes,
            "energy": self.energy.to_dict(), "ops": [b.to_dict() for b in self.bounds],
        }

    def __repr__(self):
        s = self.step
        fit = "fits" if self.fits else "DOES NOT FIT"
        return (
            f"StepRoofline({self.chip.name}, {s.model.name} {s.phase}, batch {s.batch}: >= "
            f"{self.time_s * 1e6:,.1f} us, {self.attained_flops / 1e12:,.1f} of "
            f"{self.chip.peak_flops / 1e12:,.0f} TFLOP/s, {self.memory_bound_share:.0%} memory-bound; "
            f"{fit} ({self.need_bytes / 1e9:,.3g} of {self.capacity_bytes / 1e9:,.3g} GB), weights from "
            f"{self.where}; {self.energy.total_j * 1e3:,.3g} mJ)"
        )

    def _repr_html_(self):
        rows = "".join(
            f"<tr><td>{b.op}</td><td>{b.kind}</td><td>{b.flops / 1e9:,.2f}</td><td>{b.bytes / 1e6:,.2f}</td>"
            f"<td>{b.intensity:,.1f}</td><td>{b.time_s * 1e6:,.2f}</td><td>{b.bound}</td></tr>"
            for b in self.bounds
        )
        return (
            f"<p><b>{self.chip.name}</b>, {self.step.model.name} {self.step.phase}, batch {self.step.batch}: "
            f"&ge; {self.time_s * 1e6:,.1f} &mu;s; {'fits' if self.fits else '<b>does not fit</b>'} "
            f"({self.need_bytes / 1e9:,.3g} of {self.capacity_bytes / 1e9:,.3g} GB)</p>"
            "<table><tr><th>op</th><th>kind</th><th>GFLOP</th><th>MB</th><th>FLOP/B</th>"
            f"<th>bound &mu;s</th><th>limit</th></tr>{rows}</table>"
        )


def analyze(c, s: Step, *, weights_on_chip: bool | None = None, fused: bool = False) -> StepRoofline:
    """Roofline analysis of step ``s`` on chip ``c`` (preset name or chip object)."""
    c = _chip(c)
    if not isinstance(s, Step):
        raise ValueError(f"s must be a workloads.Step (from ipusim.step(...)), got {type(s).__name__}")
    fits = fits_on_chip(c, s)
    place = placement(c, s, weights_on_chip=weights_on_chip)
    cap = float(c.data_bytes if isinstance(c, TileChip) else c.hbm_bytes)
    return StepRoofline(c, s, tuple(step_bounds(c, s, weights_on_chip=weights_on_chip, fused=bool(fused))),
                        fits, step_need_bytes(s), cap, step_energy(c, s, weights_on_chip=weights_on_chip),
                        place, bool(fused))


# ---------------------------------------------------------------------------------------------
# Capacity: where a model lives, and how many chips it needs
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Capacity:
    """Bytes a model needs for inference or training, against each memory level of a chip.

    ``chips_needed`` is a lower bound: the bytes divided evenly over chips, nothing
    replicated, no room lost to fragmentation or to per-chip copies of activations.
    """

    chip: str
    model: str
    mode: str  # "inference" or "training"
    weight_bytes: float
    kv_bytes: float  # KV cache for the whole batch at full context (decoders, inference)
    activation_bytes: float  # live (inference: largest op, one layer) or stored (training)
    state_bytes: float  # gradients + optimizer state (training), else 0
    levels: dict  # level -> bytes one chip holds there

    @property
    def need_bytes(self) -> float:
        return self.weight_bytes + self.kv_bytes + self.activation_bytes + self.state_bytes

    @property
    def fits(self) -> dict:
        """Level -> does it fit on one chip."""
        return {k: self.need_bytes <= v for k, v in self.levels.items()}

    @property
    def chips_needed(self) -> dict:
        """Level -> chips needed to hold it in that level (lower bound)."""
        return {k: max(1, math.ceil(self.need_bytes / v)) for k, v in self.levels.items()}

    @property
    def home(self) -> str | None:
        """Fastest level that holds everything on one chip, or None."""
        return next((k for k, ok in self.fits.items() if ok), None)

    def to_dict(self) -> dict:
        return {"chip": self.chip, "model": self.model, "mode": self.mode, "need_bytes": self.need_bytes,
                "weight_bytes": self.weight_bytes, "kv_bytes": self.kv_bytes,
                "activation_bytes": self.activation_bytes, "state_bytes": self.state_bytes,
                "levels": dict(self.levels), "fits": self.fits, "chips_needed": self.chips_needed,
                "home": self.home}

    def __repr__(self):
        per = ", ".join(f"{k} {v / 1e9:,.3g} GB: {self.chips_needed[k]} chip(s)" for k, v in self.levels.items())
        return (f"Capacity({self.model} {self.mode} on {self.chip}: needs {self.need_bytes / 1e9:,.3g} GB "
                f"(weights {self.weight_bytes / 1e9:,.3g}); {per})")


def capacity(
    c, model_or_name, *, mode: str = "inference", batch: int = 1, seq_len: int | None = None,
    dtype_bytes: int = 2, recompute: bool = False,
) -> Capacity:
    """Where ``model`` fits on chip ``c`` and how many chips it needs.

    Inference holds the weights, the largest op's activations for one layer and, for a
    decoder, the KV cache of ``batch`` sequences at ``seq_len`` (default: the model's
    maximum). Training holds ``workloads.training_footprint`` for ``batch x seq_len`` tokens:
    weights, gradients, Adam state (16 bytes/parameter in all) and stored activations.
    """
    c = _chip(c)
    m = workloads.model(model_or_name)
    choice("mode", mode, ("inference", "training"))
    batch = positive("batch", batch, integer=True)
    seq_len = m.max_positions if seq_len is None else positive("seq_len", seq_len, integer=True)
    if seq_len > m.max_positions:
        raise ValueError(f"seq_len={seq_len} exceeds {m.name}'s max_positions {m.max_positions}")
    if mode == "training":
        tf = workloads.training_footprint(m, seq_len=seq_len, tokens_per_step=batch * seq_len,
                                          dtype_bytes=dtype_bytes, recompute=recompute)
        return Capacity(c.name, m.name, mode, tf.weight_bytes, 0.0, tf.activation_bytes,
                        tf.gradient_bytes + tf.optimizer_bytes, memory_capacities(c))
    s = workloads.step(m, [seq_len] * batch, dtype_bytes=dtype_bytes)
    live = _live_act_bytes(s)
    kv = m.kv_bytes_per_token(dtype_bytes) * batch * seq_len if m.kind == "decoder" else 0.0
    return Capacity(c.name, m.name, mode, m.weight_bytes(dtype_bytes), float(kv), float(live), 0.0,
                    memory_capacities(c))


# ---------------------------------------------------------------------------------------------
# A grid of step bounds: batch x sequence length x chip (Numba kernel + plain reference)
# ---------------------------------------------------------------------------------------------

_BASIS = ((1, 8), (2, 8), (1, 16), (1, 32))  # (batch, seq_len) points that fix the 4 coefficients
_CHECK = (3, 24)  # a fifth point that must agree


def _features(b, ln):
    return np.array([1.0, b, b * ln, b * ln * ln])


def _op_quantities(s: Step) -> np.ndarray:
    """Per op: FLOPs, weight bytes, activation bytes, live activation bytes of one
    instance, KV-cache bytes."""
    return np.array([[o.flops, o.weight_bytes, o.act_read_bytes + o.act_write_bytes,
                      _op_live_bytes(o, s), o.kv_bytes] for o in s.ops])


def step_coefficients(model_or_name, phase: str = "forward", dtype_bytes: int = 2) -> np.ndarray:
    """Coefficients ``C[op, quantity, 4]`` with quantity = C . (1, B, B l, B l^2) for a batch
    of B sequences of l tokens (context length for decode), quantity in (FLOPs, weight bytes,
    activation bytes, live activation bytes per instance, KV-cache bytes).

    Every op of ``workloads.step`` is linear in those four features; this solves for the
    coefficients from four steps and checks them on a fifth (an error if the op list ever
    stops being of that form).
    """
    m = workloads.model(model_or_name)
    pts = [(b, min(ln, m.max_positions)) for b, ln in _BASIS]
    A = np.array([_features(b, ln) for b, ln in pts])
    Y = np.stack([_op_quantities(workloads.step(m, [ln] * b, phase=phase, dtype_bytes=dtype_bytes))
                  for b, ln in pts])  # (4 points, ops, 4 quantities)
    C = np.linalg.solve(A, Y.reshape(4, -1)).T.reshape(Y.shape[1], Y.shape[2], 4)
    b, ln = _CHECK
    ln = min(ln, m.max_positions)
    want = _op_quantities(workloads.step(m, [ln] * b, phase=phase, dtype_bytes=dtype_bytes))
    got = C @ _features(b, ln)
    if not np.allclose(got, want, rtol=1e-9, atol=1e-6):
        raise RuntimeError("workloads.step is no longer linear in (1, B, B l, B l^2); sweep cannot be used")
    return C


@njit(cache=True)
def _sweep_kernel(batches, seq_lens, coef, fixed_need, kv_per_token, peak, bw_fast, bw_weights, cap,
                  out_time, out_fits):
    """Step lower bounds over a (chip, batch, seq_len) grid.

    Preconditions: ``batches`` and ``seq_lens`` are float64 arrays of whole numbers >= 1;
    ``coef`` is float64 (ops, 5 quantities, 4 features) from ``step_coefficients``;
    ``peak``, ``bw_fast`` (> 0), ``bw_weights`` (>= 0; 0 means "no off-chip weight stream")
    and ``cap`` are float64 arrays of one value per chip; ``out_time`` (float64) and
    ``out_fits`` (bool) have shape (chips, batches, seq_lens).
    """
    n_ops = coef.shape[0]
    for c in range(peak.shape[0]):
        for i in range(batches.shape[0]):
            b = batches[i]
            for j in range(seq_lens.shape[0]):
                f1 = b
                f2 = b * seq_lens[j]
                f3 = f2 * seq_lens[j]
                live = 0.0
                for o in range(n_ops):
                    v = coef[o, 3, 0] + coef[o, 3, 1] * f1 + coef[o, 3, 2] * f2 + coef[o, 3, 3] * f3
                    if v > live:
                        live = v
                kv_need = kv_per_token * f2
                fits = fixed_need + live + kv_need <= cap[c]
                kv_on = live + kv_need <= cap[c]  # placement(): weights off first, then KV,
                act_on = live <= cap[c]  # then activations
                t = 0.0
                for o in range(n_ops):
                    fl = coef[o, 0, 0] + coef[o, 0, 1] * f1 + coef[o, 0, 2] * f2 + coef[o, 0, 3] * f3
                    w = coef[o, 1, 0] + coef[o, 1, 1] * f1 + coef[o, 1, 2] * f2 + coef[o, 1, 3] * f3
                    a = coef[o, 2, 0] + coef[o, 2, 1] * f1 + coef[o, 2, 2] * f2 + coef[o, 2, 3] * f3
                    kv = coef[o, 4, 0] + coef[o, 4, 1] * f1 + coef[o, 4, 2] * f2 + coef[o, 4, 3] * f3
                    comp = fl / peak[c]
                    if fits or bw_weights[c] <= 0.0:
                        mem = (w + a + kv) / bw_fast[c]
                    else:
                        off = w
                        if not kv_on:
                            off += kv
                        if not act_on:
                            off += a
                        mem = max(off / bw_weights[c], (w + a + kv - off) / bw_fast[c])
                    t += max(comp, mem)
                out_time[c, i, j] = t
                out_fits[c, i, j] = fits


@dataclass(frozen=True)
class BoundGrid:
    """Step lower bounds over chips x batches x sequence lengths. Seconds."""

    chips: tuple  # chip names
    model: str
    phase: str
    batches: np.ndarray  # sequences per step
    seq_lens: np.ndarray  # tokens per sequence (context length for decode)
    time_s: np.ndarray  # (chips, batches, seq_lens) lower bound of one step
    fits: np.ndarray  # (chips, batches, seq_lens) step fits in tile SRAM / HBM

    @property
    def tokens_per_s(self) -> np.ndarray:
        """Upper bound on real tokens per second (new tokens for decode)."""
        per_seq = np.ones_like(self.seq_lens, dtype=np.float64) if self.phase == "decode" else self.seq_lens
        return self.batches[None, :, None] * per_seq[None, None, :] / self.time_s

    def best_chip(self) -> np.ndarray:
        """Name of the fastest chip at each (batch, seq_len) point."""
        return np.asarray(self.chips)[np.argmin(self.time_s, axis=0)]

    def to_dict(self) -> dict:
        return {"chips": list(self.chips), "model": self.model, "phase": self.phase,
                "batches": self.batches.tolist(), "seq_lens": self.seq_lens.tolist(),
                "time_s": self.time_s.tolist(), "fits": self.fits.tolist()}

    def __repr__(self):
        return (f"BoundGrid({self.model} {self.phase}: {len(self.chips)} chips x {self.batches.size} batches "
                f"x {self.seq_lens.size} lengths; bounds {self.time_s.min() * 1e6:,.3g} us .. "
                f"{self.time_s.max() * 1e3:,.3g} ms)")


def _sweep_inputs(chips, model_or_name, batches, seq_lens):
    m = workloads.model(model_or_name)
    if isinstance(chips, (str, TileChip, GpuChip)):
        chips = [chips]
    cs = [_chip(c) for c in chips]
    if not cs:
        raise ValueError("chips is empty: give at least one chip preset name or chip object")
    arrs = []
    for name, v in (("batches", batches), ("seq_lens", seq_lens)):
        a = np.atleast_1d(np.asarray(v))
        if a.size == 0 or a.ndim != 1:
            raise ValueError(f"{name} must be a non-empty 1-D list of whole numbers >= 1")
        if not np.issubdtype(a.dtype, np.number) or not np.all(np.isfinite(a)) or np.any(a < 1) \
                or np.any(a != np.round(a)):
            raise ValueError(f"{name} must hold whole numbers >= 1, got {v!r}")
        arrs.append(a.astype(np.int64))
    if arrs[1].max() > m.max_positions:
        raise ValueError(f"seq_lens holds {arrs[1].max()} > {m.name}'s max_positions {m.max_positions}")
    return m, cs, arrs[0], arrs[1]


def sweep(chips, model_or_name, batches, seq_lens, *, phase: str = "forward", dtype_bytes: int = 2) -> BoundGrid:
    """Lower-bound step time of ``model`` for every chip x batch x sequence length (Numba).

    Each grid point is a batch of ``batch`` sequences of ``seq_len`` tokens (for decode: one
    new token each against a context of ``seq_len``), bounded as ``step_time_s`` bounds it
    (unfused): everything from tile SRAM when the step fits, else the weights (and the KV
    cache, and activations, when they do not fit either: ``placement``) from off-chip DRAM.
    """
    m, cs, b, lens = _sweep_inputs(chips, model_or_name, batches, seq_lens)
    choice("phase", phase, workloads.PHASES)
    dt = positive("dtype_bytes", dtype_bytes, integer=True)
    coef = step_coefficients(m, phase, dt)
    kv = float(m.kv_bytes_per_token(dt)) if phase in ("prefill", "decode") else 0.0
    peak = np.array([c.peak_flops for c in cs], dtype=np.float64)
    fast = np.array([main_memory_bandwidth(c, weights_on_chip=True) for c in cs], dtype=np.float64)
    wbw = np.array([c.offchip_bandwidth_bytes_per_s if isinstance(c, TileChip) else 0.0 for c in cs])
    cap = np.array([c.data_bytes if isinstance(c, TileChip) else c.hbm_bytes for c in cs], dtype=np.float64)
    out_t = np.empty((len(cs), b.size, lens.size))
    out_f = np.empty((len(cs), b.size, lens.size), dtype=np.bool_)
    _sweep_kernel(b.astype(np.float64), lens.astype(np.float64), coef, float(m.weight_bytes(dt)), kv,
                  peak, fast, wbw.astype(np.float64), cap, out_t, out_f)
    return BoundGrid(tuple(c.name for c in cs), m.name, phase, b, lens, out_t, out_f)


def _sweep_reference(chips, model_or_name, batches, seq_lens, *, phase: str = "forward",
                     dtype_bytes: int = 2) -> BoundGrid:
    """Plain-Python reference of ``sweep``: builds every step and bounds it op by op."""
    m, cs, b, lens = _sweep_inputs(chips, model_or_name, batches, seq_lens)
    out_t = np.empty((len(cs), b.size, lens.size))
    out_f = np.empty((len(cs), b.size, lens.size), dtype=bool)
    for j, ln in enumerate(lens):
        for i, n in enumerate(b):
            s = workloads.step(m, [int(ln)] * int(n), phase=phase, dtype_bytes=dtype_bytes)
            for k, c in enumerate(cs):
                out_f[k, i, j] = fits_on_chip(c, s)
                out_t[k, i, j] = step_time_s(c, s)
    return BoundGrid(tuple(c.name for c in cs), m.name, phase, b, lens, out_t, out_f)
