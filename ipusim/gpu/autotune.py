"""The autotuner: each kernel of a step runs its fastest candidate (``kernels``) in waves
(``waves``). A matmul's or an element-wise kernel's pick depends only on its ops, the dtype and
the chip's rates, which recur from step to step (a serving table's steps share their token
counts), so those picks are memoised on those values; attention's depends on every sequence's
length and is worked out each step. Times in seconds, sizes in bytes, work in FLOP.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import numpy as np

from .kernels import Rates, op_kernel_candidates
from .waves import run_waves


class Pick(NamedTuple):
    """The fastest candidate of one kernel: one instance's figures, as ``simulate`` reports them."""

    tile: str
    blocks: int  # thread blocks of one instance
    blocks_per_sm: int
    smem_bytes: float  # shared memory one SM holds: blocks_per_sm x one block's
    flops: float  # tensor-core FLOP (padded tiles included)
    simt_flops: float  # CUDA-core FLOP
    hbm_bytes: float
    l2_bytes: float  # L2-to-SM bytes
    stages_smem: bool  # its L2 bytes are staged in shared memory
    time_s: float  # without the launch
    compute_s: float
    memory_s: float
    waves: int
    busy_s: np.ndarray  # per SM (read-only: memoised picks are shared)


_PICKS: dict = {}  # (kernel name, ops, dtype bytes, rates) -> Pick
_STORE = threading.Lock()  # one thread at a time adds and drops (a lookup needs no lock)
_PICKS_SIZE = 8192
"""Picks kept (the oldest dropped first; a hit does not reorder, which would hash the key
again): all of ``ipusim claims`` has about 6,700 distinct matmul and element-wise kernels; an
entry is about 1.6 KB (mostly its per-SM busy row), 13 MB when full."""


def clear_cache() -> None:
    """Forget the memoised picks (after changing a constant of ``gpu.params`` in place; the
    tests clear it around the plain wave reference)."""
    with _STORE:
        _PICKS.clear()


def cached() -> int:
    """Picks the memo holds."""
    return len(_PICKS)


def fastest(plan, s, r: Rates, fusion: str) -> list[Pick]:
    """The autotuner's pick for each ``(kernel name, ops)`` of ``plan`` (``kernel_plan``) of
    step ``s``: the candidate with the least time (the first such, in candidate order).

    Memo key of a matmul or element-wise kernel: its name, its ops (frozen, compared by value:
    shapes, FLOP and bytes), the step's dtype bytes and the rates (chip and efficiencies): every
    value ``op_kernel_candidates`` reads for it. Picks not memoised run through one wave loop.
    """
    picks = [None] * len(plan)
    keys = [None] * len(plan)
    cands, starts, todo = [], [], []
    for i, (kname, ops) in enumerate(plan):
        if ops[0].kind != "attention":
            key = (kname, ops, s.dtype_bytes, r)
            hit = _PICKS.get(key)
            if hit is not None:
                picks[i] = hit
                continue
            keys[i] = key
        todo.append(i)
        starts.append(len(cands))
        cands += op_kernel_candidates(ops, kname, s, r, fusion)
    if not todo:
        return picks
    starts.append(len(cands))
    t, comp, mem, waves, busy = run_waves(cands, r)
    for j, i in enumerate(todo):
        lo = starts[j]
        best = lo + int(np.argmin(t[lo : starts[j + 1]]))
        kern = cands[best]
        row = busy[best].copy()  # a copy: a view would keep every candidate's row alive
        row.flags.writeable = False
        picks[i] = pick = Pick(
            tile=kern.tile,
            blocks=sum(g[0] for g in kern.groups),
            blocks_per_sm=kern.blocks_per_sm,
            smem_bytes=kern.blocks_per_sm * kern.smem_per_block,
            flops=kern.flops,
            simt_flops=kern.simt_flops,
            hbm_bytes=kern.hbm_bytes,
            l2_bytes=sum(g[0] * g[2] for g in kern.groups) * r.sm_bw,
            stages_smem=kern.stages_smem,
            time_s=float(t[best]),  # Python floats: the same doubles, cheaper to multiply
            compute_s=float(comp[best]),
            memory_s=float(mem[best]),
            waves=int(waves[best]),
            busy_s=row,
        )
        if keys[i] is not None:
            with _STORE:
                _PICKS[keys[i]] = pick
                while len(_PICKS) > _PICKS_SIZE:
                    del _PICKS[next(iter(_PICKS))]
    return picks
