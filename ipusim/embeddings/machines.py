"""The time of one embedding step on a tile chip (or a cluster of them) and on GPUs.

**Tile chip** (same constants and superstep rule as ``ipusim.supersteps``): every table is sharded by
row over every tile of every chip (``access.tally`` says who owns and who asks for each row).
Samples are dealt to tiles; a sample's bags are pooled on its tile. A step is BSP supersteps,
each ``sync + slowest tile's exchange + slowest tile's compute``:

1. requesters send each look-up's index (``INDEX_BYTES``) to the owning tile;
2. owners send the rows back; requesters pool them (one vertex per bag; FP32 vector adds);
3. (training) requesters send each look-up's gradient row to its owner; owners update the rows
   (sparse SGD: read row and gradient, write the row).

A tile's exchange cycles are ``max(bytes it receives, mean bytes sent on its exchange bus) /
exchange rate`` (``supersteps.TILES_PER_EXCHANGE_BUS``); compute cycles ``vertex overhead x vertices
+ max(FLOPs / vector rate, SRAM bytes / SRAM rate)``.

Fit (``ipusim.result``): ``on_chip`` when each tile's share of the tables, its code reserve and
its buffers fit its SRAM; else ``streams`` when the tables fit in the chips' Streaming Memory:
each look-up that misses the on-chip hot-row cache is fetched from Streaming Memory to the
requesting tile in ``STREAMING_GRANULE_BYTES`` units at ``offchip_bandwidth_bytes_per_s``
(per chip, not overlapped with the supersteps, as ``tiles`` streams weights), and written back
after the update in training; hits are exchanged from the tile that caches them. Else
``does_not_fit``. With several chips, a row whose owner is on another chip crosses the chips'
links once (twice in training), timed on ``collectives.fabric`` (``link_time_s``).

**GPU**: tables in HBM (``on_chip`` if they fit the GPUs' HBM, else ``does_not_fit``: host
memory is not modelled). One gather kernel (one warp per bag, ``BAGS_PER_BLOCK`` bags per block)
runs in waves (``gpu.simulate_kernel``): every look-up pulls its row's 32-byte sectors
(``SECTOR_BYTES``) through L2; those that miss L2 come from HBM. L2 holds the hottest rows
(``access.cache_rows`` on ``gpu.L2_REUSE_FRACTION`` of L2). Training adds a second kernel that
reads the gradients and reads and writes every looked-up row that misses L2.

Times in seconds, sizes in bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import collectives as _collectives
from .. import gpu as _gpu
from .. import supersteps as _supersteps
from .._validate import positive
from ..hardware import GpuChip, TileChip
from ..hardware import chip as _chip
from ..result import DOES_NOT_FIT, ON_CHIP, STREAMS
from . import access
from .workload import Workload

INDEX_BYTES = 4  # bytes of one look-up's row index sent to the owner (int32; ASSUMPTION)
STREAMING_GRANULE_BYTES = 64
"""Bytes Streaming Memory moves per access. ASSUMPTION: one DDR4 burst (8 beats x 64 bits, the
M2000's Streaming Memory is DDR4 DIMMs, CAMBRIAN); Graphcore publishes no access granularity."""
SECTOR_BYTES = 32
"""Bytes per L2/HBM sector on A100 and H100: global memory is accessed in 32-byte sectors
(CUDA-BPG, "Coalesced access to global memory")."""
BAGS_PER_BLOCK = (
    8  # bags (one warp each) per gather thread block of 256 threads (ASSUMPTION, FBGEMM-style)
)


def granules(row_bytes: int, granule: int) -> float:
    """Mean ``granule``-byte units a row of ``row_bytes`` touches when rows lie end to end.

    A row starts at offset ``(i x row_bytes) mod granule``; averaged over those offsets.
    """
    row_bytes = positive("row_bytes", row_bytes, integer=True)
    granule = positive("granule", granule, integer=True)
    step = math.gcd(row_bytes, granule)
    offs = np.arange(0, granule, step)
    return float(np.mean(-(-(offs + row_bytes) // granule)))


@dataclass(frozen=True)
class EmbeddingResult:
    """One embedding step on ``chips`` chips. ``split`` sums to ``time_s`` (when it fits)."""

    chip: str
    kind: str  # "tile" or "gpu"
    chips: int
    workload: str
    batch: int
    lookups: int
    training: bool
    time_s: float
    split: (
        dict  # tile: compute, sync, exchange, streaming, links; GPU: compute, memory, launch, links
    )
    fit: str  # on_chip, streams or does_not_fit (ipusim.result)
    fit_message: str
    hit_rate: float  # closed-form share of look-ups served from the cache (0 without one)
    stream_hit_rate: float  # the same share counted on the simulated stream
    cache_bytes: float  # bytes of cache (tile SRAM for hot rows; usable L2 on a GPU), all chips
    bytes_moved: dict  # where bytes moved: "offchip" / "hbm", "exchange", "links"
    power_w: float  # board power of all chips, W (chip.power_w, sourced in ipusim.hardware)
    unit_lookups: np.ndarray = field(repr=False)  # look-ups each tile / GPU serves
    unit_memory_bytes: np.ndarray = field(repr=False)  # peak bytes per tile (tile chip) or per GPU
    memory_limit_bytes: float = 0.0
    extra: dict = field(default_factory=dict)

    @property
    def fits(self) -> bool:
        return self.fit != DOES_NOT_FIT

    @property
    def lookups_per_s(self) -> float:
        return self.lookups / self.time_s

    @property
    def samples_per_s(self) -> float:
        return self.batch / self.time_s

    @property
    def samples_per_s_per_w(self) -> float:
        """Samples per second per watt of board power (TDP, not measured draw)."""
        return self.samples_per_s / self.power_w

    @property
    def energy_j(self) -> float:
        """Board power x time: an upper-bound estimate (chips rarely draw their full TDP)."""
        return self.power_w * self.time_s

    def to_dict(self) -> dict:
        return {
            "chip": self.chip,
            "kind": self.kind,
            "chips": self.chips,
            "workload": self.workload,
            "batch": self.batch,
            "lookups": self.lookups,
            "training": self.training,
            "time_s": self.time_s,
            "split_s": dict(self.split),
            "fit": self.fit,
            "fit_message": self.fit_message,
            "lookups_per_s": self.lookups_per_s,
            "samples_per_s": self.samples_per_s,
            "power_w": self.power_w,
            "samples_per_s_per_w": self.samples_per_s_per_w,
            "energy_j": self.energy_j,
            "hit_rate": self.hit_rate,
            "stream_hit_rate": self.stream_hit_rate,
            "cache_bytes": self.cache_bytes,
            "bytes_moved": dict(self.bytes_moved),
            "memory_per_unit_max_bytes": float(self.unit_memory_bytes.max()),
            "memory_limit_bytes": self.memory_limit_bytes,
            **self.extra,
        }

    def __repr__(self):
        head = f"EmbeddingResult({self.chips} x {self.chip}, {self.workload}, batch {self.batch}"
        if not self.fits:
            return f"{head}: DOES NOT FIT)"
        parts = ", ".join(f"{k} {v / self.time_s:.0%}" for k, v in self.split.items() if v > 0)
        return (
            f"{head}: {self.time_s * 1e3:,.3f} ms ({parts}); {self.lookups_per_s / 1e6:,.1f} M look-ups/s, "
            f"{self.samples_per_s:,.0f} samples/s, {self.samples_per_s_per_w:,.1f} samples/s/W; {self.fit})"
        )


def _owned_bytes(w: Workload, n_units: int) -> np.ndarray:
    """Table bytes each unit owns (``access.owned_rows`` x row bytes, summed over tables)."""
    rb = np.array([t.dim * w.dtype_bytes for t in w.tables], dtype=np.float64)
    return rb @ access.owned_rows(w, n_units)


def link_time_s(c, chips: int, per_chip_bytes: float) -> float:
    """Seconds for every chip to send (and receive) ``per_chip_bytes`` of rows to the others.

    Over ``collectives.fabric``: destinations are spread evenly, so a share
    ``(chips - g) / (chips - 1)`` (``g`` chips per node) crosses nodes on the inter-node link and
    the rest stays on the intra-node link (IPU-Links, NVLink); the two links work at once
    (ASSUMPTION), each as a point-to-point transfer (one latency plus bytes over one-way bandwidth).
    """
    if chips <= 1 or per_chip_bytes <= 0:
        return 0.0
    fab = _collectives.fabric(c, chips)
    g = min(chips, fab.chips_per_node)
    far = (chips - g) / (chips - 1)
    near_s = fab.point_to_point_s(per_chip_bytes * (1 - far), cross_node=False) if far < 1 else 0.0
    far_s = fab.point_to_point_s(per_chip_bytes * far, cross_node=True) if far > 0 else 0.0
    return max(near_s, far_s)


def _superstep(c: TileChip, recv, send, flops, load, vertices):
    """(exchange cycles, compute cycles) of the slowest tile of one superstep (``tiles``' rule)."""
    bus = _supersteps.TILES_PER_EXCHANGE_BUS
    T = send.size
    pad = (-T) % bus
    s = np.concatenate([send, np.zeros(pad)]).reshape(-1, bus)
    width = np.minimum(bus, T - np.arange(s.shape[0]) * bus)
    sent = np.repeat(s.sum(axis=1) / width, bus)[:T]
    x = np.maximum(recv, sent) / c.exchange_bytes_per_cycle_per_tile
    comp = np.where(
        vertices > 0,
        vertices * c.vertex_overhead_cycles
        + np.maximum(
            flops / c.fp32_flops_per_cycle_per_tile, load / c.sram_bytes_per_cycle_per_tile
        ),
        0.0,
    )
    return float(x.max()), float(comp.max())


def _tile(c: TileChip, w: Workload, chips: int, cache: bool, seed: int, stream) -> EmbeddingResult:
    T = c.tiles
    U = T * chips
    dt = w.dtype_bytes
    stream = (
        access.lookup_stream(w, seed) if stream is None else stream
    )  # drawn once, tallied twice
    dims = np.array([t.dim for t in w.tables], dtype=np.float64)
    row_b = float(w.lookup_bytes / max(w.lookups, 1))  # mean bytes of a looked-up row
    n_tab = 1 if w.bag_sizes is not None else len(w.tables)
    per_unit_samples = np.diff(-(-np.arange(U + 1) * w.batch // U))  # samples dealt to each tile
    out_b = float(dims.sum() * dt)  # pooled output bytes per sample

    # Buffers a tile holds while the step runs: received rows, pooled outputs, indices
    # (and gradients in training); sized from a first tally without cache.
    t0 = access.tally(w, U, units_per_chip=T, seed=seed, stream=stream)
    temp = (
        t0.requested * row_b * (2 if w.training else 1)
        + per_unit_samples * out_b
        + (t0.requested + t0.served) * INDEX_BYTES
    )
    owned = _owned_bytes(w, U)
    code = c.code_bytes_per_tile
    onchip_mem = code + owned + temp
    onchip = bool(onchip_mem.max() <= c.sram_per_tile_bytes)
    offchip_total = c.offchip_bytes * chips
    can_stream = (
        c.offchip_bytes > 0
        and w.table_bytes <= offchip_total
        and (code + temp).max() <= c.sram_per_tile_bytes
    )

    if onchip:
        fit, tl, cache_b, hr = ON_CHIP, t0, 0.0, 0.0
        mem = onchip_mem
    else:
        cache_b = (
            float(max(0.0, (c.sram_per_tile_bytes - code - temp.max())) * U)
            if (cache and can_stream)
            else 0.0
        )
        cached = access.cache_rows(w, cache_b, dims * dt)
        hr = access.hit_rate(w, cached)
        tl = (
            access.tally(w, U, units_per_chip=T, cached=cached, seed=seed, stream=stream)
            if cached.any()
            else t0
        )
        fit = STREAMS if can_stream else DOES_NOT_FIT
        mem = code + temp + cache_b / U

    streamed = fit != ON_CHIP
    # Exchange traffic: on chip every look-up not local goes owner -> requester; streaming,
    # only cache hits do (misses arrive from Streaming Memory at the requester). An owner
    # sends each distinct row once (multicast); requesters receive every row they asked for.
    if streamed:
        srv, req = tl.unique_hit.astype(float), tl.requested_hit.astype(float)
    else:
        srv, req = tl.unique.astype(float), (tl.requested - tl.local).astype(float)
    zeros = np.zeros(U)
    bags = per_unit_samples * n_tab
    steps = [
        _superstep(c, srv * INDEX_BYTES, req * INDEX_BYTES, zeros, zeros, zeros),
        _superstep(
            c, req * row_b, srv * row_b, tl.requested * row_b / dt, tl.requested * row_b, bags
        ),
    ]
    if w.training:
        upd = tl.served.astype(float) if not streamed else tl.requested.astype(float)
        steps.append(
            _superstep(
                c,
                srv * row_b,
                req * row_b,
                2 * upd * row_b / dt,
                3 * upd * row_b,
                np.where(upd > 0, n_tab, 0),
            )
        )
    hz = c.clock_hz
    split = {
        "compute": sum(s[1] for s in steps) / hz,
        "sync": len(steps) * c.sync_cycles / hz,
        "exchange": sum(s[0] for s in steps) / hz,
    }
    moved = {"exchange": float(req.sum() * (row_b + INDEX_BYTES) * (2 if w.training else 1))}
    if streamed:
        gran = float(
            np.average(
                [granules(int(t.dim * dt), STREAMING_GRANULE_BYTES) for t in w.tables],
                weights=access.traffic_weights(w),
            )
        )
        miss_chip = (tl.requested - tl.requested_hit).reshape(chips, T).sum(axis=1)
        per_chip = miss_chip * gran * STREAMING_GRANULE_BYTES * (2 if w.training else 1)
        bw = c.offchip_bandwidth_bytes_per_s
        split["streaming"] = float(per_chip.max() / bw) if bw > 0 else math.inf
        moved["offchip"] = float(per_chip.sum())
    if chips > 1:
        cross = (
            np.maximum(tl.chip_send, tl.chip_recv)
            * (row_b + INDEX_BYTES)
            * (2 if w.training else 1)
        )
        split["links"] = (
            link_time_s(c, chips, float(cross.max())) if c.link_bandwidth_bytes_per_s else math.inf
        )
        moved["links"] = float(
            tl.chip_send.sum() * (row_b + INDEX_BYTES) * (2 if w.training else 1)
        )
    estimate = float(sum(split.values()))
    fits_mem = bool(mem.max() <= c.sram_per_tile_bytes)
    if fit != DOES_NOT_FIT and not fits_mem:
        fit = DOES_NOT_FIT
    if fit == ON_CHIP:
        msg = ""
    elif fit == STREAMS:
        msg = (
            f"Tables ({w.table_bytes / 1e9:,.2f} GB) do not fit in tile SRAM (fullest tile would need "
            f"{onchip_mem.max():,.0f} of {c.sram_per_tile_bytes:,} bytes); rows stream from Streaming Memory"
            f"{f', {hr:.1%} of look-ups hit the on-chip hot-row cache' if cache_b else ''}."
        )
    else:
        room = (
            f"{offchip_total / 1e9:,.0f} GB of Streaming Memory"
            if c.offchip_bytes
            else "no Streaming Memory"
        )
        need = max(1, math.ceil(w.table_bytes / c.offchip_bytes)) if c.offchip_bytes else None
        msg = (
            f"Tables need {w.table_bytes / 1e9:,.2f} GB: more than {chips} x {c.name}'s tile SRAM "
            f"({c.data_bytes * chips / 1e9:,.2f} GB for data) and {room}"
            + (f"; at least {need} chips would hold them" if need else "")
            + (
                f"; per-tile buffers alone need {(code + temp).max():,.0f} bytes (smaller batch)"
                if (code + temp).max() > c.sram_per_tile_bytes
                else ""
            )
            + "."
        )
    time_s = estimate if fit != DOES_NOT_FIT else math.inf
    return EmbeddingResult(
        chip=c.name,
        kind="tile",
        chips=chips,
        workload=w.name,
        batch=w.batch,
        lookups=tl.lookups,
        training=w.training,
        time_s=time_s,
        split=split,
        fit=fit,
        fit_message=msg,
        hit_rate=hr,
        stream_hit_rate=tl.hit_rate,
        cache_bytes=cache_b,
        bytes_moved=moved,
        power_w=c.power_w * chips,
        unit_lookups=tl.served,
        unit_memory_bytes=mem,
        memory_limit_bytes=float(c.sram_per_tile_bytes),
        extra={
            "time_if_unlimited_s": estimate,
            "supersteps": len(steps),
            "table_bytes": w.table_bytes,
        },
    )


def _gpu_run(c: GpuChip, w: Workload, chips: int, seed: int, stream) -> EmbeddingResult:
    dt = w.dtype_bytes
    rb = np.array([t.dim * dt for t in w.tables])
    sect = np.array(
        [granules(int(b), SECTOR_BYTES) * SECTOR_BYTES for b in rb]
    )  # bytes per row via sectors
    weights = access.traffic_weights(w)
    sect_row = float(np.average(sect, weights=weights))
    row_b = float(w.lookup_bytes / max(w.lookups, 1))
    cache_b = c.l2_bytes * _gpu.L2_REUSE_FRACTION * chips
    cached = access.cache_rows(w, cache_b, sect)
    hr = access.hit_rate(w, cached)
    tl = access.tally(w, chips, units_per_chip=1, cached=cached, seed=seed, stream=stream)
    need = w.table_bytes
    fits = need <= c.hbm_bytes * chips
    u = int(np.argmax(tl.served))  # the busiest GPU sets the pace
    served, miss = float(tl.served[u]), float(tl.miss[u])
    n_bags = w.batch * (1 if w.bag_sizes is not None else len(w.tables)) / chips
    blocks = max(1, math.ceil(n_bags / BAGS_PER_BLOCK))
    out_b = w.output_bytes / chips
    fwd = _gpu.simulate_kernel(
        c,
        blocks,
        0.0,
        (miss * sect_row + out_b) / blocks,
        blocks_per_sm=_gpu.ELEMENTWISE_BLOCKS_PER_SM,
        block_l2_bytes=(served * sect_row + out_b) / blocks,
    )
    kernels = [fwd]
    if w.training:  # gradients in; every row that misses L2 read and written back
        kernels.append(
            _gpu.simulate_kernel(
                c,
                blocks,
                0.0,
                (2 * miss * sect_row + out_b) / blocks,
                blocks_per_sm=_gpu.ELEMENTWISE_BLOCKS_PER_SM,
                block_l2_bytes=(2 * served * sect_row + out_b) / blocks,
            )
        )
    split = {
        "compute": sum(k.compute_s for k in kernels),
        "memory": sum(k.memory_s for k in kernels),
        "launch": sum(k.launch_s for k in kernels),
    }
    moved = {
        "hbm": float(
            tl.miss.sum() * sect_row * (3 if w.training else 1)
            + w.output_bytes * (2 if w.training else 1)
        ),
        "l2": float(tl.served.sum() * sect_row * (1 if not w.training else 3)),
    }
    if chips > 1:
        cross = (
            np.maximum(tl.chip_send, tl.chip_recv)
            * (row_b + INDEX_BYTES)
            * (2 if w.training else 1)
        )
        split["links"] = (
            link_time_s(c, chips, float(cross.max())) if c.link_bandwidth_bytes_per_s else math.inf
        )
        moved["links"] = float(
            tl.chip_send.sum() * (row_b + INDEX_BYTES) * (2 if w.training else 1)
        )
    estimate = float(sum(split.values()))
    msg = (
        ""
        if fits
        else (
            f"Tables need {need / 1e9:,.1f} GB of HBM but {chips} x {c.name} have "
            f"{c.hbm_bytes * chips / 1e9:,.0f} GB: at least {math.ceil(need / c.hbm_bytes)} GPUs "
            "would hold them (host memory is not modelled)."
        )
    )
    mem = np.full(chips, need / chips)
    return EmbeddingResult(
        chip=c.name,
        kind="gpu",
        chips=chips,
        workload=w.name,
        batch=w.batch,
        lookups=tl.lookups,
        training=w.training,
        time_s=estimate if fits else math.inf,
        split=split,
        fit=ON_CHIP if fits else DOES_NOT_FIT,
        fit_message=msg,
        hit_rate=hr,
        stream_hit_rate=tl.hit_rate,
        cache_bytes=float(cache_b),
        bytes_moved=moved,
        power_w=c.power_w * chips,
        unit_lookups=tl.served,
        unit_memory_bytes=mem,
        memory_limit_bytes=float(c.hbm_bytes),
        extra={
            "time_if_unlimited_s": estimate,
            "table_bytes": need,
            "waves": int(sum(k.waves for k in kernels)),
            "sector_bytes_per_row": sect_row,
        },
    )


INT64_HEADROOM = 2**62  # row ids x units must stay below this (int64 holds 2**63 - 1)


def _check_int64(w: Workload, units: int) -> None:
    """Refuse a workload whose row ids (all tables' rows, numbered in one int64 range) times the
    units they are dealt to would overflow int64 in the sharding arithmetic; Python ints here."""
    rows = sum(int(t.rows) for t in w.tables)
    if rows * units >= INT64_HEADROOM:
        raise ValueError(
            f"tables hold {rows:,} rows in all: times {units:,} units that is over the "
            f"{INT64_HEADROOM:.3g} that int64 arithmetic holds (at most {INT64_HEADROOM // units:,} rows in all; "
            "fewer --rows or --tables)"
        )


def simulate(
    chip, w: Workload, *, chips: int = 1, cache: bool = True, seed: int = 0, stream=None
) -> EmbeddingResult:
    """One embedding step of ``w`` on ``chips`` chips of kind ``chip`` (a preset name or chip).

    ``cache``: keep hot rows in spare tile SRAM when tables stream (a GPU's L2 always caches);
    ``seed`` draws the look-ups; ``stream``: reuse a drawn ``access.lookup_stream(w, seed)``.
    Never raises for a step that does not fit: the result then has ``fit == "does_not_fit"`` and
    ``time_s = inf``.
    """
    c = _chip(chip)
    if not isinstance(w, Workload):
        raise ValueError(f"w must be an embeddings.Workload, got {type(w).__name__}")
    chips = positive("chips", chips, integer=True)
    _check_int64(w, c.units * chips)
    if isinstance(c, TileChip):
        return _tile(c, w, chips, bool(cache), seed, stream)
    return _gpu_run(c, w, chips, seed, stream)


def uniform_closed_form(chip, w: Workload, *, chips: int = 1) -> dict:
    """Closed-form times of the uniform, cache-less case: bytes over bandwidth at the granularity.

    ``offchip_s`` (tile chip, streaming): look-ups x granules per row x granule / (chips x
    Streaming Memory bandwidth); ``hbm_s`` (GPU): look-ups x sectors per row x 32 B / (chips x HBM
    bandwidth x ``gpu.HBM_EFFICIENCY``), plus the pooled outputs written (and their gradients read
    in training); rows once more (twice for the GPU: read and write back) in training.
    """
    c = _chip(chip)
    chips = positive("chips", chips, integer=True)
    dt = w.dtype_bytes
    pool = access.traffic_weights(w)
    if isinstance(c, TileChip):
        g = np.average(
            [granules(t.dim * dt, STREAMING_GRANULE_BYTES) for t in w.tables], weights=pool
        )
        b = w.lookups * g * STREAMING_GRANULE_BYTES * (2 if w.training else 1)
        return {"offchip_bytes": b, "offchip_s": b / (chips * c.offchip_bandwidth_bytes_per_s)}
    g = np.average([granules(t.dim * dt, SECTOR_BYTES) for t in w.tables], weights=pool)
    b = w.lookups * g * SECTOR_BYTES * (3 if w.training else 1) + w.output_bytes * (
        2 if w.training else 1
    )
    return {
        "hbm_bytes": b,
        "hbm_s": b / (chips * c.hbm_bandwidth_bytes_per_s * _gpu.HBM_EFFICIENCY),
    }
