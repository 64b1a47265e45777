"""The planner's shared vocabulary: dealing pieces to tiles, a superstep, an op's plan, the budget.

An op is cut into pieces (rows of a *piece table*, one column per cost: FLOP, SRAM bytes
streamed, bytes received and sent in the exchange before the compute, working-set bytes,
weight bytes) and piece ``i`` goes to tile ``i * tiles // pieces`` (``deal``; the
``_distribute`` kernel; its plain-Python reference is in ``tests/tileplan_reference.py``). The per-tile
sums make a ``Phase`` (one superstep); an op's supersteps and bytes make its ``OpPlan``. An
op's working set is held to ``budget_bytes`` per tile.

Units: bytes, FLOP, cycles; arrays are per tile.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
from numba import njit

from ..hardware import TileChip
from ..workloads import Op

AVAILABLE_MEMORY_PROPORTION = 0.6  # share of tile SRAM an op's working set may use (POPLIBS-OPT)
PARTIAL_BYTES = 4  # ASSUMPTION: matmul partial sums and the attention accumulator in FP32 (AMP accumulates in FP32)
# ASSUMPTION: non-matmul ops (softmax, norms, GELU, reductions) run on the vector unit at the
# FP32 rate (fp32_flops_per_cycle_per_tile); matmuls and attention products use the AMP at the
# rate of their operands (``TileChip.amp_flops_per_cycle_per_tile``: FP16 or FP32).


# ------------------------------------------------------------------------------------------
# Dealing pieces to tiles
# ------------------------------------------------------------------------------------------


@njit(cache=True, error_model="numpy")
def _distribute(work, rep, n_tiles, out):
    """Deal pieces to tiles in order: piece i goes to tile (i * n_tiles) // P; sum per tile.

    The pieces are the rows of ``work``, each repeated ``rep`` times (``np.repeat(work, rep,
    axis=0)`` without building it: piece i is row ``i // rep``, P = rows x rep); one kernel
    deals both whole piece tables (``rep`` 1) and attention's alike pieces (one compile).
    Preconditions: ``work`` is (B, K) float64 with B >= 1, ``rep >= 1``; ``out`` is
    (n_tiles, K + 1) zeros; the last column of ``out`` receives the number of pieces per tile.
    """
    B, K = work.shape
    P = B * rep
    for i in range(P):
        t = (i * n_tiles) // P
        row = i // rep
        for j in range(K):
            out[t, j] += work[row, j]
        out[t, K] += 1.0


def deal(pieces: np.ndarray, n_tiles: int, rep: int = 1) -> np.ndarray:
    """Per-tile sums of the (P, K) piece table ``pieces`` dealt to ``n_tiles`` tiles, and the
    pieces per tile as a last column: (n_tiles, K + 1). ``rep``: each row of ``pieces`` stands
    for ``rep`` consecutive alike pieces (the table ``np.repeat(pieces, rep, axis=0)``)."""
    pieces = np.ascontiguousarray(pieces, dtype=np.float64)
    out = np.zeros((n_tiles, pieces.shape[1] + 1))
    _distribute(pieces, rep, n_tiles, out)
    return out


# Columns of a piece table: what one piece costs and needs.
_COLS = ("flops", "load", "recv", "send", "temp", "weights")


PHASE_ARRAYS = ("flops", "load", "vertices", "recv", "send")  # a Phase's per-tile arrays


@dataclass
class Phase:
    """One superstep of one op instance: per-tile arrays of length ``tiles``."""

    op: str
    label: str  # "matmul", "reduce", "attention", ...
    amp: bool  # True: matmul unit (AMP) at the rate of ``dtype_bytes``; False: vector FP32 rate
    flops: np.ndarray  # FLOP per tile
    load: np.ndarray  # SRAM bytes streamed per tile
    vertices: np.ndarray  # pieces (vertices) per tile
    recv: np.ndarray  # bytes received in the exchange before the compute
    send: np.ndarray  # bytes sent in that exchange
    dtype_bytes: int = (
        2  # operand bytes of an AMP phase: 2 runs at the FP16 rate, 4 at the FP32 rate
    )


@dataclass
class OpPlan:
    """How one op is laid out over the tiles. Byte arrays are per tile."""

    op: Op
    partition: str  # human-readable partition
    pieces: int  # pieces per pass
    phases: list  # supersteps of one instance, in order (all passes)
    weights: np.ndarray  # always-live weight bytes, all instances
    temp: np.ndarray  # peak temporary bytes while one instance runs (working set + live inputs)
    stream_bytes: float = 0.0  # bytes copied from off-chip DRAM per instance (streaming mode)
    over_budget: bool = (
        False  # working set exceeds availableMemoryProportion even at the most passes tried
    )
    passes: int = 1  # serial passes per instance
    pass_axis: str = ""  # "m", "n", "k" (matmul), "keys" (attention) or "" (one pass)
    block: tuple = ()  # largest per-tile block: (m, k, n) rows x contraction x columns; attention (rows, keys)
    working_set_bytes: float = 0.0  # largest per-tile working set (held to the budget)
    budget_bytes: float = 0.0  # the working-set budget the planner held this op to, per tile

    @property
    def exchange_bytes(self) -> np.ndarray:
        """Bytes each tile receives per instance (all passes)."""
        return sum(p.recv for p in self.phases)

    @property
    def temp_bytes(self) -> float:
        """Largest per-tile temporary bytes of one instance."""
        return float(self.temp.max())

    def freeze(self) -> None:
        """Make every array the plan holds read-only: ``weights``, ``temp`` and each phase's
        ``PHASE_ARRAYS`` (a phase repeated over passes once). Memoised plans are handed to
        every caller that asks for the same plan, so none may change what the others read.
        A plan frozen once is not walked again (a memoised plan is handed out many times)."""
        if self.__dict__.get("_frozen"):
            return
        phases = {id(f): f for f in self.phases}.values()
        for a in (self.weights, self.temp, *(getattr(f, k) for f in phases for k in PHASE_ARRAYS)):
            if isinstance(a, np.ndarray):
                a.flags.writeable = False
        self._frozen = True

    def supersteps(self) -> list:
        """(phase, times it runs in one instance) of each distinct phase, in order of first
        appearance (a pass repeated is the same Phase object); kept once the plan is frozen."""
        got = self.__dict__.get("_supersteps")
        if got is not None:
            return got
        if len(self.phases) == 1:
            out = [(self.phases[0], 1)]
        else:
            ids = list(map(id, self.phases))
            by_id = dict(zip(ids, self.phases, strict=True))
            out = [(by_id[k], n) for k, n in Counter(ids).items()]  # in order of first appearance
        if self.__dict__.get("_frozen"):
            self._supersteps = out
        return out

    def with_budget(self, budget: float) -> OpPlan:
        """This plan, its ``budget_bytes`` set to ``budget``: a copy sharing every array and
        the list of phases (read-only as this plan's are, when it is frozen)."""
        out = object.__new__(type(self))  # a shallow copy (dataclasses.replace re-runs __init__)
        out.__dict__.update(self.__dict__)
        out.budget_bytes = float(budget)
        if self.__dict__.get("_frozen"):
            out._supersteps = self.supersteps()
        return out


def placed_bytes(plans: list) -> np.ndarray:
    """Weight bytes per tile of all ``plans``: ``sum(p.weights for p in plans)``, the same
    additions in the same order, into one array (no new array per plan)."""
    if not plans:
        return 0
    total = np.array(plans[0].weights, dtype=np.float64)  # a copy: 0 + the first, as sum() adds
    for p in plans[1:]:
        np.add(total, p.weights, out=total)
    return total


def dealt_phase(op, label, amp, per_tile, dtype_bytes: int = 2) -> Phase:
    """A superstep from dealt per-tile sums; sends are spread evenly over all tiles (the
    op's input is spread over all of them). ``dtype_bytes``: operand bytes (the AMP's rate)."""
    f, ld, rv, sd = (per_tile[:, i] for i in range(4))
    return Phase(
        op,
        label,
        amp,
        f,
        ld,
        per_tile[:, -1],
        rv,
        np.full(sd.size, sd.sum() / sd.size),
        dtype_bytes,
    )


def budget_bytes(c: TileChip) -> float:
    """Bytes of one tile an op's working set may use: ``AVAILABLE_MEMORY_PROPORTION`` x SRAM."""
    return AVAILABLE_MEMORY_PROPORTION * c.sram_per_tile_bytes
