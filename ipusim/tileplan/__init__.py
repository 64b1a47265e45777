"""Tile memory planner: each op of a step cut into pieces, dealt to tiles, run in serial passes.

1. **Pieces.** An op is cut into pieces (a block of a matmul, a chunk of query rows of one
   head of one sequence, a row of a layer norm, one token's embedding rows) and piece ``i``
   goes to tile ``i * tiles // pieces`` (Poplar maps work statically, at compile time). When
   the pieces do not divide evenly some tiles get one more piece than others, or are idle.
2. **Temporary budget.** While an op runs, a tile holds its *working set*: gathered input
   and weight blocks, output blocks or FP32 partial sums, attention score blocks. The
   planner keeps the working set within ``AVAILABLE_MEMORY_PROPORTION`` of the tile's SRAM
   (Poplar's ``availableMemoryProportion``, POPLIBS-OPT).
3. **Serial passes.** A matmul whose working set does not fit in one pass (one block per
   tile) runs as ``passes`` serial passes over blocks of ``k`` (FP32 partial sums accumulate
   across passes), of ``m`` or of ``n``: along each axis the fewest passes that fit, and of
   those and the one-pass plan (when it fits) the fastest, ranked with the calibrated costs
   (``ipusim.tile_calibration``). Each pass is a superstep (sync, exchange of its input and
   weight blocks, compute), plus a reduction superstep for a grid split over ``k`` (once at the end
   for passes over ``k``, after every pass otherwise). Weights are gathered again in every
   pass that needs them. Weights are *stored* spread evenly over all tiles, a layout
   independent of the compute grid (ASSUMPTION: Poplar may lay a weight out for its
   matmul, but an even spread keeps a small batch, whose grid uses few tiles, from piling
   weights onto them); each pass's exchange gathers its weight blocks from that layout.
4. **Online softmax.** Attention (forward, prefill) runs over ``key_blocks`` blocks of keys
   with an online softmax (running max and sum per query row, the FP32 context accumulator
   rescaled for every block after the first, Milakov & Gimelshein 2018; Dao et al. 2022), so
   the scores are never held whole. Each key block is a pass of each of the three attention
   ops (scores, softmax, context), each a superstep. Decode (one query row) splits its keys
   over tiles instead (ASSUMPTION: the merge of split keys' partial softmaxes is not costed).
5. **Live inputs.** Besides its working set an op holds its input activation, spread over
   all tiles, when that input is not the residual stream (which ``tiles`` counts as live
   throughout): attention holds Q, K and V; ``attn_out`` the context; ``ffn_down`` the
   activation. Passes over ``m`` or ``n`` also hold the output finished so far.

Every op's plan (``OpPlan``) says its partition, passes and block shape; its ``temp`` is the
per-tile temporary peak (working set + live inputs), which ``tiles`` adds to the always-live
bytes. ASSUMPTIONs are marked.

The package, one idea a module (each imports only the ones above it):

* ``base``: dealing pieces to tiles (the ``_distribute`` kernel), ``Phase``, ``OpPlan``, the
  working-set budget.
* ``search``: the candidate counts and bisection the planners share, and their plan caches.
* ``matmul``: the grid-and-passes search (the ``_grid_search`` kernel) and ``map_matmul``.
* ``attention``: query chunks and key blocks with an online softmax (the cost kernel).
* ``rows``: row-wise ops (norms, activation), element-wise ops in place, the embedding look-up.
* ``step``: ``plan_step``, every op of a step planned within the room the step leaves.

Units: bytes, FLOP, cycles; per-tile arrays have one entry per tile.
"""

from __future__ import annotations

from .attention import (
    RESCALE_FLOPS_PER_ROW,
    attention_live_bytes,
    attention_tables,
    map_attention,
    plan_attention,
)
from .base import AVAILABLE_MEMORY_PROPORTION, PARTIAL_BYTES, OpPlan, Phase, budget_bytes
from .matmul import PASS_AXES, MatmulPlan, map_matmul, plan_matmul
from .rows import map_elementwise, map_embedding, map_rows
from .search import clear_plan_cache
from .step import always_live_other_bytes, op_budget, plan_step

__all__ = [
    "AVAILABLE_MEMORY_PROPORTION",
    "PARTIAL_BYTES",
    "PASS_AXES",
    "RESCALE_FLOPS_PER_ROW",
    "MatmulPlan",
    "OpPlan",
    "Phase",
    "always_live_other_bytes",
    "attention_live_bytes",
    "attention_tables",
    "budget_bytes",
    "clear_plan_cache",
    "map_attention",
    "map_embedding",
    "map_matmul",
    "map_elementwise",
    "map_rows",
    "op_budget",
    "plan_attention",
    "plan_matmul",
    "plan_step",
]
