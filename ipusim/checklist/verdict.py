"""The verdict: migrate, pilot or stay, with the reasons ranked by weight.

Each reason carries points (positive: for moving to the tile chip; negative: against) and
the checks its numbers come from. The points and thresholds are this checklist's policy,
a judgement (ASSUMPTION), listed in ``POLICY`` and printed in every report.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .checks import fmt

POLICY = {
    "migrate_at": 25,  # points: migrate at or above (and software risk not high)
    "pilot_at": 5,  # points: pilot at or above
    "cost_points_per_pct": 1.0,  # points per % cost saving (tile vs GPU), capped; the saving weighed is
    # the mean of the saving at the offered rate and with the chips at capacity, or only the latter
    # when both deployments are their smallest (then the offered-rate saving is the price ratio only)
    "cost_cap": 40,  # points
    "fragile_points": -10,  # price crossover within 25% of today's price
    "rate_points": -5,  # cheaper kind flips within 0.5x-2x of the offered rate
    "risk_factor": -0.5,  # points per software risk point
    "only_tile_points": 30,  # the tile chip meets the target and no GPU candidate does
}


@dataclass(frozen=True)
class Reason:
    weight: float  # points; > 0 favours migrating
    text: str
    checks: tuple  # ids of the checks the numbers come from

    def to_dict(self) -> dict:
        return {"weight": self.weight, "text": self.text, "checks": list(self.checks)}


@dataclass(frozen=True)
class MigrationVerdict:
    """The checklist's decision on one case (migrate, pilot or stay) and its ranked reasons; a
    vendor claim's verdict is ``ipusim.claims.ClaimVerdict``."""

    decision: str  # "migrate", "pilot" or "stay"
    score: float
    reasons: tuple = field(default_factory=tuple)  # ranked by |weight|
    veto: str = ""  # a reason that decides alone (e.g. nothing fits)

    @property
    def margin(self) -> str:
        """How far the score is from the nearest threshold, in points."""
        if self.veto:
            return "decided by a veto"
        up = [
            (POLICY[k], name)
            for k, name in (("pilot_at", "PILOT"), ("migrate_at", "MIGRATE"))
            if POLICY[k] > self.score
        ]
        down = [
            (POLICY[k], name)
            for k, name in (("pilot_at", "STAY"), ("migrate_at", "PILOT"))
            if POLICY[k] <= self.score
        ]
        parts = []
        if up:
            t, name = min(up)
            parts.append(f"{t - self.score:.1f} points below {name}")
        if down:
            t, name = max(down)
            parts.append(f"{self.score - t:.1f} points above {name}")
        return "; ".join(parts)

    @property
    def headline(self) -> str:
        d = self.decision.upper()
        return (
            f"{d}: {self.veto}"
            if self.veto
            else f"{d} (score {self.score:+.1f} points; {self.margin})"
        )

    def to_dict(self) -> dict:
        return {
            "decision": self.decision,
            "score": self.score,
            "veto": self.veto,
            "margin": self.margin,
            "reasons": [r.to_dict() for r in self.reasons],
            "policy": dict(POLICY),
        }


def decide(case, checks: dict) -> MigrationVerdict:
    """Weigh the checks' evidence into a verdict."""
    reasons = []
    veto = ""
    c1, c2, c4, c5, c6, c7 = (checks.get(k) for k in ("C1", "C2", "C4", "C5", "C6", "C7"))
    if case.inference and c4 is not None:
        tile, gpu = c4.data.get("tile"), c4.data.get("gpu")
        has_tile_cand = any(c.chip.kind == "tile" for c in case.candidates)
        has_gpu_cand = any(c.chip.kind == "gpu" for c in case.candidates)
        if c1 is not None and c1.data.get("fits_nowhere"):
            veto = "the model fits on no candidate, even spread or streamed"
        elif c2 is not None and c2.data.get("impossible_target"):
            veto = "the p99 target is below the time of a single request on every candidate"
        elif has_tile_cand and tile is None:
            veto = "no tile-chip deployment meets the p99 target"
        elif tile is not None and gpu is None and has_gpu_cand:
            reasons.append(
                Reason(
                    POLICY["only_tile_points"],
                    f"only the tile chip ({tile['deployment']}) meets the p99 target",
                    ("C2", "C4"),
                )
            )
        if "saving" in c4.data:
            s = c4.data["saving"]
            s_cap = c4.data.get("saving_at_capacity", s)
            minimal = c4.data.get("minimal", False)
            weighed = c4.data.get(
                "weighed_saving", s_cap if minimal else (s + s_cap) / 2
            )  # C4 says which view
            w = max(
                -POLICY["cost_cap"],
                min(POLICY["cost_cap"], POLICY["cost_points_per_pct"] * weighed * 100),
            )
            assumed = bool(
                case.prices.assumed((tile["candidate"].split()[0], gpu["candidate"].split()[0]))
            )

            def _change(x):
                return (
                    f"saves {fmt(x * 100, '%')}"
                    if x > 0
                    else f"costs {fmt(1 - x, 'x')} what the GPU costs"
                )

            parity = c4.data.get("parity_price_at_capacity", 0)
            at_cap = f"with the chips at capacity the tile chip {_change(s_cap)}" + (
                f" (equal at {fmt(parity, 'USD')}/chip-hour for {tile['candidate'].split()[0]})"
                if parity > 0
                else ""
            )
            offered = (
                f"at the offered rate {tile['deployment']} costs {fmt(tile['usd_per_million'], 'USD')} per million "
                f"requests vs {fmt(gpu['usd_per_million'], 'USD')} on {gpu['deployment']} ({_change(s)})"
            )
            if minimal:  # the weighed view first, so the reason reads the way it counts
                text = (
                    f"{at_cap}, the view weighed; {offered}, the price ratio only, since both are their "
                    "smallest deployment"
                )
            else:
                text = f"the mean of two views is weighed: {offered}; {at_cap}"
            text += ", at ASSUMED prices" if assumed else ""
            reasons.append(Reason(round(w, 1), text, ("C2", "C4")))
        if c5 is not None and c5.data:
            if c5.data.get("fragile"):
                reasons.append(
                    Reason(
                        POLICY["fragile_points"],
                        f"the cheaper kind flips at {fmt(c5.ev('price_crossover_factor'), 'x')} today's tile-chip price",
                        ("C5",),
                    )
                )
            if c5.data.get("near_rate"):
                reasons.append(
                    Reason(
                        POLICY["rate_points"],
                        f"the cheaper kind flips within 2x of the offered rate ({c5.ev('rate_crossovers')})",
                        ("C5",),
                    )
                )
        if not has_tile_cand:
            veto = "no tile-chip candidate was given"
    if c6 is not None and c6.data:
        big = c6.data["big"]
        r = c6.data["ratios"][big]
        w = max(
            -POLICY["cost_cap"],
            min(POLICY["cost_cap"], POLICY["cost_points_per_pct"] * (1 - r) * 100),
        )
        reasons.append(
            Reason(
                round(w, 1),
                f"training {big} on the tile chip costs {fmt(r, 'x')} the GPU cost "
                f"(claim of 15-20% lower: {c6.data['verdict']})",
                ("C6",),
            )
        )
    if c7 is not None:
        pts = c7.data["points"]
        if pts:
            reasons.append(
                Reason(
                    round(POLICY["risk_factor"] * pts, 1),
                    f"software risk {c7.data['level']} ({pts} points): {c7.reason.split('.')[0]}",
                    ("C7",),
                )
            )
    score = sum(r.weight for r in reasons)
    reasons.sort(key=lambda r: -abs(r.weight))
    if veto:
        decision = "stay"
    elif score >= POLICY["migrate_at"] and (c7 is None or c7.data["level"] != "high"):
        decision = "migrate"
    elif score >= POLICY["pilot_at"]:
        decision = "pilot"
    else:
        decision = "stay"
    if math.isnan(score):
        score = 0.0
    return MigrationVerdict(decision, score, tuple(reasons), veto)
