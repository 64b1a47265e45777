"""One front door to the machine models: the time of one step on any chip.

``simulate(chip, step)`` returns a ``StepResult`` whatever the chip kind, so that
plots, the serving simulator and the checklist can take either machine:

* a ``TileChip`` goes to ``ipusim.tiles`` (BSP supersteps over the tiles);
* a ``GpuChip`` goes to ``ipusim.gpu`` (waves of thread blocks sharing HBM);

both through ``ipusim.one_chip``, which ``ipusim.placement`` also uses for its sub-steps
(so placement sits below this front door).

``step_time_s`` is the number most callers want: seconds for the step. ``simulate(...,
chips=N)`` and ``place`` spread a step over N chips (``ipusim.placement``).
"""

from __future__ import annotations

from . import limits, one_chip
from ._validate import positive
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
    return one_chip.simulate(c, s, **kwargs)


def step_time_s(c, s: Step, *, chips: int = 1, **kwargs) -> float:
    """Seconds for step ``s`` on chip ``c`` (see ``simulate``); ``math.inf`` when the step
    does not fit (the fit rule in ``StepResult``). On one GPU the time alone is worked out
    (``gpu.step_time_s``: the same double, without the per-kernel records)."""
    if positive("chips", chips, integer=True) > 1:
        return simulate(c, s, chips=chips, **kwargs).time_s
    return one_chip.step_time_s(c, s, **kwargs)


def place(c, s: Step, *, chips: int, **kwargs):
    """The fastest placement of step ``s`` on up to ``chips`` chips that fits, with the reasons the
    nearest others do not (``ipusim.placement.place``)."""
    from . import placement

    return placement.place(c, s, chips=chips, **kwargs)


ENERGY_COMPARATOR = ("gc200", "a100-80gb")
"""The chips the data-movement energy claim is judged on (notebooks 01 and 05): the GC200 and
the A100 80GB, both 7 nm parts of 2020, so the 45 nm energy table's node caveat applies to
both alike, and the A100 is the GPU the articles compare the IPU with."""


def energy_comparison(s: Step, tile=ENERGY_COMPARATOR[0], gpu=ENERGY_COMPARATOR[1]) -> dict:
    """Simulated energy of step ``s`` on a tile chip and on a GPU (``StepResult.energy_split``).

    Returns ``tile`` and ``gpu`` (the two ``StepResult``), ``data_saving`` (1 - tile data
    movement joules / GPU data movement joules: > 0 when the tile chip moves data for less)
    and ``total_saving`` (the same for all joules, FLOPs included); both ``nan`` when either
    step does not fit.
    """
    t, g = simulate(tile, s), simulate(gpu, s)
    if t.kind != "tile" or g.kind != "gpu":
        raise ValueError(
            f"energy_comparison needs a tile chip and a GPU, got {t.chip!r} ({t.kind}) "
            f"and {g.chip!r} ({g.kind})"
        )
    ok = t.fits and g.fits
    nan = float("nan")
    return {
        "tile": t,
        "gpu": g,
        "data_saving": 1 - t.data_energy_j / g.data_energy_j if ok else nan,
        "total_saving": 1 - t.energy_j / g.energy_j if ok else nan,
    }
