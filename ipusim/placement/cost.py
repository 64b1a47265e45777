"""What one placement ``(t, p, d, m)`` of an inference step costs (see ``ipusim.placement``).

How a placement is timed (all seconds):

* Every distinct stage is built as a per-chip sub-step (``workloads.shard``: ``heads / t``,
  ``d_ff / t``, ``vocab / t``, its layers; the embedding on the first stage, the head on the
  last) and simulated with ``machine.simulate`` on one chip, so the tile fit rule and the GPU
  model both apply unchanged.
* Stage time for one micro-batch ``T_i`` = the sub-step's time + its link time: two
  all-reduces of ``tokens x d_model`` per layer over the tensor group, one more for the
  vocabulary-split embedding, an all-gather of the logits for the split LM head, and the
  point-to-point send of the activations to the next stage (``ipusim.collectives``): every chip
  of the tensor group sends its copy to its counterpart in the next stage, in parallel.
* Step time ``= sum_i T_i + (m - 1) max_i T_i``: the first micro-batch fills the pipeline,
  the rest follow at the slowest stage's pace (GPipe/1F1B for a forward-only step). The
  *bubble* is the fill, ``sum_i T_i - max_i T_i`` (``(p - 1)`` stage times when stages are equal).
  Data replicas run at once; the step lasts as long as the replica with the most tokens.
* Energy: the stages' sub-step energies summed over every chip and micro-batch, plus every
  byte the collectives and the stage-to-stage sends put on the chip-to-chip links
  (``link_bytes``: ``collectives.all_reduce_bytes`` and ``all_gather_bytes`` per group, ``t``
  copies of the activations per stage boundary, over all the step's tokens) at
  ``energy.LINK`` per byte, as ``energy_split["link"]`` (IPU-Links, NVLink and the inter-node
  links alike).
* Fit: a stage must hold the KV cache of *all* its replica's sequences while it works on one
  micro-batch, so its fit is judged on the sub-step of the whole replica batch (which also
  over-counts temporaries by up to ``m`` x: conservative). The placement is ``on_chip`` if
  every stage is, ``streams`` if any streams, else ``does_not_fit`` (the one fit rule,
  ``ipusim.result``).

``assess`` times one given placement; ``Evaluator`` and ``evaluate`` are what the search
(``placement.search``) times its candidates with, ``prune`` drops those whose always-live
bytes cannot fit.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from .. import collectives, energy, tile_params, workloads
from .._validate import positive
from ..hardware import TileChip
from ..hardware import chip as _chip
from ..result import DOES_NOT_FIT, ON_CHIP, STREAMS, StepResult
from ..workloads import Step


@dataclass(frozen=True)
class PlacedStep:
    """One step placed on ``chips`` chips and what it costs (seconds, bytes): a result, where
    ``training.Placement`` is the layout a training step's search runs over.

    ``stage_time_s`` is each pipeline stage's time for one micro-batch, link time included;
    ``communication_s`` the link time on the critical path; ``bubble_s`` the pipeline fill;
    ``split`` the step time by category (the machine model's categories plus "link"), summing
    to ``time_s``. ``fit`` is one of ``on_chip``, ``streams``, ``does_not_fit``; ``reason`` says,
    for a placement that does not fit, which stage's chip (and tile) is short and by how much.
    ``alternatives`` (on the search's answer only) are the nearest placements that do not fit,
    each with its reason, then the next-fastest ones that fit (among those the search timed).
    """

    chip: str
    chips: int  # chips available
    tensor: int  # t: chips a layer is split over
    pipeline: int  # p: pipeline stages
    data: int  # d: data-parallel replicas
    micro_batches: int  # m: micro-batches per replica
    stage_layers: tuple  # layers per stage
    stage_time_s: tuple  # s per stage, one micro-batch, link included
    communication_s: float  # s of link time on the critical path
    bubble_s: float  # s of pipeline fill
    time_s: float  # s, the step (inf when it does not fit)
    fit: str
    split: dict = field(default_factory=dict)  # category -> s, sums to time_s
    reason: str = ""
    short_bytes: float = (
        0.0  # bytes over the limit on the fullest unit of the worst stage (0: fits)
    )
    energy_j: float = (
        math.nan
    )  # J, the stages' sub-step energies over all chips and micro-batches, plus links
    energy_split: dict = field(
        default_factory=dict
    )  # level -> J, summed likewise; "link": link_bytes priced
    link_bytes: float = (
        0.0  # bytes the step sends over chip-to-chip links, all chips (0 on one chip)
    )
    alternatives: tuple = ()
    simulations: int = field(default=0, compare=False)  # sub-steps the search simulated
    unit_memory_bytes: object = field(
        default=None, compare=False, repr=False
    )  # per unit, fullest stage

    @property
    def chips_used(self) -> int:
        return self.tensor * self.pipeline * self.data

    @property
    def degrees(self) -> tuple:
        """``(tensor, pipeline, data, micro_batches)``."""
        return (self.tensor, self.pipeline, self.data, self.micro_batches)

    def to_dict(self) -> dict:
        return {
            "chip": self.chip,
            "chips": self.chips,
            "chips_used": self.chips_used,
            "tensor": self.tensor,
            "pipeline": self.pipeline,
            "data": self.data,
            "micro_batches": self.micro_batches,
            "stage_layers": list(self.stage_layers),
            "stage_time_s": list(self.stage_time_s),
            "communication_s": self.communication_s,
            "bubble_s": self.bubble_s,
            "time_s": self.time_s,
            "fit": self.fit,
            "split_s": dict(self.split),
            "reason": self.reason,
            "short_bytes": self.short_bytes,
            "energy_j": self.energy_j,
            "energy_split": dict(self.energy_split),
            "link_bytes": self.link_bytes,
            "alternatives": [a.to_dict() for a in self.alternatives],
        }

    def label(self) -> str:
        return f"t={self.tensor} p={self.pipeline} d={self.data} m={self.micro_batches}"

    def __repr__(self):
        head = f"PlacedStep({self.chip} x {self.chips_used}/{self.chips}: {self.label()}"
        if self.fit == DOES_NOT_FIT:
            return f"{head}: does_not_fit; {self.reason})"
        return (
            f"{head}: {self.time_s * 1e3:,.3f} ms, link {self.communication_s * 1e3:,.3f} ms, "
            f"bubble {self.bubble_s * 1e3:,.3f} ms; {self.fit})"
        )


def tensor_degrees(model, chips: int) -> list[int]:
    """Tensor-parallel degrees ``t <= chips`` that split ``model``'s heads, ``d_ff`` and
    key/value heads evenly (see ``workloads.shard``)."""
    cfg = workloads.model(model)
    chips = positive("chips", chips, integer=True)
    kv = cfg.n_kv_heads
    return [
        t
        for t in range(1, chips + 1)
        if cfg.heads % t == 0 and cfg.d_ff % t == 0 and (kv % t == 0 or t % kv == 0)
    ]


def stage_layers(layers: int, stages: int) -> tuple:
    """Layers per pipeline stage, as even as possible (the first ``layers % stages`` get one more)."""
    layers = positive("layers", layers, integer=True)
    stages = positive("stages", stages, integer=True)
    if stages > layers:
        raise ValueError(f"{stages} pipeline stages exceed the model's {layers} layers")
    q, r = divmod(layers, stages)
    return tuple(q + 1 if i < r else q for i in range(stages))


def chunks(lengths: np.ndarray, parts: int) -> list[np.ndarray]:
    """Contiguous chunks of sequences, as even in count as possible."""
    return [c for c in np.array_split(lengths, parts) if c.size]


def _heaviest(parts: list[np.ndarray]) -> np.ndarray:
    return max(parts, key=lambda c: (int(c.sum()), c.size))


@functools.lru_cache(maxsize=4096)
def _shard(cfg, t: int, n: int, first: bool, last: bool):
    return workloads.shard(cfg, tensor=t, layers=n, first=first, last=last)


def _memo(method):
    """Cache a method of ``Evaluator`` per evaluator, keyed by its (hashable) arguments."""

    def wrapper(self, *args):
        key = (method.__name__, *args)
        out = self.memo.get(key)
        if out is None:
            out = self.memo[key] = method(self, *args)
        return out

    wrapper.__name__, wrapper.__doc__ = method.__name__, method.__doc__
    return wrapper


def _stage_key(layers: tuple, i: int, t: int, chips_per_node: int) -> tuple:
    """``(layers, first, last, sends across a node)`` of stage ``i``."""
    p = len(layers)
    cross = i < p - 1 and (i * t) // chips_per_node != ((i + 1) * t) // chips_per_node
    return (layers[i], i == 0, i == p - 1, cross)


@functools.lru_cache(maxsize=4096)
def stage_kinds(layers: tuple, t: int, chips_per_node: int) -> tuple:
    """Distinct stages of a pipeline: ``(first index, layers, first, last, sends across a node,
    count)``. Stage ``i`` sends to stage ``i+1``; with the tensor-innermost layout its chips start
    at ``i * t``, so the send crosses a node when ``i t`` and ``(i+1) t`` fall in different nodes."""
    kinds = {}
    for i in range(len(layers)):
        key = _stage_key(layers, i, t, chips_per_node)
        if key in kinds:
            kinds[key][1] += 1
        else:
            kinds[key] = [i, 1]
    return tuple((i, *key, count) for key, (i, count) in kinds.items())


_CACHE: OrderedDict = (
    OrderedDict()
)  # sub-step results shared by every search in the process (keyed with
# the chip, the shard, the sequences and the tile calibration in force)
_CACHE_SIZE = 4096  # entries kept (least recently used dropped)


def clear_cache() -> None:
    """Forget every cached sub-step result (benchmarks time a cold search with it)."""
    _CACHE.clear()


class Evaluator:
    """Simulates per-chip sub-steps once each (an LRU cache keyed by chip, shard and sequences)."""

    def __init__(self, c, s: Step, fabric: collectives.Fabric, sim_kwargs: dict):
        self.c, self.s, self.fabric, self.kw = c, s, fabric, sim_kwargs
        cal = (
            tile_params.current() if isinstance(c, TileChip) else ()
        )  # results move with the calibration
        self.base_key = (
            c,
            s.model,
            s.phase,
            s.row_len,
            s.dtype_bytes,
            tuple(sorted(sim_kwargs.items())),
            cal,
        )
        self.simulations = 0
        self.memo: dict = {}

    @_memo
    def batches(self, d: int, m: int) -> tuple[np.ndarray, np.ndarray]:
        """The sequences of the heaviest of ``d`` replicas, and of its heaviest of ``m`` micro-batches."""
        replica = _heaviest(chunks(self.s.lengths, d))
        return replica, _heaviest(chunks(replica, m))

    def sub_step(self, t, n, first, last, lengths) -> Step:
        s = self.s
        cfg = _shard(s.model, t, n, first, last)
        return workloads.step(
            cfg, lengths, phase=s.phase, pad_to=s.row_len or None, dtype_bytes=s.dtype_bytes
        )

    def result(self, t, n, first, last, lengths: np.ndarray, weights=None) -> StepResult:
        key = (self.base_key, t, n, first, last, tuple(int(x) for x in lengths), weights)
        r = _CACHE.get(key)
        if r is None:
            from .. import one_chip

            kw = dict(self.kw)
            if weights is not None:
                kw["weights"] = weights
            r = one_chip.simulate(self.c, self.sub_step(t, n, first, last, lengths), **kw)
            _CACHE[key] = r
            if len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
            self.simulations += 1
        else:
            _CACHE.move_to_end(key)
        return r

    def tokens(self, lengths: np.ndarray) -> int:
        """Token rows one stage computes for these sequences (its activations are tokens x d_model)."""
        s = self.s
        if s.phase == "decode":
            return int(lengths.size)
        return int(lengths.size * s.row_len) if s.row_len else int(lengths.sum())

    @_memo
    def link_s(self, t, n, first, last, d, m, cross_node) -> float:
        """Link seconds of one stage for one micro-batch (of ``d`` replicas, ``m`` micro-batches):
        the tensor group's all-reduces and the send of the activations to the next stage."""
        s, f = self.s, self.fabric
        micro = self.batches(d, m)[1]
        act = self.tokens(micro) * s.model.d_model * s.dtype_bytes
        out = 0.0
        if t > 1:
            out += 2 * n * f.all_reduce_s(act, t)
            if first:
                out += f.all_reduce_s(act, t)  # vocabulary-split embedding: partial rows summed
            if last and s.model.kind == "decoder":
                out += f.all_gather_s(micro.size * s.model.vocab * s.dtype_bytes, t)  # logits
        if not last:
            out += f.point_to_point_s(act, cross_node=cross_node)
        return out

    @_memo
    def link_bytes(self, t, layers) -> float:
        """Bytes the whole step sends over the links, summed over every chip, replica and
        micro-batch, with ``t``-way tensor parallelism and pipeline stages of ``layers``: per layer
        two all-reduces of the activations, one more for the embedding, the logits all-gathered
        (decoders), and ``t`` copies of the activations over each of the ``p - 1`` stage boundaries.
        Every term is linear in the tokens (or sequences), and every token passes every stage
        once, so the total is that of the step's tokens whatever the replicas and micro-batches."""
        s, cfg = self.s, self.s.model
        act = self.tokens(s.lengths) * cfg.d_model * s.dtype_bytes
        out = (len(layers) - 1) * t * act
        if t > 1:
            out += (2 * sum(layers) + 1) * collectives.all_reduce_bytes(act, t)
            if cfg.kind == "decoder":
                out += collectives.all_gather_bytes(s.batch * cfg.vocab * s.dtype_bytes, t)
        return float(out)

    @_memo
    def stream_bound_s(self, t, n, first, last, d) -> float:
        """Seconds a stage must spend streaming weights, per micro-batch: 0 unless its weights,
        KV cache and code exceed the chip's SRAM (then they cannot all be on chip), else its
        layers' matrices copied in once at the off-chip bandwidth (ASSUMPTION: a streamed op
        copies its weights in at least once per step, as ``ipusim.tiles`` does)."""
        c = self.c
        if not isinstance(c, TileChip) or c.offchip_bandwidth_bytes_per_s <= 0:
            return 0.0
        w, kv = self.always_live_bytes(t, n, first, last, d)
        if w + kv + c.tiles * c.code_bytes_per_tile <= c.sram_bytes:
            return 0.0
        cfg = _shard(self.s.model, t, n, first, last)
        return cfg.nonembedding_matmul_params * self.s.dtype_bytes / c.offchip_bandwidth_bytes_per_s

    @_memo
    def always_live_bytes(self, t, n, first, last, d) -> tuple[float, float]:
        """(weights, KV cache) bytes one chip of this stage holds for one of ``d`` replicas."""
        s = self.s
        replica = self.batches(d, 1)[0]
        cfg = _shard(s.model, t, n, first, last)
        kv = 0.0
        if s.phase in ("prefill", "decode"):
            kv = cfg.kv_bytes_per_token(s.dtype_bytes) * float(
                replica.sum() if s.phase == "decode" else self.tokens(replica)
            )
        return cfg.weight_bytes(s.dtype_bytes), kv


def _capacity_reason(c, weights: float, kv: float) -> tuple[bool, float, str]:
    """(may fit, bytes short, reason): the necessary condition on one chip's always-live bytes."""
    gb = 1e9
    if isinstance(c, TileChip):
        cap = float(c.data_bytes)
        can_stream = c.offchip_bytes >= weights
        need = kv + (0.0 if can_stream else weights)
        what = "KV cache" if can_stream else "weights + KV cache"
        if need > cap:
            return (
                False,
                need - cap,
                (
                    f"{what} {need / gb:,.2f} GB per chip exceed the "
                    f"{cap / gb:,.2f} GB of tile SRAM left after code"
                ),
            )
        return True, 0.0, ""
    need = weights + kv
    if need > c.hbm_bytes:
        return (
            False,
            need - c.hbm_bytes,
            (
                f"weights + KV cache {need / gb:,.2f} GB per chip exceed "
                f"{c.hbm_bytes / gb:,.0f} GB of HBM"
            ),
        )
    return True, 0.0, ""


def short_bytes(ev: Evaluator, r: StepResult, t, n, first, last, lengths) -> tuple[float, str]:
    """Bytes over the limit, and where, for a sub-step that does not fit (on a tile chip that can
    stream the stage's weights, the shortfall with the weights streamed)."""
    c, sub = ev.c, ev.sub_step(t, n, first, last, lengths)
    if isinstance(c, TileChip) and r.unit_memory_bytes.size:
        how = ""
        if c.offchip_bytes >= sub.model.weight_bytes(sub.dtype_bytes):
            r = ev.result(t, n, first, last, lengths, "stream")
            how = " with its weights streamed"
        tile = int(np.argmax(r.unit_memory_bytes))
        over = float(r.unit_memory_bytes[tile] - r.memory_limit_bytes)
        return max(over, 0.0), f"tile {tile} short by {over:,.0f} bytes{how}"
    from ..roofline import step_need_bytes

    over = step_need_bytes(sub) - c.hbm_bytes
    return max(over, 0.0), f"HBM short by {over / 1e9:,.2f} GB"


@dataclass
class Candidate:
    t: int
    p: int
    d: int
    m: int
    layers: tuple
    bound_s: float = 0.0
    reason: str = ""
    short: float = 0.0


def evaluate(ev: Evaluator, cand: Candidate) -> PlacedStep:
    """Time and fit of one placement (simulating each distinct stage once)."""
    c, fab = ev.c, ev.fabric
    t, d, m = cand.t, cand.d, cand.m
    replica, micro = ev.batches(d, m)
    kinds = stage_kinds(cand.layers, t, fab.chips_per_node)
    rows, fits, worst_short, reason, peak = [], [], -1.0, "", None
    for i, n, first, last, cross, count in kinds:
        whole = ev.result(t, n, first, last, replica)
        if not whole.fits:
            over, where = short_bytes(ev, whole, t, n, first, last, replica)
            if over > worst_short:
                worst_short = over
                on = f"chip {i * t}" if t == 1 else f"chips {i * t}-{(i + 1) * t - 1}"
                reason = (
                    f"stage {i} ({n} layers{', embedding' if first else ''}{', head' if last else ''}) "
                    f"on {on} of each replica: {where}"
                )
            fits.append(DOES_NOT_FIT)
            continue
        streamed = whole.extra.get("weights") == "streamed"
        fits.append(STREAMS if streamed else ON_CHIP)
        r = whole if m == 1 else ev.result(t, n, first, last, micro, "stream" if streamed else None)
        link = ev.link_s(t, n, first, last, d, m, cross)
        rows.append((i, count, r, link, r.time_s + link))
        if peak is None or np.max(whole.unit_memory_bytes, initial=0) > np.max(peak, initial=0):
            peak = whole.unit_memory_bytes
    base = dict(
        chip=c.name,
        chips=fab.chips,
        tensor=t,
        pipeline=cand.p,
        data=d,
        micro_batches=m,
        stage_layers=cand.layers,
    )
    if DOES_NOT_FIT in fits:
        return PlacedStep(
            **base,
            stage_time_s=(),
            communication_s=math.nan,
            bubble_s=math.nan,
            time_s=math.inf,
            fit=DOES_NOT_FIT,
            reason=reason,
            short_bytes=worst_short,
        )
    k = max(range(len(rows)), key=lambda j: rows[j][4])
    fill = sum(count * st for _, count, _, _, st in rows)
    slowest = rows[k][4]
    split: dict = {}
    energy_j, energy_split = 0.0, {}
    for j, (_, count, r, _, _) in enumerate(rows):
        w = count + (m - 1) * (j == k)
        for key, v in r.split.items():
            split[key] = split.get(key, 0.0) + w * v
        per = count * t * d * m  # chips running this kind of stage, times micro-batches
        energy_j += per * r.energy_j
        for key, v in r.energy_split.items():
            energy_split[key] = energy_split.get(key, 0.0) + per * v
    split["link"] = sum(count * link for _, count, _, link, _ in rows) + (m - 1) * rows[k][3]
    link_bytes = ev.link_bytes(t, cand.layers)
    link_j = link_bytes * energy.LINK.pj * energy.PJ
    energy_j += link_j
    energy_split["link"] = energy_split.get("link", 0.0) + link_j
    time_of = {(row_kind[1:5]): row[4] for row_kind, row in zip(kinds, rows, strict=True)}
    per_stage = [time_of[_stage_key(cand.layers, j, t, fab.chips_per_node)] for j in range(cand.p)]
    return PlacedStep(
        **base,
        stage_time_s=tuple(per_stage),
        communication_s=split["link"],
        bubble_s=fill - slowest,
        time_s=fill + (m - 1) * slowest,
        fit=STREAMS if STREAMS in fits else ON_CHIP,
        split=split,
        energy_j=energy_j,
        energy_split=energy_split,
        link_bytes=link_bytes,
        unit_memory_bytes=peak,
    )


def prune(ev: Evaluator, cands: list[Candidate]) -> tuple[list, list]:
    """Split candidates into (may fit, cannot fit by the always-live bytes of some stage)."""
    keep, out = [], []
    for cand in cands:
        for i, n, first, last, _, _ in stage_kinds(cand.layers, cand.t, ev.fabric.chips_per_node):
            ok, short, why = _capacity_reason(
                ev.c, *ev.always_live_bytes(cand.t, n, first, last, cand.d)
            )
            if not ok:
                cand.reason = f"stage {i} ({n} layers): {why} (short by {short / 1e9:,.2f} GB)"
                cand.short = short
                break
        (keep if not cand.reason else out).append(cand)
    return keep, out


def as_placement(ev: Evaluator, cand: Candidate) -> PlacedStep:
    return PlacedStep(
        chip=ev.c.name,
        chips=ev.fabric.chips,
        tensor=cand.t,
        pipeline=cand.p,
        data=cand.d,
        micro_batches=cand.m,
        stage_layers=cand.layers,
        stage_time_s=(),
        communication_s=math.nan,
        bubble_s=math.nan,
        time_s=math.inf,
        fit=DOES_NOT_FIT,
        reason=cand.reason,
        short_bytes=cand.short,
    )


def assess(
    c,
    s: Step,
    *,
    tensor: int,
    pipeline: int,
    data: int = 1,
    micro_batches: int = 1,
    chips: int | None = None,
    chips_per_node: int | None = None,
    **sim_kwargs,
) -> PlacedStep:
    """Time and fit of one given placement ``(tensor, pipeline, data, micro_batches)`` (no search):
    to ask why the search did not pick it. ``chips`` defaults to ``tensor x pipeline x data``."""
    c = _chip(c)
    if not isinstance(s, Step):
        raise ValueError(
            f"step must be a workloads.Step (from ipusim.step(...)), got {type(s).__name__}"
        )
    t = positive("tensor", tensor, integer=True)
    p = positive("pipeline", pipeline, integer=True)
    d = positive("data", data, integer=True)
    m = positive("micro_batches", micro_batches, integer=True)
    n = t * p * d if chips is None else positive("chips", chips, integer=True)
    if t * p * d > n:
        raise ValueError(f"tensor x pipeline x data = {t * p * d} exceeds chips = {n}")
    if t not in tensor_degrees(s.model, t):
        raise ValueError(
            f"tensor={t} must divide {s.model.name}'s heads and d_ff (valid: "
            f"{', '.join(map(str, tensor_degrees(s.model, s.model.heads)))})"
        )
    if d > s.batch:
        raise ValueError(f"data={d} exceeds the batch of {s.batch} sequences")
    fab = collectives.fabric(c, n, chips_per_node=chips_per_node)
    if t > fab.chips_per_node and t % fab.chips_per_node:
        raise ValueError(
            f"tensor={t} spans nodes of {fab.chips_per_node} chips without filling them"
        )
    ev = Evaluator(c, s, fab, sim_kwargs)
    b = ev.batches(d, 1)[0].size
    if m > b:
        raise ValueError(f"micro_batches={m} exceeds the {b} sequences of a replica")
    cand = Candidate(t, p, d, m, stage_layers(s.model.layers, p))
    keep, out = prune(ev, [cand])
    pl = as_placement(ev, out[0]) if out else evaluate(ev, cand)
    return dataclasses.replace(pl, simulations=ev.simulations)
