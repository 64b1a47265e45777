"""Training placement search: the fastest placement of a step on 1,024 chips.

Kernel: ``training.best_placement`` (memory check over the whole grid first, then one
vectorised ``model.evaluate`` over the placements that fit).
Reference: ``tests/training_reference.search_reference`` (every placement on the grid timed one at a time,
no pruning), the same function the tests compare to.
"""

from __future__ import annotations

import sys
from pathlib import Path

from _timing import kernel_row

from ipusim import training

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import training_reference  # noqa: E402  (the plain-Python references live beside the tests)


def rows(quick: bool) -> list[dict]:
    cases = (
        [("llama-2-7b", "a100-80gb", 64)]
        if quick
        else [
            ("gpt-3-175b", "a100-80gb", 1024),
            ("llama-2-70b", "gc200", 1024),
            ("llama-2-70b", "h100-sxm", 2048),
        ]
    )
    out = []
    for model, chip, chips in cases:
        from ipusim import workloads
        from ipusim.training.search import candidates

        n = candidates(workloads.model(model), chips, training.recipe(workloads.model(model))[1])[
            "d"
        ].size
        out.append(
            kernel_row(
                f"training placement search {model} on {chips} {chip} ({n:,} placements)",
                lambda m=model, c=chip, n_=chips: training.best_placement(m, c, n_, explain=False),
                lambda m=model, c=chip, n_=chips: training_reference.search_reference(m, c, n_),
                goal="under 2 s for 1,024 chips",
                note="kernel: memory pre-check + one vectorised evaluation; reference: one placement at a time",
            )
        )
    return out
