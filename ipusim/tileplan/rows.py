"""Row-wise ops (layer norm, activation), element-wise ops in place, and the embedding look-up,
laid out over the tiles.

A norm gathers whole rows (the previous matmul left them in column blocks); the activation runs
in place, its rows cut into chunks when there are fewer rows than tiles. The embedding look-up
sends each token's table rows (drawn with a seed) from the tiles that own them.

Units: bytes, FLOP; per-tile arrays.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..hardware import TileChip
from ..workloads import Op, Step
from .base import OpPlan, dealt_phase
from .search import plan_cache


def _deal_same(row, P: int, n_tiles: int) -> np.ndarray:
    """``deal`` of ``P`` identical pieces ``row``: a count per tile times the row (the tests
    hold it to ``deal`` of the P rows)."""
    # the last column, counts x 1.0, is the counts themselves: one product table, contiguous
    return np.multiply.outer(_pieces_per_tile(P, n_tiles), np.array([*row, 1.0], dtype=np.float64))


@lru_cache(maxsize=256)
def _pieces_per_tile(P: int, n_tiles: int) -> np.ndarray:
    """Pieces each tile gets of ``P`` dealt in order (piece i to tile ``i * n_tiles // P``), as
    float64, read-only (memoised: a table's steps deal the same counts again)."""
    counts = np.bincount(np.arange(P, dtype=np.int64) * n_tiles // P, minlength=n_tiles)
    counts = counts.astype(np.float64)
    counts.flags.writeable = False
    return counts


def map_rows(op: Op, s: Step, c: TileChip, width: int, exchange: bool) -> OpPlan:
    """Row-wise element ops (layer norm, activation): ``op.m // width`` rows of ``width``.

    A norm needs whole rows, which the previous matmul left in column blocks, so its rows
    are gathered (``exchange``); the activation runs in place on the up-projection output.
    Rows are cut into chunks when there are fewer rows than tiles (activation only).

    The plan is memoised on the op, the step's dtype and the chip's tile count (all it reads:
    the steps of a table with the same tokens share it) and read-only.
    """
    return _map_rows(op, s.dtype_bytes, c.tiles, width, bool(exchange))


@plan_cache(maxsize=64)  # a plan holds a dealt table: about 95 kB on 1,472 tiles, 6 MB in all
def _map_rows(op: Op, dt: int, T: int, width: int, exchange: bool) -> OpPlan:
    rows = op.m // width
    chunks = 1 if exchange else max(1, min(width, T // max(rows, 1)))
    P = rows * chunks
    w = width / chunks
    reads = op.act_read_bytes / op.count / (op.m * dt)
    fl = op.flops / op.count / op.m * w
    recv = w * dt * (T - 1) / T if exchange else 0.0
    per = _deal_same([fl, (reads + 1) * w * dt, recv, recv, (reads + 1) * w * dt, 0.0], P, T)
    plan = OpPlan(
        op,
        f"{rows} rows x {chunks} chunks",
        P,
        [dealt_phase(op.name, op.kind, False, per)],
        per[:, 5],
        per[:, 4],
        block=(w,),
        working_set_bytes=float(per[:, 4].max()),
    )
    plan.freeze()
    return plan


def map_elementwise(op: Op, c: TileChip, elements: int, load_bytes_per_element: float) -> OpPlan:
    """An element-wise op in place on values spread evenly over the tiles (an optimizer update):
    each tile updates the ``elements / tiles`` values it holds, reading and writing
    ``load_bytes_per_element`` bytes of SRAM for each; no exchange, no temporaries."""
    P = min(int(elements), c.tiles)
    per_piece = elements / P
    fl = op.flops / op.count / elements * per_piece
    per = _deal_same([fl, load_bytes_per_element * per_piece, 0.0, 0.0, 0.0, 0.0], P, c.tiles)
    return OpPlan(
        op,
        f"{elements:,} elements on {P} tiles, in place",
        P,
        [dealt_phase(op.name, op.kind, False, per)],
        per[:, 5],
        per[:, 4],
    )


def _distinct(idx: np.ndarray, n: int) -> np.ndarray:
    """``np.unique(idx)`` for integers in ``[0, n)``, by a presence mask (linear, no sort)."""
    if idx.size == 0 or idx.min() < 0 or idx.max() >= n:
        return np.unique(idx)
    present = np.zeros(n, dtype=bool)
    present[idx] = True
    return np.flatnonzero(present)


@lru_cache(maxsize=64)
def _rows_per_tile(nrows: int, T: int) -> np.ndarray:
    """Rows of an ``nrows``-row table each of ``T`` tiles owns (spread evenly), read-only."""
    out = np.bincount(np.arange(nrows) * T // nrows, minlength=T)[:T]
    out.flags.writeable = False
    return out


def map_embedding(op: Op, s: Step, c: TileChip, seed: int) -> OpPlan:
    """Embedding look-up: table rows are spread over tiles; each token's row is sent to its tile.

    Token ids are drawn uniformly from the vocabulary with ``seed`` (ASSUMPTION: real text is
    Zipf-like, which would load a few tiles more); padding positions use id 0 ([PAD]).
    Position (and token-type) rows come from tables spread the same way. A tile sends each
    distinct row it owns once, multicast to every tile that needs it (the same ASSUMPTION as
    for matmul inputs), so a row many tokens share costs one send.
    """
    cfg, dt, T = s.model, s.dtype_bytes, c.tiles
    d = cfg.d_model
    rng = np.random.default_rng(seed)
    ntok = s.tokens
    if s.phase == "decode":
        pos = s.lengths - 1
    elif s.row_len:
        pos = np.tile(np.arange(s.row_len), s.batch)
    else:
        pos = np.concatenate([np.arange(n) for n in s.lengths])
    ids = rng.integers(1, cfg.vocab, size=ntok)
    if s.row_len and s.phase != "decode":
        ids[(pos >= np.repeat(s.lengths, s.row_len))] = 0
    tables = [(ids, cfg.vocab)]
    if cfg.learned_positions:
        tables.append((pos, cfg.max_positions))
    if cfg.type_vocab:
        tables.append((np.zeros(ntok, np.int64), cfg.type_vocab))
    send, owned = np.zeros(T), np.zeros(T)
    for idx, nrows in tables:
        send += np.bincount(_distinct(idx, nrows) * T // nrows, minlength=T)[:T] * d * dt
        owned += _rows_per_tile(nrows, T) * d * dt
    k = len(tables)
    per = _deal_same(
        [op.flops / ntok, (k + 1) * d * dt, k * d * dt, 0.0, (k + 1) * d * dt, 0.0], ntok, T
    )
    plan = OpPlan(
        op,
        f"{ntok} tokens; {k} tables row-split",
        ntok,
        [dealt_phase(op.name, "embedding", False, per)],
        owned,
        per[:, 4],
        working_set_bytes=float(per[:, 4].max()),
    )
    plan.phases[0].send = send
    plan.stream_bytes = float(ntok * k * d * dt)
    return plan
