"""Bounds on what one call may cost, checked before anything is allocated or looped.

One memory budget (``max_memory_bytes``: default 4 GiB, or ``IPUSIM_MAX_MEMORY``, or the
CLI's ``--max-memory``) and a few fixed work limits. Each public entry point estimates the
bytes (or the work) its input implies with the estimate functions below and calls
``check``; anything over the limit is refused with one ``ValueError`` that names the input,
its value, the limit and why, e.g.::

    --batch = 1,000,000,000: needs about 95 GB (about 96 bytes per token of the step
    simulation), over the memory budget of 4 GB; lower it, or raise the budget with
    --max-memory / IPUSIM_MAX_MEMORY

The estimates are deliberately simple upper-bound-ish products (bytes per element times
elements), measured on this code; they are not meant to be exact.
"""

from __future__ import annotations

import os

DEFAULT_MAX_MEMORY_BYTES = 4 * 2**30  # 4 GiB: a laptop can spare it; the CI machine has 24 GiB
ENV_MAX_MEMORY = "IPUSIM_MAX_MEMORY"
_override: list[int] = []  # set by the CLI's --max-memory

# Fixed work limits (not memory): chosen so that one call stays well under a minute.
MAX_SEQUENCE_TOKENS = 1 << 20  # one sequence, tokens: 256x the longest preset context (4,096)
MAX_EXACT_COUNT = (
    2**53
)  # counts and token totals kept exactly in float64 (and far from int64's 9.2e18)
MAX_CHIPS = 65_536  # chips in one deployment: beyond the largest published systems (thousands)
MAX_RATE_PER_S = 1e7  # requests/s offered to one deployment (x1000 a BERT-base chip's capacity)
MAX_SECONDS = 1e7  # any one time input (delay, latency target, service time): ~116 days
MAX_USD = 1e9  # any one price (per chip-hour or per kWh)
MAX_REQUESTS_IN_TRACE = 20_000_000  # as serving.MAX_REQUESTS

# Bytes per element, measured on this code (peak resident set / elements, rounded up).
BYTES_PER_STEP_TOKEN = 96  # the tile simulator keeps ~6 float64 per token per op, twice
BYTES_PER_SEQUENCE = 64  # a Python list entry + int64 arrays per sequence in a step
STEP_TOKENS_WORK = 1 << 24  # tokens in one simulated step: ~16.8M (tile simulation ~0.4 us/token)
MAX_BATCH_SEQUENCES = 1 << 22  # sequences in one step: ~4.2M (building 1e7 took ~7 s)
MAX_SIMULATED_SEQUENCES = (
    1 << 20
)  # sequences in one simulated step: the machine model spends ~22 us
#                                    per sequence (measured at 262,144 x 4 tokens), so ~25 s here


def parse_bytes(text) -> int:
    """A memory budget (``"4G"``, ``"512M"``, ``"2GiB"``, ``"1e9"``) in bytes, by ``units.parse_bytes``'s
    rule (bare K, M, G, T and KiB... are powers of 1024; kB, MB, GB, TB powers of 1000)."""
    from .units import parse_bytes as _parse

    try:
        v = _parse(text, "memory budget")
    except ValueError:
        raise ValueError(
            f"memory budget {text!r} is not a size; use e.g. 4G, 512M or 1e9 (bytes)"
        ) from None
    if v < 2**20 or v > 2**50:
        raise ValueError(f"memory budget {text!r} must lie between 1M and 1024T bytes")
    return v


def set_max_memory(text) -> None:
    """Set the budget for this process (the CLI's ``--max-memory``); None clears it."""
    _override.clear()
    if text is not None:
        _override.append(parse_bytes(text))


def max_memory_bytes() -> int:
    """The memory budget in force, bytes: ``--max-memory``, else ``IPUSIM_MAX_MEMORY``, else 4 GiB."""
    if _override:
        return _override[0]
    env = os.environ.get(ENV_MAX_MEMORY, "").strip()
    if env:
        try:
            return parse_bytes(env)
        except ValueError as err:
            raise ValueError(f"{ENV_MAX_MEMORY}: {err}") from None
    return DEFAULT_MAX_MEMORY_BYTES


def _fmt_bytes(b: float) -> str:
    for unit, m in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if b >= m:
            return f"{b / m:,.3g} {unit}"
    return f"{b:,.0f} bytes"


def _fmt(v) -> str:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer() and abs(v) < 1e15):
        return f"{int(v):,}"
    return f"{v:g}"


def check_memory(name: str, value, need_bytes: float, why: str) -> None:
    """Refuse ``name = value`` if it implies more than the memory budget."""
    limit = max_memory_bytes()
    if not (need_bytes <= limit):  # also catches NaN
        raise ValueError(
            f"{name} = {_fmt(value)}: needs about {_fmt_bytes(need_bytes)} ({why}), over the memory "
            f"budget of {_fmt_bytes(limit)}; lower it, or raise the budget with --max-memory / "
            f"{ENV_MAX_MEMORY}"
        )


def check_at_most(name: str, value, limit, why: str) -> None:
    """Refuse ``name = value`` if it exceeds a fixed work or range limit."""
    if not (value <= limit):
        raise ValueError(f"{name} = {_fmt(value)} is over the limit of {_fmt(limit)} ({why})")


# ------------------------------------------------------------------------------------------
# Estimates (bytes) per input kind
# ------------------------------------------------------------------------------------------


def step_bytes(batch: int, tokens: float) -> float:
    """A simulated step of ``batch`` sequences and ``tokens`` tokens in all (padded)."""
    return batch * BYTES_PER_SEQUENCE + tokens * BYTES_PER_STEP_TOKEN


def check_batch(batch, *, name: str = "batch") -> None:
    """Bound the number of sequences in one step (before a list of them is built)."""
    check_at_most(name, batch, MAX_BATCH_SEQUENCES, "sequences in one step; split the batch")
    check_memory(
        name, batch, batch * BYTES_PER_SEQUENCE, f"about {BYTES_PER_SEQUENCE} bytes per sequence"
    )


def check_step(batch, seq_len, *, name: str = "batch") -> None:
    """Bound a simulated step of ``batch`` sequences of up to ``seq_len`` tokens (before it is built)."""
    check_batch(batch, name=name)
    check_at_most(
        name,
        batch,
        MAX_SIMULATED_SEQUENCES,
        "sequences in one simulated step, ~22 us each in the machine model; simulate a smaller "
        "batch and scale",
    )
    check_at_most(
        f"{name} x seq_len",
        batch * seq_len,
        STEP_TOKENS_WORK,
        f"tokens in one simulated step; batch {_fmt(batch)} x {_fmt(seq_len)} tokens; "
        "split the batch or simulate a smaller one and scale",
    )
    check_memory(
        name,
        batch,
        step_bytes(batch, batch * seq_len),
        f"about {BYTES_PER_STEP_TOKEN} bytes per token of the step simulation",
    )


def check_sequence_length(name: str, value) -> None:
    check_at_most(
        name,
        value,
        MAX_SEQUENCE_TOKENS,
        "tokens in one sequence; no model preset has more than 4,096 positions",
    )


def array_bytes(elements: float, itemsize: int = 8) -> float:
    return float(elements) * itemsize


# Ranges of rates and arrival shapes, derived from the arithmetic that uses them.
MAX_RUN_SECONDS = (
    2**53 * 1e-6
)  # ~9.0e9 s (285 years): float64 arrival times resolve 1 us up to here
MIN_RATE_PER_S = 1.0 / MAX_RUN_SECONDS  # one request in the longest run (a run of n needs n x this)
RATE_WHY = (
    f"requests/s: float64 arrival times resolve 1 us only over a run of up to {MAX_RUN_SECONDS:.3g} s, "
    f"and over {MAX_RATE_PER_S:g}/s is over 1000x any one deployment's capacity"
)


def check_run_length(name: str, rate: float, n: int) -> None:
    """Refuse a run of ``n`` requests at ``rate``/s that spans more than ``MAX_RUN_SECONDS``
    (its arrival times would no longer resolve the microseconds a batch takes)."""
    if not n / rate <= MAX_RUN_SECONDS:
        raise ValueError(
            f"{name} = {_fmt(rate)}: {_fmt(n)} requests span about {n / rate:.3g} s, over the "
            f"{MAX_RUN_SECONDS:.3g} s over which float64 arrival times resolve 1 us; raise the rate "
            "or simulate fewer requests"
        )


MIN_CV, MAX_CV = 1e-6, 3.0
CV_WHY = (
    "coefficient of variation of Gamma gaps (shape 1/cv^2): over 3, more than 5% of the "
    "gaps fall below 1e-12 of the mean and the draw no longer has the cv asked for; under 1e-6 "
    "the gaps differ from the mean by less than float64 resolves"
)
