"""What a command's arguments will cost in memory, estimated from the arguments alone before it runs.

``check(command, args)`` is called by ``ipusim.cli.main`` after parsing and before the command
runs. Each command has one estimate function here (``ESTIMATES[command]``) that returns the
large allocations its arguments imply as ``Cost`` items: the option that drives it, that
option's value, the bytes, and why (bytes per element times elements). The sum is checked
against the memory budget (``ipusim.limits``: ``--max-memory`` / ``IPUSIM_MAX_MEMORY``, 4 GiB by
default) and refused in one line naming the largest item, e.g.::

    --max-batch = 100,000,000: needs about 4.8 GB (the service table and the batcher's work
    arrays, about 48 bytes per row up to the largest batch), over the memory budget of 4.29 GB; ...

The bytes per element are measured on this code (peak resident set over elements, rounded up;
``tests/test_bounds.py`` checks the estimates hold with a property test). Library entry points
keep their own checks; catching ``MemoryError`` in the CLI is only the last line of defence.
"""

from __future__ import annotations

from typing import NamedTuple

from .. import limits


class Cost(NamedTuple):
    flag: str  # the option that drives the allocation, e.g. "--max-batch"
    value: object  # its value as given
    bytes: float  # bytes the allocation needs, estimated
    why: str  # bytes per element x elements, in words


# Bytes per element, measured on this code (peak RSS growth / elements, rounded up).
SERVE_BYTES_PER_ROW = 64  # one batch size of the largest batch: table, its padded copy, the
#                           batcher's per-size arrays (measured 47 B/row at 10^7 rows, 59 with buckets)
SWEEP_BYTES_PER_POINT = 4096  # one grid point: its parameter dict and result row kept in memory
EMBED_BYTES_PER_LOOKUP = (
    96  # drawn (sample, table, rank), its concatenation, row ids, owners, sorts
)
#                              (measured 69 B at 10^7 look-ups)
EMBED_BYTES_PER_TABLE_UNIT = 16  # the (tables x units) owned-rows matrix and its byte product


def check(command: str, args) -> None:
    """Refuse ``args`` of ``command`` if its estimate exceeds the memory budget (one ValueError)."""
    fn = ESTIMATES.get(command)
    if fn is None:
        return
    costs = [c for c in fn(args) if c.bytes > 0]
    if not costs:
        return
    total = float(sum(c.bytes for c in costs))
    big = max(costs, key=lambda c: c.bytes)
    why = (
        big.why
        if len(costs) == 1
        else (f"{big.why}; with {', '.join(c.flag for c in costs if c is not big)} in all")
    )
    limits.check_memory(big.flag, big.value, total, why)


def _get(args, name, default=None):
    v = getattr(args, name, default)
    return default if v is None else v


def _int(x) -> int:
    """A whole-number option as a Python int (0 for anything that is not one: its own check refuses it)."""
    return int(x) if isinstance(x, int) and not isinstance(x, bool) and x > 0 else 0


def simulate(args) -> list[Cost]:
    b, s = _int(args.batch), _int(args.seq_len)
    if b and s:
        limits.check_step(
            b, s, name="--batch"
        )  # the work limits first: their message is the more precise
    return [
        Cost(
            "--batch",
            args.batch,
            limits.step_bytes(b, b * s),
            f"{limits.BYTES_PER_SEQUENCE} bytes per sequence and {limits.BYTES_PER_STEP_TOKEN} per token "
            f"of the step, {b:,} x {s:,} tokens",
        )
    ]


def roofline(args) -> list[Cost]:
    b = _int(args.batch)
    s = max(_int(args.seq_len), _int(_get(args, "pad_to", 0)))
    if b:
        limits.check_batch(
            b, name="--batch"
        )  # the work limit first: its message is the more precise
    return [
        Cost(
            "--batch",
            args.batch,
            b * limits.BYTES_PER_SEQUENCE,
            f"{limits.BYTES_PER_SEQUENCE} bytes per sequence of the step ({s:,} tokens each: per-op "
            "totals, not per token)",
        )
    ]


def serve(args) -> list[Cost]:
    from .. import serving

    n = _int(args.requests)
    limits.check_at_most(
        "--requests",
        n,
        serving.MAX_REQUESTS,
        f"requests in one run, about {serving.BYTES_PER_REQUEST} bytes per request; split longer runs",
    )
    rates = len(args.rate) if isinstance(getattr(args, "rate", None), list) else 1
    out = [
        Cost(
            "--requests",
            args.requests,
            n * serving.BYTES_PER_REQUEST,
            f"about {serving.BYTES_PER_REQUEST} bytes per request ({rates} rate(s) run one after another)",
        )
    ]
    B = _int(args.max_batch)
    rows = (
        4 * B if args.policy == "token" else B
    )  # policies.make: the token budget's batch cap is 4x
    if args.policy != "continuous":
        out.append(
            Cost(
                "--max-batch",
                args.max_batch,
                rows * SERVE_BYTES_PER_ROW,
                f"the service table and the batcher's work arrays, about {SERVE_BYTES_PER_ROW} bytes per "
                f"row up to the largest batch of {rows:,} rows",
            )
        )
    return out


def pack(args) -> list[Cost]:
    from .. import lengths, packing

    L = _int(args.max_len)
    if not L:
        return []
    limits.check_sequence_length("--max-len", L)
    if args.histogram:
        hist = lengths.load_histogram(args.histogram)
    elif args.lengths:
        hist = lengths.load(args.lengths)
        hist = hist if isinstance(hist, lengths.Histogram) else lengths.from_lengths(hist)
    else:
        hist = lengths.dataset(args.dataset)
    K = _int(args.max_per_row) or None
    need, why = packing.strategies.pack_bytes(hist, L, args.strategy, max_per_row=K)
    return [Cost("--max-len", L, need, why)]


def embed(args) -> list[Cost]:
    from .. import embeddings, hardware

    c = hardware.chip(args.chip)
    chips = _int(args.chips)
    units = c.units * max(chips, 1)
    if args.preset:
        w = embeddings.preset(args.preset, batch=max(_int(args.batch), 1))
        tables, lookups = len(w.tables), w.lookups
    else:
        tables = _int(args.tables)
        limits.check_at_most(
            "--tables",
            tables,
            embeddings.workload.MAX_TABLES,
            "tables in one embedding step; published recommenders use tens to hundreds",
        )
        lookups = _int(args.batch) * tables * _int(args.pooling)
    return [
        Cost(
            "--batch",
            args.batch,
            lookups * EMBED_BYTES_PER_LOOKUP,
            f"{lookups:,} look-ups (batch x tables x pooling) drawn and counted, about "
            f"{EMBED_BYTES_PER_LOOKUP} bytes each",
        ),
        Cost(
            "--tables",
            args.tables,
            tables * units * EMBED_BYTES_PER_TABLE_UNIT,
            f"{tables:,} tables x {units:,} units sharded, {EMBED_BYTES_PER_TABLE_UNIT} bytes each",
        ),
    ]


def train(args) -> list[Cost]:
    return []  # placements are enumerated by divisor; memory is a few rows per candidate


def sweep(args) -> list[Cost]:
    from .. import sweep as _sweep

    vary = _sweep.parse_vary(args.vary) if args.vary else {}
    points = 1
    for values in vary.values():
        points *= len(values)
    limits.check_at_most(
        "grid points",
        points,
        _sweep.space.MAX_POINTS,
        "points in one sweep (~1 ms to minutes each)",
    )
    out = [
        Cost(
            "--vary (grid points)",
            points,
            points * SWEEP_BYTES_PER_POINT,
            f"{points:,} grid points, about {SWEEP_BYTES_PER_POINT} bytes each kept",
        )
    ]

    def largest(name):  # a size parameter at its largest: set with --NAME, or the top of its --vary
        given = [_int(_get(args, name, 0))] + [
            _int(round(v)) if isinstance(v, float) and v.is_integer() else _int(v)
            for v in vary.get(name, ())
        ]
        return max(given), (f"--{name.replace('_', '-')}" if name not in vary else f"--vary {name}")

    (b, flag), (s, _) = largest("batch"), largest("seq_len")
    if b:
        out.append(Cost(flag, b, limits.step_bytes(b, b * s), "one point's simulated step"))
    B, flag = largest("max_batch")
    if B:
        out.append(Cost(flag, B, B * SERVE_BYTES_PER_ROW, "one point's service table"))
    return out


def checklist(args) -> list[Cost]:
    return []  # every size in a case is bounded where the case is built (``checklist.case``)


ESTIMATES = {
    "simulate": simulate,
    "roofline": roofline,
    "serve": serve,
    "pack": pack,
    "embed": embed,
    "train": train,
    "sweep": sweep,
    "checklist": checklist,
    "claims": lambda args: [],
    "presets": lambda args: [],
    "schema": lambda args: [],
    # the registry's rows, or a measurements / calibration file read under read_text_file's size bound
    "validate": lambda args: [],
    "calibrate": lambda args: [],
}
