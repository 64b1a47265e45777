"""One step, all of it: ``StepRoofline`` (``analyze``), the object the CLI, the widget and
scripts print. Seconds, bytes, FLOP."""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import energy as _energy
from ..hardware import GpuChip, TileChip
from ..hardware import chip as _chip
from ..workloads import Step
from .bounds import fits_on_chip, placement, step_bounds, step_energy, step_need_bytes


@dataclass(frozen=True)
class StepRoofline:
    """Roofline analysis of one step on one chip: per-op bounds, total, fit and energy."""

    chip: TileChip | GpuChip
    step: Step
    bounds: tuple  # OpBound per op, step order
    fits: bool  # weights + live activations (+ KV) fit in tile SRAM / HBM
    need_bytes: float  # what must be held at once, bytes
    capacity_bytes: float  # tile SRAM data room or HBM, bytes
    energy: _energy.Energy = field(repr=False)
    placement: dict = field(
        default_factory=lambda: {"weights": True, "kv": True, "activations": True}
    )
    fused: bool = False  # bounds are per fused kernel (see the module docstring)

    @property
    def time_s(self) -> float:
        """Lower bound on the step time, seconds."""
        return float(sum(b.time_s for b in self.bounds))

    @property
    def compute_s(self) -> float:
        """The step's FLOPs at peak, seconds (the time bound if nothing waited for memory)."""
        return self.step.flops / self.chip.peak_flops

    @property
    def memory_bound_share(self) -> float:
        """Share of the bound spent in memory-bound ops."""
        t = self.time_s
        return sum(b.time_s for b in self.bounds if b.bound == "memory") / t if t else 0.0

    @property
    def attained_flops(self) -> float:
        return self.step.flops / self.time_s if self.time_s else 0.0

    @property
    def where(self) -> str:
        """Where the weights are read from."""
        if isinstance(self.chip, GpuChip):
            return "HBM"
        return "tile SRAM" if self.placement["weights"] else "streaming DRAM"

    @property
    def offchip(self) -> tuple:
        """Tensors read from off-chip DRAM on a tile chip (weights, kv, activations)."""
        if isinstance(self.chip, GpuChip):
            return ()
        return tuple(k for k, on in self.placement.items() if not on)

    @property
    def tokens_per_s(self) -> float:
        return self.step.real_tokens / self.time_s

    @property
    def seq_per_s(self) -> float:
        return self.step.batch / self.time_s

    def to_dict(self) -> dict:
        s = self.step
        return {
            "chip": self.chip.name,
            "model": s.model.name,
            "phase": s.phase,
            "batch": s.batch,
            "row_len": s.row_len,
            "real_tokens": s.real_tokens,
            "tokens": s.tokens,
            "flops": s.flops,
            "bytes": s.bytes,
            "time_s": self.time_s,
            "compute_s": self.compute_s,
            "memory_bound_share": self.memory_bound_share,
            "attained_flops": self.attained_flops,
            "peak_flops": self.chip.peak_flops,
            "tokens_per_s": self.tokens_per_s,
            "seq_per_s": self.seq_per_s,
            "fits": self.fits,
            "weights_in": self.where,
            "offchip": list(self.offchip),
            "fused": self.fused,
            "need_bytes": self.need_bytes,
            "capacity_bytes": self.capacity_bytes,
            "energy": self.energy.to_dict(),
            "ops": [b.to_dict() for b in self.bounds],
        }

    def __repr__(self):
        s = self.step
        fit = "fits" if self.fits else "DOES NOT FIT"
        return (
            f"StepRoofline({self.chip.name}, {s.model.name} {s.phase}, batch {s.batch}: >= "
            f"{self.time_s * 1e6:,.1f} us, {self.attained_flops / 1e12:,.1f} of "
            f"{self.chip.peak_flops / 1e12:,.0f} TFLOP/s, {self.memory_bound_share:.0%} memory-bound; "
            f"{fit} ({self.need_bytes / 1e9:,.3g} of {self.capacity_bytes / 1e9:,.3g} GB), weights from "
            f"{self.where}; {self.energy.total_j * 1e3:,.3g} mJ)"
        )

    def _repr_html_(self):
        rows = "".join(
            f"<tr><td>{b.op}</td><td>{b.kind}</td><td>{b.flops / 1e9:,.2f}</td><td>{b.bytes / 1e6:,.2f}</td>"
            f"<td>{b.intensity:,.1f}</td><td>{b.time_s * 1e6:,.2f}</td><td>{b.bound}</td></tr>"
            for b in self.bounds
        )
        return (
            f"<p><b>{self.chip.name}</b>, {self.step.model.name} {self.step.phase}, batch {self.step.batch}: "
            f"&ge; {self.time_s * 1e6:,.1f} &mu;s; {'fits' if self.fits else '<b>does not fit</b>'} "
            f"({self.need_bytes / 1e9:,.3g} of {self.capacity_bytes / 1e9:,.3g} GB)</p>"
            "<table><tr><th>op</th><th>kind</th><th>GFLOP</th><th>MB</th><th>FLOP/B</th>"
            f"<th>bound &mu;s</th><th>limit</th></tr>{rows}</table>"
        )


def analyze(
    c, s: Step, *, weights_on_chip: bool | None = None, fused: bool = False
) -> StepRoofline:
    """Roofline analysis of step ``s`` on chip ``c`` (preset name or chip object)."""
    c = _chip(c)
    if not isinstance(s, Step):
        raise ValueError(
            f"s must be a workloads.Step (from ipusim.step(...)), got {type(s).__name__}"
        )
    fits = fits_on_chip(c, s)
    place = placement(c, s, weights_on_chip=weights_on_chip)
    cap = float(c.data_bytes if isinstance(c, TileChip) else c.hbm_bytes)
    return StepRoofline(
        c,
        s,
        tuple(step_bounds(c, s, weights_on_chip=weights_on_chip, fused=bool(fused))),
        fits,
        step_need_bytes(s),
        cap,
        step_energy(c, s, weights_on_chip=weights_on_chip),
        place,
        bool(fused),
    )
