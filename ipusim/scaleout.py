"""A step scaled out over chips of each kind, and what its throughput costs: the numbers claims 9
("for the same throughput, 20-30% lower hardware cost, and a lower power bill") and 15 ("a model
with a severe memory bottleneck gains most") rest on.

For each chip count tried, ``placement.place`` finds the fastest tensor/pipeline/data placement of
the step that fits (the one fit rule). Its throughput is ``batch / step time`` sequences/s: one
step at a time, so that the chips hold the KV cache of this batch only (the fit the placement
was judged on) and a pipeline pays its fill every step; both kinds run the same batch. A count's
hardware cost is ``chips used x price per chip-hour``; per sequence it is that over the
throughput, so comparing per-sequence costs compares the two kinds at the same throughput
(replicas scale linearly). Energy per sequence is board power x chips used / throughput (the
upper bound the checklist uses) beside the simulated dynamic energy (``PlacedStep.energy_j``).
Prices are ``ipusim.prices.Prices`` (ASSUMPTIONS unless the caller gives its own).

These functions return numbers; the verdicts are drawn elsewhere from them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from . import hardware, placement, workloads
from ._validate import positive
from .prices import Prices

HOUR_S = 3600.0
DEFAULT_SCALES = (
    3  # chip counts tried per kind: the fewest power of two that may hold the step, x2, x4
)


@dataclass(frozen=True)
class ScaledStep:
    """The cheapest fitting placement of one step on one chip kind, and the counts tried.

    ``rows``: one dict per chip count tried (``chips``, ``fit``, ``label``, ``chips_used``,
    ``sequences_per_s``, ``usd_per_million``)."""

    chip: str
    chips_used: int  # chips of the cheapest fitting placement (0: none fits)
    placement: object  # placement.PlacedStep (the cheapest fitting one, or the least short)
    sequences_per_s: float  # steady throughput of that placement, sequences/s
    usd_per_hour: float  # chips used x chip-hour price (hardware only), USD/h
    usd_per_million: float  # hardware USD per million sequences (inf: nothing fits)
    board_j_per_sequence: float  # board power x chips used / throughput, J
    sim_j_per_sequence: float  # simulated dynamic energy (links included) / sequences, J
    rows: tuple = field(default=(), repr=False)

    @property
    def fits(self) -> bool:
        return self.chips_used > 0

    def to_dict(self) -> dict:
        return {
            "chip": self.chip,
            "chips_used": self.chips_used,
            "placement": self.placement.label() if self.placement is not None else "",
            "fit": self.placement.fit if self.placement is not None else "does_not_fit",
            "sequences_per_s": self.sequences_per_s,
            "usd_per_hour": self.usd_per_hour,
            "usd_per_million": self.usd_per_million,
            "board_j_per_sequence": self.board_j_per_sequence,
            "sim_j_per_sequence": self.sim_j_per_sequence,
            "rows": [dict(r) for r in self.rows],
        }

    def __repr__(self):
        if not self.fits:
            return (
                f"ScaledStep({self.chip}: does_not_fit on {[r['chips'] for r in self.rows]} chips)"
            )
        return (
            f"ScaledStep({self.chip} x {self.chips_used}, {self.placement.label()}: "
            f"{self.sequences_per_s:,.1f} seq/s, {self.usd_per_million:,.2f} USD per million sequences)"
        )


def throughput_seq_per_s(pl, batch: int) -> float:
    """Sequences/s of a fitting ``placement.PlacedStep`` of a step of ``batch`` sequences, one step
    at a time: ``batch / time_s`` (0 when it does not fit)."""
    batch = positive("batch", batch, integer=True)
    if pl.fit == "does_not_fit" or not math.isfinite(pl.time_s) or pl.time_s <= 0:
        return 0.0
    return batch / pl.time_s


def chip_counts(chip, s, scales: int = DEFAULT_SCALES) -> tuple:
    """Chip counts to try: the fewest power of two whose memory (tile SRAM after code, or HBM) holds
    the step's weights and KV cache (necessary, not sufficient), then ``scales - 1`` doublings."""
    c = hardware.chip(chip)
    scales = positive("scales", scales, integer=True, at_most=12, why="doublings of the chip count")
    kv = 0.0
    if s.phase in ("prefill", "decode"):
        kv = s.model.kv_bytes_per_token(s.dtype_bytes) * float(
            s.lengths.sum() if s.phase == "decode" else s.tokens
        )
    cap = c.data_bytes if c.kind == "tile" else c.hbm_bytes
    n = 2 ** max(
        0, math.ceil(math.log2(max(1.0, (s.model.weight_bytes(s.dtype_bytes) + kv) / cap)))
    )
    return tuple(n * 2**k for k in range(scales))


def scale_out(chip, s, *, counts=None, prices: Prices | None = None) -> ScaledStep:
    """The cheapest (hardware USD per sequence) fitting placement of step ``s`` over the chip
    ``counts`` (default ``chip_counts``); ties go to fewer chips."""
    c = hardware.chip(chip)
    if not isinstance(s, workloads.Step):
        raise ValueError(f"s must be a workloads.Step (from ipusim.step), got {type(s).__name__}")
    prices = Prices() if prices is None else prices
    counts = (
        chip_counts(c, s)
        if counts is None
        else tuple(positive("chip count", n, integer=True) for n in counts)
    )
    if not counts:
        raise ValueError("counts must list at least one chip count")
    price = prices.chip_hour(c)
    rows, best, least_short = [], None, None
    for n in counts:
        pl = placement.place(c, s, chips=n)
        rate = throughput_seq_per_s(pl, s.batch)
        usd = pl.chips_used * price / (rate * HOUR_S) * 1e6 if rate > 0 else math.inf
        rows.append(
            {
                "chips": n,
                "fit": pl.fit,
                "label": pl.label(),
                "chips_used": pl.chips_used,
                "sequences_per_s": rate,
                "usd_per_million": usd,
            }
        )
        if rate > 0 and (best is None or usd < best[1] * (1 - 1e-12)):
            best = (pl, usd, rate)
        if rate == 0 and (least_short is None or pl.short_bytes < least_short.short_bytes):
            least_short = pl
    if best is None:
        return ScaledStep(
            c.name, 0, least_short, 0.0, 0.0, math.inf, math.inf, math.inf, tuple(rows)
        )
    pl, usd, rate = best
    return ScaledStep(
        c.name,
        pl.chips_used,
        pl,
        rate,
        pl.chips_used * price,
        usd,
        c.power_w * pl.chips_used / rate,
        pl.energy_j / s.batch,
        tuple(rows),
    )


def default_step(model) -> workloads.Step:
    """The serving step the claims are judged on, per model kind: a decoder's decode of 8 sequences
    at a context of 1,024 tokens (or its longest), an encoder's forward of 8 sequences of 384."""
    m = workloads.model(model)
    if m.kind == "decoder":
        return workloads.step(m, [min(1024, m.max_positions)] * 8, phase="decode")
    n = min(384, m.max_positions)
    return workloads.step(m, [n] * 8, pad_to=n)


def same_throughput_cost(
    model,
    *,
    step=None,
    tile="gc200",
    gpu="a100-80gb",
    prices: Prices | None = None,
    tile_counts=None,
    gpu_counts=None,
) -> dict:
    """Claim 9's numbers for one model: each kind's cheapest deployment of ``step`` (default
    ``default_step(model)``) and the ratios at the same throughput.

    Returns ``tile`` and ``gpu`` (``ScaledStep``), ``hardware_cost_ratio`` (tile USD per sequence /
    GPU USD per sequence: < 1 when the tile chips are cheaper), ``hardware_saving`` (1 - that),
    ``chip_hours_ratio`` (the same without prices: tile chip-hours per sequence / GPU's),
    ``parity_tile_usd_per_chip_hour`` (the tile price at which the costs are equal),
    ``board_energy_ratio`` and ``board_energy_saving`` (board J per sequence), ``sim_energy_ratio``
    (simulated dynamic J per sequence); ratios are ``nan`` when either kind fits nowhere.
    """
    s = default_step(model) if step is None else step
    prices = Prices() if prices is None else prices
    t = scale_out(tile, s, counts=tile_counts, prices=prices)
    g = scale_out(gpu, s, counts=gpu_counts, prices=prices)
    nan = math.nan
    ok = t.fits and g.fits
    hw = t.usd_per_million / g.usd_per_million if ok else nan
    chip_h = (t.chips_used / t.sequences_per_s) / (g.chips_used / g.sequences_per_s) if ok else nan
    board = t.board_j_per_sequence / g.board_j_per_sequence if ok else nan
    return {
        "model": s.model.name,
        "phase": s.phase,
        "batch": s.batch,
        "tile": t,
        "gpu": g,
        "hardware_cost_ratio": hw,
        "hardware_saving": 1 - hw,
        "chip_hours_ratio": chip_h,
        "parity_tile_usd_per_chip_hour": prices.chip_hour(t.chip) / hw if ok else nan,
        "board_energy_ratio": board,
        "board_energy_saving": 1 - board,
        "sim_energy_ratio": t.sim_j_per_sequence / g.sim_j_per_sequence if ok else nan,
    }


MEMORY_MODELS = ("bert-base", "gpt2", "llama-2-7b")
"""Models from one that fits one tile chip to one that needs tens of them (claim 15)."""


def memory_bottleneck_gain(
    models=MEMORY_MODELS, *, tile="gc200", gpu="a100-80gb", prices: Prices | None = None
) -> list[dict]:
    """Claim 15's numbers: per model (``default_step`` of each), how memory-bound it is on the tile
    chip and what moving it from the GPU saves.

    One row per model, in the order given: ``model``, ``memory_need_bytes`` (weights + KV cache),
    ``tile_chips_by_memory`` (that over one tile chip's SRAM after code, rounded up: the memory
    bottleneck), ``gpu_chips_by_memory``, ``tile_chips_used`` and ``gpu_chips_used`` (the cheapest
    deployments), ``hardware_saving``, ``chip_hours_ratio`` and ``board_energy_saving`` (from
    ``same_throughput_cost``). The claim holds if the saving grows with the memory bottleneck.
    """
    if isinstance(models, str) or not len(models):
        raise ValueError("models must be a non-empty list of model names or configs")
    tc, gc = hardware.chip(tile), hardware.chip(gpu)
    out = []
    for m in models:
        s = default_step(m)
        kv = (
            s.model.kv_bytes_per_token(s.dtype_bytes) * float(s.lengths.sum())
            if s.phase == "decode"
            else 0.0
        )
        need = s.model.weight_bytes(s.dtype_bytes) + kv
        r = same_throughput_cost(m, step=s, tile=tc, gpu=gc, prices=prices)
        out.append(
            {
                "model": s.model.name,
                "phase": s.phase,
                "memory_need_bytes": need,
                "tile_chips_by_memory": math.ceil(need / tc.data_bytes),
                "gpu_chips_by_memory": math.ceil(need / gc.hbm_bytes),
                "tile_chips_used": r["tile"].chips_used,
                "gpu_chips_used": r["gpu"].chips_used,
                "hardware_saving": r["hardware_saving"],
                "chip_hours_ratio": r["chip_hours_ratio"],
                "board_energy_saving": r["board_energy_saving"],
            }
        )
    return out
