"""``ipusim simulate``: the time of one step on one chip, its split, memory per unit, and fit."""

from __future__ import annotations

import numpy as np

from .. import hardware, lengths, limits, machine, workloads
from .._validate import positive
from ._common import (
    add_batch_and_seq_len,
    add_chip_and_model,
    add_json,
    add_lengths,
    format_table,
    print_json,
    seed_arg,
)

NAME = "simulate"
HELP = "simulate one step (forward, prefill or decode) of a model on a chip"
ORDER = 20


def add_arguments(p):
    add_chip_and_model(p)
    add_batch_and_seq_len(p)
    p.add_argument(
        "--phase",
        default="forward",
        choices=("forward", "prefill", "decode"),
        help="step kind (default forward)",
    )
    add_lengths(
        p,
        "draw the --batch sequence lengths from (longer ones are cut to --seq-len; "
        "default: every sequence is --seq-len tokens)",
    )
    p.add_argument("--seed", type=seed_arg, default=0, help="seed of the length draw; default 0")
    p.add_argument(
        "--packed",
        action="store_true",
        help="run the drawn lengths unpadded/packed (default: every sequence padded to --seq-len); "
        "needs --lengths (a decode step has no padding either way)",
    )
    p.add_argument(
        "--chips",
        type=int,
        default=1,
        help="chips to place the step on (tensor/pipeline/data parallel; default 1)",
    )
    p.add_argument(
        "--calibration",
        metavar="FILE",
        default=None,
        help="a calibration file from `ipusim calibrate` for this --chip: its efficiency parameters "
        "replace the preset's",
    )
    p.add_argument(
        "--trace-out",
        metavar="FILE",
        help="write the step as a Chrome Trace Event Format JSON (Perfetto, chrome://tracing): "
        "supersteps per tile group (sync, exchange, compute), ops; per stage on several chips",
    )
    add_json(p)


def run(args) -> int:
    c = hardware.chip(args.chip)
    m = workloads.model(args.model)
    batch = positive("--batch", args.batch, integer=True)
    seq = positive("--seq-len", args.seq_len, integer=True)
    chips = positive("--chips", args.chips, integer=True)
    if seq > m.max_positions:
        raise ValueError(
            f"--seq-len {seq:,} is longer than {m.name}'s max_positions {m.max_positions:,}"
        )
    limits.check_step(batch, seq, name="--batch")
    limits.check_at_most("--chips", chips, limits.MAX_CHIPS, "chips in one deployment")
    lens, source = _lengths(args, batch, seq)
    pad = None if (args.packed or args.phase == "decode") else seq
    s = workloads.step(args.model, lens, phase=args.phase, pad_to=pad)
    options = {}
    if args.calibration:
        from .. import calibration

        options = calibration.options(calibration.load(args.calibration), c)
    r = machine.simulate(c, s, chips=chips, **options)
    if args.trace_out:
        from .. import chrometrace

        chrometrace.write(args.trace_out, chrometrace.step_trace(c, s, chips=chips))
    pl = r.placement
    mem = r.unit_memory_bytes
    unit = "tile" if r.kind == "tile" else "SM"
    if args.json:
        print_json(
            {
                "chip": r.chip,
                "kind": r.kind,
                "model": r.model,
                "phase": r.phase,
                "batch": r.batch,
                "seq_len": seq,
                "lengths_source": source,
                "real_tokens": int(sum(lens)),
                "packed": bool(args.packed),
                "time_s": r.time_s,
                "split_s": dict(r.split),
                "throughput_seq_per_s": r.throughput_seq_per_s,
                "unit": unit,
                "memory_per_unit_max_bytes": float(np.max(mem)) if mem.size else 0.0,
                "memory_per_unit_mean_bytes": float(np.mean(mem)) if mem.size else 0.0,
                "memory_limit_bytes": r.memory_limit_bytes,
                "fit": r.fit,
                "fits": r.fits,
                "fit_message": r.fit_message,
                "time_if_unlimited_s": r.extra.get("time_if_unlimited_s", r.time_s),
                "energy_j": r.energy_j,
                "energy_split": dict(r.energy_split),
                "board_energy_j": r.board_energy_j,
                "chips": chips,
                "placement": pl.to_dict() if pl is not None else None,
                "ops": [
                    {"op": n, "time_s": float(t)}
                    for n, t in zip(r.op_names, r.op_time_s, strict=True)
                ],
            }
        )
        return 0
    layout = (
        "one new token each" if args.phase == "decode" else ("packed" if args.packed else "padded")
    )
    what = "tokens of context" if args.phase == "decode" else "tokens"
    on = f"{chips} x {r.chip}" if chips > 1 else r.chip
    size = f"{seq}" if source is None else f"up to {seq}"
    drawn = "" if source is None else f", lengths from {source}: {int(sum(lens)):,} real tokens"
    print(
        f"{on} ({r.kind}), {r.model} {r.phase}, batch {r.batch} x {size} {what} ({layout}{drawn})"
    )
    if pl is not None:
        print(
            f"placement   {pl.label()} (tensor, pipeline, data parallel, micro-batches) on "
            f"{pl.chips_used} of {chips} chips; layers per stage {_layers(pl.stage_layers)}"
        )
        if r.fits:
            print(
                f"            link {pl.communication_s * 1e3:,.3f} ms, pipeline bubble {pl.bubble_s * 1e3:,.3f} ms"
            )
    if r.fits:
        print(f"step time   {r.time_s * 1e3:,.3f} ms  ({r.throughput_seq_per_s:,.0f} seq/s)")
        total = r.time_s
    elif pl is not None:  # no placement fits: nothing to split
        total = float("nan")
        print(f"step time   none: the step DOES NOT FIT on {chips} chips")
    else:  # the fit rule: no honest time; show the diagnostic estimate, labelled
        total = r.extra.get("time_if_unlimited_s", float("nan"))
        print(
            f"step time   none: the step DOES NOT FIT (as if memory were unlimited: {total * 1e3:,.3f} ms)"
        )
    if r.split:
        rows = [{"part": k, "ms": v * 1e3, "share": v / total * 100} for k, v in r.split.items()]
        print(
            format_table(rows, [("part", "split", ""), ("ms", "ms", ",.3f"), ("share", "%", ".1f")])
        )
    if pl is not None and pl.alternatives:
        print("why not the others:")
        for a in pl.alternatives:
            why = (
                a.reason
                if a.fit == "does_not_fit"
                else f"fits ({a.fit}) but slower: {a.time_s * 1e3:,.3f} ms"
            )
            print(f"  {a.label()}: {why}")
    if mem.size:
        print(
            f"memory per {unit}: max {np.max(mem) / 1024:,.1f} KiB, mean {np.mean(mem) / 1024:,.1f} KiB, "
            f"limit {r.memory_limit_bytes / 1024:,.1f} KiB"
        )
    if r.fits:
        print(
            f"energy      {r.energy_j * 1e3:,.1f} mJ ("
            + ", ".join(f"{k} {v * 1e3:,.1f}" for k, v in r.energy_split.items())
            + f" mJ; 45 nm table, ipusim.energy); board power x time {r.board_energy_j * 1e3:,.1f} mJ"
        )
    print(f"fit: {r.fit} ({'fits' if r.fits else 'DOES NOT FIT'})")
    if r.fit_message:
        print(r.fit_message)
    return 0


def _lengths(args, batch: int, seq: int) -> tuple[list[int], str | None]:
    """The step's sequence lengths (tokens) and where they come from (None: all ``seq`` long)."""
    if args.lengths is None:
        if args.packed and args.phase != "decode":
            raise ValueError(
                "--packed changes nothing when every sequence is --seq-len tokens long; "
                "draw unequal lengths with --lengths"
            )
        return [seq] * batch, None
    hist = lengths.source(args.lengths)
    drawn = np.minimum(
        hist.sample(batch, seed=args.seed), seq
    )  # a tokenizer truncates at the row length
    return [int(x) for x in drawn], args.lengths


def _layers(layers) -> str:
    """'4 x 8' for equal stages, else the list."""
    return f"{len(layers)} x {layers[0]}" if len(set(layers)) == 1 else ", ".join(map(str, layers))
