"""The time of one step on one chip, whatever its kind: the dispatch below ``ipusim.machine``.

* a ``TileChip`` goes to ``ipusim.tiles`` (BSP supersteps over the tiles);
* a ``GpuChip`` goes to ``ipusim.gpu`` (waves of thread blocks sharing HBM).

``ipusim.placement`` times each sub-step of a placement here; ``ipusim.machine.simulate`` (the
front door) sends one-chip steps here and steps on several chips to ``ipusim.placement``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import limits
from .hardware import GpuChip, TileChip
from .hardware import chip as _chip
from .result import StepResult
from .workloads import Step


def _checked(c, s: Step):
    """The chip object ``c`` names (or is), once ``s`` is known to be a step within the limits."""
    c = _chip(c)
    if not isinstance(s, Step):
        raise ValueError(f"s must be a workloads.Step (from ipusim.step), got {type(s).__name__}")
    positions = max(s.tokens, int(s.lengths.sum()))  # decode: the cached context counts too
    limits.check_step(s.batch, positions / max(s.batch, 1), name="step batch")
    return c


def simulate(c, s: Step, **kwargs) -> StepResult:
    """Simulate step ``s`` on one chip ``c`` (a preset name or a chip object); never raises
    because a step does not fit (the result then has ``fits=False``, ``time_s = inf``)."""
    c = _checked(c, s)
    if isinstance(c, TileChip):
        from . import tiles

        return tiles.simulate(c, s, **kwargs)
    if isinstance(c, GpuChip):
        from . import gpu

        return gpu.simulate(c, s, **kwargs)
    raise ValueError(f"chip must be a TileChip or GpuChip, got {type(c).__name__}")


def step_time_s(c, s: Step, **kwargs) -> float:
    """``simulate(c, s, **kwargs).time_s`` (``inf`` when the step does not fit); on a GPU without
    building the rest of the result (``gpu.step_time_s``), the same double."""
    c = _checked(c, s)
    if isinstance(c, GpuChip):
        from . import gpu

        return gpu.step_time_s(c, s, **kwargs)
    return simulate(c, s, **kwargs).time_s


def tile_time_s(c, s: Step, **kwargs) -> tuple[float, bool]:
    """(seconds, weights stream) of step ``s`` on tile chip ``c`` (``tiles.timed``):
    ``simulate(c, s, **kwargs).time_s`` (``inf`` when the step does not fit), the same double,
    and whether its split has streaming, without building the rest of the result (the serving
    tables read only these, hundreds of steps a table)."""
    c = _checked(c, s)
    from . import tiles

    return tiles.timed(c, s, **kwargs)


class StepTimes(NamedTuple):
    """The figures of ``simulate``'s result that a caller timing a step's ops reads, the same
    values: seconds (``inf`` when the step does not fit), whether it fits, the time split by
    category, and each op's name and seconds."""

    time_s: float
    fits: bool
    split: dict
    op_names: tuple
    op_time_s: np.ndarray


def step_times(c, s: Step, **kwargs) -> StepTimes:
    """``StepTimes`` of ``simulate(c, s, **kwargs)`` without building the rest of the result
    (``tiles.step_times``, ``gpu.step_times``): no per-unit rows, energy or messages (a tile
    chip's ``explain`` is accepted and has nothing to explain)."""
    c = _checked(c, s)
    if isinstance(c, TileChip):
        from . import tiles

        kwargs.pop("explain", None)
        return StepTimes(*tiles.step_times(c, s, **kwargs))
    if isinstance(c, GpuChip):
        from . import gpu

        return StepTimes(*gpu.step_times(c, s, **kwargs))
    raise ValueError(f"chip must be a TileChip or GpuChip, got {type(c).__name__}")
