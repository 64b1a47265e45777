"""Verdicts on the vendor claims of docs/claims.md: one function per claim, one rule per claim.

>>> from ipusim import claims
>>> v = claims.data_movement_energy()      # doctest: +SKIP
>>> v.state, v.numbers["data_saving_on_chip"], v.rule     # doctest: +SKIP
>>> claims.scoreboard()                    # all 15, in claim order  # doctest: +SKIP

Each verdict is ``supported``, ``contradicted`` or ``depends`` (``ipusim.claims.verdict``),
computed from library numbers by the rule in ``ipusim.claims.rules``; a verdict that rests
on assumed prices or on something the user chooses is ``depends`` and states its break-even
value. Every claim compares the chips of its row of one table (``ipusim.claims.comparisons``:
same generation, GC200 against A100-80GB, unless the article names a part; Bow against H100 and
H200 as a sensitivity row, ``sensitivity(n)``) at one price set (``ipusim.prices``), and a claim
that rests on prices has one break-even, computed here. Notebooks and the checklist judge a
claim with the same rule, and ``python -m ipusim claims [--json]`` prints the scoreboard.

================  ===========================================================================
``verdict``       ``ClaimVerdict`` and its three states
``rules``         one comparator per claim, its threshold and its rule in words
``comparisons``   which chips each claim compares, at which prices; the one break-even
``common``        what the judges share: ``make_verdict``, prices, the cached BERT-base step
``architecture``  claims 1-5: on-chip bandwidth, data-movement energy, cores, compiling, latency
``inference``     claims 6-8 and 14: dynamic batching, BERT-base throughput, lengths, per watt
``deployment``    claims 9-10: cost at the same throughput, a hybrid GPU + tile-chip deployment
``training``      claims 11-13 and 15: training cost, the memory wall, embeddings, bottlenecks
================  ===========================================================================
"""

from __future__ import annotations

from .. import texttable
from . import comparisons, rules
from .architecture import (
    data_movement_energy,
    dynamic_graphs,
    fine_grained_parallelism,
    on_chip_bandwidth,
    tile_memory_latency,
)
from .common import clear_cache
from .comparisons import TABLE, break_even_usd_per_chip_hour, run_break_even
from .deployment import hardware_cost, hybrid_deployment
from .inference import bert_throughput, dynamic_batching, equal_power, variable_length
from .training import memory_bottleneck, memory_wall_training, sparse_embeddings, training_cost
from .verdict import CONTRADICTED, DEPENDS, STATES, SUPPORTED, ClaimVerdict

CLAIMS = {
    1: on_chip_bandwidth,
    2: data_movement_energy,
    3: fine_grained_parallelism,
    4: dynamic_graphs,
    5: tile_memory_latency,
    6: dynamic_batching,
    7: bert_throughput,
    8: variable_length,
    9: hardware_cost,
    10: hybrid_deployment,
    11: training_cost,
    12: memory_wall_training,
    13: sparse_embeddings,
    14: equal_power,
    15: memory_bottleneck,
}
"""Claim number (docs/claims.md) -> the function that judges it."""


def judge(claim: int) -> ClaimVerdict:
    """The verdict on claim number ``claim`` (1-15, docs/claims.md)."""
    if isinstance(claim, bool) or not isinstance(claim, int) or claim not in CLAIMS:
        raise ValueError(
            f"claim must be a claim number {min(CLAIMS)}-{max(CLAIMS)} (docs/claims.md), got {claim!r}"
        )
    return CLAIMS[claim]()


def sensitivity(claim: int) -> list[ClaimVerdict]:
    """Claim ``claim`` judged by the same rule on each later pair of its comparison-table row
    (``comparisons.TABLE[claim].sensitivity``: Bow against H100 and H200), in that order."""
    judge(claim)  # checks the number
    return [CLAIMS[claim](tile=t, gpu=g) for t, g in TABLE[claim].sensitivity]


def scoreboard(claims=None) -> list[ClaimVerdict]:
    """Verdicts on ``claims`` (claim numbers; default all 15), in claim order."""
    nums = sorted(CLAIMS) if claims is None else list(claims)
    return [judge(n) for n in nums]


def scoreboard_markdown(verdicts: list[ClaimVerdict], *, links: bool = False) -> str:
    """A Markdown table: claim, verdict, the numbers in one line, the function that judges it;
    ``links`` adds a column of links to the notebooks that teach each claim (for a notebook)."""
    head = ["#", "claim", "verdict", "what the library computes", "judged by"]
    rows = []
    for v in verdicts:
        be = f" Break-even: {v.break_even}." if v.break_even else ""
        row = [v.claim, v.title, f"**{v.state}**", f"{v.summary}.{be}", f"`{v.function}`"]
        if links:
            row.append(", ".join(f"[{nb[:2]}]({nb})" for nb in v.notebooks))
        rows.append(row)
    return texttable.markdown(head + (["taught in"] if links else []), rows)


__all__ = [
    "CLAIMS",
    "TABLE",
    "CONTRADICTED",
    "DEPENDS",
    "STATES",
    "SUPPORTED",
    "ClaimVerdict",
    "bert_throughput",
    "break_even_usd_per_chip_hour",
    "clear_cache",
    "comparisons",
    "data_movement_energy",
    "dynamic_batching",
    "dynamic_graphs",
    "equal_power",
    "fine_grained_parallelism",
    "hardware_cost",
    "hybrid_deployment",
    "judge",
    "memory_bottleneck",
    "memory_wall_training",
    "on_chip_bandwidth",
    "rules",
    "run_break_even",
    "scoreboard",
    "scoreboard_markdown",
    "sensitivity",
    "sparse_embeddings",
    "tile_memory_latency",
    "training_cost",
    "variable_length",
]
