"""``ipusim train``: the fastest placement of a model's training on N chips, and the run's time, cost and energy."""

from __future__ import annotations

from .. import limits, training, workloads
from ..checklist.case import parse_prices
from ._common import add_chip_and_model, add_json, number, print_json

NAME = "train"
HELP = (
    "train a model on N chips: best placement, step time, tokens/s, MFU, memory, days, cost, energy"
)
ORDER = 45


def add_arguments(p):
    add_chip_and_model(p)
    p.add_argument("--chips", type=int, required=True, help="number of chips")
    p.add_argument(
        "--tokens",
        type=number(1, 1e16, "tokens", "30,000x GPT-3's budget"),
        required=True,
        help="training tokens (e.g. 2e12)",
    )
    p.add_argument(
        "--global-batch",
        type=int,
        default=None,
        help="sequences per step (default: the model's published recipe)",
    )
    p.add_argument(
        "--seq-len", type=int, default=None, help="tokens per sequence (default: the recipe's)"
    )
    p.add_argument(
        "--recompute", default="any", help="none, selective, full or any (default: search all)"
    )
    p.add_argument("--sharding", default="any", help="0-3 or any (default: search all)")
    p.add_argument(
        "--price",
        action="append",
        default=[],
        metavar="CHIP=USD",
        help="price per chip-hour (default: the placeholder ASSUMPTION prices)",
    )
    p.add_argument(
        "--usd-per-kwh",
        type=number(0, limits.MAX_USD, "USD"),
        default=None,
        help="energy price (default: placeholder)",
    )
    add_json(p)


def run(args) -> int:
    m = workloads.model(args.model)
    rc = training.RECOMPUTE if args.recompute == "any" else (args.recompute,)
    if args.sharding == "any":
        z = training.SHARDING
    elif args.sharding in ("0", "1", "2", "3"):
        z = (int(args.sharding),)
    else:
        raise ValueError(f"--sharding must be 0, 1, 2, 3 or any, got {args.sharding!r}")
    r = training.best_placement(
        m,
        args.chip,
        args.chips,
        seq_len=args.seq_len,
        global_batch=args.global_batch,
        recompute=rc,
        sharding=z,
    )
    prices = parse_prices(args.price)
    run_ = (
        None
        if r.fit == "does_not_fit"
        else r.run(args.tokens, usd_per_chip_hour=prices.get(r.chip), usd_per_kwh=args.usd_per_kwh)
    )
    if args.json:
        d = r.to_dict()
        d["memory_per_chip_bytes"] = {**d["memory_per_chip_bytes"], "total": r.memory_total_bytes}
        for k in ("days", "chip_hours", "cost_usd", "energy_kwh"):
            d[k] = getattr(run_, k) if run_ else None
        d["tokens"] = args.tokens
        print_json(d)
        return 0
    if run_ is None:
        print(f"{m.name} on {args.chips} {r.chip}: does_not_fit. {r.fit_message}")
        return 0
    gb = {k: v / 1e9 for k, v in r.memory_per_chip_bytes.items()}
    print(f"{m.name} on {r.chips} {r.chip}: {r.global_batch} x {r.seq_len} tokens per step")
    print(
        f"placement: {r.placement.label()} ({r.micro_batches} micro-batches per replica); {r.fit}"
    )
    print(
        f"step time {r.step_time_s:,.3f} s: "
        + ", ".join(f"{k} {v:,.3f}" for k, v in r.split.items() if v > 0)
    )
    print(
        f"tokens/s {r.tokens_per_s:,.0f}; MFU {r.mfu:.1%} (with recomputation {r.hfu:.1%}, "
        f"{r.hardware_flops_per_chip / 1e12:,.1f} TFLOP/s per chip)"
    )
    print(
        "memory per chip: "
        + ", ".join(f"{k} {v:,.2f} GB ({r.memory_where[k]})" for k, v in gb.items())
        + f"; total {r.memory_total_bytes / 1e9:,.2f} GB"
    )
    print(
        f"{args.tokens:.3g} tokens: {run_.days:,.1f} days, {run_.chip_hours:,.0f} chip-hours, "
        f"{run_.cost_usd:,.0f} USD at {run_.usd_per_chip_hour:g} USD/chip-hour and {run_.usd_per_kwh:g} USD/kWh"
        f"{'' if r.chip in prices else ' (placeholder ASSUMPTION prices)'}, {run_.energy_kwh / 1e3:,.1f} MWh "
        f"(board power x time)"
    )
    for a in r.alternatives:
        print(f"  other {a['knob']}: {training.Placement(**a['placement']).label()}: {a['why']}")
    return 0
