"""``ipusim claims``: the scoreboard of the vendor claims (docs/claims.md), one verdict each."""

from __future__ import annotations

from ._common import add_json, print_json

NAME = "claims"
HELP = "verdicts on the articles' vendor claims (supported / contradicted / depends), with their numbers and rules"
ORDER = 70


def add_arguments(p):
    p.add_argument(
        "--claim",
        type=int,
        action="append",
        default=None,
        metavar="N",
        help="only claim N (1-15, docs/claims.md); repeat for several (default: all)",
    )
    p.add_argument(
        "--rules", action="store_true", help="print each verdict's rule and assumptions too"
    )
    p.add_argument(
        "--sensitivity",
        action="store_true",
        help="judge each claim again on the later parts of its comparison-table row (Bow vs H100 "
        "and H200), by the same rule (about twice the time)",
    )
    add_json(p)


def run(args) -> int:
    from .. import claims

    nums = sorted(claims.CLAIMS) if args.claim is None else args.claim
    for n in nums:
        if n not in claims.CLAIMS:
            raise ValueError(
                f"--claim must be a claim number {min(claims.CLAIMS)}-{max(claims.CLAIMS)}, got {n}"
            )
    verdicts = claims.scoreboard(nums)
    counts = {s: sum(v.state == s for v in verdicts) for s in claims.STATES}
    sens = {v.claim: claims.sensitivity(v.claim) for v in verdicts} if args.sensitivity else {}
    if args.json:
        out = [v.to_dict() for v in verdicts]
        for d in out:
            if d["claim"] in sens:
                d["comparison"]["sensitivity_verdicts"] = [
                    {
                        "tile": s.comparison["tile"],
                        "gpu": s.comparison["gpu"],
                        "state": s.state,
                        "summary": s.summary,
                    }
                    for s in sens[d["claim"]]
                ]
        print_json({"verdicts": out, "counts": counts})
        return 0
    for v in verdicts:
        c = v.comparison
        chips = " vs ".join(x for x in (c["tile"], c["gpu"]) if x) or "no chips"
        print(f"{v.claim:2d}. {v.state.upper():12s} {v.title}")
        print(f"    {v.summary}")
        if v.break_even:
            print(f"    break-even: {v.break_even}")
        print(f"    compares {chips}: {c['why']}")
        for s in sens.get(v.claim, ()):
            print(f"    sensitivity {s.comparison['tile']} vs {s.comparison['gpu']}: {s.state}")
        if args.rules:
            print(f"    rule: {v.rule}")
            for k, a in v.assumptions.items():
                print(f"    assumes {k}: {a}")
        print(f"    judged by {v.function}; notebooks: {', '.join(v.notebooks)}")
    print(", ".join(f"{counts[s]} {s}" for s in claims.STATES))
    return 0
