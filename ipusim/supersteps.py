"""Bulk-synchronous supersteps of a planned program on a tile chip: cycles per tile and energy.

``run_program`` takes the plans of ``ipusim.tileplan`` (each op cut into pieces dealt to the
tiles, as one or more serial passes) and times their supersteps. A superstep is sync, then the
exchange that brings an op its inputs, then the op's compute (Graphcore's compute -> sync ->
exchange order read cyclically, facts §1.4 GC-MPO2):

* compute cycles per tile: ``vertex overhead x pieces + max(FLOPs / FLOP-rate, SRAM bytes /
  SRAM rate)``, in the Numba kernel ``_superstep_cycles`` (its plain-Python reference is
  ``tests/tiles_reference.superstep_cycles``);
* exchange cycles per tile: the larger of its received bytes over the per-tile exchange rate and
  the bytes sent by all tiles on its exchange bus over the bus's rate
  (``TILES_PER_EXCHANGE_BUS`` x the per-tile rate; ASSUMPTION on how the bus is shared);
* a superstep lasts ``sync + max over tiles (exchange) + max over tiles (compute)``.

Three calibrated parameters (``ipusim.tile_params``, set by ``ipusim.tile_calibration`` from
measured IPU microbenchmarks) enter here: the exchange runs at ``EXCHANGE_EFFICIENCY`` of its
rate, and an AMP (matmul) compute phase costs ``AMP_PHASE_OVERHEAD_CYCLES`` more plus the
rearranging of the bytes the tile received, at ``REARRANGE_BYTES_PER_CYCLE``. ``energy_split``
prices what the supersteps did (``ipusim.energy.tile_split``). ``ipusim.tiles`` runs a whole
step through these (memory, fit, streaming and the result).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import energy as _energy
from . import tile_params as _cal
from .hardware import TileChip
from .tileplan.base import PHASE_ARRAYS as _PHASE_ARRAYS

TILES_PER_EXCHANGE_BUS = 2  # tiles sharing one exchange bus for sending (UNATTR-IPU21, conf. L)


# ------------------------------------------------------------------------------------------
# The superstep kernel (its plain-Python reference is in tests/tiles_reference.py)
# ------------------------------------------------------------------------------------------


@njit(cache=True, error_model="numpy")
def _superstep_cycles(
    flops,
    load,
    vertices,
    recv,
    send,
    flop_rate,
    sram_rate,
    x_rate,
    vertex_cycles,
    bus,
    out_comp,
    out_exch,
    out_max,
):
    """Per-tile compute and exchange cycles of S supersteps over T tiles.

    Preconditions: ``flops, load, vertices, recv, send, out_comp, out_exch`` are (S, T)
    float64; ``flop_rate`` is (S,) FLOP/cycle/tile, all > 0; ``sram_rate, x_rate > 0``;
    ``bus >= 1``; ``out_max`` is (S, 2): column 0 the slowest tile's compute, 1 its exchange.
    """
    S, T = flops.shape
    for s in range(S):
        mc = 0.0
        mx = 0.0
        for t in range(T):
            c = 0.0
            if vertices[s, t] > 0.0:
                c = max(flops[s, t] / flop_rate[s], load[s, t] / sram_rate)
                c += vertices[s, t] * vertex_cycles
            b0 = (t // bus) * bus
            sent = 0.0
            for u in range(b0, min(b0 + bus, T)):
                sent += send[s, u]
            x = max(recv[s, t], sent / (min(b0 + bus, T) - b0)) / x_rate
            out_comp[s, t] = c
            out_exch[s, t] = x
            mc = max(mc, c)
            mx = max(mx, x)
        out_max[s, 0] = mc
        out_max[s, 1] = mx


# ------------------------------------------------------------------------------------------
# BSP execution of the mapped program
# ------------------------------------------------------------------------------------------


class Program:
    """The supersteps of one instance of each op, run through the cycle kernel.

    ``comp`` and ``exch`` are (S, T) cycles per tile; ``slowest`` is (S, 2) the slowest
    tile's compute and exchange; ``op_index`` maps each superstep to its plan; ``count`` is
    how many times it runs in the step (the op's layer count); ``totals`` is (S, 5) each
    superstep's sums over its tiles of ``PHASE_ARRAYS`` (what ``energy_split`` prices).
    ``comp``, ``exch`` and ``totals`` are put together from the supersteps' rows when first
    read (a caller timing the step reads only ``slowest``: the serving tables' steps).
    """

    def __init__(self, phases, slowest, op_index, count, sync_cycles, rows, tiles):
        self.phases = phases
        self.slowest = slowest
        self.op_index = op_index
        self.count = count
        self.sync_cycles = sync_cycles
        self._rows = rows  # (compute row, exchange row) of each superstep
        self._tiles = tiles
        self._frozen = False

    def __repr__(self):
        return f"Program({len(self.phases)} supersteps, {self.slowest.shape} slowest)"

    def _built(self, name, make):
        got = self.__dict__.get(name)
        if got is None:
            got = make()
            if self._frozen:
                got.flags.writeable = False
            self.__dict__[name] = got
        return got

    @property
    def comp(self) -> np.ndarray:
        return self._built("_comp", lambda: self._stacked(0))

    @property
    def exch(self) -> np.ndarray:
        return self._built("_exch", lambda: self._stacked(1))

    @property
    def totals(self) -> np.ndarray:
        # a phase's sum equals its row's in the (S, T) copy bit for bit (the same pairwise
        # summation over the same values)
        return self._built(
            "_totals",
            lambda: np.array(
                [[float(getattr(ph, k).sum()) for k in _PHASE_ARRAYS] for ph in self.phases],
                float,
            ).reshape(len(self.phases), len(_PHASE_ARRAYS)),
        )

    def _stacked(self, j: int) -> np.ndarray:
        out = np.empty((len(self._rows), self._tiles))
        for i, row in enumerate(self._rows):
            out[i] = row[j]
        return out

    def freeze(self) -> None:
        """Make every array the program holds, or puts together later, read-only (a memoised
        program is handed to every caller of the same step)."""
        self._frozen = True
        for a in (self.slowest, self.op_index, self.count):
            a.flags.writeable = False
        for k in ("_comp", "_exch", "_totals"):
            if k in self.__dict__:
                self.__dict__[k].flags.writeable = False

    @property
    def superstep_cycles(self) -> np.ndarray:
        """Cycles of each superstep: sync + slowest exchange + slowest compute."""
        return self.sync_cycles + self.slowest[:, 0] + self.slowest[:, 1]


def run_program(c: TileChip, plans: list) -> Program:
    """Time the supersteps of ``plans`` on chip ``c`` (per-tile compute and exchange cycles).

    An op's identical supersteps (its serial passes) are timed once and counted as many
    times as they run. A superstep of a frozen plan (read-only, memoised: the planner's
    matmul and row layouts, which the steps of a table share) keeps its cycles, by the rates
    they were worked out with, and is not run through the kernel again: each superstep's
    rows depend on its own arrays and the rates only."""
    phases, idx, cnt, keep = [], [], [], []
    for i, p in enumerate(plans):
        frozen = bool(p.__dict__.get("_frozen"))
        for ph, n in p.supersteps():
            phases.append(ph)
            idx.append(i)
            cnt.append(n * p.op.count)
            keep.append(frozen)
    S, T = len(phases), c.tiles
    vec = c.fp32_flops_per_cycle_per_tile
    sram, x_rate = (
        c.sram_bytes_per_cycle_per_tile,
        c.exchange_bytes_per_cycle_per_tile * _cal.EXCHANGE_EFFICIENCY,
    )
    # every value a superstep's rows depend on besides its arrays (and its FLOP rate)
    base = (
        T,
        sram,
        x_rate,
        c.vertex_overhead_cycles,
        TILES_PER_EXCHANGE_BUS,
        _cal.AMP_PHASE_OVERHEAD_CYCLES,
        _cal.REARRANGE_BYTES_PER_CYCLE,
        _superstep_cycles,  # a reference swapped in (tests) is not answered by the kernel's rows
    )
    slowest = np.empty((S, 2))
    rows = [None] * S
    todo, rates, keys, rate_of = [], [], [], {}
    for i, ph in enumerate(phases):
        # Calibrated (ipusim.tile_calibration): an AMP phase runs at the AMP rate of its operands
        rate = vec
        if ph.amp:
            rate = rate_of.get(ph.dtype_bytes)
            if rate is None:
                rate = rate_of[ph.dtype_bytes] = c.amp_flops_per_cycle_per_tile(ph.dtype_bytes)
        if keep[i]:
            key = (base, rate)
            got = ph.__dict__.get("_cycles")
            if got is not None and got[0] == key and _same_arrays(got[1], ph):
                rows[i] = got[2]
                slowest[i] = got[3]
                continue
            keys.append(key)
        else:
            keys.append(None)
        todo.append(i)
        rates.append(rate)
    if todo:
        _cycles(c, phases, todo, rates, keys, sram, x_rate, rows, slowest)
    return Program(phases, slowest, np.array(idx), np.array(cnt, float), c.sync_cycles, rows, T)


def _same_arrays(arrays: tuple, ph) -> bool:
    """Whether ``ph`` still holds the very arrays its kept cycles were worked out from (a
    phase whose array was replaced since is run through the kernel again)."""
    a = arrays
    return (
        a[0] is ph.flops
        and a[1] is ph.load
        and a[2] is ph.vertices
        and a[3] is ph.recv
        and a[4] is ph.send
    )


def _cycles(c, phases, todo, rates, keys, sram, x_rate, rows, slowest):
    """Run the supersteps ``phases[todo]`` through the kernel, at FLOP rates ``rates``: their
    (compute, exchange) rows into ``rows`` and slowest tiles into ``slowest`` (at ``todo``);
    each one with a key (not None) keeps them, read-only, on its phase under that key."""
    n, T = len(todo), c.tiles
    fl, ld, vt, rv, sd = (np.empty((n, T)) for _ in _PHASE_ARRAYS)
    amp = []
    for j, i in enumerate(todo):  # row by row: one copy each, no list of arrays to stack
        ph = phases[i]
        fl[j], ld[j], vt[j], rv[j], sd[j] = ph.flops, ph.load, ph.vertices, ph.recv, ph.send
        if ph.amp:
            amp.append(j)  # the AMP phases' rows
    comp, exch, mx = np.empty((n, T)), np.empty((n, T)), np.empty((n, 2))
    args = (fl, ld, vt, rv, sd, np.array(rates, float), sram, x_rate, c.vertex_overhead_cycles)
    _superstep_cycles(*args, TILES_PER_EXCHANGE_BUS, comp, exch, mx)
    # Calibrated (ipusim.tile_calibration): the exchange runs at EXCHANGE_EFFICIENCY of its rate;
    # an AMP compute phase costs AMP_PHASE_OVERHEAD_CYCLES more, plus rearranging the bytes it
    # received into the AMP's layout at REARRANGE_BYTES_PER_CYCLE.
    if amp:  # (the other rows' cycles are >= 0: adding 0.0 would leave them as they are)
        amp = np.array(amp)
        comp[amp] += np.where(
            vt[amp] > 0,
            _cal.AMP_PHASE_OVERHEAD_CYCLES + rv[amp] / _cal.REARRANGE_BYTES_PER_CYCLE,
            0.0,
        )
    mx[:, 0] = comp.max(axis=1)
    slowest[todo] = mx
    for j, i in enumerate(todo):
        key = keys[j]
        if key is None:
            rows[i] = (comp[j], exch[j])
        else:  # copies, read-only: shared by every program of the phase
            row = (comp[j].copy(), exch[j].copy())
            row[0].flags.writeable = row[1].flags.writeable = False
            rows[i] = row
            ph = phases[i]
            arrays = (ph.flops, ph.load, ph.vertices, ph.recv, ph.send)
            ph.__dict__["_cycles"] = (key, arrays, row, mx[j].copy())


def energy_split(
    prog: Program, plans: list, streamed: bool, link_bytes: float = 0.0, process_nm: float = 45.0
) -> dict:
    """Energy by level (``energy.tile_split``, joules) of the supersteps of ``prog``, each run
    as many times as its op's count: AMP and vector FLOPs (priced at ``process_nm``,
    ``energy.flop_scale``), SRAM loads (and a read and a write of every byte an AMP phase
    rearranges), exchange bytes sent and received, Streaming Memory bytes (when ``streamed``)
    and ``link_bytes`` over IPU-Links."""
    amp = vec = load = sent = recv = 0.0
    # each superstep's sums over its tiles, as Python floats (a row sum equals the sum of the
    # phase's own array bit for bit: the same pairwise summation over the same values)
    for ph, n, (fl, ld, _, rv, sd) in zip(
        prog.phases, prog.count, prog.totals.tolist(), strict=True
    ):
        f = fl * n
        amp, vec = (amp + f, vec) if ph.amp else (amp, vec + f)
        got = rv * n
        load += ld * n + (2.0 * got if ph.amp else 0.0)  # AMP operands rearranged: read + write
        sent += sd * n
        recv += got
    stream = sum(p.stream_bytes * p.op.count for p in plans) if streamed else 0.0
    return _energy.tile_split(
        amp_flops=amp,
        vector_flops=vec,
        sram_read_bytes=load,
        exchange_sent_bytes=sent,
        exchange_received_bytes=recv,
        streamed_bytes=stream,
        link_bytes=link_bytes,
        flop_scale=_energy.flop_scale(process_nm),
    )
