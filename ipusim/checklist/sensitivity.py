"""C5: how the cheaper chip kind moves with the price ratio, the arrival rate and the long share."""

from __future__ import annotations

import math

import numpy as np

from ..config import sweep_size
from . import search
from .case import Case
from .context import HOUR_S, Context
from .evidence import Check, Evidence, fmt


# ---------------------------------------------------------------------------------------
# C5 Sensitivity
# ---------------------------------------------------------------------------------------
def check_sensitivity(case: Case, ctx: Context | None = None) -> Check:
    """C5: how the cheaper chip kind changes with price ratio, arrival rate and long share."""
    ctx = ctx or Context(case)
    best = {}
    for cand in case.candidates:
        d = ctx.best(cand)
        if d is not None:
            k = cand.chip.kind
            if k not in best or d.usd_per_million < best[k][1].usd_per_million:
                best[k] = (cand, d)
    if set(best) != {"tile", "gpu"}:
        return Check(
            "C5",
            "Sensitivity",
            "skipped",
            "needs one tile and one GPU candidate that meet the target",
            "no comparison to move",
            [],
            {},
            "",
        )
    (tc, td), (gc, gd) = best["tile"], best["gpu"]
    ev, tables = [], {}
    # Price ratio: tile chip-hour price multiplied by k; cost is linear in k.
    e_tile = tc.chip.power_w / 1e3 * case.prices.usd_per_kwh
    p_tile = case.prices.chip_hour(tc.chip)
    from ..claims import break_even_usd_per_chip_hour  # the one break-even rule

    k_star = (
        break_even_usd_per_chip_hour(gd.usd_per_hour, td.chips_needed, e_tile * td.chips_needed)
        / p_tile
    )
    ratio_now = p_tile / case.prices.chip_hour(gc.chip)
    if k_star <= 0:  # the tile deployment's energy alone costs more than the GPU deployment
        k_star = math.nan
    ev.append(
        Evidence(
            "price_crossover_usd_per_chip_hour",
            k_star * p_tile,
            "USD",
            f"{tc.chip.name} chip-hour price at which it costs the same per request as {gc.label}"
            + (" (none: its energy alone costs more)" if math.isnan(k_star) else ""),
        )
    )
    ev.append(
        Evidence("price_crossover_factor", k_star, "x", f"of the current {tc.chip.name} price")
    )
    ev.append(
        Evidence(
            "price_ratio_now", ratio_now, "x", f"{tc.chip.name} / {gc.chip.name} chip-hour price"
        )
    )
    # Arrival rate: chips scale in whole replicas.
    top = max(16 * case.rate_per_s, 4 * max(td.capacity_per_replica, gd.capacity_per_replica))
    rates = np.unique(
        np.concatenate(
            [np.geomspace(case.rate_per_s / 16, top, sweep_size(13, 9)), [case.rate_per_s]]
        )
    )
    rate_rows = []
    for r in rates:
        cost = {}
        for kind, (cand, d) in best.items():
            reps = math.ceil(r / d.capacity_per_replica * (1 - 1e-9))
            cost[kind] = (
                reps * d.placement.chips * ctx.chip_hour_usd(cand.chip) / (r * HOUR_S) * 1e6
            )
        rate_rows.append(
            {
                "rate_req_s": float(r),
                "tile_usd_per_million": cost["tile"],
                "gpu_usd_per_million": cost["gpu"],
                "cheaper": _cheaper(cost["tile"], cost["gpu"]),
            }
        )
    tables["rate"] = rate_rows
    rate_cross = crossings(rate_rows, "rate_req_s")
    ev.append(
        Evidence(
            "rate_crossovers",
            ", ".join(fmt(x, "req/s") for x in rate_cross) or "none in range",
            "",
            f"rates from {fmt(rates[0], 'req/s')} to {fmt(rates[-1], 'req/s')} where the cheaper kind changes",
        )
    )
    # Long share: re-search the capacity with re-weighted lengths.
    # Cost per request with the chips fully used (a large deployment), so that it does not
    # hide behind whole-chip rounding at a small offered rate.
    fracs = sweep_size((0.0, 0.2, 0.4, 0.6, 0.8, 1.0), (0.0, 0.2, 0.5, 1.0))
    long_rows = []
    for fr in fracs:
        lens = search.traffic_lengths(case, ctx.n, long_fraction=fr)
        cost = {}
        for kind, (cand, d) in best.items():
            res = ctx.best_policy(cand, d.placement, d.mode, d.service, lens)
            if res.capacity_per_replica <= 0:
                cost[kind] = math.inf
                continue
            per_chip = res.capacity_per_replica / d.placement.chips
            cost[kind] = ctx.chip_hour_usd(cand.chip) / (per_chip * HOUR_S) * 1e6
        long_rows.append(
            {
                "long_share_%": fr * 100,
                "tile_usd_per_million": cost["tile"],
                "gpu_usd_per_million": cost["gpu"],
                "cheaper": _cheaper(cost["tile"], cost["gpu"]),
            }
        )
    tables["long_share"] = long_rows
    long_cross = crossings(long_rows, "long_share_%")
    ev.append(
        Evidence(
            "long_share_crossovers",
            ", ".join(fmt(x, "%") for x in long_cross) or "none in range",
            "",
            "long-text shares where the cheaper kind changes (cost with the chips at capacity)",
        )
    )
    fragile = bool(0.8 <= k_star <= 1.25)
    near_rate = any(case.rate_per_s / 2 <= x <= case.rate_per_s * 2 for x in rate_cross)
    status = "warn" if (fragile or near_rate) else "pass"
    winner_now = "tile" if td.usd_per_million < gd.usd_per_million else "GPU"
    flip = (
        f"no {tc.chip.name} price flips it (its energy alone costs more)"
        if math.isnan(k_star)
        else f"the answer flips if the {tc.chip.name} price moves to {fmt(k_star * p_tile, 'USD')}/chip-hour "
        f"({fmt(k_star, 'x')} today's)"
    )
    reason = (
        f"the {winner_now} deployment is cheaper now; {flip}"
        + ("; that is within 25% of today's price: a fragile answer" if fragile else "")
        + (
            f"; it also flips at {', '.join(fmt(x, 'req/s') for x in rate_cross)}"
            if rate_cross
            else ""
        )
    )
    summary = (
        (
            f"no {tc.chip.name} price makes it cheaper"
            if math.isnan(k_star)
            else f"price crossover {fmt(k_star * p_tile, 'USD')}/chip-hour for {tc.chip.name}"
        )
        + "; rate crossovers: "
        f"{', '.join(fmt(x, 'req/s') for x in rate_cross) or 'none'}; long-share crossovers: "
        f"{', '.join(fmt(x, '%') for x in long_cross) or 'none'}"
    )
    data = {"k_star": k_star, "fragile": fragile, "near_rate": near_rate}
    return Check(
        "C5",
        "Sensitivity",
        status,
        summary,
        reason,
        ev,
        tables,
        "C2 policy search re-run per long share; C4 prices",
        data,
    )


TIE_BAND = 0.03  # relative cost difference below which neither kind counts as cheaper


def _side(row) -> int:
    """+1 tile cheaper, -1 GPU cheaper, 0 a tie (within TIE_BAND of each other)."""
    t, g = row["tile_usd_per_million"], row["gpu_usd_per_million"]
    if not (math.isfinite(t) or math.isfinite(g)):
        return 0
    if not math.isfinite(t) or not math.isfinite(g):
        return 1 if math.isfinite(t) else -1
    if abs(t - g) <= TIE_BAND * min(t, g):
        return 0
    return 1 if t < g else -1


def _cheaper(t: float, g: float) -> str:
    side = _side({"tile_usd_per_million": t, "gpu_usd_per_million": g})
    return {1: "tile", -1: "gpu", 0: f"tie (within {TIE_BAND:.0%})"}[side]


def crossings(rows, xkey):
    """Where the cheaper kind changes, interpolated between the last clear side and the next
    clear other side; costs within TIE_BAND of each other are ties and make no crossing."""
    out, last = [], None
    for b in rows:
        sb = _side(b)
        if sb == 0:
            continue
        if last is not None and _side(last) != sb:
            a = last
            da = a["tile_usd_per_million"] - a["gpu_usd_per_million"]
            db = b["tile_usd_per_million"] - b["gpu_usd_per_million"]
            if math.isfinite(da) and math.isfinite(db) and da != db:
                t = da / (da - db)
                out.append(a[xkey] + t * (b[xkey] - a[xkey]))
            else:
                out.append((a[xkey] + b[xkey]) / 2)
        last = b
    return out
