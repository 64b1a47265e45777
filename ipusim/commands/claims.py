"""``ipusim claims``: the scoreboard of the vendor claims (docs/claims.md), one verdict each."""

from __future__ import annotations

from .. import background
from ._common import add_json, print_json

NAME = "claims"
HELP = "verdicts on the articles' vendor claims (supported / contradicted / depends), with their numbers and rules"
ORDER = 70
EPILOG = (
    "With two or more CPUs, claim 10 (its GPT-2 generation tables are the largest independent "
    "piece of a first run) is judged in a second process while this one judges the rest; the "
    "output is the same. IPUSIM_WORKERS=1 keeps everything in one process."
)
HANDED = (10,)
"""Claims judged by a background worker when the scoreboard holds others too (``ipusim.background``)."""


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


def judged(n: int, sensitivity: bool) -> tuple:
    """Claim ``n``'s verdict and, with ``sensitivity``, its sensitivity verdicts (else [])."""
    from .. import claims

    return claims.judge(n), (claims.sensitivity(n) if sensitivity else [])


def run(args) -> int:
    from .. import claims

    nums = sorted(claims.CLAIMS) if args.claim is None else args.claim
    for n in nums:
        if n not in claims.CLAIMS:
            raise ValueError(
                f"--claim must be a claim number {min(claims.CLAIMS)}-{max(claims.CLAIMS)}, got {n}"
            )
    handed = [n for n in HANDED if n in nums] if len(nums) > 1 else []
    workers = {n: background.start(f"{__name__}:judged", n, args.sensitivity) for n in handed}
    try:
        got = {n: judged(n, args.sensitivity) for n in nums if n not in workers}
        for n, w in workers.items():
            got[n] = w.result(lambda n=n: judged(n, args.sensitivity))
    finally:
        for w in workers.values():
            w.close()
    verdicts = [got[n][0] for n in nums]
    counts = {s: sum(v.state == s for v in verdicts) for s in claims.STATES}
    sens = {n: got[n][1] for n in nums} if args.sensitivity else {}
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
