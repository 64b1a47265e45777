"""A training step's placement and result, and the cost of a whole training run."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import footprint as mem
from .. import hardware, limits, workloads
from .._validate import choice, positive
from ..result import DOES_NOT_FIT, ON_CHIP, STREAMS
from . import model as _model

HOUR_S = 3600.0

RECIPES = {
    # model: (sequence length in tokens, global batch in sequences, source)
    "bert-base": (
        128,
        65536,
        "ASSUMPTION: BERT phase-1 pre-training at length 128 with a LAMB batch of 64K "
        "sequences (You et al. 2020, 'LAMB', Table 1)",
    ),
    "bert-large": (128, 65536, "as bert-base (You et al. 2020, Table 1)"),
    "gpt2": (1024, 512, "Radford et al. 2019: context 1,024, batch 512"),
    "llama-2-7b": (4096, 1024, "Touvron et al. 2023, §2.2: context 4,096, global batch 4M tokens"),
    "llama-2-70b": (4096, 1024, "Touvron et al. 2023, §2.2: context 4,096, global batch 4M tokens"),
    "gpt-3-175b": (
        2048,
        1536,
        "Narayanan et al. 2021, Table 1: GPT-3 175B at batch 1,536 of 2,048 tokens",
    ),
}


def recipe(cfg) -> tuple[int, int]:
    """(sequence length, global batch in sequences) a preset model is trained with (``RECIPES``);
    a custom model gets its longest length and a 4M-token batch."""
    if cfg.name in RECIPES:
        return RECIPES[cfg.name][:2]
    return cfg.max_positions, max(1, 4 * 1024 * 1024 // cfg.max_positions)


@dataclass(frozen=True)
class Placement:
    """How a training step is spread over ``data * tensor * pipeline`` chips."""

    data: int  # data-parallel replicas
    tensor: int  # tensor-parallel degree (chips sharing each layer)
    pipeline: int  # pipeline stages
    micro_batch: int  # sequences per micro-batch
    recompute: str = "full"  # one of footprint.RECOMPUTE
    sharding: int = (
        0  # 0-3: optimizer state, + gradients, + weights sharded over replicas (footprint.SHARDING)
    )

    def __post_init__(self):
        for f in ("data", "tensor", "pipeline", "micro_batch"):
            positive(f"Placement.{f}", getattr(self, f), integer=True)
        choice("Placement.recompute", self.recompute, mem.RECOMPUTE)
        if self.sharding not in mem.SHARDING:
            raise ValueError(f"Placement.sharding must be one of 0, 1, 2, 3, got {self.sharding!r}")

    @property
    def chips(self) -> int:
        return self.data * self.tensor * self.pipeline

    def to_dict(self) -> dict:
        return {
            "data": self.data,
            "tensor": self.tensor,
            "pipeline": self.pipeline,
            "micro_batch": self.micro_batch,
            "recompute": self.recompute,
            "sharding": self.sharding,
        }

    def label(self) -> str:
        return (
            f"d={self.data} t={self.tensor} p={self.pipeline} micro-batch {self.micro_batch}, "
            f"recompute {self.recompute}, sharding {self.sharding}"
        )


@dataclass(frozen=True)
class TrainingStep:
    """One training step of ``model`` on ``chips`` chips placed by ``placement``. Seconds, bytes."""

    model: str
    chip: str
    kind: str
    chips: int
    seq_len: int  # tokens per sequence
    global_batch: int  # sequences per step
    placement: Placement
    micro_batches: int  # per replica per step (gradient accumulation)
    step_time_s: float  # inf when it does not fit
    split: dict  # category -> seconds; sums to step_time_s
    memory_per_chip_bytes: dict  # category -> bytes on the busiest chip
    memory_where: dict  # category -> memory level it lives in
    capacity_bytes: dict  # level -> bytes one chip offers
    fit: str  # on_chip, streams, does_not_fit
    model_flops: float  # per step, forward + backward (no recompute)
    hardware_flops: float  # per step, with recomputation
    peak_flops: float  # per chip
    power_w: float  # per chip
    fit_message: str = ""
    alternatives: tuple = field(default=(), compare=False)  # why the nearest other placements lost

    @property
    def tokens_per_step(self) -> int:
        return self.seq_len * self.global_batch

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_step / self.step_time_s

    @property
    def mfu(self) -> float:
        """Model FLOPs utilisation: model FLOPs per second over the chips' peak."""
        return self.model_flops / self.step_time_s / (self.chips * self.peak_flops)

    @property
    def hfu(self) -> float:
        """Hardware FLOPs utilisation (recomputation counted, as Megatron-LM reports it)."""
        return self.hardware_flops / self.step_time_s / (self.chips * self.peak_flops)

    @property
    def hardware_flops_per_chip(self) -> float:
        """Achieved FLOP/s per chip with recomputation counted (Narayanan et al. 2021's measure)."""
        return self.hardware_flops / self.step_time_s / self.chips

    @property
    def memory_total_bytes(self) -> float:
        return float(sum(self.memory_per_chip_bytes.values()))

    def run(
        self,
        tokens: float,
        *,
        usd_per_chip_hour: float | None = None,
        usd_per_kwh: float | None = None,
    ) -> TrainingRun:
        """Days, chip-hours, cost and energy to train on ``tokens`` tokens at this step's pace.

        Prices default to the placeholder ASSUMPTIONS of ``ipusim.prices``
        (``DEFAULT_USD_PER_CHIP_HOUR``, ``DEFAULT_USD_PER_KWH``)."""
        from .. import prices as _prices

        tokens = positive("tokens", tokens)
        price = (
            _prices.DEFAULT_USD_PER_CHIP_HOUR.get(self.chip)
            if usd_per_chip_hour is None
            else positive("usd_per_chip_hour", usd_per_chip_hour)
        )
        if price is None:
            raise ValueError(f"no default price for chip {self.chip!r}: pass usd_per_chip_hour")
        kwh_price = (
            _prices.DEFAULT_USD_PER_KWH
            if usd_per_kwh is None
            else positive("usd_per_kwh", usd_per_kwh)
        )
        seconds = tokens / self.tokens_per_s if self.fit != DOES_NOT_FIT else math.inf
        chip_hours = seconds * self.chips / HOUR_S
        energy_kwh = chip_hours * self.power_w / 1e3
        return TrainingRun(
            self,
            tokens,
            seconds / 86400.0,
            chip_hours,
            chip_hours * price + energy_kwh * kwh_price,
            energy_kwh,
            price,
            kwh_price,
        )

    def to_dict(self) -> dict:
        return {
            "model": self.model,
            "chip": self.chip,
            "chips": self.chips,
            "seq_len": self.seq_len,
            "global_batch": self.global_batch,
            "placement": {**self.placement.to_dict(), "micro_batches": self.micro_batches},
            "step_time_s": self.step_time_s,
            "split_s": dict(self.split),
            "tokens_per_s": self.tokens_per_s,
            "mfu": self.mfu,
            "hfu": self.hfu,
            "hardware_tflops_per_chip": self.hardware_flops_per_chip / 1e12,
            "memory_per_chip_bytes": dict(self.memory_per_chip_bytes),
            "memory_where": dict(self.memory_where),
            "capacity_bytes": dict(self.capacity_bytes),
            "fit": self.fit,
            "fit_message": self.fit_message,
            "alternatives": list(self.alternatives),
        }

    def __repr__(self):
        if self.fit == DOES_NOT_FIT:
            return f"TrainingStep({self.model} on {self.chips} {self.chip}: does_not_fit; {self.fit_message})"
        return (
            f"TrainingStep({self.model} on {self.chips} {self.chip}, {self.placement.label()}: "
            f"{self.step_time_s:,.2f} s/step, {self.tokens_per_s:,.0f} tokens/s, MFU {self.mfu:.1%}, "
            f"{self.memory_total_bytes / 1e9:,.1f} GB/chip; {self.fit})"
        )


@dataclass(frozen=True)
class TrainingRun:
    """A whole training run at one step's pace: time, chip-hours, cost (USD) and energy (kWh)."""

    step: TrainingStep
    tokens: float
    days: float
    chip_hours: float
    cost_usd: float  # chip-hours x price + energy x price (prices are ASSUMPTIONS unless given)
    energy_kwh: float  # chips x board power x time (upper bound: PUE 1, full board power)
    usd_per_chip_hour: float
    usd_per_kwh: float

    def to_dict(self) -> dict:
        return {
            **self.step.to_dict(),
            "tokens": self.tokens,
            "days": self.days,
            "chip_hours": self.chip_hours,
            "cost_usd": self.cost_usd,
            "energy_kwh": self.energy_kwh,
            "usd_per_chip_hour": self.usd_per_chip_hour,
            "usd_per_kwh": self.usd_per_kwh,
        }

    def __repr__(self):
        return (
            f"TrainingRun({self.step.model}, {self.tokens:.3g} tokens on {self.step.chips} {self.step.chip}: "
            f"{self.days:,.1f} days, {self.chip_hours:,.0f} chip-hours, {self.cost_usd / 1e6:,.2f} M USD, "
            f"{self.energy_kwh / 1e3:,.0f} MWh)"
        )


def _where(c, level: int) -> dict:
    if c.kind == "gpu":
        return dict.fromkeys(("weights", "gradients", "optimizer", "activations", "working"), "HBM")
    w = dict.fromkeys(("weights", "gradients", "optimizer", "activations", "working"), "tile SRAM")
    if level >= 1:
        w["optimizer"] = "streaming DRAM"
    if level >= 2:
        w["weights"] = w["gradients"] = "streaming DRAM"
    return w


def _short_message(c, memory: dict, cap: dict) -> str:
    """What does not fit, by how much: all of it in HBM (GPU); on a tile chip, the states in
    Streaming Memory and the activations in tile SRAM (its most frugal arrangement)."""
    total = sum(memory.values())
    if c.kind == "gpu":
        return f"HBM needs {total / 1e9:,.2f} GB of {cap['HBM'] / 1e9:,.2f} GB usable"
    states = memory["weights"] + memory["gradients"] + memory["optimizer"]
    sram = memory["activations"] + memory["working"]
    parts = []
    dram = cap.get("streaming DRAM", 0.0)
    if states > dram:
        parts.append(
            f"weights, gradients and optimizer state need {states / 1e9:,.2f} GB of Streaming Memory "
            f"({dram / 1e9:,.2f} GB per chip)"
        )
    if sram > cap["tile SRAM"] or not parts:
        parts.append(
            f"activations need {sram / 1e9:,.2f} GB of tile SRAM ({cap['tile SRAM'] / 1e9:,.2f} GB per chip, "
            "with a streamed layer's weights double-buffered beside them)"
        )
    return "; ".join(parts)


def _capacity(c) -> dict:
    if c.kind == "gpu":
        return {"HBM": mem.GPU_USABLE_FRACTION * c.hbm_bytes}
    cap = {"tile SRAM": float(c.data_bytes)}
    if c.offchip_bytes:
        cap["streaming DRAM"] = float(c.offchip_bytes)
    return cap


def inputs(model, chip, chips, seq_len=None, global_batch=None):
    """Validated (config, chip, chips, seq_len, global_batch), recipe defaults filled in."""
    cfg = workloads.model(model)
    c = hardware.chip(chip)
    chips = positive("chips", chips, integer=True)
    limits.check_at_most("chips", chips, limits.MAX_CHIPS, "chips in one deployment")
    s0, b0 = recipe(cfg)
    seq_len = s0 if seq_len is None else positive("seq_len", seq_len, integer=True)
    if seq_len > cfg.max_positions:
        raise ValueError(
            f"seq_len={seq_len} exceeds {cfg.name}'s max_positions {cfg.max_positions}"
        )
    global_batch = (
        b0 if global_batch is None else positive("global_batch", global_batch, integer=True)
    )
    if chips > 1 and c.link_bandwidth_bytes_per_s <= 0:
        raise ValueError(f"chip {c.name!r} has no chip-to-chip link; train it on 1 chip")
    return cfg, c, chips, seq_len, global_batch


def build(
    cfg, c, chips, seq_len, global_batch, pl: Placement, row: dict, i=0, alternatives=()
) -> TrainingStep:
    """A ``TrainingStep`` from element ``i`` of ``model.evaluate``'s output."""
    level = int(np.ravel(row["level"])[i])
    fit = DOES_NOT_FIT if level < 0 else (ON_CHIP if level == 0 else STREAMS)
    memory = {k: float(np.ravel(v)[i]) for k, v in row["memory"].items()}
    where = _where(c, max(level, 0))
    cap = _capacity(c)
    msg = ""
    if level < 0 and bool(np.ravel(row.get("tile_overflow", False))[i]):
        msg = (
            "the states fit in total, but a tile overflows: the training state's share of each tile plus "
            "a layer's working set exceed its SRAM (the tile simulator's fit rule)"
        )
    elif level < 0:
        msg = _short_message(c, memory, cap)
    t = float(np.ravel(row["step_time_s"])[i])
    split = {k: float(np.ravel(v)[i]) for k, v in row["split"].items()} if level >= 0 else {}
    return TrainingStep(
        cfg.name,
        c.name,
        c.kind,
        chips,
        seq_len,
        global_batch,
        pl,
        int(round(float(np.ravel(row["micro_batches"])[i]))),
        t,
        split,
        memory,
        where,
        cap,
        fit,
        float(np.ravel(row["model_flops"])[i]),
        float(np.ravel(row["hardware_flops"])[i]),
        c.peak_flops,
        c.power_w,
        msg,
        tuple(alternatives),
    )


def simulate(
    model,
    chip,
    placement: Placement,
    *,
    seq_len: int | None = None,
    global_batch: int | None = None,
) -> TrainingStep:
    """One training step of ``model`` on ``placement.chips`` chips of ``chip`` (never raises for a
    placement that does not fit: ``fit == "does_not_fit"`` and ``step_time_s = inf``)."""
    if not isinstance(placement, Placement):
        raise ValueError(f"placement must be a training.Placement, got {type(placement).__name__}")
    cfg, c, chips, seq_len, global_batch = inputs(
        model, chip, placement.chips, seq_len, global_batch
    )
    if global_batch % (placement.data * placement.micro_batch):
        raise ValueError(
            f"global batch {global_batch} does not split into {placement.data} replicas x "
            f"micro-batches of {placement.micro_batch}"
        )
    if cfg.heads % placement.tensor:
        raise ValueError(
            f"tensor degree {placement.tensor} must divide {cfg.name}'s {cfg.heads} heads"
        )
    if placement.pipeline > cfg.layers:
        raise ValueError(
            f"pipeline degree {placement.pipeline} exceeds {cfg.name}'s {cfg.layers} layers"
        )
    rc = mem.RECOMPUTE.index(placement.recompute)
    row = _model.evaluate(
        cfg,
        c,
        chips,
        seq_len,
        global_batch,
        placement.data,
        placement.tensor,
        placement.pipeline,
        placement.micro_batch,
        rc,
        placement.sharding,
    )
    return build(cfg, c, chips, seq_len, global_batch, placement, row)
