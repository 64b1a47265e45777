"""ipusim: when does a tile-based accelerator (IPU style) beat a shared-HBM GPU for transformers?

The pipeline runs one way: ``hardware`` + ``workloads`` -> machine models (``roofline``,
``tiles``, ``gpu``) -> ``serving`` -> ``checklist``. Plots and widgets live in
``ipusim.plots`` and ``ipusim.widgets`` and are imported only by notebooks that need them.
"""

from . import _numba_cache

_numba_cache.ensure()  # before any @njit(cache=True) kernel is defined

from . import hardware, workloads  # noqa: E402
from .hardware import GpuChip, TileChip, chip  # noqa: E402
from .workloads import TransformerConfig, model, step  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "GpuChip", "TileChip", "TransformerConfig", "chip", "hardware", "model", "step", "workloads",
]
