"""Capacity: where a model lives (tile SRAM, off-chip DRAM or HBM), and how many chips it
needs (``capacity``). Bytes."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import footprint, workloads
from .._validate import choice, positive
from ..hardware import chip as _chip
from .bounds import live_act_bytes
from .levels import memory_capacities


@dataclass(frozen=True)
class Capacity:
    """Bytes a model needs for inference or training, against each memory level of a chip.

    ``chips_needed`` is a lower bound: the bytes divided evenly over chips, nothing
    replicated, no room lost to fragmentation or to per-chip copies of activations.
    """

    chip: str
    model: str
    mode: str  # "inference" or "training"
    weight_bytes: float
    kv_bytes: float  # KV cache for the whole batch at full context (decoders, inference)
    activation_bytes: float  # live (inference: largest op, one layer) or stored (training)
    state_bytes: float  # gradients + optimizer state (training), else 0
    levels: dict  # level -> bytes one chip holds there

    @property
    def need_bytes(self) -> float:
        return self.weight_bytes + self.kv_bytes + self.activation_bytes + self.state_bytes

    @property
    def fits(self) -> dict:
        """Level -> does it fit on one chip."""
        return {k: self.need_bytes <= v for k, v in self.levels.items()}

    @property
    def chips_needed(self) -> dict:
        """Level -> chips needed to hold it in that level (lower bound)."""
        return {k: max(1, math.ceil(self.need_bytes / v)) for k, v in self.levels.items()}

    @property
    def home(self) -> str | None:
        """Fastest level that holds everything on one chip, or None."""
        return next((k for k, ok in self.fits.items() if ok), None)

    def to_dict(self) -> dict:
        return {
            "chip": self.chip,
            "model": self.model,
            "mode": self.mode,
            "need_bytes": self.need_bytes,
            "weight_bytes": self.weight_bytes,
            "kv_bytes": self.kv_bytes,
            "activation_bytes": self.activation_bytes,
            "state_bytes": self.state_bytes,
            "levels": dict(self.levels),
            "fits": self.fits,
            "chips_needed": self.chips_needed,
            "home": self.home,
        }

    def __repr__(self):
        per = ", ".join(
            f"{k} {v / 1e9:,.3g} GB: {self.chips_needed[k]} chip(s)" for k, v in self.levels.items()
        )
        return (
            f"Capacity({self.model} {self.mode} on {self.chip}: needs {self.need_bytes / 1e9:,.3g} GB "
            f"(weights {self.weight_bytes / 1e9:,.3g}); {per})"
        )


def capacity(
    c,
    model_or_name,
    *,
    mode: str = "inference",
    batch: int = 1,
    seq_len: int | None = None,
    dtype_bytes: int = 2,
    recompute: bool = False,
) -> Capacity:
    """Where ``model`` fits on chip ``c`` and how many chips it needs.

    Inference holds the weights, the largest op's activations for one layer and, for a
    decoder, the KV cache of ``batch`` sequences at ``seq_len`` (default: the model's
    maximum). Training holds ``footprint.training_footprint`` for ``batch x seq_len`` tokens:
    weights, gradients, Adam state (16 bytes/parameter in all) and stored activations.
    """
    c = _chip(c)
    m = workloads.model(model_or_name)
    choice("mode", mode, ("inference", "training"))
    batch = positive("batch", batch, integer=True)
    seq_len = m.max_positions if seq_len is None else positive("seq_len", seq_len, integer=True)
    if seq_len > m.max_positions:
        raise ValueError(f"seq_len={seq_len} exceeds {m.name}'s max_positions {m.max_positions}")
    if mode == "training":
        tf = footprint.training_footprint(
            m,
            seq_len=seq_len,
            tokens_per_step=batch * seq_len,
            dtype_bytes=dtype_bytes,
            recompute=recompute,
        )
        return Capacity(
            c.name,
            m.name,
            mode,
            tf.weight_bytes,
            0.0,
            tf.activation_bytes,
            tf.gradient_bytes + tf.optimizer_bytes,
            memory_capacities(c),
        )
    s = workloads.step(m, [seq_len] * batch, dtype_bytes=dtype_bytes)
    live = live_act_bytes(s)
    kv = m.kv_bytes_per_token(dtype_bytes) * batch * seq_len if m.kind == "decoder" else 0.0
    return Capacity(
        c.name,
        m.name,
        mode,
        m.weight_bytes(dtype_bytes),
        float(kv),
        float(live),
        0.0,
        memory_capacities(c),
    )
