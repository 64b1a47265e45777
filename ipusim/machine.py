"""One front door to the machine models: the time of one step on any chip.

``simulate(chip, step)`` returns a ``StepResult`` whatever the chip kind, so that
plots, the serving simulator and the checklist can take either machine:

* a ``TileChip`` goes to ``ipusim.tiles`` (BSP supersteps over the tiles);
* a ``GpuChip`` goes to ``ipusim.gpu`` (waves of thread blocks sharing HBM).

``step_time_s`` is the number most callers want: seconds for the step. ``simulate(...,
chips=N)`` and ``place`` spread a step over N chips (``ipusim.placement``).
"""

from __future__ import annotations

from . import limits
from ._validate import positive
from .hardware import GpuChip, TileChip
from .hardware import chip as _chip
from .result import DOES_NOT_FIT, FIT_STATES, ON_CHIP, STREAMS, StepResult, fit_state  # noqa: F401 (re-exported)
from .workloads import Step


def simulate(c, s: Step, *, chips: int = 1, **kwargs) -> StepResult:
    """Simulate step ``s`` on chip ``c`` (a preset name or a chip object).

    ``chips > 1`` places the step on up to that many chips (tensor, pipeline and data
    parallel, ``ipusim.placement.place``): the result's ``placement`` is set, ``fit`` is the
    placement's, ``time_s`` the step latency and ``split`` includes "link".

    Never raises because a step does not fit: the result then has ``fits=False`` and
    ``time_s = inf`` (see ``StepResult``)."""
    if positive("chips", chips, integer=True) > 1:
        limits.check_at_most("chips", chips, limits.MAX_CHIPS, "chips in one deployment")
        from . import placement

        return placement.simulate(c, s, chips=chips, **kwargs)
    c = _chip(c)
    if not isinstance(s, Step):
        raise ValueError(f"s must be a workloads.Step (from ipusim.step), got {type(s).__name__}")
    positions = max(s.tokens, int(s.lengths.sum()))  # decode: the cached context counts too
    limits.check_step(s.batch, positions / max(s.batch, 1), name="step batch")
    if isinstance(c, TileChip):
        from . import tiles

        return tiles.simulate(c, s, **kwargs)
    if isinstance(c, GpuChip):
        from . import gpu

        return gpu.simulate(c, s, **kwargs)
    raise ValueError(f"chip must be a TileChip or GpuChip, got {type(c).__name__}")


def step_time_s(c, s: Step, **kwargs) -> float:
    """Seconds for step ``s`` on chip ``c`` (see ``simulate``); ``math.inf`` when the step
    does not fit (the fit rule in ``StepResult``)."""
    return simulate(c, s, **kwargs).time_s


def place(c, s: Step, *, chips: int, **kwargs):
    """The fastest placement of step ``s`` on up to ``chips`` chips that fits, with the reasons the
    nearest others do not (``ipusim.placement.place``)."""
    from . import placement

    return placement.place(c, s, chips=chips, **kwargs)
