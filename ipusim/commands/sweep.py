"""``ipusim sweep``: a task over a grid of chip and workload parameters, serially or on Dask."""

from __future__ import annotations

from .._files import check_writable
from ._common import add_json, format_table, print_json

NAME = "sweep"
HELP = "run a task over a grid of chip and workload parameters (on Dask), into Parquet or CSV"
ORDER = 60


def add_arguments(p):
    p.add_argument(
        "--task",
        default="simulate",
        help="what each point computes: simulate, serve, train, embed, checklist, spin (default simulate)",
    )
    p.add_argument(
        "--chip", default="gc200", help="chip preset the varied fields change (default gc200)"
    )
    p.add_argument(
        "--vary",
        action="append",
        default=[],
        metavar="NAME=lo:hi:n",
        help="a parameter to sweep: NAME=lo:hi:n (evenly spaced), NAME=lo:hi:n:log, or NAME=a,b,c; "
        "values may carry units (256KiB, 2MiB, 64GB/s, 1.5GHz); repeat for a grid",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a parameter held at one value (any chip field or task parameter); repeatable",
    )
    p.add_argument("--model", help="model preset")
    p.add_argument("--batch", type=int, help="sequences per step (simulate)")
    p.add_argument("--seq-len", type=int, help="tokens per sequence")
    p.add_argument("--phase", help="forward, prefill or decode (simulate)")
    p.add_argument("--max-batch", type=int, help="largest batch (serve)")
    p.add_argument(
        "--chips",
        type=int,
        help="chips to place the step on (simulate), train on (train) or "
        "spread the tables over (embed)",
    )
    p.add_argument(
        "--tokens", type=float, help="training tokens for the run's days, cost and energy (train)"
    )
    p.add_argument(
        "--rate",
        type=float,
        help="offered requests/s (serve, checklist; serve default: the "
        "highest rate meeting the p99 target)",
    )
    p.add_argument("--slo-p99", type=float, help="p99 latency target, seconds (serve, checklist)")
    p.add_argument("--gpu", help="GPU preset to compare against (checklist)")
    p.add_argument("--out", help="output table, .parquet or .csv (streamed in chunks)")
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue an existing --out: skip the points already in it",
    )
    p.add_argument(
        "--retry-refused", action="store_true", help="with --resume: run the refused points again"
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing --out (without it, or --resume, an existing table is refused)",
    )
    p.add_argument(
        "--scheduler",
        help="address of a running Dask scheduler (tcp://host:8786); "
        "default DASK_SCHEDULER_ADDRESS, else a local cluster",
    )
    p.add_argument(
        "--workers", type=int, help="worker processes of the local cluster (default: one per core)"
    )
    p.add_argument("--serial", action="store_true", help="run in this process, without Dask")
    p.add_argument(
        "--batch-size", type=int, help="points per Dask task (default: about 4 tasks per worker)"
    )
    add_json(p)


def run(args) -> int:
    from .. import sweep

    vary = sweep.parse_vary(args.vary)
    if not vary:
        raise ValueError("give at least one --vary NAME=lo:hi:n")
    fixed = {"chip": args.chip}
    given = {
        "model": args.model,
        "batch": args.batch,
        "seq_len": args.seq_len,
        "phase": args.phase,
        "max_batch": args.max_batch,
        "rate_per_s": args.rate,
        "slo_p99_s": args.slo_p99,
        "gpu": args.gpu,
        "chips": args.chips,
        "tokens": args.tokens,
    }
    t = sweep.task(args.task)
    for k, v in given.items():
        if v is None:
            continue
        if k not in t.params:
            raise ValueError(f"--{k.replace('_', '-')} does not apply to task {args.task!r}")
        fixed[k] = v
    if not t.takes_chip:
        fixed.pop("chip")
    for item in args.set:
        if "=" not in item:
            raise ValueError(f"--set {item!r} must be NAME=VALUE")
        k, v = item.split("=", 1)
        fixed[k.strip()] = sweep.parse_value(v, k.strip())
    both = set(fixed) & set(vary)
    if both:
        raise ValueError(f"{sorted(both)[0]!r} is both varied and set")
    if (args.resume or args.overwrite) and not args.out:
        raise ValueError(f"{'--resume' if args.resume else '--overwrite'} needs --out")
    if args.retry_refused and not args.resume:
        raise ValueError("--retry-refused needs --resume")
    if args.resume and args.overwrite:
        raise ValueError("give --resume or --overwrite, not both")
    if args.out:
        check_writable("--out", args.out)
    res = sweep.run(
        args.task,
        vary=vary,
        fixed=fixed,
        mode="serial" if args.serial else "dask",
        scheduler=args.scheduler,
        workers=args.workers,
        batch_size=args.batch_size,
        out=args.out,
        resume=args.resume,
        overwrite=args.overwrite,
        retry_refused=args.retry_refused,
        show_progress=not args.json,
    )
    best = res.best()
    if args.json:
        print_json(res.to_dict())
        return 0
    print(
        f"{len(res.table):,} points ({res.computed:,} run, {res.skipped:,} resumed, {res.refused:,} refused) "
        f"in {res.elapsed_s:.2f} s: {res.points_per_s:,.1f} points/s, {res.mode} on {res.workers} worker(s)"
    )
    if args.out:
        print(f"table: {args.out}")
    if best is None:
        print("best point: none (no point ran with a throughput)")
        return 0
    rows = [
        {"name": k, "value": _fmt(best[k])}
        for k in (*res.params, "fit", "throughput_per_s", "per_usd", "per_j", "point_key")
        if k in best
    ]
    print("best point (highest throughput_per_s):")
    print(format_table(rows, [("name", "parameter", ""), ("value", "value", "")]))
    return 0


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:,.6g}"
    return str(v)
