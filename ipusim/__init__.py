"""ipusim: when does a tile-based accelerator (IPU style) beat a shared-HBM GPU for transformers?

The pipeline runs one way: ``hardware`` + ``workloads`` -> machine models (``roofline``,
``tiles``, ``gpu``) -> ``serving`` -> ``checklist``. Plots and widgets live in
``ipusim.plots`` and ``ipusim.widgets`` and are imported only by notebooks that need them.
"""

from . import hardware, workloads
from .hardware import GpuChip, TileChip, chip
from .workloads import TransformerConfig, model, step

__version__ = "0.1.0"

__all__ = [
    "GpuChip", "TileChip", "TransformerConfig", "chip", "hardware", "model", "step", "workloads",
]
