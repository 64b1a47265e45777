"""Tile machine (IPU style): map each op of a step onto the tiles, run it as BSP supersteps.

The model, in the order a step is simulated:

1. **Planning** (``ipusim.tileplan``). Every op of one layer is cut into pieces dealt to
   tiles at compile time; an op whose working set does not fit ``availableMemoryProportion``
   of a tile runs as several serial passes (matmuls over blocks of k, m or n; attention over
   key blocks with an online softmax). Each ``OpPlan`` says its partition, passes and block.
2. **Memory.** A tile can touch only its own SRAM (facts §1.4, GC-PGKR). Each tile holds
   *always-live* bytes (a code budget, 1/tiles of every layer's weights, the embedding
   rows it owns, the KV cache, the residual stream) and, while an op runs, that op's
   *temporary* bytes (its working set and the inputs it holds); temporaries are freed
   between ops (PopVision's not-always-live memory). Peak per tile = always-live + the
   largest single op's temporaries. More than ``sram_per_tile_bytes`` is an out-of-memory
   error, reported with the tile, the excess and what would make it fit; nothing is placed
   silently. A step that fits neither on chip nor by streaming its weights has
   ``fits=False`` and ``time_s = inf`` (the fit rule in ``ipusim.result``).
3. **Supersteps** (``ipusim.supersteps``). A superstep is sync, then the exchange that brings an op its inputs,
   then the op's compute (read cyclically, this is Graphcore's compute -> sync -> exchange
   order, facts §1.4 GC-MPO2). Compute cycles per tile are ``vertex overhead x pieces +
   max(FLOPs / FLOP-rate, SRAM bytes / SRAM rate)``; exchange cycles per tile are the larger
   of its received bytes over the per-tile exchange rate and the bytes sent by all tiles on
   its exchange bus over the bus's rate (``TILES_PER_EXCHANGE_BUS`` x the per-tile rate, so
   that all tiles together keep the chip's 8 TB/s; ASSUMPTION on how the bus is shared).
   Sent bytes are each input byte once (one send reaches every tile that needs it:
   multicast, ASSUMPTION), spread evenly over the tiles that hold the input.
   An op's inputs are taken to be spread evenly over all tiles by the op before it, so a
   tile already holds 1/tiles of what it needs and receives the rest (ASSUMPTION).
   A superstep lasts ``sync + max over tiles (exchange) + max over tiles (compute)``: the
   slowest tile sets the pace.
   Three calibrated parameters (``ipusim.tile_calibration``, each set once from measured IPU
   microbenchmarks) enter here: the exchange runs at ``EXCHANGE_EFFICIENCY`` of its rate, and
   an AMP (matmul) compute phase costs ``AMP_PHASE_OVERHEAD_CYCLES`` more plus the rearranging
   of the bytes the tile received, at ``REARRANGE_BYTES_PER_CYCLE``.
4. **Layers.** The ops of one layer are simulated once and multiplied by ``Op.count``;
   the trace in ``TileProfile`` shows one instance of each op in program order.
5. **Streaming.** When the weights do not fit (``weights="auto"``), they stay in off-chip
   Streaming Memory; each op instance first copies its weights in at
   ``offchip_bandwidth_bytes_per_s``, not overlapped with compute (ASSUMPTION: no double
   buffering; Poplar's copies are explicit program steps, facts §1.2 GC-PG). The copy lands
   in the layout the weights are stored in on chip, so a matmul still pays its weight gather
   in the exchange (ASSUMPTION); while its op runs the copy is a temporary on the tiles
   that hold it. The embedding rows a batch needs are streamed likewise.

6. **Energy.** ``supersteps.energy_split`` prices what the supersteps did (``ipusim.energy.tile_split``):
   FLOPs, SRAM loads and rearranged bytes, exchange bytes sent and received, streamed bytes.

Constants from facts §1.4 are named with their source, here and in ``ipusim.supersteps``. Assumptions are marked.
Only forward, prefill and decode steps are mapped (training is left to a later module).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import NamedTuple

import numpy as np

from ._validate import choice
from .hardware import TileChip
from .hardware import chip as _chip
from .result import StepResult
from .supersteps import Program, energy_split, run_program
from .tileplan import (  # noqa: F401 (re-exported: the planner's names, for callers of tiles)
    AVAILABLE_MEMORY_PROPORTION,
    PARTIAL_BYTES,
    OpPlan,
    Phase,
    always_live_other_bytes,
    budget_bytes,
    map_elementwise,
    map_matmul,
    plan_matmul,
    plan_step,
)
from .tileplan.base import placed_bytes
from .tileplan.search import plan_cache
from .workloads import Step

WEIGHT_MODES = ("auto", "on_chip", "stream")


def _tile_chip(c, fn: str) -> TileChip:
    """``c`` as a TileChip, or a ValueError naming the function and the chip."""
    c = _chip(c)
    if not isinstance(c, TileChip):
        raise ValueError(
            f"tiles.{fn} needs a tile chip, got {c.name!r} ({type(c).__name__}); "
            "use ipusim.machine.simulate for any chip"
        )
    return c


def _step_arg(s) -> Step:
    if not isinstance(s, Step):
        raise ValueError(
            f"s must be a workloads.Step (from ipusim.step(...)), got {type(s).__name__}"
        )
    return s


def map_step(c, s: Step, *, seed: int = 0) -> list[OpPlan]:
    """Lay every op of ``s`` out over the tiles of ``c`` (one ``OpPlan`` per op; see
    ``ipusim.tileplan``)."""
    c = _tile_chip(c, "map_step")
    _step_arg(s)
    return plan_step(c, s, seed=seed)


@dataclass
class TileProfile:
    """Everything the tile simulation knows about one step: the views PopVision would show.

    Memory arrays are bytes per tile; ``always_live`` holds the code budget, weights, KV
    cache and other parameters, ``temporary`` the largest per-op temporaries (plus the
    residual stream); ``peak_op`` names the op behind each tile's temporary peak.
    """

    chip: TileChip
    step: Step
    plans: list
    program: Program
    weights: str  # "on-chip" or "streamed"
    always_live: np.ndarray
    temporary: np.ndarray
    peak_op: np.ndarray
    result: StepResult = field(repr=False, default=None)
    weight_bytes: np.ndarray = None  # per tile, part of always_live (zero when streamed)

    def memory_breakdown(self) -> dict:
        """Max and mean bytes per tile by category: code budget, weights, other always-live
        (biases, norms, KV cache), temporaries, and the peak total."""
        w = np.zeros_like(self.always_live) if self.weight_bytes is None else self.weight_bytes
        code = np.full_like(self.always_live, self.chip.code_bytes_per_tile)
        parts = {
            "code": code,
            "weights": w,
            "other_always_live": self.always_live - code - w,
            "temporary": self.temporary,
            "peak": self.memory,
        }
        return {k: {"max": float(v.max()), "mean": float(v.mean())} for k, v in parts.items()}

    @property
    def memory(self) -> np.ndarray:
        """Peak bytes per tile."""
        return self.always_live + self.temporary

    @property
    def idle_s(self) -> np.ndarray:
        """Seconds each tile waits (at syncs, for the slowest tile) over the step (for a step
        that does not fit: over its as-if-unlimited-memory time)."""
        return (
            self.result.extra.get("time_if_unlimited_s", self.result.time_s)
            - self.result.unit_busy_s
        )

    def fullest_tiles(self, n: int = 5) -> list[dict]:
        """The ``n`` tiles with the most bytes: tile, bytes, always-live, temporary, op at peak."""
        order = np.argsort(-self.memory, kind="stable")[:n]
        return [
            {
                "tile": int(t),
                "bytes": float(self.memory[t]),
                "always_live": float(self.always_live[t]),
                "temporary": float(self.temporary[t]),
                "op": self.plans[self.peak_op[t]].op.name,
            }
            for t in order
        ]

    def op_table(self) -> list[dict]:
        """Per op: partition, pieces per pass, serial passes (and over which axis), the
        largest per-tile block, temporary bytes per tile (max; working set and held
        inputs), seconds by phase, bytes received per tile (max)."""
        r = self.result
        return [
            {
                "op": p.op.name,
                "partition": p.partition,
                "pieces": p.pieces,
                "passes": p.passes,
                "pass_axis": p.pass_axis,
                "block": tuple(float(b) for b in p.block),
                "temp_bytes_max": p.temp_bytes,
                "working_set_bytes_max": p.working_set_bytes,
                "time_s": float(r.op_time_s[i]),
                **{k: float(v[i]) for k, v in r.op_split.items()},
                "exchange_bytes_max": float(p.exchange_bytes.max()),
            }
            for i, p in enumerate(self.plans)
        ]

    def __repr__(self):
        return f"TileProfile({self.result!r})"


def _memory(c: TileChip, s: Step, plans: list, streamed: bool = False):
    """Per-tile bytes: (always-live other than weights, placed weights, temporaries, and every
    op's temporaries, (ops, tiles): ``argmax(axis=0)`` of it is the op at each tile's peak).

    Always-live: the code budget, biases and norm parameters and the KV cache (prefill,
    decode), spread evenly, and the residual stream (tokens x d_model), live throughout and
    spread over all tiles. Placed weights: every op's weight blocks (always-live when on
    chip). Temporaries: per tile, the largest single op's (freed between ops); when weights
    stream, an op's temporaries include its copied-in weights. Capacity per tile is then
    ``always-live + largest temporaries``.
    """
    placed = placed_bytes(plans)
    temps = np.empty((len(plans), c.tiles))
    for i, p in enumerate(plans):
        temps[i] = p.temp
        if streamed and p.op.kind == "matmul":
            temps[i] += p.weights / p.op.count
    base = c.code_bytes_per_tile + always_live_other_bytes(c, s, placed)
    return base, placed, temps.max(axis=0), temps


def _stream_fits(c: TileChip, s: Step, plans: list) -> bool:
    """Whether the step's peak fits the tiles with its weights streamed."""
    s_base, _, s_temp, _ = _memory(c, s, plans, streamed=True)
    return bool((s_base + s_temp).max() <= c.sram_per_tile_bytes)


def tile_memory_batch_limit(c, s: Step, *, weights_on_chip: bool = True, seed: int = 0) -> int:
    """Most sequences of ``s`` (its first ones, same padding) whose step fits the tiles; 0 if none.

    ``weights_on_chip``: the limit with every weight on chip (``simulate(..., weights="on_chip")``
    fits exactly up to it); False: with weights streamed (``weights="stream"``). Bisection over
    the batch, planning each candidate (temporaries do not scale linearly with tokens,
    because the planner changes partitions and passes); it assumes fitting is monotone in
    the batch.
    """
    c = _tile_chip(c, "tile_memory_batch_limit")
    _step_arg(s)

    def fits(b):
        sb = _sub_step(s, b)
        base, placed, temp, _ = _memory(
            c, sb, map_step(c, sb, seed=seed), streamed=not weights_on_chip
        )
        return (base + (placed if weights_on_chip else 0.0) + temp).max() <= c.sram_per_tile_bytes

    lo, hi = 0, s.batch
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _sub_step(s: Step, b: int) -> Step:
    from .workloads import step as make_step

    return make_step(
        s.model, s.lengths[:b], phase=s.phase, pad_to=s.row_len or None, dtype_bytes=s.dtype_bytes
    )


def _fit_message(c: TileChip, s: Step, prof: TileProfile, stream_s: float) -> str:
    mem, sram = prof.memory, c.sram_per_tile_bytes
    t = int(np.argmax(mem))
    op = prof.plans[prof.peak_op[t]].op.name
    lines = [
        f"Out of memory on tile {t}: {mem[t]:,.0f} bytes used but tiles only have {sram:,} "
        f"bytes ({mem[t] - sram:,.0f} over; always-live {prof.always_live[t]:,.0f}, "
        f"temporaries {prof.temporary[t]:,.0f} at op {op})."
    ]
    best = (
        tile_memory_batch_limit(c, s, weights_on_chip=prof.weights == "on-chip")
        if s.batch > 1
        else 0
    )
    if best:
        lines.append(
            f"Would fit with {best} sequences per batch or fewer "
            f"({_sub_step(s, best).tokens:,} tokens; now {s.batch}, {s.tokens:,} tokens)."
        )
    else:
        lines.append("No batch of these sequences fits on one chip.")
    need = s.model.weight_bytes(s.dtype_bytes) + (mem - prof.always_live).sum()
    lines.append(
        f"Splitting over at least {max(2, math.ceil(need / c.data_bytes))} chips (layers pipelined) "
        "gives it room."
    )
    if prof.weights == "on-chip" and c.offchip_bytes > 0:
        s_base, _, s_temp, _ = _memory(c, s, prof.plans, streamed=True)
        stream_peak = (s_base + s_temp).max()
        verdict = (
            "then it fits"
            if stream_peak <= sram
            else f"not enough alone: temporaries and code still need {stream_peak:,.0f} bytes on a tile"
        )
        lines.append(
            f"Streaming weights from off-chip DRAM adds about {stream_s * 1e3:,.2f} ms per step "
            f"({verdict})."
        )
    return " ".join(lines)


NOT_PLANNED_FIELDS = (
    "name",
    "clock_hz",
    "offchip_bytes",
    "offchip_bandwidth_bytes_per_s",
    "link_bandwidth_bytes_per_s",
    "power_w",
    "process_nm",
)
"""Fields of a ``TileChip`` that neither the planner (``plan_step``) nor the cycle count
(``run_program``) reads: both work in cycles and bytes per tile, and the clock, Streaming
Memory, links, power and process only enter afterwards (seconds, streaming, energy). Chips
that differ only in these share one plan and one program (tests/test_tiles_memo.py checks it)."""

_PLANNED_FIELDS = tuple(
    f.name for f in fields(TileChip) if f.compare and f.name not in NOT_PLANNED_FIELDS
)


def _plan_key(c: TileChip) -> tuple:
    return tuple(getattr(c, f) for f in _PLANNED_FIELDS)


def _step_key(s: Step) -> tuple:
    """Every field of ``s``, arrays as (dtype, shape, bytes): equal keys, equal steps."""
    return tuple(
        (v.dtype.str, v.shape, v.tobytes()) if isinstance(v, np.ndarray) else v
        for v in (getattr(s, f.name) for f in fields(Step))
    )


class _Keyed:
    """A value passed through a memoised function under a hashable key of its own."""

    __slots__ = ("key", "value")

    def __init__(self, key, value):
        self.key, self.value = key, value

    def __hash__(self):
        return hash(self.key)

    def __eq__(self, other):
        return isinstance(other, _Keyed) and self.key == other.key


@plan_cache(maxsize=16)
def _planned(c: _Keyed, s: _Keyed, seed: int):
    """(plans, program) of step ``s.value`` on chip ``c.value``, read-only, memoised by the
    chip's planned fields: a sweep of Streaming Memory or link bandwidth, clock or power plans
    each step once (``clear_plan_cache`` empties it with the planner's caches)."""
    plans = map_step(c.value, s.value, seed=seed)
    prog = run_program(c.value, plans)
    # every array a shared plan holds, not only the program's: a caller's edit of one chip's
    # plan would otherwise change the plan every chip with the same planned fields is handed
    for p in plans:
        p.freeze()
    prog.freeze()
    return plans, prog


class _Timing(NamedTuple):
    """What both ``profile`` and ``timed`` work out of a step (``_timed``)."""

    plans: list
    prog: Program
    streamed: bool
    placed: np.ndarray  # weight bytes per tile
    temporary: np.ndarray
    op_temps: np.ndarray  # (ops, tiles) each op's temporaries: argmax(axis=0) is the peak op
    onchip_peak: float  # the fullest tile's bytes with the weights on chip
    stream_s_if: float  # seconds to stream the weights, were they streamed
    op_split: dict
    op_time: np.ndarray
    time_if_unlimited: float
    always: np.ndarray
    mem: np.ndarray
    fits: bool


def _timed(c: TileChip, s: Step, weights: str, seed: int) -> _Timing:
    """What both ``profile`` and ``timed`` work out: the plans and program, the weights mode,
    the memory per tile and the time (the arithmetic of ``profile``, in its order)."""
    cfg, dt, T = s.model, s.dtype_bytes, c.tiles
    plans, prog = _planned(_Keyed(_plan_key(c), c), _Keyed(_step_key(s), s), seed)

    base, placed, temporary, op_temps = _memory(c, s, plans)
    onchip_peak = (base + placed + temporary).max()
    stream_bytes = sum(p.stream_bytes * p.op.count for p in plans)
    stream_s_if = stream_bytes / c.offchip_bandwidth_bytes_per_s if c.offchip_bytes else 0.0
    mode = weights
    if weights == "auto":  # stream only when that is what makes the step fit
        can_stream = c.offchip_bytes >= cfg.weight_bytes(dt)
        if onchip_peak > c.sram_per_tile_bytes and can_stream and _stream_fits(c, s, plans):
            mode = "stream"
        else:  # fits on chip, or fits nowhere (then time_s = inf below)
            mode = "on_chip"
    streamed = mode == "stream"
    if streamed:
        base, placed, temporary, op_temps = _memory(c, s, plans, streamed=True)
    always = np.full(T, base) + (0.0 if streamed else placed)

    # Time
    cyc_comp = prog.slowest[:, 0] * prog.count
    cyc_exch = prog.slowest[:, 1] * prog.count
    cyc_sync = prog.sync_cycles * prog.count
    n_ops, hz = len(plans), c.clock_hz
    op_split = {
        "compute": np.bincount(prog.op_index, cyc_comp, n_ops) / hz,
        "sync": np.bincount(prog.op_index, cyc_sync, n_ops) / hz,
        "exchange": np.bincount(prog.op_index, cyc_exch, n_ops) / hz,
    }
    if streamed:
        op_split["streaming"] = (
            np.array([p.stream_bytes * p.op.count for p in plans]) / c.offchip_bandwidth_bytes_per_s
        )
    op_time = sum(op_split.values())
    time_if_unlimited = float(op_time.sum())
    mem = always + temporary
    fits = bool(mem.max() <= c.sram_per_tile_bytes)
    return _Timing(
        plans,
        prog,
        streamed,
        placed,
        temporary,
        op_temps,
        onchip_peak,
        stream_s_if,
        op_split,
        op_time,
        time_if_unlimited,
        always,
        mem,
        fits,
    )


def _checked_step(c, s: Step, weights: str) -> TileChip:
    """The tile chip ``c`` names, once ``s`` and ``weights`` are known to be simulable on it."""
    c = _tile_chip(c, "simulate")
    _step_arg(s)
    choice("weights", weights, WEIGHT_MODES)
    if s.phase == "train":
        raise ValueError(
            "tiles maps forward, prefill and decode steps; phase 'train' is not modelled"
        )
    if weights == "stream" and c.offchip_bytes < s.model.weight_bytes(s.dtype_bytes):
        raise ValueError(
            f"chip {c.name!r} has {c.offchip_bytes / 1e9:g} GB of off-chip DRAM, too little to "
            f"stream {s.model.name}'s {s.model.weight_bytes(s.dtype_bytes) / 1e9:.2f} GB of weights from"
        )
    return c


def timed(c, s: Step, *, weights: str = "auto", seed: int = 0) -> tuple[float, bool]:
    """(seconds, weights stream) of step ``s`` on tile chip ``c``: ``simulate``'s ``time_s``
    (``inf`` when the step does not fit), the same double, and whether its weights stream from
    off-chip DRAM, without the rest of the profile (per-tile busy time, energy, the result's
    records and messages): for callers that read only these (the serving tables' steps)."""
    c = _checked_step(c, s, weights)
    tm = _timed(c, s, weights, seed)
    split = tm.op_split
    streams = "streaming" in split and float(split["streaming"].sum()) > 0.0
    return (tm.time_if_unlimited if tm.fits else math.inf), streams


def step_times(c, s: Step, *, weights: str = "auto", seed: int = 0) -> tuple:
    """(time_s, fits, split, op_names, op_time_s) of ``simulate(c, s, weights=weights,
    seed=seed)``, the same values, without the rest of the profile (per-tile busy time, energy,
    messages): for callers that time a step's ops and read only these (training's layer times)."""
    c = _checked_step(c, s, weights)
    tm = _timed(c, s, weights, seed)
    split = {k: float(v.sum()) for k, v in tm.op_split.items()}
    time_s = tm.time_if_unlimited if tm.fits else math.inf
    return time_s, tm.fits, split, tuple(p.op.name for p in tm.plans), tm.op_time


def profile(
    c, s: Step, *, weights: str = "auto", seed: int = 0, explain: bool = True
) -> TileProfile:
    """Map and run step ``s`` on tile chip ``c``; return the full per-tile profile.

    ``weights``: "auto" keeps weights on chip if the step fits, else streams them from
    off-chip DRAM (when the chip has any); "on_chip" never streams (a model that does not fit
    is reported as such); "stream" always streams. ``seed`` draws the embedding token ids.
    ``explain=False`` skips the out-of-memory explanation of a step that does not fit (it
    searches the largest batch that fits); callers that only read ``fits`` and ``time_s``
    (the serving tables) save that search.
    """
    c = _checked_step(c, s, weights)
    cfg, T, hz = s.model, c.tiles, c.clock_hz
    tm = _timed(c, s, weights, seed)
    plans, prog, streamed, always = tm.plans, tm.prog, tm.streamed, tm.always
    temporary, op_split, mem, fits = tm.temporary, tm.op_split, tm.mem, tm.fits
    time_if_unlimited = tm.time_if_unlimited
    split = {k: float(v.sum()) for k, v in op_split.items()}
    busy = ((prog.comp + prog.exch) * prog.count[:, None]).sum(axis=0) / hz

    prof = TileProfile(
        c,
        s,
        plans,
        prog,
        "streamed" if streamed else "on-chip",
        always,
        temporary,
        tm.op_temps.argmax(axis=0),
        weight_bytes=np.zeros(T) if streamed else tm.placed,
    )
    # The fit rule (machine.StepResult): a step that fits nowhere has no honest time.
    time_s = time_if_unlimited if fits else math.inf
    if not fits:
        msg = (
            _fit_message(c, s, prof, tm.stream_s_if)
            if explain
            else "does not fit (explanation not asked for)"
        )
    elif streamed:
        msg = (
            f"Weights do not fit on chip ({tm.onchip_peak:,.0f} bytes on the fullest tile); they stream "
            f"from off-chip DRAM, adding {split['streaming'] * 1e3:,.2f} ms per step."
        )
    else:
        msg = ""
    over = [p.op.name for p in plans if p.over_budget]
    if over:
        msg += (" " if msg else "") + (
            f"Temporaries of {', '.join(over)} exceed availableMemoryProportion "
            f"{AVAILABLE_MEMORY_PROPORTION} of a tile."
        )
    esplit = energy_split(prog, plans, streamed, process_nm=c.process_nm)
    prof.result = StepResult(
        chip=c.name,
        kind="tile",
        model=cfg.name,
        phase=s.phase,
        batch=s.batch,
        real_tokens=s.real_tokens,
        tokens=s.tokens,
        time_s=time_s,
        split=split,
        op_names=tuple(p.op.name for p in plans),
        op_time_s=tm.op_time,
        op_split=op_split,
        unit_busy_s=busy,
        unit_memory_bytes=mem,
        memory_limit_bytes=float(c.sram_per_tile_bytes),
        fits=fits,
        fit_message=msg,
        energy_j=sum(esplit.values()) if fits else math.inf,
        energy_split=esplit,
        board_power_w=c.power_w,
        extra={
            "weights": prof.weights,
            "cycles": time_s * hz,
            "time_if_unlimited_s": time_if_unlimited,
            "supersteps": int(prog.count.sum()),
            "passes": {p.op.name: p.passes for p in plans if p.passes > 1},
            "memory_always_live_max_bytes": float(always.max()),
            "memory_temporary_max_bytes": float(temporary.max()),
        },
    )
    return prof


def single_pass_time_s(c, s: Step, *, seed: int = 0) -> float:
    """Seconds step ``s`` would take on chip ``c`` with weights on chip if every op ran in one
    pass (temporaries unconstrained, whether or not they fit): ``simulate``'s on-chip time
    minus this is what the serial passes cost."""
    c = _tile_chip(c, "single_pass_time_s")
    _step_arg(s)
    prog = run_program(c, plan_step(c, s, seed=seed, unlimited=True))
    return float((prog.superstep_cycles * prog.count).sum() / c.clock_hz)


def simulate(c, s: Step, **kwargs) -> StepResult:
    """Simulate step ``s`` on tile chip ``c``; a ``machine.StepResult`` (see ``profile``)."""
    return profile(c, s, **kwargs).result


def matmul(c, m: int, k: int, n: int, *, dtype_bytes: int = 2) -> TileProfile:
    """One (m x k) @ (k x n) matmul on the chip's tiles, as a one-op program (for lessons).

    The two operands are tensors of the program, always live and spread evenly over the
    tiles: the input (m x k) and the weights (k x n), of ``dtype_bytes`` each. The output
    (m x n) is written into the output blocks (or FP32 partials) of the planner's working set,
    which comes on top, within ``availableMemoryProportion`` of a tile (the planner, like
    Poplar's, budgets the temporaries alone). The result's split has compute, sync and
    exchange; its ``extra`` says the planner's partition, passes, block and temporary bytes.
    """
    from ._validate import positive
    from .workloads import matmul_op

    c = _tile_chip(c, "matmul")
    m, k, n = (positive(nm, v, integer=True) for nm, v in (("m", m), ("k", k), ("n", n)))
    dtype_bytes = positive("dtype_bytes", dtype_bytes, integer=True)
    op = matmul_op("matmul", 1, m, k, n, dtype_bytes)
    plan = map_matmul(op, c, dtype_bytes)
    prog = run_program(c, [plan])
    esplit = energy_split(prog, [plan], False, process_nm=c.process_nm)
    hz = c.clock_hz
    split = {
        "compute": (prog.slowest[:, 0] * prog.count).sum() / hz,
        "sync": prog.count.sum() * c.sync_cycles / hz,
        "exchange": (prog.slowest[:, 1] * prog.count).sum() / hz,
    }
    t_unlimited = float(sum(split.values()))
    always = c.code_bytes_per_tile + plan.weights + m * k * dtype_bytes / c.tiles  # + the input
    mem = always + plan.temp
    fits = bool(mem.max() <= c.sram_per_tile_bytes)
    t = t_unlimited if fits else math.inf  # the fit rule (machine.StepResult)
    msg = (
        ""
        if fits
        else (
            f"Out of memory: {mem.max():,.0f} bytes on the fullest tile, tiles have "
            f"{c.sram_per_tile_bytes:,}; a smaller m, k or n (or more chips) would fit."
        )
    )
    res = StepResult(
        chip=c.name,
        kind="tile",
        model=f"matmul {m}x{k}x{n}",
        phase="forward",
        batch=1,
        real_tokens=m,
        tokens=m,
        time_s=t,
        split=split,
        op_names=("matmul",),
        op_time_s=np.array([t_unlimited]),
        op_split={k_: np.array([v]) for k_, v in split.items()},
        unit_busy_s=((prog.comp + prog.exch) * prog.count[:, None]).sum(axis=0) / hz,
        unit_memory_bytes=mem,
        memory_limit_bytes=float(c.sram_per_tile_bytes),
        fits=fits,
        fit_message=msg,
        energy_j=sum(esplit.values()) if fits else math.inf,
        energy_split=esplit,
        board_power_w=c.power_w,
        extra={
            "partition": plan.partition,
            "passes": plan.passes,
            "pass_axis": plan.pass_axis,
            "block": plan.block,
            "temp_bytes_max": plan.temp_bytes,
            "cycles": t * hz,
            "time_if_unlimited_s": t_unlimited,
        },
    )
    return TileProfile(
        c, None, [plan], prog, "on-chip", always, plan.temp, np.zeros(c.tiles, int), res
    )


def elementwise_s(
    c,
    elements: int,
    *,
    flops_per_element: float,
    load_bytes_per_element: float,
    stream_bytes_per_element: float = 0.0,
) -> float:
    """Seconds of one element-wise op in place over ``elements`` values spread evenly over the
    tiles of ``c`` (an optimizer update): one superstep (sync, then each tile's vector FLOPs or
    its ``load_bytes_per_element`` of SRAM traffic, whichever is slower, ``run_program``), plus,
    when its operands live in Streaming Memory, ``stream_bytes_per_element`` copied in and out at
    ``offchip_bandwidth_bytes_per_s`` and not overlapped (the streaming rule of ``profile``)."""
    from ._validate import positive
    from .workloads import Op

    c = _tile_chip(c, "elementwise_s")
    elements = positive("elements", elements, integer=True)
    fpe = positive("flops_per_element", flops_per_element, allow_zero=True)
    lpe = positive("load_bytes_per_element", load_bytes_per_element, allow_zero=True)
    spe = positive("stream_bytes_per_element", stream_bytes_per_element, allow_zero=True)
    if spe and not c.offchip_bandwidth_bytes_per_s:
        raise ValueError(f"chip {c.name!r} has no Streaming Memory to stream operands from")
    op = Op("elementwise", "activation", 1, fpe * elements, 0.0, lpe * elements, 0.0)
    prog = run_program(c, [map_elementwise(op, c, elements, lpe)])
    cycles = float((prog.superstep_cycles * prog.count).sum())
    stream = spe * elements / c.offchip_bandwidth_bytes_per_s if spe else 0.0
    return cycles / c.clock_hz + stream
