"""A whole step: every op planned with a working-set budget, budgets cut where a tile overflows.

``plan_step`` plans each op (``matmul``, ``attention``, ``rows``) with the budget ``op_budget``
leaves beside the always-live bytes (code, parameters, KV cache, residual stream) and the op's
held input, then plans again, with a smaller budget, any op whose peak overflows some tile.

Units: bytes per tile.
"""

from __future__ import annotations

import numpy as np

from ..hardware import TileChip
from ..workloads import Op, Step
from .attention import attention_live_bytes, map_attention, plan_attention
from .base import OpPlan, budget_bytes, placed_bytes
from .matmul import map_matmul
from .rows import map_embedding, map_rows

_HOLDS_INPUT = ("attn_out", "ffn_down")  # matmuls whose input is not the residual stream


def _room(c: TileChip, s: Step, op: Op) -> float:
    """Bytes per tile left beside the always-live bytes while ``op`` runs, estimated with
    every parameter spread evenly: code, parameters (or, if they cannot stay on chip, the
    op's own weights copied in), KV cache and residual stream."""
    return _room_of(c, op, *_step_room(c, s))


def _step_room(c: TileChip, s: Step) -> tuple:
    """(code, KV cache and residual stream per tile; parameters per tile) of ``s``: what
    ``_room`` needs of the step, worked out once for all its ops."""
    return _room_base(c, s), s.model.weight_bytes(s.dtype_bytes) / c.tiles


def _room_of(c: TileChip, op: Op, base: float, params: float) -> float:
    if base + params < c.sram_per_tile_bytes:
        return c.sram_per_tile_bytes - base - params
    return c.sram_per_tile_bytes - base - op.weight_bytes / op.count / c.tiles


def op_budget(c: TileChip, s: Step, op: Op, live_bytes: float) -> float:
    """Working-set budget of ``op`` per tile: ``availableMemoryProportion`` of the tile, or
    less when the always-live bytes and the op's held inputs leave less room (then the
    planner serialises sooner); never below a tenth of ``budget_bytes(c)`` (a step that
    tight does not fit, and the out-of-memory report says so)."""
    return _budget(c, _room(c, s, op), live_bytes)


def _budget(c: TileChip, room: float, live_bytes: float) -> float:
    room = room - live_bytes
    return float(max(0.1 * budget_bytes(c), min(budget_bytes(c), room)))


def plan_step(c: TileChip, s: Step, *, seed: int = 0, unlimited: bool = False) -> list[OpPlan]:
    """Lay every op of ``s`` out over the tiles of ``c`` (one ``OpPlan`` per op).

    Each op's working-set budget starts from ``op_budget`` (parameters spread evenly); since
    a tile's real share of the weights depends on the plans, an op whose peak then overflows
    some tile is planned again with its budget cut by that overflow (a few rounds).
    ``unlimited``: no budget (every op in one pass; for the cost of the passes).
    ``c`` must be a ``TileChip`` and ``s`` a forward, prefill or decode ``Step`` (``tiles``
    checks both for its public functions)."""
    T = c.tiles
    att_ops = [i for i, op in enumerate(s.ops) if op.kind in ("attention", "softmax")]
    live = [_live_bytes(op, s, T) for op in s.ops]
    if unlimited:
        return _plan_ops(
            c, s, seed, [float("inf")] * len(s.ops), live, att_ops, [None] * len(s.ops)
        )
    room = _step_room(c, s)  # the step's share of every op's room, once
    budgets = [_budget(c, _room_of(c, op, *room), lv) for op, lv in zip(s.ops, live, strict=True)]
    plans = _plan_ops(c, s, seed, budgets, live, att_ops, [None] * len(s.ops))
    on_chip = _on_chip_estimate(c, s)
    floor = 0.1 * budget_bytes(c)
    for _ in range(4):
        placed = placed_bytes(plans)
        always = (
            c.code_bytes_per_tile
            + always_live_other_bytes(c, s, placed)
            + (placed if on_chip else 0.0)
        )
        redo = []
        for i, p in enumerate(plans):
            if p.op.kind not in ("matmul", "attention", "softmax"):
                continue
            landed = 0.0 if on_chip or p.op.kind != "matmul" else p.weights / p.op.count
            over = float((always + p.temp + landed).max()) - c.sram_per_tile_bytes
            if over > 0 and budgets[i] > floor:
                redo.append(i)
                budgets[i] = max(floor, budgets[i] - over - 1024.0)
        if not redo:
            break
        if any(i in att_ops for i in redo):  # the three attention ops share one layout
            b = min(budgets[i] for i in att_ops)
            for i in att_ops:
                budgets[i] = b
            redo = sorted(set(redo) | set(att_ops))
        plans = _plan_ops(
            c,
            s,
            seed,
            budgets,
            live,
            att_ops,
            [None if i in redo else p for i, p in enumerate(plans)],
        )
    return plans


def _live_bytes(op: Op, s: Step, T: int) -> float:
    """The op's input held per tile while it runs, when it is not the residual stream."""
    if op.kind in ("attention", "softmax"):
        return attention_live_bytes(s, T)
    if op.name in _HOLDS_INPUT:
        return op.m * op.k * s.dtype_bytes / T
    return 0.0


def _on_chip_estimate(c: TileChip, s: Step) -> bool:
    """Whether the parameters, spread evenly, leave room on a tile (else they will stream)."""
    return _room_base(c, s) + s.model.weight_bytes(s.dtype_bytes) / c.tiles < c.sram_per_tile_bytes


def _room_base(c: TileChip, s: Step) -> float:
    """Code budget, KV cache (prefill, decode) and residual stream per tile, spread evenly."""
    cfg, dt = s.model, s.dtype_bytes
    kv = 0.0
    if s.phase in ("prefill", "decode"):
        kv = cfg.kv_bytes_per_token(dt) * float(
            s.lengths.sum() if s.phase == "decode" else s.tokens
        )
    return c.code_bytes_per_tile + (kv + s.tokens * cfg.d_model * dt) / c.tiles


def always_live_other_bytes(c: TileChip, s: Step, placed: np.ndarray) -> float:
    """Always-live bytes per tile besides code and placed weights: other parameters (biases,
    norms) spread evenly, the KV cache and the residual stream."""
    cfg, dt = s.model, s.dtype_bytes
    other = max(0.0, cfg.params * dt - placed.sum()) / c.tiles
    return other + _room_base(c, s) - c.code_bytes_per_tile


def _plan_ops(c, s, seed, budgets, live, att_ops, keep) -> list[OpPlan]:
    cfg, dt = s.model, s.dtype_bytes
    plans, att = [], None
    for i, op in enumerate(s.ops):
        if keep[i] is not None:
            plans.append(keep[i])
        elif op.kind == "matmul":
            tied = op.name == "lm_head" and cfg.tied_embeddings
            plans.append(map_matmul(op, c, dt, tied=tied, live_bytes=live[i], budget=budgets[i]))
        elif op.kind in ("attention", "softmax"):
            if att is None:
                att = plan_attention(s, c, budgets[i])
            plans.append(map_attention(op, s, c, *att))
        elif op.kind == "norm":
            plans.append(map_rows(op, s, c, cfg.d_model, exchange=True))
        elif op.kind == "activation":
            plans.append(map_rows(op, s, c, op.m // s.tokens, exchange=False))
        elif op.kind == "embedding":
            plans.append(map_embedding(op, s, c, seed))
        else:  # pragma: no cover - OP_KINDS is closed
            raise ValueError(f"op kind {op.kind!r} is not mapped")
    return plans
