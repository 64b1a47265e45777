"""Sparse embeddings and fine-grained gathers: tables sharded over tiles or held in HBM or
Streaming Memory, access skew (Zipf), hot-row caches, and one GNN neighbour gather.

* ``workload``: tables, look-ups per sample, batch, skew; published presets (MLPerf DLRM).
* ``access``: who owns and who asks for each row; cache hit rates; the Numba tally kernel.
* ``machines``: the time of one step on a tile chip (BSP supersteps) and on GPUs (waves).
* ``dlrm``: a DLRM training step (embeddings and their all-to-all, MLPs, interaction, all-reduce,
  optimizer, host) on a cluster of either kind, against TorchRec's published rows.
"""

from .access import cache_rows, harmonic, hit_rate, lookup_stream, tally
from .machines import EmbeddingResult, simulate, uniform_closed_form
from .workload import (
    PRESETS,
    Table,
    Workload,
    gnn_products,
    power_law_degrees,
    preset,
    uniform_tables,
)

__all__ = [
    "PRESETS",
    "EmbeddingResult",
    "Table",
    "Workload",
    "cache_rows",
    "gnn_products",
    "harmonic",
    "hit_rate",
    "lookup_stream",
    "power_law_degrees",
    "preset",
    "simulate",
    "tally",
    "uniform_closed_form",
    "uniform_tables",
]
