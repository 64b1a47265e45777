"""One inference step on N chips: tensor, pipeline and data parallel placement, and its search.

A placement ``(t, p, d, m)`` runs ``d`` data-parallel replicas, each a pipeline of ``p``
stages, each stage split over ``t`` chips by tensor parallelism (Megatron-LM style: heads and
MLP columns, then rows, so each layer ends in two all-reduces of the activations), with each
replica's batch cut into ``m`` micro-batches. Chips are laid out tensor-innermost: a tensor
group shares a node (IPU-M2000, DGX) when it is no larger than one.

* ``cost``: what one placement costs and whether it fits (``PlacedStep``, ``assess``);
* ``search``: the fastest placement that fits (``place``), and ``simulate``, the step on N
  chips as a ``StepResult``.
"""

from .cost import PlacedStep, assess, clear_cache, evaluate, stage_layers, tensor_degrees
from .search import ALTERNATIVES, RUNNERS_UP, place, simulate

__all__ = [
    "ALTERNATIVES",
    "RUNNERS_UP",
    "PlacedStep",
    "assess",
    "clear_cache",
    "evaluate",
    "place",
    "simulate",
    "stage_layers",
    "tensor_degrees",
]
