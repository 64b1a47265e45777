"""``ipusim serve``: simulate a serving queue with a batching policy and print its numbers."""

from __future__ import annotations

import argparse
import csv

import numpy as np

from .. import arrivals, background, lengths, limits, policies, serving, traffic
from .._files import atomic_write, check_writable
from .._validate import in_range
from ..serving import llm_metrics, tables
from ._common import (
    add_chip_and_model,
    add_json,
    add_lengths,
    format_table,
    number,
    print_json,
    seed_arg,
)

NAME = "serve"
HELP = "simulate requests through a batching policy on a chip (or a fixed/exponential server)"
ORDER = 30
EPILOG = (
    "When the chip's service table is not cached yet and two CPUs are free, a second process "
    "compiles the event kernel while this one builds the table; the output is the same. "
    "IPUSIM_WORKERS=1 keeps everything in one process."
)
_MS = limits.MAX_SECONDS * 1e3  # any one time option, ms


def add_arguments(p):
    add_chip_and_model(
        p,
        chip="gc200",
        model="bert-base",
        model_note="; gpt2 for generation (--output-tokens, or a --trace with output lengths)",
    )
    p.set_defaults(model=None)
    p.add_argument(
        "--service",
        choices=("chip", "fixed", "exponential"),
        default="chip",
        help="where batch times come from: the chip's machine model (default), or a fixed or "
        "exponential time of --service-ms per batch (for checks against queueing theory)",
    )
    p.add_argument(
        "--service-ms",
        type=number(1e-9, _MS, "ms", "a batch's time"),
        default=10.0,
        help="batch time for --service fixed/exponential, ms",
    )
    p.add_argument(
        "--rate",
        type=_rate_arg,
        metavar="R or START:STOP:STEP",
        help="mean arrival rate, requests/s (required unless --trace); START:STOP:STEP sweeps the "
        "rates START, START+STEP, ... up to STOP and prints one row per rate",
    )
    p.add_argument(
        "--arrivals",
        choices=("poisson", "gamma", "bursty", "ramp"),
        default="poisson",
        help="arrival process at the mean --rate: Poisson (default); gamma (Gamma gaps with "
        "coefficient of variation --cv); bursty (on/off, on 1 s at twice the rate, off 1 s); "
        "ramp (one sinusoidal 'day' over the run, swing 0.8)",
    )
    p.add_argument(
        "--cv",
        type=number(limits.MIN_CV, limits.MAX_CV, "", limits.CV_WHY),
        default=1.0,
        help="coefficient of variation of the gaps for --arrivals gamma; default 1 (Poisson)",
    )
    p.add_argument(
        "--trace",
        help="requests to replay instead of --rate: a CSV with a header (arrival_s,length; "
        "or an LLM trace such as Azure's TIMESTAMP,ContextTokens,GeneratedTokens) or "
        "JSON Lines (arrival, input and output lengths); output lengths make it generation",
    )
    p.add_argument(
        "--trace-columns",
        metavar="time=NAME,input=NAME,output=NAME",
        help="name the trace's columns (default: found by common names, see ipusim.traffic)",
    )
    p.add_argument(
        "--trace-time-unit",
        choices=tuple(traffic.TIME_UNITS),
        default="s",
        help="unit of numeric arrival times in --trace (default s; dates need none)",
    )
    p.add_argument(
        "--goodput",
        nargs="+",
        metavar="KEY:MS",
        help="generation: SLOs of request_goodput, as vLLM's benchmark_serving takes them "
        "(ttft:MS tpot:MS e2el:MS); default ttft:1000 tpot:100 (ASSUMPTION, see "
        "ipusim.serving.llm_metrics)",
    )
    p.add_argument(
        "--requests",
        type=int,
        default=10_000,
        help=f"requests to simulate; default 10000, at most {serving.MAX_REQUESTS:,} (memory: about "
        f"{serving.BYTES_PER_REQUEST} bytes each)",
    )
    p.add_argument(
        "--policy",
        choices=policies.POLICIES,
        default=None,
        help="batching policy (default dynamic; continuous for generation); continuous (and static "
        "with --output-tokens) serve generation",
    )
    p.add_argument("--max-batch", type=int, default=32, help="largest batch, requests; default 32")
    p.add_argument(
        "--max-delay-ms",
        type=number(0, float("inf")),
        default=2.0,
        help="longest hold of the oldest request, ms",
    )
    p.add_argument(
        "--packed", action="store_true", help="the device runs packed rows instead of padded ones"
    )
    g = p.add_mutually_exclusive_group()
    add_lengths(g, "draw request lengths from")
    (slo, shi), (llo, lhi) = lengths.SHORT_RANGE, lengths.LONG_RANGE
    g.add_argument(
        "--long-fraction",
        type=number(0, 1),
        default=0.0,
        metavar="F",
        help=f"share of long requests ({llo}-{lhi} tokens; others {slo}-{shi}); default 0",
    )
    p.add_argument(
        "--latency-target-ms",
        type=number(1e-9, _MS, "ms", "a latency target"),
        default=100.0,
        help="latency target for goodput, ms",
    )
    p.add_argument("--seed", type=seed_arg, default=0, help="random seed; default 0")
    p.add_argument(
        "--output-tokens",
        metavar="N or LO:HI",
        default=None,
        help="generation: tokens each request generates (N, or uniform in LO..HI, seeded); requests' "
        "lengths are their prompts. Needs a decoder --model; prints time to first token and "
        "time between tokens (p50, p99 over every gap)",
    )
    p.add_argument(
        "--chunk-tokens",
        type=int,
        default=0,
        help="continuous batching: chunked prefill, at most this many tokens an iteration (default 0: off)",
    )
    p.add_argument(
        "--kv-tokens",
        type=int,
        default=200_000,
        help="continuous batching: tokens the KV cache holds; default 200000",
    )
    p.add_argument(
        "--prefill-chip",
        metavar="CHIP",
        help="disaggregated generation: the prefill pool's chip "
        "(preset or file); needs --decode-chip",
    )
    p.add_argument(
        "--decode-chip", metavar="CHIP", help="disaggregated generation: the decode pool's chip"
    )
    p.add_argument(
        "--prefill-count", type=int, default=1, help="disaggregated: prefill devices; default 1"
    )
    p.add_argument(
        "--decode-count", type=int, default=1, help="disaggregated: decode devices; default 1"
    )
    p.add_argument(
        "--kv-link-bytes-per-s",
        type=float,
        default=None,
        help="disaggregated: bytes/s each prefill device sends KV caches at (default 12.5e9: one "
        "100 Gb/s port, ASSUMPTION; see ipusim.serving.disaggregated)",
    )
    p.add_argument(
        "--trace-out",
        metavar="FILE",
        help="write the run as a Chrome Trace Event Format JSON (Perfetto, chrome://tracing): batches "
        "per device and the spans of up to 200 requests (one rate only)",
    )
    p.add_argument(
        "--csv",
        metavar="FILE",
        help="write rows to FILE: one per request for one rate, one per rate for a sweep",
    )
    p.add_argument(
        "--replications",
        type=int,
        default=1,
        metavar="N",
        help="N >= 2: also run N independent seeded replications and give p50/p99 with 95%% "
        "intervals, the first 10%% of each run's arrivals discarded as warm-up "
        "(ipusim.serving.replications); default 1: one run, no interval",
    )
    add_json(p)


def parse_rates(text: str) -> list[float]:
    """``R`` or ``START:STOP:STEP`` (requests/s; STOP included when the steps land on it)."""
    parts = text.split(":")
    try:
        vals = [float(x) for x in parts]
    except ValueError:
        raise ValueError(f"--rate must be a number or START:STOP:STEP, got {text!r}") from None
    for v in vals[:2]:  # a rate (START and STOP) within the physical range; also no inf or NaN
        in_range("--rate", v, limits.MIN_RATE_PER_S, limits.MAX_RATE_PER_S, why=limits.RATE_WHY)
    if len(vals) == 1:
        return vals
    if len(vals) != 3:
        raise ValueError(f"--rate takes START:STOP:STEP, got {text!r}")
    lo, hi, step = vals
    if not (0 < lo <= hi and step > 0):
        raise ValueError(
            f"--rate START:STOP:STEP needs 0 < START <= STOP and STEP > 0, got {text!r}"
        )
    in_range("--rate STEP", step, 0, limits.MAX_RATE_PER_S, why="requests/s")
    k = int(np.floor((hi - lo) / step * (1 + 1e-12))) + 1
    if k > 1000:
        raise ValueError(f"--rate {text} asks for {k} rates; at most 1000")
    return [lo + i * step for i in range(k)]


def _rate_arg(text: str) -> list[float]:
    try:
        return parse_rates(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--rate ")) from None


_REQUEST_COLUMNS = ("arrival_s", "length", "start_s", "finish_s", "latency_s", "device", "batch_id")


def _write_csv(path, rows: list[dict], result=None) -> None:
    """The rows to ``path``, whole or not at all (``_files.atomic_write``)."""
    with atomic_write(path, "w", newline="") as f:
        w = csv.writer(f)
        if (
            result is not None and result.first_token_s is not None
        ):  # generation: one row per request
            cols = llm_metrics.request_rows(result)
            w.writerow(cols)
            w.writerows(zip(*(np.asarray(c).tolist() for c in cols.values()), strict=True))
        elif result is not None:  # one row per request
            w.writerow(_REQUEST_COLUMNS)
            cols = (
                result.arrival_s,
                result.lengths,
                result.start_s,
                result.finish_s,
                result.latency_s,
                result.device,
                result.batch_id,
            )
            w.writerows(zip(*(c.tolist() for c in cols), strict=True))
        else:  # one row per rate
            keys = [k for k, v in rows[0].items() if not isinstance(v, (list, dict))]
            w.writerow(keys)
            w.writerows([r[k] for k in keys] for r in rows)


def _arrivals(args, rate, n, seed=None):
    seed = args.seed if seed is None else seed
    if args.arrivals == "poisson":
        return arrivals.poisson(rate, n, seed=seed)
    if args.arrivals == "gamma":
        return arrivals.gamma(rate, n, cv=args.cv, seed=seed)
    if args.arrivals == "bursty":
        return arrivals.on_off(2 * rate, n, mean_on_s=1.0, mean_off_s=1.0, seed=seed)
    return arrivals.daily_ramp(rate, n, period_s=n / rate, seed=seed)


def _replications(args, rate, n, pol, dev) -> dict:
    """p50/p99 intervals over ``--replications`` independent seeded runs (``serving.replications``)."""
    from ..serving import replications

    def one(seed):
        if args.lengths:
            lens = lengths.source(args.lengths).sample(n, seed=seed + 1)
        else:
            lens = lengths.sample(n, long_fraction=args.long_fraction, seed=seed + 1)
        r = serving.simulate(
            _arrivals(args, rate, n, seed),
            lens,
            pol,
            dev,
            latency_target_s=args.latency_target_ms / 1e3,
            seed=seed,
        )
        return r.arrival_s, r.latency_s

    return replications.replicate(one, args.replications, seed=args.seed)


def warm_kernels(arrival, lengths, policy, rows: int, seed: int) -> None:
    """Compile (or load) the event kernel a run of ``policy`` needs, by a tiny run of the same
    ``serving.simulate`` call on requests like the run's (the same dtypes: the same signature)
    with a fixed service time: what a background worker does while a first ``serve`` builds
    its chip table."""
    serving.simulate(
        arrival, lengths, policy, serving.fixed_service(1e-3, max_batch=rows), seed=seed
    )


def _chip_service(args, rows: int, shortest: int, longest: int | None, on_build=None):
    """The chip's service table: from the cache when it is there; otherwise one shortest request
    is simulated first, so that a model that fits nowhere is refused before a table is built.

    ``longest``: the longest request the run reads (None: any length). When the full table
    (every length up to the model's ``max_positions``) is not cached, the shortest padded
    table that holds the same cells for requests up to ``longest`` is used instead
    (``serving.service.table_length``), so the run's results are the same, bit for bit, and
    a first ``serve`` of the default lengths (16-128 tokens) builds a quarter of BERT-base's
    table. ``on_build()`` is called first when the table is to be built."""
    from .. import workloads
    from ..serving.service import table_length

    dev = _service_or_none(args, rows, None)
    max_len = None
    if dev is None and longest is not None and not args.packed:
        if longest <= workloads.model(args.model).max_positions:
            max_len = table_length(args.model, longest)
        if max_len is not None:
            dev = _service_or_none(args, rows, max_len)
    if dev is None and on_build is not None:
        on_build()
    if dev is None or not np.isfinite(dev.table[1, 1:]).any():
        from .. import machine  # only when the table is not cached

        one = machine.simulate(args.chip, workloads.step(args.model, [shortest], pad_to=shortest))
        if one.fit == "does_not_fit":
            raise ValueError(
                f"{args.model} does not fit {args.chip} even at batch 1 "
                f"({shortest} tokens): {one.fit_message.split('. ')[0]}"
            )
    return dev or serving.chip_service(
        args.chip, args.model, max_batch=rows, packed=args.packed, max_len=max_len
    )


def _if_cached(build, *args, **kwargs):
    """``build(*args, **kwargs)`` from the table cache alone, or None when a table it needs is
    not cached (nothing is built)."""
    try:
        with tables.only_cached():
            return build(*args, **kwargs)
    except tables.NotCached:
        return None


def _service_or_none(args, rows: int, max_len: int | None):
    """The chip's service table up to ``max_len`` tokens if cached, else None."""
    return _if_cached(
        serving.chip_service,
        args.chip,
        args.model,
        max_batch=rows,
        packed=args.packed,
        max_len=max_len,
    )


def _generation_model(args, chip: str, prompts, outs, *, mixed: bool = True):
    """``chip``'s generation model of ``args.model``: its full tables (every context up to the
    model's ``max_positions``) when cached; otherwise the shortest tables that hold the same
    cells for these requests (``serving.generation.table_lengths``), so the run's results are
    the same, bit for bit, and a first run of short requests builds a fraction of the tables
    (GPT-2, prompts of up to 128 tokens and replies of up to 64: an eighth of the prompt
    columns and 3 of the 16 context columns)."""
    full = _if_cached(
        serving.generation_model, chip, args.model, max_batch=args.max_batch, mixed=mixed
    )
    if full is not None:
        return full
    pr = np.asarray(prompts)
    mp, mc = serving.generation.table_lengths(args.model, int(pr.max()), int((pr + outs).max()))
    return serving.generation_model(
        chip, args.model, max_batch=args.max_batch, mixed=mixed, max_prompt=mp, max_ctx=mc
    )


def _output_tokens(text, n, seed):
    """``N`` or ``LO:HI`` (uniform, seeded) tokens generated per request."""
    parts = str(text).split(":")
    try:
        vals = [int(x) for x in parts]
    except ValueError:
        raise ValueError(
            f"--output-tokens must be N or LO:HI (whole numbers), got {text!r}"
        ) from None
    if len(vals) > 2 or min(vals) < 1 or vals[0] > vals[-1]:
        raise ValueError(
            f"--output-tokens must be N >= 1 or LO:HI with 1 <= LO <= HI, got {text!r}"
        )
    return np.random.default_rng([seed, 0x70C]).integers(vals[0], vals[-1] + 1, n)


def _generation(args, rates, trace_arr, prompts, n, outs=None) -> int:
    """Generation serving: continuous or static batching of a decoder; TTFT and TBT beside latency."""
    if args.service != "chip":
        raise ValueError("generation (--output-tokens / --policy continuous) needs --service chip")
    if args.policy not in ("continuous", "static"):
        raise ValueError(f"generation runs --policy continuous or static, got {args.policy}")
    if args.output_tokens is None and outs is None:
        raise ValueError("--policy continuous serves generation: give --output-tokens N or LO:HI")
    if args.chunk_tokens and args.policy != "continuous":
        raise ValueError("--chunk-tokens applies to --policy continuous")
    if outs is None:
        outs = _output_tokens(args.output_tokens, n, args.seed)
    slos = llm_metrics.parse_goodput(args.goodput) if args.goodput else None
    if args.prefill_chip or args.decode_chip:
        return _disaggregated(args, rates, trace_arr, prompts, n, outs, slos)
    if args.policy == "continuous":
        pol = policies.make(
            "continuous",
            max_batch=args.max_batch,
            kv_capacity_tokens=args.kv_tokens,
            chunk_tokens=args.chunk_tokens,
        )
    else:
        pol = policies.make("static", max_batch=args.max_batch, max_delay_s=args.max_delay_ms / 1e3)
    gen = _generation_model(args, args.chip, prompts, outs)
    out, last = [], None
    for rate in rates:
        a = trace_arr if rate is None else _arrivals(args, rate, n)
        last = serving.simulate_generation(
            a, prompts, outs, pol, gen, latency_target_s=args.latency_target_ms / 1e3
        )
        d = last.to_dict()
        d.update(
            {
                "chip": args.chip,
                "model": args.model,
                "rate_rps": rate,
                "arrivals": "trace" if args.trace else args.arrivals,
                "seed": args.seed,
            }
        )
        d.update(llm_metrics.llm_metrics(last, goodput_slos_ms=slos))
        out.append(d)
    if not args.json and len(out) == 1:
        _print_llm(out[0])
    keys = [
        ("throughput_rps", "req/s", ",.1f"),
        ("latency_p50_s", "p50 s", ".4g"),
        ("latency_p99_s", "p99 s", ".4g"),
        ("ttft_p50_s", "TTFT p50 s", ".4g"),
        ("ttft_p99_s", "TTFT p99 s", ".4g"),
        ("tbt_p50_s", "TBT p50 s", ".4g"),
        ("tbt_p99_s", "TBT p99 s", ".4g"),
        ("mean_batch", "tokens/step", ".2f"),
    ]
    return _report(args, out, last, keys)


def _disaggregated(args, rates, trace_arr, prompts, n, outs, slos) -> int:
    """Generation on a prefill pool and a decode pool (``serving.disaggregated``)."""
    from .. import workloads
    from ..serving import disaggregated

    if not (args.prefill_chip and args.decode_chip):
        raise ValueError("disaggregated serving needs both --prefill-chip and --decode-chip")
    if args.policy != "continuous" or args.chunk_tokens:
        raise ValueError(
            "disaggregated serving decodes with continuous batching: leave --policy and --chunk-tokens"
        )
    pre = _generation_model(args, args.prefill_chip, prompts, outs, mixed=False)
    dec = _generation_model(args, args.decode_chip, prompts, outs, mixed=False)
    link = args.kv_link_bytes_per_s or disaggregated.DEFAULT_KV_LINK_BYTES_PER_S
    kvb = workloads.model(args.model).kv_bytes_per_token()
    # the prefill pool batches at most --max-batch prompts, and no more than one pass holds
    pre_batch = disaggregated.prompt_batch_limit(pre, int(np.max(prompts)), args.max_batch)
    # the decode pool runs at most --max-batch sequences, and no more than one step holds
    longest = int(np.max(np.asarray(prompts) + np.asarray(outs)))
    dec_batch = disaggregated.decode_batch_limit(dec, longest, args.max_batch)
    out, last = [], None
    for rate in rates:
        a = trace_arr if rate is None else _arrivals(args, rate, n)
        last, pools = disaggregated.simulate_disaggregated(
            a,
            prompts,
            outs,
            prefill=pre,
            decode=dec,
            kv_bytes_per_token=kvb,
            prefill_policy=policies.make(
                "dynamic", max_batch=pre_batch, max_delay_s=args.max_delay_ms / 1e3
            ),
            prefill_count=args.prefill_count,
            decode_count=args.decode_count,
            max_batch=dec_batch,
            kv_capacity_tokens=args.kv_tokens,
            kv_link_bytes_per_s=link,
            latency_target_s=args.latency_target_ms / 1e3,
        )
        d = last.to_dict()
        d.update(pools)
        d.update(
            {
                "model": args.model,
                "rate_rps": rate,
                "arrivals": "trace" if args.trace else args.arrivals,
                "seed": args.seed,
            }
        )
        d.update(llm_metrics.llm_metrics(last, goodput_slos_ms=slos))
        out.append(d)
    if not args.json and len(out) == 1:
        _print_llm(out[0])
    keys = [
        ("request_throughput", "req/s", ",.1f"),
        ("p99_ttft_ms", "TTFT p99 ms", ",.2f"),
        ("p99_tpot_ms", "TPOT p99 ms", ",.3f"),
        ("p99_e2el_ms", "E2EL p99 ms", ",.1f"),
        ("request_goodput", "goodput req/s", ",.1f"),
    ]
    return _report(args, out, last, keys)


def _print_llm(d: dict) -> None:
    """The vLLM-style block: throughputs, goodput, and mean/median/p90/p95/p99 of TTFT, TPOT, ITL, E2EL."""
    slos = ", ".join(f"{k} <= {v:g} ms" for k, v in d["goodput_slos_ms"].items()) or "none"
    print(
        f"completed {d['completed']:,} in {d['duration']:,.2f} s; request_throughput "
        f"{d['request_throughput']:,.2f} req/s, output_throughput {d['output_throughput']:,.1f} tok/s, "
        f"request_goodput {d['request_goodput']:,.2f} req/s ({slos})"
    )
    rows = [
        {"metric": m, **{c: d[f"{c}_{m}_ms"] for c in ("mean", "median", "p90", "p95", "p99")}}
        for m in llm_metrics.METRICS
    ]
    print(
        format_table(
            rows,
            [
                ("metric", "ms", ""),
                ("mean", "mean", ",.2f"),
                ("median", "median", ",.2f"),
                ("p90", "p90", ",.2f"),
                ("p95", "p95", ",.2f"),
                ("p99", "p99", ",.2f"),
            ],
        )
    )


def _report(args, out: list[dict], last, keys) -> int:
    """Write the CSV, print the JSON, or print the result and a table of ``keys`` (one row per rate)."""
    sweep = len(out) > 1
    if args.trace_out:
        if sweep:
            raise ValueError("--trace-out writes one run: give one --rate, not a sweep")
        from .. import chrometrace

        chrometrace.write(args.trace_out, chrometrace.serving_trace(last))
    if args.csv:
        _write_csv(args.csv, out, None if sweep else last)
    if args.json:
        print_json(out if sweep else out[0])
        return 0
    if not sweep:
        print(repr(last))
    if sweep:
        keys = [("rate_rps", "rate req/s", ",.0f"), *keys, ("stable", "stable", "")]
    print(format_table(out, keys))
    rep = out[0].get("replications")
    if rep:
        print(f"over {rep['replications']} replications ({rep['interval']}; {rep['warmup_rule']}):")
        for q in ("p50", "p99"):
            i = rep[f"latency_{q}_s"]
            print(f"  {q} {i['mean']:.4g} s, interval {i['lo']:.4g} .. {i['hi']:.4g} s")
    for d in out:
        if not d["stable"]:
            where = f"at {d['rate_rps']:,.0f} req/s: " if sweep else ""
            print(f"UNSTABLE {where}{d['unstable_reason']}")
    return 0


def run(args) -> int:
    n = args.requests
    if not 1 <= n <= serving.MAX_REQUESTS:
        raise ValueError(
            f"--requests must lie in 1..{serving.MAX_REQUESTS:,}, got {n:,} (the simulator keeps "
            f"about {serving.BYTES_PER_REQUEST} bytes per request in memory; split longer runs)"
        )
    if args.csv is not None:
        check_writable("--csv", args.csv)
    if args.cv != 1.0 and args.arrivals != "gamma":
        raise ValueError("--cv applies to --arrivals gamma only")
    outs = None
    if args.trace:
        arr, lens, outs = traffic.load(
            args.trace,
            columns=traffic.parse_columns(args.trace_columns),
            time_unit=args.trace_time_unit,
        )
        n = arr.size
        rates = [None]
    else:
        if args.rate is None:
            raise ValueError("give --rate (requests/s) or --trace FILE")
        rates = args.rate
        for r in rates:
            limits.check_run_length("--rate", r, n)
        if args.lengths:
            lens = lengths.source(args.lengths).sample(n, seed=args.seed + 1)
        else:
            lens = lengths.sample(n, long_fraction=args.long_fraction, seed=args.seed + 1)
    B = args.max_batch
    if B < 1:
        raise ValueError(f"--max-batch must be >= 1, got {B}")
    if outs is not None and args.output_tokens is not None:
        raise ValueError("--trace gives each request's output length; leave out --output-tokens")
    generation = args.output_tokens is not None or args.policy == "continuous" or outs is not None
    if args.model is None:
        args.model = "gpt2" if generation else "bert-base"
    if args.policy is None:
        args.policy = "continuous" if generation else "dynamic"
    if args.replications != 1 and (
        args.replications < 2 or args.trace or len(rates) > 1 or generation
    ):
        raise ValueError(
            f"--replications takes N >= 2 (got {args.replications}) with one --rate, "
            "no --trace and no generation"
        )
    if generation:
        return _generation(args, rates, arr if args.trace else None, lens, n, outs)
    pol = policies.make(
        args.policy,
        max_batch=B,
        max_delay_s=args.max_delay_ms / 1e3,
        latency_target_s=args.latency_target_ms / 1e3,
    )
    rows = getattr(pol, "max_batch", B)
    worker = background.Worker()  # started only if the chip's table is to be built
    if args.service == "fixed":
        dev = serving.fixed_service(args.service_ms / 1e3, max_batch=rows)
    elif args.service == "exponential":
        dev = serving.exponential_service(args.service_ms / 1e3, max_batch=rows)
    else:

        def on_build():  # the table takes seconds: compile the event kernel meanwhile
            if background.cached(serving.batching.event_kernel(isinstance(pol, policies.Adaptive))):
                return
            k = min(8, n)
            tiny = arr[:k] if rates[0] is None else _arrivals(args, rates[0], k)
            worker.start(f"{__name__}:warm_kernels", tiny, lens[:k], pol, rows, args.seed)

        # replications draw other lengths: any length then
        longest = None if args.replications >= 2 else int(lens.max())
        with worker:
            dev = _chip_service(args, rows, int(lens.min()), longest, on_build)
            worker.result(lambda: None)  # compiled by now, or being loaded here next
    out, last = [], None
    for rate in rates:
        a = arr if rate is None else _arrivals(args, rate, n)
        last = serving.simulate(
            a, lens, pol, dev, latency_target_s=args.latency_target_ms / 1e3, seed=args.seed
        )
        d = last.to_dict()
        d.update(
            {
                "chip": args.chip if args.service == "chip" else None,
                "model": args.model if args.service == "chip" else None,
                "service": args.service,
                "rate_rps": rate,
                "arrivals": "trace" if args.trace else args.arrivals,
                "cv": args.cv if args.arrivals == "gamma" else None,
                "seed": args.seed,
            }
        )
        out.append(d)
    if args.replications >= 2:
        out[0]["replications"] = _replications(args, rates[0], n, pol, dev)
    keys = [
        ("throughput_rps", "req/s", ",.1f"),
        ("goodput_rps", "goodput req/s", ",.1f"),
        ("latency_p50_s", "p50 s", ".4g"),
        ("latency_p99_s", "p99 s", ".4g"),
        ("latency_p999_s", "p99.9 s", ".4g"),
        ("queueing_mean_s", "mean queue s", ".4g"),
        ("mean_batch", "mean batch", ".2f"),
        ("utilization", "utilization", ".3f"),
        ("padded_token_waste", "pad waste", ".3f"),
    ]
    return _report(args, out, last, keys)
