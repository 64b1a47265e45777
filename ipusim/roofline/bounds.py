"""Roofline lower bounds of ops and steps: where each op's bytes come from (``placement``,
``op_bytes_by_level``), fused kernel groups, per-op and per-step bounds, the bytes a step needs
on chip, and the energy of moving them. Seconds, bytes, joules."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import energy as _energy
from ..hardware import GpuChip, TileChip
from ..hardware import chip as _chip
from ..workloads import Op, Step
from .levels import memory_levels


def placement(
    c: TileChip | GpuChip,
    s: Step,
    *,
    weights_on_chip: bool | None = None,
    kv_on_chip: bool | None = None,
    activations_on_chip: bool | None = None,
) -> dict[str, bool]:
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
        live, kv = live_act_bytes(s), _kv_need_bytes(s)
        place = {
            "weights": False,
            "kv": kv == 0 or live + kv <= c.data_bytes,
            "activations": live <= c.data_bytes,
        }
    for k, v in (("kv", kv_on_chip), ("activations", activations_on_chip)):
        if v is not None:
            place[k] = bool(v)
    return place


def op_bytes_by_level(
    c: TileChip | GpuChip,
    op: Op,
    *,
    weights_on_chip: bool = True,
    kv_on_chip: bool = True,
    activations_on_chip: bool = True,
) -> dict[str, float]:
    """Bytes ``op`` reads and writes at each memory level of chip ``c`` (compulsory traffic only).

    On a tile chip with off-chip DRAM, the weights, the KV cache and the other activations
    each cross the DRAM link when their flag says they are not on chip.
    """
    c = _chip(c)
    if isinstance(c, GpuChip):
        return {"HBM": op.bytes}
    if c.offchip_bandwidth_bytes_per_s > 0 and not (
        weights_on_chip and kv_on_chip and activations_on_chip
    ):
        act = op.act_read_bytes + op.act_write_bytes
        off = (
            (0.0 if weights_on_chip else op.weight_bytes)
            + (0.0 if kv_on_chip else op.kv_bytes)
            + (0.0 if activations_on_chip else act)
        )
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
        return {
            "op": self.op,
            "kind": self.kind,
            "flops": self.flops,
            "bytes": self.bytes,
            "flop_per_byte": self.intensity,
            "compute_s": self.compute_s,
            "memory_s": self.memory_s,
            "time_s": self.time_s,
            "bound": self.bound,
            "level": self.level,
        }


def _group_bound(c, name: str, kind: str, ops: list[Op], moved: list[Op], place: dict) -> OpBound:
    """One kernel running ``ops`` (with ``moved``'s bytes crossing memory): compute is all
    their FLOPs at peak, memory the slowest level's bytes over its bandwidth."""
    flops = sum(o.flops for o in ops)
    compute = flops / c.peak_flops
    bws = memory_levels(c)
    per_level: dict[str, float] = {}
    for o in moved:
        for lvl, b in op_bytes_by_level(
            c,
            o,
            weights_on_chip=place["weights"],
            kv_on_chip=place["kv"],
            activations_on_chip=place["activations"],
        ).items():
            per_level[lvl] = per_level.get(lvl, 0.0) + b
    memory, level = 0.0, ""
    for lvl, b in per_level.items():
        t = b / bws[lvl]
        if t > memory or not level:
            memory, level = t, lvl
    return OpBound(
        name,
        kind,
        compute,
        memory,
        "compute" if compute >= memory else "memory",
        flops=flops,
        bytes=float(sum(o.bytes for o in moved)),
        level=level,
    )


def op_bound(
    c: TileChip | GpuChip,
    op: Op,
    *,
    weights_on_chip: bool = True,
    kv_on_chip: bool = True,
    activations_on_chip: bool = True,
) -> OpBound:
    """Lower-bound time of ``op`` on chip ``c`` (unfused: all its bytes cross memory).

    On a tile chip whose weights (or KV cache, or activations) live in off-chip DRAM, those
    bytes cross the DRAM link and the rest stay in SRAM; the two overlap at best.
    """
    c = _chip(c)
    place = {"weights": weights_on_chip, "kv": kv_on_chip, "activations": activations_on_chip}
    return _group_bound(c, op.name, op.kind, [op], [op], place)


def step_bounds(
    c: TileChip | GpuChip,
    s: Step,
    *,
    weights_on_chip: bool | None = None,
    fused: bool = False,
    kv_on_chip: bool | None = None,
    activations_on_chip: bool | None = None,
) -> list[OpBound]:
    """Lower bounds of a step, op by op (``fused=False``: one per op, step order) or kernel
    by kernel (``fused=True``: the ``FUSED_GROUPS`` as one bound each, in place of their
    first op, every other op as itself). Placement of weights, KV cache and activations by
    ``placement`` (``weights_on_chip`` defaults to "does the step fit?"; ``kv_on_chip`` and
    ``activations_on_chip`` override it for those tensors).
    """
    c = _chip(c)
    place = placement(
        c,
        s,
        weights_on_chip=weights_on_chip,
        kv_on_chip=kv_on_chip,
        activations_on_chip=activations_on_chip,
    )
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


def step_time_s(
    c: TileChip | GpuChip,
    s: Step,
    *,
    weights_on_chip: bool | None = None,
    fused: bool = False,
    kv_on_chip: bool | None = None,
    activations_on_chip: bool | None = None,
) -> float:
    """Lower bound on the time of a whole step: the sum of its ops' (or fused kernels')
    bounds, seconds. ``fused=False`` bounds ``tiles.simulate`` and an unfused GPU;
    ``fused=True`` bounds the default (fused) ``gpu.simulate`` and everything else."""
    return float(
        sum(
            b.time_s
            for b in step_bounds(
                c,
                s,
                weights_on_chip=weights_on_chip,
                fused=fused,
                kv_on_chip=kv_on_chip,
                activations_on_chip=activations_on_chip,
            )
        )
    )


def live_act_bytes(s: Step) -> float:
    """Activation bytes the largest op of one instance (one layer) must hold at once: its
    input and output; for the attention ops (scores, softmax, context) Q, K, V and the
    context, not the scores, which an online softmax holds one key block at a time
    (``ipusim.tileplan`` plans attention so). A lower bound on what any machine holds, so
    that a step the tile rule puts on chip also passes this byte count."""
    return float(max(op_live_bytes(o, s) for o in s.ops))


def op_live_bytes(o: Op, s: Step) -> float:
    """Activation bytes one instance of ``o`` holds at once (see ``live_act_bytes``)."""
    if o.kind in ("attention", "softmax"):
        return float(
            s.tokens * (2 * s.model.q_dim + 2 * s.model.kv_dim) * s.dtype_bytes
        )  # Q, K, V, context
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
    return float(s.model.weight_bytes(s.dtype_bytes)) + live_act_bytes(s) + _kv_need_bytes(s)


def fits_on_chip(c: TileChip | GpuChip, s: Step) -> bool:
    """Do the step's weights and its largest op's activations fit in the chip's fast memory?

    For a tile chip that is the SRAM left after code; for a GPU it is HBM.
    """
    c = _chip(c)
    cap = c.data_bytes if isinstance(c, TileChip) else c.hbm_bytes
    return step_need_bytes(s) <= cap


def step_energy(
    c: TileChip | GpuChip, s: Step, *, weights_on_chip: bool | None = None
) -> _energy.Energy:
    """Energy of a step's FLOPs and compulsory (unfused) bytes, joules: the bottom-up
    estimate from the pJ table in ``ipusim.energy``. (``StepResult.energy_j`` is the other,
    top-down estimate: board power x simulated time, an upper bound.)"""
    c = _chip(c)
    place = placement(c, s, weights_on_chip=weights_on_chip)
    total = _energy.Energy(0.0, {})
    for o in s.ops:
        total = total + _energy.energy(
            o.flops,
            op_bytes_by_level(
                c,
                o,
                weights_on_chip=place["weights"],
                kv_on_chip=place["kv"],
                activations_on_chip=place["activations"],
            ),
        )
    return total
