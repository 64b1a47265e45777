"""Concept diagrams: one picture per idea, shown before the first data figure of its topic.

Each function takes ``ax=None`` (a new figure of a readable size when None), draws and returns
the axes. The numbers written on a diagram come from the library, never typed in: capacities
and bandwidths from ``ipusim.hardware`` presets, BSP phase lengths from a chip's sync and
exchange rates, batching timelines from ``ipusim.serving.simulate`` on a small toy service
model, rows from ``ipusim.packing`` on a seeded sample of ``ipusim.lengths``, check names from
``ipusim.checklist``, look-up granules from ``ipusim.embeddings``. Colours per chip and per BSP
phase come from ``ipusim.plots.style`` (the phases as ``ipusim.plots.tiles``' traces colour them).

=======================  ==================================================================
``series_strip``         the notebooks 01-09 as boxes, the current one highlighted
``memory_hierarchy``     tile chip vs GPU: memory levels with capacities and bandwidths
``bsp_superstep``        sync, exchange and compute of one superstep over a few tiles
``batching_timelines``   a queue with a batcher, then one timeline per batching policy
``padding_rows``         the same requests padded, bucketed and packed into rows
``checklist_pipeline``   case -> checks C1..C8 -> verdict
``parallelism_grid``     data, tensor and pipeline parallelism on a grid of chips
``embedding_lookup``     rows of an embedding table against 32-byte sectors / 64-byte bursts
``sweep_grid``           a two-parameter sweep: one row per point, and a break-even line
``verdict_pipeline``     claim -> model -> rule -> verdict; published rows: calibration vs check
=======================  ==================================================================

The package, one module per topic (the functions above are imported here, so a notebook calls
``diagrams.memory_hierarchy()``):

============  ===============================================================================
``shapes``    the drawing vocabulary every diagram shares: canvas, boxes, arrows, font size
``series``    ``SERIES`` and ``series_strip``
``chips``     ``memory_hierarchy``, ``bsp_superstep``, ``parallelism_grid``, ``embedding_lookup``
``batching``  ``batching_timelines`` (with its toy service model), ``padding_rows``
``methods``   ``checklist_pipeline``, ``sweep_grid``, ``verdict_pipeline``
============  ===============================================================================
"""

from .batching import ROWS_SAMPLE, batching_timelines, padding_rows, toy_policies
from .chips import bsp_superstep, embedding_lookup, memory_hierarchy, parallelism_grid
from .methods import checklist_pipeline, sweep_grid, verdict_pipeline
from .series import SERIES, series_strip
from .shapes import FONT

__all__ = [
    "FONT",
    "ROWS_SAMPLE",
    "SERIES",
    "batching_timelines",
    "bsp_superstep",
    "checklist_pipeline",
    "embedding_lookup",
    "memory_hierarchy",
    "padding_rows",
    "parallelism_grid",
    "series_strip",
    "sweep_grid",
    "toy_policies",
    "verdict_pipeline",
]
