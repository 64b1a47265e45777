"""C1: do weights, activations (and KV cache) fit in each candidate's fast memory."""

from __future__ import annotations

from .case import Case
from .context import Context
from .evidence import Check, Evidence, fmt


def _gb(x):
    return x / 1e9


# ---------------------------------------------------------------------------------------
# C1 Fit
# ---------------------------------------------------------------------------------------
def _placed_fits(f: dict) -> bool:
    """Whether ``ipusim.placement`` fits the case on the chips given (C1's multi-chip fit)."""
    return f.get("placed") is not None and f["placed"].fit != "does_not_fit"


def check_fit(case: Case, ctx: Context | None = None) -> Check:
    """C1: do weights, activations (and KV cache) fit on chip; if not, what it costs."""
    ctx = ctx or Context(case)
    rows, ev = [], []
    any_fit, all_fit = False, True
    for cand in case.candidates:
        f = ctx.fit(cand)
        c = cand.chip
        ws = f["need"]
        place = f["given"][0] if f["given"] else None
        placed = f.get("placed")
        placed_fits = placed is not None and placed.fit != "does_not_fit"
        options = "; ".join(p.label for p in f["placements"]) or "none"
        row = {
            "candidate": cand.label,
            "memory": "tile SRAM (after code)" if c.kind == "tile" else "HBM",
            "capacity_GB": _gb(f["capacity"]),
            "weights_GB": _gb(ws["weights"]),
            "activations_GB": _gb(ws["activations"]),
            "kv_cache_GB": _gb(ws["kv"]),
            "need_GB": _gb(ws["total"]),
            "chips_to_fit": f["chips_on_chip"],
            "chips_by_fit_rule": f["chips_fit_rule"] if f["chips_fit_rule"] is not None else "none",
            "placement": place.label
            if place
            else (
                f"{placed.label()} on {placed.chips_used} chips ({placed.fit})"
                if placed_fits
                else "does not fit"
            ),
            "max_batch_fit": place.max_batch if place else 0,
            "other_options": options,
        }
        if placed is not None:
            row["placement_search"] = (
                f"{placed.label()} on {placed.chips_used} of {placed.chips} chips: "
                + (placed.fit if placed_fits else placed.reason)
            )
        if "stream_s_per_pass" in f and f["chips_on_chip"] > 1:
            row["stream_ms_per_pass"] = f["stream_s_per_pass"] * 1e3
        rows.append(row)
        any_fit |= place is not None or placed_fits
        all_fit &= place is not None or placed_fits
        if placed is not None:
            ev.append(
                Evidence(
                    f"placement.{cand.label.replace(' ', '')}",
                    placed.fit,
                    "",
                    f"ipusim.placement on the {cand.count} chips given: {placed.label()} "
                    "(tensor, pipeline, data parallel, micro-batches), one sequence of the longest length",
                )
            )
        key = cand.label.replace(" ", "")
        ev.append(
            Evidence(
                f"need.{key}",
                _gb(ws["total"]),
                "GB",
                f"weights + largest op's activations at {ws['length']} tokens"
                + (" + KV cache" if ws["kv"] else ""),
            )
        )
        ev.append(Evidence(f"capacity.{key}", _gb(f["capacity"]), "GB", row["memory"]))
        ev.append(
            Evidence(
                f"chips_to_fit.{key}",
                f["chips_on_chip"],
                "chips",
                "to hold everything in fast memory, chip-wide bytes (a lower bound)",
            )
        )
        ev.append(
            Evidence(
                f"chips_by_fit_rule.{key}",
                f["chips_fit_rule"] if f["chips_fit_rule"] is not None else "none",
                "chips" if f["chips_fit_rule"] is not None else "",
                "fewest whose pipeline stages fit each tile / the HBM (StepResult.fits)",
            )
        )
        if "stream_s_per_pass" in f and f["chips_on_chip"] > 1:
            ev.append(
                Evidence(
                    f"stream_time.{key}",
                    f["stream_s_per_pass"] * 1e3,
                    "ms",
                    "to stream the weights once from off-chip DRAM (per forward pass)",
                )
            )
    placed_only = [
        c.label for c in case.candidates if not ctx.fit(c)["given"] and _placed_fits(ctx.fit(c))
    ]
    if all_fit and not placed_only:
        status, reason = (
            "pass",
            "every candidate holds the model in its fast memory with the chips given",
        )
    elif any_fit:
        status = "warn"
        nowhere = [
            c.label
            for c in case.candidates
            if not ctx.fit(c)["placements"] and c.label not in placed_only
        ]
        bad = [
            r["candidate"]
            for r in rows
            if r["placement"] == "does not fit" and r["candidate"] not in nowhere
        ]
        parts = []
        served = [  # a serving replica was built from the placement (Context.fit, kind "placed")
            c.label
            for c in case.candidates
            if c.label in placed_only and any(p.kind == "placed" for p in ctx.fit(c)["placements"])
        ]
        if served:
            parts.append(
                f"{', '.join(served)}: no pipeline of whole layers on the chips given, nor streamed "
                "weights on one chip, fits by the fit rule; it fits only by a tensor/pipeline/data "
                "placement (ipusim.placement, the placement column) on some or all of the chips "
                "given, and C2-C5 serve it as replicas of that placement"
            )
        if set(placed_only) - set(served):
            parts.append(
                f"{', '.join(c for c in placed_only if c not in served)}: fits by tensor/pipeline/data "
                "placement (ipusim.placement) for one sequence, but no serving replica was built from "
                "it (it fits one chip, or no batch fits its tensor x pipeline chips in every phase), so "
                "C2-C5 cannot price it"
            )
        if bad:
            parts.append(
                f"{', '.join(bad)}: the model does not fit the chips given; the cost check prices "
                "the chips it would need (spread or streamed) instead"
            )
        if nowhere:
            parts.append(
                f"{', '.join(nowhere)}: no placement fits by the machine models' fit rule (no "
                f"pipeline of 1 to {case.model.layers} chips, nor streamed weights, nor a tensor/pipeline/data "
                f"placement on the chips given (placement_search), holds one sequence of "
                f"{case.model.max_positions} tokens on each tile / in HBM), so it drops out of C2-C5"
            )
        reason = "; ".join(parts)
    else:
        status = "fail"
        reason = "the model fits none of the candidates as given"
    fits_nowhere = not any(
        ctx.fit(c)["placements"] or _placed_fits(ctx.fit(c)) for c in case.candidates
    )
    if fits_nowhere:
        status, reason = (
            "fail",
            (
                "the model fits nowhere: no candidate can hold it, even spread over "
                "more chips or streamed from off-chip DRAM"
            ),
        )
    summary = "; ".join(
        f"{r['candidate']}: {r['placement']} ({fmt(r['need_GB'], 'GB')} of "
        f"{fmt(r['capacity_GB'], 'GB')} per chip)"
        for r in rows
    )
    return Check(
        "C1",
        "Fit in on-chip memory",
        status,
        summary,
        reason,
        ev,
        {"fit": rows},
        "workloads.step op bytes (need, chip-wide); StepResult.fits of ipusim.tiles / ipusim.gpu "
        "(tiles.tile_memory_batch_limit per tile) for the placements and batch limits",
        {"fits_nowhere": fits_nowhere},
    )
