"""Training at scale: a training step of a transformer on N chips, its placement and its cost.

* bytes per parameter (mixed-precision Adam) and activations per layer come from
  ``ipusim.footprint`` (re-exported here), below the machine models that size a step with them.
* ``ops``: the ops of a training step on one chip (forward, input- and weight-gradient matmuls,
  recomputation), timed by the machine model inference uses (tile simulator, GPU model).
* ``model``: a step's placement bookkeeping: the busiest stage, the 1F1B pipeline, the collectives.
* ``step``: ``Placement``, ``TrainingStep`` (step time, tokens/s, MFU, memory per chip) and
  ``TrainingRun`` (days, chip-hours, cost, energy for a token budget).
* ``search``: the fastest placement that fits, and why the nearest others lose.
* ``calibration``: the published runs the model is checked against.
* ``convergence``: FP16 weight updates with round-to-nearest vs stochastic rounding.
"""

from ..footprint import BYTES_PER_PARAM, RECOMPUTE, SHARDING, activation_bytes_per_layer
from .model import bubble_fraction
from .ops import forward_time_s
from .search import best_placement, candidates, smallest_chip_count
from .step import RECIPES, Placement, TrainingRun, TrainingStep, recipe, simulate

__all__ = [
    "BYTES_PER_PARAM",
    "RECIPES",
    "RECOMPUTE",
    "SHARDING",
    "Placement",
    "TrainingRun",
    "TrainingStep",
    "activation_bytes_per_layer",
    "best_placement",
    "bubble_fraction",
    "candidates",
    "forward_time_s",
    "recipe",
    "simulate",
    "smallest_chip_count",
]
