"""``ipusim serve``: simulate a serving queue with a batching policy and print its numbers."""

from __future__ import annotations

from .. import arrivals, lengths, policies, serving
from ._common import add_chip_and_model, add_json, format_table, print_json

NAME = "serve"
HELP = "simulate requests through a batching policy on a chip (or a fixed/exponential server)"
ORDER = 30


def add_arguments(p):
    add_chip_and_model(p, chip="gc200", model="bert-base")
    p.add_argument("--service", choices=("chip", "fixed", "exponential"), default="chip",
                   help="where batch times come from: the chip's machine model (default), or a fixed or "
                        "exponential time of --service-ms per batch (for checks against queueing theory)")
    p.add_argument("--service-ms", type=float, default=10.0, help="batch time for --service fixed/exponential, ms")
    p.add_argument("--rate", type=float, help="mean arrival rate, requests/s (required unless --trace)")
    p.add_argument("--arrivals", choices=("poisson", "bursty", "ramp"), default="poisson",
                   help="arrival process at the mean --rate: Poisson (default); bursty (on/off, on 1 s at "
                        "twice the rate, off 1 s); ramp (one sinusoidal 'day' over the run, swing 0.8)")
    p.add_argument("--trace", help="CSV of requests (columns arrival_s,length) to replay instead of --rate")
    p.add_argument("--requests", type=int, default=10_000,
                   help=f"requests to simulate; default 10000, at most {serving.MAX_REQUESTS:,} (memory: about "
                        f"{serving.BYTES_PER_REQUEST} bytes each)")
    p.add_argument("--policy", choices=[x for x in policies.POLICIES if x != "continuous"], default="dynamic")
    p.add_argument("--max-batch", type=int, default=32, help="largest batch, requests; default 32")
    p.add_argument("--max-delay-ms", type=float, default=2.0, help="longest hold of the oldest request, ms")
    p.add_argument("--packed", action="store_true", help="the device runs packed rows instead of padded ones")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--lengths", metavar="FILE", help="histogram CSV 'length,count' to draw request lengths from")
    (slo, shi), (llo, lhi) = lengths.SHORT_RANGE, lengths.LONG_RANGE
    g.add_argument("--long-fraction", type=float, default=0.0, metavar="F",
                   help=f"share of long requests ({llo}-{lhi} tokens; others {slo}-{shi}); default 0")
    p.add_argument("--latency-target-ms", type=float, default=100.0, help="latency target for goodput, ms")
    p.add_argument("--seed", type=int, default=0, help="random seed; default 0")
    add_json(p)


def run(args) -> int:
    n = args.requests
    if not 1 <= n <= serving.MAX_REQUESTS:
        raise ValueError(f"--requests must lie in 1..{serving.MAX_REQUESTS:,}, got {n:,} (the simulator keeps "
                         f"about {serving.BYTES_PER_REQUEST} bytes per request in memory; split longer runs)")
    if args.trace:
        arr, lens = arrivals.load_trace(args.trace)
        n = arr.size
    else:
        if args.rate is None:
            raise ValueError("give --rate (requests/s) or --trace FILE")
        if args.arrivals == "poisson":
            arr = arrivals.poisson(args.rate, n, seed=args.seed)
        elif args.arrivals == "bursty":
            arr = arrivals.on_off(2 * args.rate, n, mean_on_s=1.0, mean_off_s=1.0, seed=args.seed)
        else:
            arr = arrivals.daily_ramp(args.rate, n, period_s=n / args.rate, seed=args.seed)
        if args.lengths:
            lens = lengths.sample(n, histogram=args.lengths, seed=args.seed + 1)
        else:
            lens = lengths.sample(n, long_fraction=args.long_fraction, seed=args.seed + 1)
    B = args.max_batch
    if B < 1:
        raise ValueError(f"--max-batch must be >= 1, got {B}")
    pol = policies.make(args.policy, max_batch=B, max_delay_s=args.max_delay_ms / 1e3,
                        latency_target_s=args.latency_target_ms / 1e3)
    rows = getattr(pol, "max_batch", B)
    if args.service == "fixed":
        dev = serving.fixed_service(args.service_ms / 1e3, max_batch=rows)
    elif args.service == "exponential":
        dev = serving.exponential_service(args.service_ms / 1e3, max_batch=rows)
    else:
        dev = serving.chip_service(args.chip, args.model, max_batch=rows, packed=args.packed)
    r = serving.simulate(arr, lens, pol, dev, latency_target_s=args.latency_target_ms / 1e3, seed=args.seed)
    d = r.to_dict()
    d.update({"chip": args.chip if args.service == "chip" else None, "model": args.model if args.service == "chip" else None,
              "service": args.service, "rate_rps": args.rate, "arrivals": "trace" if args.trace else args.arrivals,
              "seed": args.seed})
    if args.json:
        print_json(d)
        return 0
    print(repr(r))
    keys = [("throughput_rps", "req/s", ",.1f"), ("goodput_rps", "goodput req/s", ",.1f"),
            ("latency_p50_s", "p50 s", ".4g"), ("latency_p99_s", "p99 s", ".4g"),
            ("latency_p999_s", "p99.9 s", ".4g"), ("queueing_mean_s", "mean queue s", ".4g"),
            ("mean_batch", "mean batch", ".2f"), ("utilization", "utilization", ".3f"),
            ("padded_token_waste", "pad waste", ".3f")]
    print(format_table([d], keys))
    if not d["stable"]:
        print(f"UNSTABLE: {d['unstable_reason']}")
    return 0
