"""ipusim: when does a tile-based accelerator (IPU style) beat a shared-HBM GPU for transformers?

The pipeline runs one way: ``hardware`` + ``workloads`` -> machine models (``roofline``,
``tiles``, ``gpu``) -> ``serving`` -> ``checklist``. Plots and widgets live in
``ipusim.plots`` and ``ipusim.widgets`` and are imported only by notebooks that need them.

Kernels and references: the library has one path, its Numba kernels and fast searches; no
argument or switch runs a slower one. Each kernel's plain reference lives beside the tests in
``tests/<topic>_reference.py``. The tests hold each kernel to its reference, and where a whole
public function is compared, the topic's ``plain()`` (``tests/kernel_swap.py``) puts the
references in place of the kernels for the duration; ``benchmarks/`` times both. A kernel that
does little work in a run may run its own source in the interpreter instead, while that costs
less than compiling it (``_numba_cache.interpreted_or_compiled``): the same code, not a second
path, and its tests hold the compiled and the interpreted runs to the reference alike.
"""

from . import _numba_cache

_numba_cache.ensure()  # before any @njit(cache=True) kernel is defined

from . import hardware, workloads  # noqa: E402
from .hardware import GpuChip, TileChip, chip  # noqa: E402
from .workloads import TransformerConfig, model, step  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "GpuChip",
    "TileChip",
    "TransformerConfig",
    "chip",
    "hardware",
    "model",
    "step",
    "workloads",
]
