"""C6: the training claim, priced from ``ipusim.training`` on each chip kind."""

from __future__ import annotations

import math

from .case import Case
from .context import Context
from .evidence import Check, Evidence, fmt

# ---------------------------------------------------------------------------------------
# C6 Training
# ---------------------------------------------------------------------------------------
TRAINING_CLAIM = (
    "70B-175B parameter models trained on IPU clusters at 15-20% lower cost per dollar "
    "than GPU clusters"
)


def training_chips(case: Case) -> list:
    """One chip per kind for the training check: the case's candidates, else GC200 and A100-80GB."""
    from .. import hardware

    seen = {}
    for cand in case.candidates:
        seen.setdefault(cand.chip.kind, cand.chip)
    seen.setdefault("tile", hardware.chip("gc200"))
    seen.setdefault("gpu", hardware.chip("a100-80gb"))
    return [seen["tile"], seen["gpu"]]


TRAIN_CHIPS = (
    1024  # chips per training run in C6 (Megatron-LM's GPT-3 run, NARAYANAN2021); more if none fits
)
TRAINING_MODEL_NOTE = (
    "Time from ipusim.training: the fastest placement (data, tensor, pipeline parallel, micro-batch, "
    "recomputation, optimizer-state sharding) on the chips, per-op rooflines, 1F1B bubble, collectives at "
    "published link rates, Streaming Memory for what does not fit in tile SRAM; one GPU matmul efficiency "
    "set from Megatron-LM's GPT-3 175B run, one tile GEMM efficiency from a measured GEMM (JIA-FT)."
)


def train_estimate(m, c, tr, prices) -> dict:
    """Memory, chips, time and cost to train ``m`` on ``tr.token_budget`` tokens on chip ``c``
    (``ipusim.training``: the best placement on ``TRAIN_CHIPS`` chips, or on the smallest power of
    two above it that fits)."""
    from .. import training

    seq, gb0 = training.recipe(m)
    gb = max(1, (seq * gb0) // tr.seq_len)
    chips_min = training.smallest_chip_count(m, c, seq_len=tr.seq_len, global_batch=gb)
    n = max(TRAIN_CHIPS, chips_min or TRAIN_CHIPS)
    r = training.best_placement(m, c, n, seq_len=tr.seq_len, global_batch=gb, explain=False)
    if r.fit == "does_not_fit":
        inf = math.inf
        return {
            "model": m.name,
            "params_B": m.params / 1e9,
            "chip": c.name,
            "kind": c.kind,
            "memory_GB": r.memory_total_bytes / 1e9,
            "placement": "does not fit",
            "fit": r.fit,
            "chips_min": chips_min or 0,
            "chips": n,
            "mfu": 0.0,
            "days": inf,
            "chip_hours": inf,
            "energy_MWh": inf,
            "usd": inf,
            "flops_per_token_6N": 6.0 * m.params,
        }
    run = r.run(
        tr.token_budget, usd_per_chip_hour=prices.chip_hour(c), usd_per_kwh=prices.usd_per_kwh
    )
    return {
        "model": m.name,
        "params_B": m.params / 1e9,
        "chip": c.name,
        "kind": c.kind,
        "memory_GB": r.memory_total_bytes / 1e9,
        "placement": r.placement.label(),
        "fit": r.fit,
        "chips_min": chips_min,
        "chips": n,
        "mfu": r.mfu,
        "days": run.days,
        "chip_hours": run.chip_hours,
        "energy_MWh": run.energy_kwh / 1e3,
        "usd": run.cost_usd,
        "flops_per_token_6N": 6.0 * m.params,
    }


def check_training(case: Case, ctx: Context | None = None) -> Check:
    """C6: footprint, chips, time and cost to train each model; the cost claim checked."""
    tr = case.training
    if tr is None:
        return Check(
            "C6",
            "Training",
            "skipped",
            "not asked (add a [training] section or --train)",
            "the case is about inference only",
            [],
            {},
            "",
        )
    chips = training_chips(case)
    rows = [train_estimate(m, c, tr, case.prices) for m in tr.models for c in chips]
    ev, ratios = [], {}
    for m in tr.models:
        t = next(r for r in rows if r["model"] == m.name and r["kind"] == "tile")
        g = next(r for r in rows if r["model"] == m.name and r["kind"] == "gpu")
        ratio = t["usd"] / g["usd"]
        ratios[m.name] = ratio
        ev.append(
            Evidence(f"cost_ratio.{m.name}", ratio, "x", f"{t['chip']} / {g['chip']} cost to train")
        )
        ev.append(
            Evidence(
                f"chips.{m.name}.{t['chip']}",
                t["chips_min"],
                "chips",
                f"fewest chips (power of two) that fit; {t['fit']} on {t['chips']}: {t['placement']}",
            )
        )
        ev.append(
            Evidence(
                f"chips.{m.name}.{g['chip']}",
                g["chips_min"],
                "chips",
                f"fewest chips (power of two) that fit; on {g['chips']}: {g['placement']}",
            )
        )
        ev.append(
            Evidence(
                f"memory.{m.name}",
                t["memory_GB"],
                "GB",
                f"per {t['chip']} at the best placement (weights, grads, Adam state, activations)",
            )
        )
    tile_c, gpu_c = chips
    # Price at which the tile chip would be the claimed share cheaper to train the largest model.
    # The case's own model when it is in the list (a training question is about it), else the largest.
    big = next(
        (m for m in tr.models if m.name == case.model.name), max(tr.models, key=lambda m: m.params)
    )
    from .. import claims
    from ..claims import rules as claim_rules

    claimed = claim_rules.CLAIMED_TRAINING_SAVING  # claim 11's, one home (ipusim.claims.rules)

    e_tile = tile_c.power_w / 1e3 * case.prices.usd_per_kwh
    need = {}  # per model: the tile chip-hour price at which it trains `claimed` cheaper (cost is linear in it)
    for m in tr.models:
        t_m = next(r for r in rows if r["model"] == m.name and r["kind"] == "tile")
        g_m = next(r for r in rows if r["model"] == m.name and r["kind"] == "gpu")
        need[m.name] = claims.break_even_usd_per_chip_hour(  # claim 11's one break-even rule
            g_m["usd"], t_m["chip_hours"], e_tile * t_m["chip_hours"], claimed
        )
    need_price = need[big.name]
    ev.append(
        Evidence(
            "claim_price_needed",
            need_price,
            "USD",
            f"break-even for {big.name} alone: the {tile_c.name} chip-hour price at or below which "
            f"{big.name} trains {claimed:.0%} cheaper than on {gpu_c.name}",
        )
    )
    judged = [m.name for m in tr.models if m.params >= 60e9] or [big.name]
    # The claim is "15-20% lower cost"; judged by the claim's one rule (ipusim.claims.rules.price_claim):
    # with any price ASSUMED it depends on the price (or is contradicted when no price gives it).
    assumed = any(case.prices.is_assumed(n) for n in (tile_c.name, gpu_c.name, "kwh"))
    state = claim_rules.price_claim(
        min(1 - ratios[n] for n in judged),
        min(need[n] for n in judged),
        claimed,
        assumed,
    )
    # The models the claim is judged on, named wherever its price is quoted (C6's reason quotes
    # the case's model alone, a different number).
    claim_price = min(need[n] for n in judged)  # the verdict's break-even: every judged model
    judged_label = (
        f"{' and '.join(judged)}, the claim's 70B-175B models"
        if any(m.params >= 60e9 for m in tr.models)
        else f"{big.name}, no 70B-175B model in the case"
    )
    verdict = (
        state
        if state != "depends"
        else (
            f"depends on the price ({claimed:.0%} cheaper for each of {judged_label}, at a {tile_c.name} "
            f"price at or below {fmt(claim_price, 'USD')}/chip-hour)"
        )
    )
    ev.append(Evidence("claim_verdict", verdict, "", TRAINING_CLAIM))
    status = "pass" if state == "supported" else ("fail" if state == "contradicted" else "warn")
    summary = (
        f"{tile_c.name} / {gpu_c.name} training cost ratio: "
        + ", ".join(f"{k} {fmt(v, 'x')}" for k, v in ratios.items())
        + f"; claim of 15-20% lower cost: {verdict}"
    )
    reason = (
        f"at the case prices, training {big.name} on {tile_c.name} costs {fmt(ratios[big.name], 'x')} "
        f"what it costs on {gpu_c.name}; {big.name} alone trains {claimed:.0%} cheaper with {tile_c.name} at "
        f"or below {fmt(need_price, 'USD')}/chip-hour (its break-even; today "
        f"{fmt(case.prices.chip_hour(tile_c), 'USD')}), while the claim's verdict takes the lowest "
        f"break-even of {judged_label}: {fmt(claim_price, 'USD')}/chip-hour. " + TRAINING_MODEL_NOTE
    )
    data = {"ratios": ratios, "verdict": verdict, "state": state, "big": big.name}
    return Check(
        "C6",
        "Training",
        status,
        summary,
        reason,
        ev,
        {"training": rows},
        "ipusim.training.best_placement (step time, MFU) and TrainingStep.run (days, cost)",
        data,
    )
