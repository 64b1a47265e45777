"""C2's proposal for generation: prefill on one chip kind, decode on the other, when that carries
more requests/s at the p99 target than either kind alone at the same hourly cost.

The case's traffic (its prompt lengths, its reply length) goes through
``serving.deployments.compare`` on the first GPU and the first tile-chip candidate, at the
case's prices; the split is proposed when its best direction beats the best co-located
deployment. Weighed on single-chip replicas only: a model that needs several chips of either kind
per replica is reported as not weighed.
"""

from __future__ import annotations

import numpy as np

from .. import machine, workloads
from ..serving import deployments
from . import search
from .evidence import Evidence, fmt

SPLIT_REQUESTS = 2000  # requests per capacity probe of each deployment


def _fits_one_chip(chip, model, prompt: int) -> bool:
    s = workloads.step(model, [prompt], phase="prefill")
    return machine.simulate(chip, s).fit == "on_chip"


def split_proposal(case) -> tuple[list[dict], list[Evidence], str]:
    """(table rows, evidence, a sentence for C2's reason: the proposal and why, or why not);
    nothing for a case that does not generate or lacks a GPU or a tile-chip candidate."""
    if case.task != "generate":
        return [], [], ""
    kinds = {}
    for c in case.candidates:
        kinds.setdefault(c.chip.kind, c.chip.name)
    if not {"gpu", "tile"} <= set(kinds):
        return [], [], ""
    gpu, tile = kinds["gpu"], kinds["tile"]
    m = case.model
    longest = max(8, m.max_positions - case.output_tokens)
    prompts = np.minimum(search.traffic_lengths(case, SPLIT_REQUESTS), longest)
    big = int(prompts.max())
    if not all(_fits_one_chip(c, m, big) for c in (gpu, tile)):
        return (
            [],
            [],
            (
                f"a disaggregated split (prefill on one kind, decode on the other) was not weighed: "
                f"{m.name} does not fit one {gpu} and one {tile} on chip (the split is weighed on "
                "single-chip replicas)"
            ),
        )
    outputs = np.full(prompts.size, case.output_tokens)
    try:
        cmp = deployments.compare(
            gpu, tile, m, prompts, outputs, prices=case.prices, slo_p99_s=case.slo_p99_s, iters=7
        )
    except ValueError as e:  # a pool that cannot hold this traffic's longest prompt or context
        return [], [], f"a disaggregated split was not weighed: {e}"
    split, colo = cmp.best("disaggregated"), cmp.best("co-located")
    gain = cmp.gain("disaggregated")
    ev = [
        Evidence(
            "split.gain_x",
            gain,
            "x",
            f"best split ({split.name}) over the best co-located deployment ({colo.name}), "
            f"capacity at p99 <= {fmt(case.slo_p99_s * 1e3, 'ms')}, at most {fmt(colo.usd_per_hour, 'USD')} an hour each",
        )
    ]
    p, d = split.chips[0][0], split.chips[1][0]
    ph = cmp.phase_s
    why = (
        f"a prompt of {cmp.median_prompt} tokens prefills in {fmt(ph[p]['prefill_s'] * 1e3, 'ms')} on {p} "
        f"against {fmt(ph[d]['prefill_s'] * 1e3, 'ms')} on {d}, and a decode step of "
        f"{cmp.max_batch} sequences takes {fmt(ph[d]['decode_s'] * 1e3, 'ms')} on {d} against "
        f"{fmt(ph[p]['decode_s'] * 1e3, 'ms')} on {p}"
    )
    if gain > 1:
        text = (
            f"proposal: a disaggregated split, {split.name} ({fmt(split.usd_per_hour, 'USD')} an "
            f"hour), carries {gain:.2f}x the requests/s of {colo.name} ({fmt(colo.usd_per_hour, 'USD')} "
            f"an hour) at the same p99 target, because {why}"
        )
    else:
        text = (
            f"a disaggregated split does not pay here: its best direction ({split.name}) carries "
            f"{gain:.2f}x the requests/s of {colo.name} at no more hourly cost ({why})"
        )
    return cmp.rows(), ev, text
