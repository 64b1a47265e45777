"""``ipusim pack``: pad, bucket or pack a length distribution and print the token accounting."""

from __future__ import annotations

from .. import lengths, packing
from ._common import add_json, add_lengths, format_table, print_json

NAME = "pack"
HELP = "pad, bucket or pack sequences into rows and count the padding they waste"
ORDER = 40


def add_arguments(p):
    src = p.add_mutually_exclusive_group(required=True)
    add_lengths(src, "the sequences to pack, exactly as given")
    src.add_argument("--histogram", metavar="FILE", help="length,count CSV (header optional)")
    src.add_argument("--dataset", choices=list(lengths.DATASETS), help="a shipped real histogram")
    p.add_argument("--max-len", type=int, required=True, metavar="N", help="tokens per row")
    p.add_argument(
        "--strategy",
        default="spfhp",
        choices=list(packing.STRATEGIES),
        help="how sequences go into rows (default: spfhp)",
    )
    p.add_argument(
        "--max-per-row",
        type=int,
        default=None,
        metavar="K",
        help="cap on sequences per row for ffd/spfhp/bfhp/nnlshp (default: none)",
    )
    p.add_argument(
        "--buckets",
        type=int,
        default=8,
        metavar="B",
        help="equal-width buckets for --strategy bucket (default: 8)",
    )
    p.add_argument(
        "--slack",
        type=int,
        default=0,
        metavar="T",
        help="nnlshp: compositions may fall T tokens short of the row (default: 0)",
    )
    p.add_argument(
        "--model",
        default="bert-base",
        help="model whose forward FLOPs are counted (default: bert-base)",
    )
    add_json(p)


def run(args) -> int:
    from .. import workloads

    workloads.model(args.model)  # an unknown model is refused before the packing runs
    if args.histogram:
        source = lengths.load_histogram(args.histogram)
    elif args.lengths:
        source = lengths.load(args.lengths)
    else:
        source = args.dataset
    res = packing.pack(
        source,
        args.max_len,
        args.strategy,
        max_per_row=args.max_per_row,
        buckets=args.buckets,
        slack=args.slack,
    )
    out = res.to_dict()
    out.update(res.flops(args.model))
    out["model"] = args.model
    if args.json:
        print_json(out)
        return 0
    print(repr(res))
    rows = [
        {"k": "sequences", "v": f"{res.sequences:,}"},
        {"k": "rows", "v": f"{res.rows:,}"},
        {"k": "real tokens", "v": f"{res.real_tokens:,}"},
        {"k": "padding tokens", "v": f"{res.padded_tokens:,}"},
        {"k": "efficiency", "v": f"{res.efficiency:.2%}"},
        {"k": "speed-up vs pad", "v": f"{res.speedup_vs_pad():.3f}x"},
        {"k": f"{args.model} FLOPs wasted", "v": f"{out['wasted_fraction']:.2%}"},
    ]
    print(format_table(rows, [("k", "quantity", ""), ("v", "value", "")]))
    return 0
