"""The checklist re-judges a case with a user's calibration (``ipusim calibrate``'s file).

``recalibrate(case, params)`` puts the calibrated chips in the case (``calibration.calibrated_chip``:
a GPU named ``<preset>*`` priced as its preset); ``rejudge(case, params)`` runs the checklist on
the case as it is and as calibrated (tile parameters through ``tile_calibration.overrides``) and
says which parameters moved and by how much, whether the verdict changed, and why: the reasons
whose weight moved most, with their texts before and after.
"""

from __future__ import annotations

import dataclasses

from .. import calibration, texttable
from ..prices import Prices


def recalibrate(case, params: dict):
    """``case`` with every candidate (and training chip) on the calibrated GPU of ``params``."""
    cands = tuple(
        dataclasses.replace(c, chip=calibration.calibrated_chip(params, c.chip))
        for c in case.candidates
    )
    p = case.prices
    d = dict(p.usd_per_chip_hour)
    user = set(p.user_set)
    for c in cands:
        base = c.chip.name.removesuffix("*")
        if c.chip.name != base and c.chip.name not in d and base in d:
            d[c.chip.name] = d[base]  # the same chip, calibrated: the same price
            if base in user:
                user.add(c.chip.name)
    return case.replace(candidates=cands, prices=Prices(d, p.usd_per_kwh, tuple(sorted(user))))


def _reasons(verdict) -> dict:
    return {r.checks: r for r in verdict.reasons}


def _capacities(report) -> dict:
    """C2's requests/s at the p99 target per candidate, keyed by the preset's name (a calibrated
    chip ``<preset>*`` under its preset's)."""
    c2 = report.checks.get("C2")
    rows = c2.tables.get("throughput", []) if c2 is not None else []
    return {r["candidate"].replace("*", ""): r["capacity_req_s"] for r in rows}


def _capacity_moves(before, after, case) -> list[str]:
    """One line per candidate whose capacity at the p99 target the calibration moved: the link
    from the parameters to the cost reason."""
    b, a = _capacities(before), _capacities(after)
    target = f"p99 <= {case.slo_p99_s * 1e3:g} ms"
    return [
        f"C2 {name}: {a[name]:,.0f} req/s at {target} as calibrated, {b[name]:,.0f} with the "
        "preset" + (f" ({a[name] / b[name] - 1:+.1%})" if b[name] > 0 else " (from none)")
        for name in a
        if name in b and a[name] != b[name]
    ]


def rejudge(case, params: dict, *, show_progress: bool = False) -> dict:
    """Run the checklist on ``case`` before and after the calibration ``params`` (from
    ``calibration.load``). Returns ``moved`` (``calibration.moved``), ``before`` and ``after``
    (``Report``), ``changed`` (the decision changed), ``score_change`` (points) and ``why``:
    one line per reason whose weight moved, largest move first, then each candidate whose
    capacity at the p99 target moved (C2), then each check whose status changed."""
    from .. import tile_calibration
    from .report import run_checklist

    before = run_checklist(case, show_progress=show_progress)
    with tile_calibration.overrides(**(params.get("tile") or {})):
        after = run_checklist(recalibrate(case, params), show_progress=show_progress)
    rb, ra = _reasons(before.verdict), _reasons(after.verdict)
    moves = []
    for key in dict.fromkeys([*rb, *ra]):
        wb = rb[key].weight if key in rb else 0.0
        wa = ra[key].weight if key in ra else 0.0
        if wa != wb:
            moves.append((abs(wa - wb), key, wb, wa))
    moves.sort(key=lambda m: -m[0])
    why = [
        f"{', '.join(key)}: {wb:+.1f} -> {wa:+.1f} points"
        + (f" (now: {ra[key].text})" if key in ra else f" (was: {rb[key].text}; gone)")
        for _, key, wb, wa in moves
    ]
    why += _capacity_moves(before, after, case)
    for cid, c in after.checks.items():
        if cid in before.checks and before.checks[cid].status != c.status:
            why.append(f"{cid} {c.name}: {before.checks[cid].status} -> {c.status} ({c.summary})")
    g = params.get("gpu")
    if g and g["chip"] not in {c.chip.name for c in case.candidates}:
        why.append(
            f"the calibrated chip {g['chip']} is not a candidate of this case: nothing to re-judge"
        )
    if before.verdict.veto != after.verdict.veto:
        why.insert(0, f"veto: {before.verdict.veto or 'none'} -> {after.verdict.veto or 'none'}")
    return {
        "moved": calibration.moved(params),
        "before": before,
        "after": after,
        "changed": before.decision != after.decision,
        "score_change": after.verdict.score - before.verdict.score,
        "why": why,
    }


def summary_markdown(result: dict, source: str = "") -> str:
    """The re-judging as a Markdown section: the parameters moved, the verdict before and after,
    and why."""
    b, a = result["before"].verdict, result["after"].verdict
    lines = [
        f"## Calibration{f' ({source})' if source else ''}",
        "",
        texttable.markdown(
            ["parameter", "chip", "preset", "calibrated", "change"],
            [
                [
                    m["parameter"],
                    m["chip"],
                    f"{m['preset']:.4g}",
                    f"{m['calibrated']:.4g}",
                    f"{m['change']:+.1%}",
                ]
                for m in result["moved"]
            ],
        ),
    ]
    lines += [
        "",
        f"Verdict before: **{b.headline}**. After: **{a.headline}**. The decision "
        + ("**changed**" if result["changed"] else "did not change")
        + f" (score {result['score_change']:+.1f} points).",
        "",
    ]
    lines += [f"- {w}" for w in result["why"]] or ["- no reason moved"]
    return "\n".join(lines)


def summary_dict(result: dict) -> dict:
    """The re-judging in plain form (for ``--json``)."""
    return {
        "moved": result["moved"],
        "before": result["before"].verdict.to_dict(),
        "after": result["after"].verdict.to_dict(),
        "changed": result["changed"],
        "score_change": result["score_change"],
        "why": result["why"],
    }
