"""``ipusim roofline``: per-op and total lower bounds of one step on one chip, and whether it fits."""

from __future__ import annotations

from .. import hardware, limits, roofline, workloads
from ._common import add_batch_and_seq_len, add_chip_and_model, add_json, format_table, print_json

NAME = "roofline"
HELP = (
    "roofline lower bounds of one step of a model on a chip (per op and total), and whether it fits"
)
ORDER = 20


def add_arguments(p):
    add_chip_and_model(p)
    add_batch_and_seq_len(p)
    p.add_argument(
        "--phase", default="forward", help=f"one of {', '.join(workloads.PHASES)} (default forward)"
    )
    p.add_argument(
        "--pad-to", type=int, default=None, help="pad every sequence to this many tokens"
    )
    p.add_argument(
        "--fused",
        action="store_true",
        help="bound fused kernels (attention scores and GELU kept on chip): the bound of a "
        "fused-kernel GPU; default: the unfused bound (of the tile simulator)",
    )
    add_json(p)


def _num(x: float) -> str:
    """Thousands separators for big numbers, three significant digits for small ones."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _joules(j: float) -> str:
    return f"{j:,.3f} J" if j >= 1 else f"{j * 1e3:,.3f} mJ"


def run(args) -> int:
    c = hardware.chip(args.chip)
    m = workloads.model(args.model)
    if args.batch < 1:
        raise ValueError(f"--batch must be >= 1, got {args.batch}")
    if args.seq_len < 1:
        raise ValueError(f"--seq-len must be >= 1, got {args.seq_len}")
    if args.seq_len > m.max_positions:
        raise ValueError(
            f"--seq-len {args.seq_len} exceeds {m.name}'s max_positions {m.max_positions}"
        )
    limits.check_batch(args.batch, name="--batch")
    s = workloads.step(m, [args.seq_len] * args.batch, phase=args.phase, pad_to=args.pad_to)
    r = roofline.analyze(c, s, fused=bool(getattr(args, "fused", False)))
    mode = "training" if args.phase == "train" else "inference"
    cap = roofline.capacity(
        c, m, mode=mode, batch=args.batch, seq_len=max(args.seq_len, args.pad_to or 0)
    )
    if args.json:
        print_json({**r.to_dict(), "capacity": cap.to_dict()})
        return 0
    print(
        f"{m.name} {s.phase} on {c.name}: batch {s.batch} x {args.seq_len} tokens "
        f"({s.real_tokens:,} real tokens, {s.flops / 1e9:,.1f} GFLOP, {s.bytes / 1e6:,.1f} MB touched)"
    )
    rows = [
        {
            **b.to_dict(),
            "gflop": b.flops / 1e9,
            "mb": b.bytes / 1e6,
            "compute_us": b.compute_s * 1e6,
            "memory_us": b.memory_s * 1e6,
            "time_us": b.time_s * 1e6,
        }
        for b in r.bounds
    ]
    print(
        format_table(
            rows,
            [
                ("op", "op", ""),
                ("kind", "kind", ""),
                ("gflop", "GFLOP", ",.3f"),
                ("mb", "MB", ",.2f"),
                ("flop_per_byte", "FLOP/B", ",.1f"),
                ("compute_us", "compute us", ",.2f"),
                ("memory_us", "memory us", ",.2f"),
                ("time_us", "bound us", ",.2f"),
                ("bound", "limit", ""),
                ("level", "bytes from", ""),
            ],
        )
    )
    print(
        f"total ({'fused' if r.fused else 'unfused'} bound): >= {r.time_s * 1e6:,.1f} us per step (compute alone {r.compute_s * 1e6:,.1f} us; "
        f"{r.memory_bound_share:.0%} of the bound in memory-bound ops); <= {_num(r.seq_per_s)} seq/s, "
        f"{_num(r.tokens_per_s)} tokens/s"
    )
    fit = "fits" if r.fits else "does NOT fit"
    print(
        f"memory: step {fit} in {'tile SRAM' if c.kind == 'tile' else 'HBM'} "
        f"({r.need_bytes / 1e9:,.3f} of {r.capacity_bytes / 1e9:,.3f} GB); weights read from {r.where}"
        + (f"; from off-chip DRAM: {', '.join(r.offchip)}" if r.offchip else "")
        + (
            ""
            if r.fits or c.kind == "tile"
            else " (the bound is one chip running the whole step as if it fit)"
        )
    )
    print(
        f"{mode} capacity: needs {cap.need_bytes / 1e9:,.3f} GB; chips needed: "
        + ", ".join(f"{k} {v}" for k, v in cap.chips_needed.items())
    )
    e = r.energy
    print(
        f"energy: {_joules(e.total_j)} ({_joules(e.compute_j)} compute + {_joules(e.data_j)} moving "
        f"data, {e.data_share:.0%}; 45 nm pJ table, see ipusim.energy)"
    )
    return 0
