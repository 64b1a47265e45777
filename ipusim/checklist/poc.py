"""C8: what to measure in a proof of concept, from the other checks' weakest numbers."""

from __future__ import annotations

import math

from .case import Case
from .context import Context
from .evidence import Check, Evidence, fmt


# ---------------------------------------------------------------------------------------
# C8 What to measure in a proof of concept
# ---------------------------------------------------------------------------------------
def check_poc(case: Case, ctx: Context | None, checks: dict) -> Check:
    """C8: the short list of experiments, each with the prediction it confirms or refutes."""
    rows = []
    c1, c2, c3, c4, c6, c7 = (checks.get(k) for k in ("C1", "C2", "C3", "C4", "C6", "C7"))
    if c1 is not None and c1.tables.get("fit"):
        for r in c1.tables["fit"]:
            rows.append(
                {
                    "measure": f"memory occupancy on {r['candidate']}",
                    "prediction": f"{fmt(r['need_GB'], 'GB')} needed per replica vs {fmt(r['capacity_GB'], 'GB')} per chip ({r['placement']})",
                    "refuted_if": "the compiler reports out of memory, or more than 1.2x the predicted bytes",
                    "from": "C1",
                }
            )
    if c2 is not None and c2.tables.get("throughput"):
        for r in c2.tables["throughput"]:
            if r["capacity_req_s"] > 0:
                rows.append(
                    {
                        "measure": f"throughput at p99 <= {fmt(case.slo_p99_s * 1e3, 'ms')} on {r['candidate']}",
                        "prediction": f"{fmt(r['capacity_req_s'], 'req/s')} with {r['policy']}, {r['mode']}",
                        "refuted_if": "measured below 0.7x the prediction (the machine model is optimistic) or above 1.3x",
                        "from": "C2",
                    }
                )
    if c3 is not None and c3.evidence:
        rows.append(
            {
                "measure": "padding waste and packing speed-up on your real traffic",
                "prediction": f"{fmt(c3.ev('padding_to_max'), '%')} padding at max length; packing efficiency {fmt(c3.ev('packing_efficiency'), '%')}",
                "refuted_if": "your logged length histogram gives a padding share more than 10 points away",
                "from": "C3",
            }
        )
    if c4 is not None and c4.tables.get("cost"):
        for r in c4.tables["cost"]:
            if math.isfinite(r["energy_j_per_request"]):
                rows.append(
                    {
                        "measure": f"energy per request on {r['candidate']} (board power meter)",
                        "prediction": f"at most {fmt(r['energy_j_per_request'], 'J')} (board power all the time); busy-only {fmt(r['busy_energy_j_per_request'], 'J')}",
                        "refuted_if": "measured energy above the first figure",
                        "from": "C4",
                    }
                )
    if c6 is not None and c6.status != "skipped":
        for r in c6.tables["training"]:
            if r["params_B"] == max(x["params_B"] for x in c6.tables["training"]):
                rows.append(
                    {
                        "measure": f"convergence speed for training on {r['chip']} (tokens/s and loss vs tokens)",
                        "prediction": f"{fmt(r['chip_hours'] / (case.training.token_budget / 1e9), 'chip-hours')} per billion tokens for {r['model']}; same loss per token as the other machine at the same numerics",
                        "refuted_if": "tokens/s per chip below 0.7x, or loss per token worse (numerics or packing change convergence)",
                        "from": "C6",
                    }
                )
    if c7 is not None and case.answers.get("dynamic_shapes", "unknown") in (
        "bucketed",
        "arbitrary",
        "unknown",
    ):
        rows.append(
            {
                "measure": "compile time and memory per input shape (bucket)",
                "prediction": "one compiled graph per shape; padding or packing to a few shapes keeps it bounded",
                "refuted_if": "recompilation appears in the serving path",
                "from": "C7",
            }
        )
    ev = [
        Evidence(
            "experiments",
            len(rows),
            "experiments",
            "each with a prediction from the check it names",
        )
    ]
    return Check(
        "C8",
        "What to measure in a proof of concept",
        "info",
        f"{len(rows)} experiments, each confirming or refuting a simulated prediction",
        "the simulation is a model: the proof of concept measures the numbers the verdict rests on",
        ev,
        {"experiments": rows},
        "checks C1-C7",
    )
