"""The search over placements of an inference step on N chips (see ``ipusim.placement``).

The search (``place``) enumerates ``t`` (dividing heads and ``d_ff``), ``p <= layers``, the
most replicas that fit ``d = min(batch, N // (t p))`` (more replicas never lengthen a step:
each gets fewer sequences) and ``m`` dividing the replica batch. It prunes without simulating
every placement whose per-chip always-live bytes (weights, KV cache, code) exceed the chip's
memory, and bounds the rest from below by ``n_i x`` the time of one lone layer of the same
shard plus the exact link time (a stage of ``n`` layers holds more bytes than one lone layer,
so it is never faster per layer, and when a lone layer does not fit no stage does: ASSUMPTION,
checked against the exhaustive search of ``tests/placement_reference.py`` in the tests and
``benchmarks/bench_placement.py``);
placements are simulated in order of that bound until the bound passes the best time found.
``cost.assess`` times one given placement, to ask why the search did not pick it.
"""

from __future__ import annotations

import dataclasses
import heapq
import math

import numpy as np

from .. import collectives
from .._validate import positive
from ..hardware import GpuChip, TileChip
from ..hardware import chip as _chip
from ..result import DOES_NOT_FIT, ON_CHIP, STREAMS, StepResult
from ..workloads import Step
from .cost import (
    Candidate,
    Evaluator,
    PlacedStep,
    as_placement,
    chunks,
    evaluate,
    prune,
    short_bytes,
    stage_kinds,
    stage_layers,
    tensor_degrees,
)

ALTERNATIVES = 5  # non-fitting placements listed with their reasons
RUNNERS_UP = 2  # next-fastest placements that fit (among those the search timed), listed too


def candidates(s: Step, chips: int, fab: collectives.Fabric) -> list[Candidate]:
    out = []
    L, B = s.model.layers, s.batch
    for t in tensor_degrees(s.model, chips):
        if t > fab.chips_per_node and t % fab.chips_per_node:
            continue  # a tensor group spanning nodes must fill them
        for p in range(1, min(L, chips // t) + 1):
            d = min(B, chips // (t * p))
            b = max(x.size for x in chunks(s.lengths, d))
            ms = [1] if p == 1 else [m for m in range(1, b + 1) if b % m == 0]
            for m in ms:
                out.append(Candidate(t, p, d, m, stage_layers(L, p)))
    return out


def _bound(ev: Evaluator, cand: Candidate, level: int) -> float:
    """Lower bound on the step time: ``n_i`` lone layers of the stage's shard, the exact link time
    and the streaming a stage cannot avoid. Level 0 times the lone layer on one sequence (the
    shortest), level 1 on the micro-batch."""
    t, d, m = cand.t, cand.d, cand.m
    micro = ev.batches(d, m)[1]
    seqs = micro if level else micro[np.argmin(micro)][None]
    lone = ev.result(t, 1, False, False, seqs)
    if not lone.fits:  # every stage holds at least this layer (and more tokens): none can fit
        cand.short, where = short_bytes(ev, lone, t, 1, False, False, seqs)
        cand.reason = (
            f"one layer of this shard alone does not fit a chip ({len(seqs)} sequences): {where}"
        )
        return math.inf
    per_layer = lone.time_s
    fill, slowest = 0.0, 0.0
    for _, n, first, last, cross, count in stage_kinds(cand.layers, t, ev.fabric.chips_per_node):
        st = (
            n * per_layer
            + ev.link_s(t, n, first, last, d, m, cross)
            + ev.stream_bound_s(t, n, first, last, d)
        )
        fill += count * st
        slowest = max(slowest, st)
    return fill + (m - 1) * slowest


def _advice(c, s: Step, chips: int) -> str:
    """What would make a step that fits nowhere fit: more chips, or streaming."""
    cfg = s.model
    kv = 0.0
    if s.phase in ("prefill", "decode"):
        kv = cfg.kv_bytes_per_token(s.dtype_bytes) * float(
            s.lengths.sum() if s.phase == "decode" else s.tokens
        )
    w = cfg.weight_bytes(s.dtype_bytes)
    cap = c.data_bytes if isinstance(c, TileChip) else c.hbm_bytes
    need = math.ceil((w + kv) / cap)
    msg = (
        f"Weights + KV cache take {(w + kv) / 1e9:,.1f} GB: more than {need - 1} chips' "
        f"{'tile SRAM' if isinstance(c, TileChip) else 'HBM'} (now {chips}; bytes alone, so necessary, "
        "not sufficient)."
    )
    if isinstance(c, TileChip) and c.offchip_bytes > 0:
        msg += (
            f" Streaming weights from Streaming Memory leaves the KV cache ({kv / 1e9:,.1f} GB) and "
            f"the working set on chip: more than {math.ceil(kv / cap) - 1} chips."
        )
    return msg + " A smaller batch or shorter context also shrinks the KV cache."


def place(
    c, s: Step, *, chips: int = 1, chips_per_node: int | None = None, **sim_kwargs
) -> PlacedStep:
    """The fastest placement of step ``s`` on up to ``chips`` chips of ``c`` that fits.

    Returns a ``PlacedStep`` with ``alternatives``: the nearest placements that do not fit
    (least short first) with the reason for each. If none fits, the returned placement is the
    least short one, ``fit = "does_not_fit"``, and its ``reason`` ends with what would make the
    step fit. ``chips_per_node`` overrides the node size of ``collectives.fabric``;
    other keyword arguments go to ``machine.simulate`` for each sub-step.
    """
    c = _chip(c)
    if not isinstance(c, (TileChip, GpuChip)):
        raise ValueError(f"chip must be a TileChip or GpuChip, got {type(c).__name__}")
    if not isinstance(s, Step):
        raise ValueError(
            f"step must be a workloads.Step (from ipusim.step(...)), got {type(s).__name__}"
        )
    if s.phase == "train":
        raise ValueError(
            "place handles inference steps (forward, prefill, decode); training has its own module"
        )
    chips = positive("chips", chips, integer=True)
    fab = collectives.fabric(c, chips, chips_per_node=chips_per_node)
    ev = Evaluator(c, s, fab, sim_kwargs)
    cands = candidates(s, chips, fab)
    fitting = []
    keep, rejected = prune(ev, cands)
    failed = [as_placement(ev, x) for x in rejected]
    # Best-first search on lower bounds that tighten as they are popped: level 0 (a lone layer,
    # one sequence), level 1 (a lone layer, the micro-batch), level 2 (the exact time). The
    # first exact placement popped is the fastest.
    heap = [(0.0, k, 0, None) for k in range(len(keep))]
    while heap and not fitting:
        bound, k, level, pl = heapq.heappop(heap)
        cand = keep[k]
        if level < 2:
            b = _bound(ev, cand, level)
            if math.isinf(b):
                failed.append(as_placement(ev, cand))
            else:
                heapq.heappush(heap, (max(bound, b), k, level + 1, None))
        elif level == 2:
            pl = evaluate(ev, cand)
            if pl.fit == DOES_NOT_FIT:
                failed.append(pl)
            else:
                heapq.heappush(heap, (pl.time_s, k, 3, pl))
        else:
            fitting.append(pl)
    # placements already timed on the way, next fastest first (no extra simulation)
    fitting += sorted((e[3] for e in heap if e[2] == 3), key=lambda x: (x.time_s, x.chips_used))
    failed.sort(key=lambda x: (x.short_bytes, x.chips_used, x.micro_batches))
    seen: set = set()
    failed = [
        x
        for x in failed
        if not (
            (x.tensor, x.pipeline, x.data, x.reason) in seen
            or seen.add((x.tensor, x.pipeline, x.data, x.reason))
        )
    ]
    if not fitting:
        if not failed:
            raise ValueError(f"no placement of {s.model.name} on {chips} chips to try")
        worst = failed[0]
        if worst.reason.startswith("one layer") and worst.tensor == max(x.t for x in cands):
            most = max(tensor_degrees(s.model, s.model.heads))
            more = (
                "more chips do not help"
                if worst.tensor == most
                else f"more chips would let it split up to {most} ways"
            )
            advice = (
                f"One layer split {worst.tensor} ways still overflows a tile ({more}); shorter sequences "
                "or a smaller batch would shrink it."
            )
        else:
            advice = _advice(c, s, chips)
        return dataclasses.replace(
            worst,
            reason=f"{worst.reason}. Nothing fits on {chips} chips. {advice}",
            alternatives=tuple(failed[1 : 1 + ALTERNATIVES]),
            simulations=ev.simulations,
        )
    best = fitting[0]
    others = tuple(failed[:ALTERNATIVES]) + tuple(fitting[1 : 1 + RUNNERS_UP])
    return dataclasses.replace(best, alternatives=others, simulations=ev.simulations)


def simulate(c, s: Step, *, chips: int = 1, **kwargs) -> StepResult:
    """``machine.simulate`` on ``chips`` chips: the step placed by ``place``, as a ``StepResult``
    whose ``placement`` is set, ``fit`` is the placement's, ``time_s`` the step latency and
    ``split`` includes "link". ``energy_j`` sums every chip's work; ``board_power_w`` is the
    board power of every chip the placement uses (``chips_used`` x the chip's), so
    ``board_energy_j`` is theirs over the step."""
    c = _chip(c)
    pl = place(c, s, chips=chips, **kwargs)
    fits = pl.fit != DOES_NOT_FIT
    time_s = pl.time_s if fits else math.inf
    msg = "" if pl.fit == ON_CHIP else pl.reason
    if pl.fit == STREAMS:
        msg = f"Placed {pl.label()}; some stage streams its weights from Streaming Memory."
    return StepResult(
        chip=c.name,
        kind=c.kind,
        model=s.model.name,
        phase=s.phase,
        batch=s.batch,
        real_tokens=s.real_tokens,
        tokens=s.tokens,
        time_s=time_s,
        split=dict(pl.split),
        op_names=(),
        op_time_s=np.zeros(0),
        op_split={},
        unit_busy_s=np.zeros(0),
        unit_memory_bytes=pl.unit_memory_bytes if pl.unit_memory_bytes is not None else np.zeros(0),
        memory_limit_bytes=float(
            c.sram_per_tile_bytes if isinstance(c, TileChip) else c.smem_per_sm_bytes
        ),
        fits=fits,
        fit_message=msg,
        energy_j=pl.energy_j if fits else math.inf,
        energy_split=dict(pl.energy_split),
        board_power_w=c.power_w * pl.chips_used,
        extra={
            "weights": "streamed" if pl.fit == STREAMS else "on-chip",
            "chips": pl.chips_used,
            "time_if_unlimited_s": time_s,
        },
        placement=pl,
    )
