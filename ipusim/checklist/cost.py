"""C4: cost per million requests and energy per request, each candidate scaled to the rate."""

from __future__ import annotations

import math

from .case import Case
from .context import Context
from .evidence import Check, Evidence, fmt


# ---------------------------------------------------------------------------------------
# C4 Cost and energy
# ---------------------------------------------------------------------------------------
def check_cost(case: Case, ctx: Context | None = None) -> Check:
    """C4: cost per million requests and energy per request, each candidate scaled to the rate."""
    ctx = ctx or Context(case)
    rows, ev = [], []
    for cand in case.candidates:
        dep = ctx.best(cand)
        key = cand.label.replace(" ", "")
        c = cand.chip
        price = case.prices.chip_hour(c)
        if dep is None:
            rows.append(
                {
                    "candidate": cand.label,
                    "kind": c.kind,
                    "deployment": "none meets the target",
                    "chips_needed": 0,
                    "usd_per_chip_hour": price,
                    "usd_per_hour": math.nan,
                    "usd_per_million": math.inf,
                    "usd_per_million_at_capacity": math.inf,
                    "energy_j_per_request": math.nan,
                    "busy_energy_j_per_request": math.nan,
                    "price_assumed": case.prices.is_assumed(c.name),
                }
            )
            continue
        joules_all = dep.chips_needed * c.power_w / case.rate_per_s
        # Busy-only energy: board power x the chip-seconds the scaled deployment is busy at
        # the offered rate (serving run), per request served. A pipeline batch occupies each
        # of its m chips for 1/m of its time, so its chip-seconds are its time.
        run = ctx.offered(cand, dep, max(1, dep.chips_needed // dep.placement.chips))
        busy_j = c.power_w * float(run.device_busy_s.sum()) / max(run.served, 1)
        rows.append(
            {
                "candidate": cand.label,
                "kind": c.kind,
                "deployment": f"{c.name} x{dep.chips_needed} ({dep.placement.label}, {dep.mode})",
                "chips_needed": dep.chips_needed,
                "usd_per_chip_hour": price,
                "usd_per_hour": dep.usd_per_hour,
                "usd_per_million": dep.usd_per_million,
                "usd_per_million_at_capacity": dep.usd_per_million_at_capacity,
                "energy_j_per_request": joules_all,
                "busy_energy_j_per_request": busy_j,
                "price_assumed": case.prices.is_assumed(c.name),
            }
        )
        ev += [
            Evidence(
                f"chips_needed.{key}",
                dep.chips_needed,
                "chips",
                f"to carry {fmt(case.rate_per_s, 'req/s')} at p99 <= {fmt(case.slo_p99_s * 1e3, 'ms')} (C2 capacity)",
            ),
            Evidence(
                f"usd_per_million.{key}",
                dep.usd_per_million,
                "USD",
                "per million requests, chips + energy"
                + (" (ASSUMED price)" if case.prices.is_assumed(c.name) else ""),
            ),
            Evidence(
                f"usd_per_million_at_capacity.{key}",
                dep.usd_per_million_at_capacity,
                "USD",
                "per million requests if the chips ran at their C2 capacity (large deployments)",
            ),
            Evidence(f"energy_per_request.{key}", joules_all, "J", "board power x chips / rate"),
            Evidence(
                f"busy_energy_per_request.{key}",
                busy_j,
                "J",
                "board power x busy chip-seconds at the offered rate / requests served",
            ),
        ]
    tile = _best_of_kind(rows, "tile")
    gpu = _best_of_kind(rows, "gpu")
    data = {"tile": tile, "gpu": gpu}
    if (
        tile
        and gpu
        and math.isfinite(tile["usd_per_million"])
        and math.isfinite(gpu["usd_per_million"])
    ):
        saving = 1 - tile["usd_per_million"] / gpu["usd_per_million"]
        ev.append(
            Evidence(
                "tile_saving",
                saving * 100,
                "%",
                f"{tile['deployment']} vs {gpu['deployment']}, cost per million requests",
            )
        )
        data["saving"] = saving
        status = "info"
        reason = "each candidate is scaled to the chips it needs for the offered rate at the target, then priced"
        cap_saving = 1 - tile["usd_per_million_at_capacity"] / gpu["usd_per_million_at_capacity"]
        data["saving_at_capacity"] = cap_saving
        ev.append(
            Evidence(
                "tile_saving_at_capacity",
                cap_saving * 100,
                "%",
                "cost per million requests with the chips at their C2 capacity",
            )
        )
        # The tile chip-hour price at which the two cost the same per request at capacity
        # (cost at capacity is linear in the price: (price + energy) / requests per chip-hour).
        tc = next(c for c in case.candidates if c.label == tile["candidate"]).chip
        e_tile = tc.power_w / 1e3 * case.prices.usd_per_kwh
        per_chip_hour = (case.prices.chip_hour(tc) + e_tile) / tile[
            "usd_per_million_at_capacity"
        ]  # M req
        from ..claims import break_even_usd_per_chip_hour  # the one break-even rule

        parity = break_even_usd_per_chip_hour(
            gpu["usd_per_million_at_capacity"] * per_chip_hour, 1.0, e_tile
        )  # the GPUs' cost of one tile chip-hour's requests, against the tile chip-hour
        data["parity_price_at_capacity"] = parity
        ev.append(
            Evidence(
                "parity_price_at_capacity",
                parity,
                "USD",
                f"{tc.name} chip-hour price at which it costs the same per request as the GPU at capacity",
            )
        )
        minimal = [
            d
            for d in (ctx.best(c) for c in case.candidates)
            if d is not None
            and d.chips_needed == d.placement.chips
            and d.capacity_per_replica > 2 * case.rate_per_s
        ]
        data["minimal"] = len(minimal) == len(
            [r for r in rows if math.isfinite(r["usd_per_million"])]
        )
        if data["minimal"]:
            reason += (
                f"; at {fmt(case.rate_per_s, 'req/s')} every deployment is its smallest (one replica, "
                "under half used), so the cost per request is its hourly price over the traffic; with "
                f"the chips fully used it would be {fmt(tile['usd_per_million_at_capacity'], 'USD')} (tile) vs "
                f"{fmt(gpu['usd_per_million_at_capacity'], 'USD')} (GPU) per million"
            )
        # Which view the verdict weighs, and why (verdict.POLICY["cost_points_per_pct"]): at the
        # offered rate a deployment that is its smallest is mostly idle, so its cost per request
        # says only how the hourly prices compare; with the chips at capacity it says what a
        # request costs once the traffic grows to fill them.
        if data["minimal"]:
            data["weighed_saving"] = cap_saving
            data["weighed_view"] = (
                "the verdict weighs the cost at capacity: every deployment is its smallest, "
                "so the cost at the offered rate is the price ratio only"
            )
        else:
            data["weighed_saving"] = (saving + cap_saving) / 2
            data["weighed_view"] = (
                "the verdict weighs the mean of both views: the offered rate needs more "
                "than the smallest deployment, so both the traffic and the chips' capacity count"
            )

        def _change(x):
            return (
                f"tile cheaper by {fmt(x * 100, '%')}"
                if x > 0
                else f"tile costs {fmt(1 - x, 'x')} the GPU"
            )

        summary = (
            f"at the offered rate: {tile['deployment']} {fmt(tile['usd_per_million'], 'USD')}/M requests vs "
            f"{gpu['deployment']} {fmt(gpu['usd_per_million'], 'USD')}/M ({_change(saving)}); with the chips at "
            f"capacity: {fmt(tile['usd_per_million_at_capacity'], 'USD')}/M vs "
            f"{fmt(gpu['usd_per_million_at_capacity'], 'USD')}/M ({_change(cap_saving)}); "
            + data["weighed_view"].split(":")[0]
        )
        reason += "; " + data["weighed_view"]
    else:
        finite = [r for r in rows if math.isfinite(r["usd_per_million"])]
        summary = (
            "; ".join(f"{r['candidate']}: {fmt(r['usd_per_million'], 'USD')}/M" for r in finite)
            or "no candidate can serve the traffic at the target, so none has a cost"
        )
        status = "warn" if finite else "fail"
        reason = (
            "a tile/GPU comparison needs at least one candidate of each kind that meets the target"
        )
    ev.append(
        Evidence(
            "usd_per_kwh",
            case.prices.usd_per_kwh,
            "USD/kWh",
            "ASSUMED" if case.prices.is_assumed("kwh") else "user value",
        )
    )
    return Check(
        "C4",
        "Cost and energy",
        status,
        summary,
        reason + ". " + case.prices.note(c.chip for c in case.candidates),
        ev,
        {"cost": rows},
        "C2 capacities; chip power from hardware presets; prices from the case",
        data,
    )


def _best_of_kind(rows, kind):
    ok = [r for r in rows if r["kind"] == kind and math.isfinite(r["usd_per_million"])]
    return min(ok, key=lambda r: r["usd_per_million"]) if ok else None
