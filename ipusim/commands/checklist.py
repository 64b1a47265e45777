"""``ipusim checklist``: run the proof-of-concept migration checklist and print its report.

With no options it runs the documented default case (BERT-base classification, 40% long
texts, 300 req/s, p99 <= 50 ms, one GC200 against one A100-80GB). ``--config FILE`` reads
a TOML or JSON case (see ``examples/*.toml``); the other options override it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .. import background, limits
from .._files import atomic_write, check_writable
from ._common import add_lengths, seed_arg

NAME = "checklist"
HELP = "run the POC migration checklist on a model and traffic and print the report (verdict and evidence)"
ORDER = 60
EPILOG = (
    "On a first run (the event kernel not in Numba's cache) with two CPUs free, a second "
    "process compiles the serving, packing and GPU kernels while this one fits the chips; the "
    "output is the same. IPUSIM_WORKERS=1 keeps everything in one process."
)


def add_arguments(p):
    p.add_argument("--config", metavar="FILE", help="TOML or JSON case file (examples/*.toml)")
    p.add_argument("--model", help="model preset (e.g. bert-base, gpt2, llama-2-7b)")
    p.add_argument(
        "--rate-per-s",
        type=float,
        metavar="R",
        help="offered load, requests/s (config: rate_per_s)",
    )
    p.add_argument(
        "--slo-p99-ms", type=float, metavar="T", help="p99 latency target, ms (config: slo_p99_ms)"
    )
    g = p.add_mutually_exclusive_group()
    g.add_argument("--long-fraction", type=float, metavar="F", help="share of long texts, 0-1")
    add_lengths(g, "request lengths (a CSV is sampled, a list taken as it is)")
    p.add_argument(
        "--arrivals",
        metavar="FILE",
        help="arrival trace: one time in seconds per line (sets the rate)",
    )
    p.add_argument(
        "--candidates", metavar="LIST", help="e.g. gc200:4,a100-80gb:2 (CHIP[:COUNT[:MODE]])"
    )
    p.add_argument(
        "--task", choices=("auto", "classify", "generate"), help="default: by model kind"
    )
    p.add_argument(
        "--output-tokens", type=int, metavar="N", help="reply tokens per request (generate)"
    )
    p.add_argument(
        "--price",
        action="append",
        metavar="CHIP=USD",
        help="price per chip-hour (repeatable); defaults are ASSUMPTIONS",
    )
    p.add_argument(
        "--usd-per-kwh", type=float, metavar="USD", help="energy price (default is an ASSUMPTION)"
    )
    p.add_argument("--train", action="store_true", help="also run the training check (7B-175B)")
    p.add_argument(
        "--answer",
        action="append",
        metavar="ITEM=ANSWER",
        help="questionnaire answer, e.g. dynamic_shapes=bucketed (repeatable)",
    )
    p.add_argument("--seed", type=seed_arg, help="random seed (default 0)")
    p.add_argument(
        "--format", choices=("md", "html", "json"), default="md", help="report format (default md)"
    )
    p.add_argument("--json", action="store_true", help="same as --format json")
    p.add_argument("--out", metavar="FILE", help="write the report here instead of stdout")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--calibration",
        metavar="FILE",
        help="re-judge the case with a calibration file (ipusim calibrate): the report is the "
        "calibrated one, with which parameters moved, by how much, and whether and why the verdict changed",
    )


def build_case(args):
    """The case described by the parsed arguments (config file first, options on top)."""
    from ..checklist import case as C
    from ..checklist import config_file as F

    if args.output_tokens is not None and args.output_tokens < 1:
        raise ValueError(f"--output-tokens must be >= 1, got {args.output_tokens}")
    if args.config:
        base = F.load_case(
            args.config, prices=C.parse_prices(args.price)
        )  # a custom chip's price may come from --price
    else:
        base = C.default_case()
    changes = {}
    if args.model:
        changes["model"] = args.model
    rate = args.rate_per_s
    if rate is not None:
        if not rate > 0 or rate == float("inf"):
            raise ValueError(
                f"--rate-per-s must be a finite number > 0 requests/s, got {rate:g}"
                + (" (zero traffic has no cost per request)" if rate == 0 else "")
            )
        limits.check_at_most(
            "--rate-per-s",
            rate,
            limits.MAX_RATE_PER_S,
            "requests/s; the checklist simulates the replicas that carry it",
        )
        changes["rate_per_s"] = rate
        changes["arrivals"] = None
    if args.arrivals:
        if rate is not None:
            raise ValueError(
                "give --rate-per-s or --arrivals, not both (a trace sets its own rate)"
            )
        changes["arrivals"] = F.read_arrivals(args.arrivals)
    if args.slo_p99_ms is not None:
        if args.slo_p99_ms <= 0:
            raise ValueError(f"--slo-p99-ms must be > 0, got {args.slo_p99_ms:g}")
        limits.check_at_most(
            "--slo-p99-ms", args.slo_p99_ms, limits.MAX_SECONDS * 1e3, "a latency target, ms"
        )
        changes["slo_p99_s"] = args.slo_p99_ms / 1e3
    if args.long_fraction is not None:
        changes["long_fraction"] = args.long_fraction
        changes["lengths"] = None
        changes["length_source"] = ""
    if args.lengths:
        seed = args.seed if args.seed is not None else base.seed
        lens, src = F.lengths_from_name(args.lengths, Path.cwd(), seed)
        changes["lengths"], changes["length_source"] = lens, src
    if args.candidates:
        changes["candidates"] = C.parse_candidates(args.candidates)
    if args.task:
        changes["task"] = args.task
    elif args.model:
        changes["task"] = "auto"
    if args.output_tokens is not None:
        changes["output_tokens"] = args.output_tokens
    if args.price or args.usd_per_kwh is not None:
        changes["prices"] = base.prices.with_prices(C.parse_prices(args.price), args.usd_per_kwh)
    if args.train and base.training is None:
        changes["training"] = C.Training()
    if args.answer:
        ans = dict(base.answers)
        for a in args.answer:
            if "=" not in a:
                raise ValueError(f"--answer {a!r}: use ITEM=ANSWER, e.g. custom_ops=none")
            k, v = a.split("=", 1)
            ans[k.strip()] = v.strip()
        changes["answers"] = ans
    if args.seed is not None:
        changes["seed"] = args.seed
    if not changes:
        return base
    if not args.config:
        changes["name"] = ""  # a new case: name it from its contents
    if "model" in changes and "lengths" not in changes and base.lengths is not None:
        changes["lengths"], changes["long_fraction"] = None, base.long_fraction or 0.4
    return base.replace(**changes)


def warm_kernels(gpu: str | None, model, max_len: int) -> None:
    """Compile (or load) kernels a first checklist needs after its tile planner's, by tiny
    calls through the paths the checklist takes (the same argument types: the same
    signatures): the event kernel (the serving search's ``serving.simulate`` with a dynamic
    policy, on a fixed service time), the packing kernels (``packing.pack``, first-fit and
    SPFHP; SPFHP's tiny call runs interpreted, as the checklist's own calls do while that
    costs less than compiling: ``packing.spfhp``) and the GPU model's (a one-request step on
    ``gpu``, if a candidate is a GPU).
    What a background worker does while the checklist fits the chips and builds their tables;
    in this order, the one that left the checklist least time waiting (the fit compiles the
    GPU model's kernel itself soon after the tile planner's)."""
    import numpy as np

    from .. import machine, packing, policies, serving, workloads

    lens = np.array([16, 32, 16, 48, 64, 16, 32, 16], dtype=np.int64)
    serving.simulate(
        np.linspace(0.0, 1e-3, lens.size),
        lens,
        policies.Dynamic(max_batch=4, max_delay_s=1e-3),
        [serving.fixed_service(1e-3, max_batch=4)] * 2,
        latency_target_s=1.0,
        max_waiting=1000,
    )
    for strategy in ("ffd", "spfhp"):  # the order the checklist needs them
        packing.pack(lens, max_len, strategy, max_per_row=2)
    if gpu is not None:
        machine.simulate(gpu, workloads.step(model, [16]))


def _worker(case) -> background.Worker:
    """A background worker compiling what ``warm_kernels`` does, unless Numba's cache holds
    the event kernel already (then the rest is there too, or quick)."""
    from .. import serving

    w = background.Worker()
    if background.cached(serving.batching.event_kernel(False)):
        return w
    gpu = next((c.chip.name for c in case.candidates if c.chip.kind == "gpu"), None)
    return w.start(f"{__name__}:warm_kernels", gpu, case.model, int(case.max_len))


def run(args) -> int:
    if args.out is not None:
        check_writable("--out", args.out)
    case = build_case(args)
    with _worker(case) as worker:
        report = _report(args, case)
        worker.result(lambda: None)  # waited for, not killed
    return _write(args, report)


def _report(args, case) -> tuple:
    """The checklist's report on ``case`` and, with ``--calibration``, its re-judging (else None)."""
    from ..checklist import run_checklist

    recal = None
    if args.calibration:
        from .. import calibration
        from ..checklist import recalibrate

        params = calibration.load(args.calibration)
        recal = recalibrate.rejudge(case, params, show_progress=not args.no_progress)
        report = recal["after"]
    else:
        report = run_checklist(case, show_progress=not args.no_progress)
    return report, recal


def _write(args, got) -> int:
    """Print or write (``--out``) the report in the asked format."""
    report, recal = got
    if recal is not None:
        from ..checklist import recalibrate

    fmt = "json" if args.json else args.format
    if fmt == "json":
        text = report.to_json()
        if recal is not None:
            import json

            from .._json import json_safe

            d = json.loads(text)
            d["calibration"] = {"file": str(args.calibration), **recalibrate.summary_dict(recal)}
            text = json.dumps(json_safe(d), indent=2, allow_nan=False)
    elif fmt == "html":
        text = report.to_html()
        if recal is not None:
            import html

            section = (
                "<section><pre>"
                + html.escape(recalibrate.summary_markdown(recal, args.calibration))
                + "</pre></section>"
            )
            text = (
                text.replace("</body>", section + "</body>", 1)
                if "</body>" in text
                else text + section
            )
    else:
        text = report.to_markdown()
        if recal is not None:
            text += "\n\n" + recalibrate.summary_markdown(recal, args.calibration)
    if args.out:
        with atomic_write(args.out) as f:  # whole or not at all
            f.write(text + ("\n" if not text.endswith("\n") else ""))
        print(f"{report.verdict.headline}; report written to {args.out}", file=sys.stderr)
    else:
        print(text)
    return 0
