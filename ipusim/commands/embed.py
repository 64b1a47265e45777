"""``ipusim embed``: one embedding step (tables sharded over tiles, or in HBM) on one chip kind."""

from __future__ import annotations

import math

from .. import embeddings, hardware
from .._validate import positive
from ._common import add_json, format_table, print_json, seed_arg

NAME = "embed"
HELP = "simulate one embedding look-up step (tables, rows, dim, pooling, batch, skew) on a chip"
ORDER = 25


def add_arguments(p):
    p.add_argument("--chip", required=True, help=f"chip preset: {', '.join(hardware.PRESETS)}")
    p.add_argument(
        "--preset",
        choices=embeddings.PRESETS,
        help="a published table set (overrides --tables/--rows/--dim/--pooling)",
    )
    p.add_argument("--tables", type=int, default=26, help="tables (default 26)")
    p.add_argument("--rows", type=int, default=1_000_000, help="rows per table (default 1,000,000)")
    p.add_argument("--dim", type=int, default=128, help="values per row (default 128)")
    p.add_argument(
        "--pooling", type=int, default=1, help="look-ups per sample per table (default 1)"
    )
    p.add_argument("--batch", type=int, default=2048, help="samples per step (default 2048)")
    p.add_argument("--dtype-bytes", type=int, default=4, help="bytes per value (default 4, FP32)")
    p.add_argument(
        "--zipf",
        type=float,
        default=0.0,
        help="Zipf exponent of row popularity (default 0: uniform)",
    )
    p.add_argument(
        "--chips", type=int, default=1, help="chips the tables are sharded over (default 1)"
    )
    p.add_argument(
        "--training", action="store_true", help="forward + sparse backward (SGD row update)"
    )
    p.add_argument("--no-cache", action="store_true", help="no hot-row cache in spare tile SRAM")
    p.add_argument(
        "--seed", type=seed_arg, default=0, help="seed of the drawn look-ups (default 0)"
    )
    add_json(p)


def run(args) -> int:
    c = hardware.chip(args.chip)
    batch = positive("--batch", args.batch, integer=True)
    zipf = positive("--zipf", args.zipf, allow_zero=True)
    chips = positive("--chips", args.chips, integer=True)
    if args.preset:
        w = embeddings.preset(args.preset, batch=batch, zipf=zipf, training=args.training)
    else:
        tabs = embeddings.uniform_tables(
            positive("--tables", args.tables, integer=True),
            positive("--rows", args.rows, integer=True),
            positive("--dim", args.dim, integer=True),
            positive("--pooling", args.pooling, integer=True),
        )
        name = f"{args.tables} x {args.rows:,} x {args.dim}"
        w = embeddings.Workload(
            name,
            tabs,
            batch,
            positive("--dtype-bytes", args.dtype_bytes, integer=True),
            zipf,
            args.training,
        )
    r = embeddings.simulate(c, w, chips=chips, cache=not args.no_cache, seed=args.seed)
    if args.json:
        d = r.to_dict()
        if not r.fits:
            d.update(lookups_per_s=0.0, samples_per_s=0.0, samples_per_s_per_w=0.0)
        print_json(d)
        return 0
    print(
        f"{chips} x {r.chip} ({r.kind}), tables {w.table_bytes / 1e9:,.3f} GB "
        f"({len(w.tables)} tables), batch {w.batch}, {w.lookups:,} look-ups/step, "
        f"{'uniform' if zipf == 0 else f'Zipf s={zipf:g}'}, {'training' if w.training else 'forward'}"
    )
    print(f"fit         {r.fit}")
    if r.fits:
        print(f"step time   {r.time_s * 1e6:,.2f} us")
        print(f"look-ups/s  {r.lookups_per_s:,.0f}")
        print(f"samples/s   {r.samples_per_s:,.0f}")
        total = r.time_s
    else:
        total = r.extra.get("time_if_unlimited_s", math.nan)
        print("step time   none: the tables DO NOT FIT")
    print(f"power       {r.power_w:,.0f} W board power (TDP, not measured draw)")
    if r.fits:
        print(f"samples/s/W {r.samples_per_s_per_w:,.1f}")
    if r.cache_bytes:
        print(
            f"cache       {r.cache_bytes / 1e6:,.1f} MB, hit rate {r.hit_rate:.1%} (closed form), "
            f"{r.stream_hit_rate:.1%} (simulated stream)"
        )
    if math.isfinite(total) and total > 0:
        rows = [{"part": k, "us": v * 1e6, "share": v / total * 100} for k, v in r.split.items()]
        print(
            format_table(rows, [("part", "split", ""), ("us", "us", ",.2f"), ("share", "%", ".1f")])
        )
    if r.fit_message:
        print(r.fit_message)
    return 0
