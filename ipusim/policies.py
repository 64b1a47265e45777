"""Batching policies: when a server sends the requests it holds to a device, and how many.

Each policy is a small frozen object; ``ipusim.serving.simulate`` turns it into the
numbers its event-loop kernel reads. Times are seconds, sizes are requests, budgets are
tokens. All policies serve each queue first-in first-out.

================  ==========================================================================
``Static``        wait for exactly ``batch`` requests (or ``timeout_s`` after the oldest
                  arrived, so the tail is not stranded); the device always runs the full
                  compiled shape of ``batch`` rows (a fixed-shape graph, as on an IPU).
``Dynamic``       Triton's dynamic batcher: send as soon as ``max_batch`` (or a preferred
                  size) is queued, or when the oldest request has waited ``max_delay_s``;
                  the batch runs at its real size, padded to its longest request.
``TokenBudget``   fill a batch up to ``max_tokens`` real tokens (what packing makes
                  possible), or ``max_delay_s``; at most ``max_batch`` requests.
``LengthBuckets`` one dynamic queue per length range (``edges``); a batch holds requests of
                  one bucket only, so it pads to a length close to its own.
``Adaptive``      a dynamic batcher that sets its fill target from the measured arrival
                  rate: the smallest batch whose throughput covers the load with headroom
                  ``utilization_target``; waits at most ``latency_target_s`` minus that
                  batch's service time. Small batches at low load, large at high load.
``Continuous``    iteration-level batching for decoder generation (Orca, vLLM): requests
                  join and leave the running batch at every decode step, limited by
                  ``max_batch`` and by KV-cache capacity ``kv_capacity_tokens``.
================  ==========================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ._validate import fraction, hold_seconds, positive


@dataclass(frozen=True)
class Static:
    """Fixed batch size ``batch``; a partial batch leaves after ``timeout_s`` (padded to ``batch`` rows)."""

    batch: int = 8  # requests per batch, and rows of the compiled shape
    timeout_s: float = 0.1  # s the oldest request may wait for the batch to fill

    def __post_init__(self):
        positive("Static.batch", self.batch, integer=True)
        hold_seconds("Static.timeout_s", self.timeout_s)

    @property
    def max_batch(self) -> int:
        return self.batch

    def describe(self) -> str:
        return f"static batch {self.batch}, timeout {self.timeout_s * 1e3:g} ms"


@dataclass(frozen=True)
class Dynamic:
    """Triton-style dynamic batcher (``max_batch_size``, ``max_queue_delay``, ``preferred_batch_size``)."""

    max_batch: int = 32  # largest batch sent, requests
    max_delay_s: float = 0.002  # s the oldest request may be held to let a batch grow
    preferred: tuple = field(default=())  # sizes sent at once when reached (Triton: rarely useful)

    def __post_init__(self):
        positive("Dynamic.max_batch", self.max_batch, integer=True)
        hold_seconds("Dynamic.max_delay_s", self.max_delay_s)
        pref = tuple(
            sorted({positive("Dynamic.preferred size", p, integer=True) for p in self.preferred})
        )
        if any(p > self.max_batch for p in pref):
            raise ValueError(
                f"Dynamic.preferred sizes {pref} must not exceed max_batch {self.max_batch}"
            )
        object.__setattr__(self, "preferred", pref)

    def describe(self) -> str:
        pref = f", preferred {list(self.preferred)}" if self.preferred else ""
        return f"dynamic max batch {self.max_batch}, max delay {self.max_delay_s * 1e3:g} ms{pref}"


@dataclass(frozen=True)
class TokenBudget:
    """Fill a batch with up to ``max_tokens`` real tokens; ``max_delay_s`` as in ``Dynamic``.

    A single request longer than the budget is sent alone.
    """

    max_tokens: int = 4096  # real tokens per batch
    max_delay_s: float = 0.002  # s
    max_batch: int = 256  # requests per batch, at most

    def __post_init__(self):
        positive("TokenBudget.max_tokens", self.max_tokens, integer=True)
        hold_seconds("TokenBudget.max_delay_s", self.max_delay_s)
        positive("TokenBudget.max_batch", self.max_batch, integer=True)

    def describe(self) -> str:
        return f"token budget {self.max_tokens}, max delay {self.max_delay_s * 1e3:g} ms"


@dataclass(frozen=True)
class LengthBuckets:
    """Separate dynamic queues per length range: bucket i holds lengths in (edges[i-1], edges[i]]."""

    edges: tuple = (128, 256, 512)  # upper length of each bucket, tokens, ascending
    max_batch: int = 32  # per bucket, requests
    max_delay_s: float = 0.002  # s

    def __post_init__(self):
        e = tuple(positive("LengthBuckets.edges", x, integer=True) for x in self.edges)
        if not e or list(e) != sorted(set(e)):
            raise ValueError(
                f"LengthBuckets.edges must be a non-empty ascending list of lengths, got {self.edges}"
            )
        object.__setattr__(self, "edges", e)
        positive("LengthBuckets.max_batch", self.max_batch, integer=True)
        hold_seconds("LengthBuckets.max_delay_s", self.max_delay_s)

    def describe(self) -> str:
        return f"length buckets {list(self.edges)}, max batch {self.max_batch}, max delay {self.max_delay_s * 1e3:g} ms"


@dataclass(frozen=True)
class Adaptive:
    """Batch fill target follows the load to hold a latency target.

    At each batch the policy estimates the arrival rate from the ``window`` requests that
    arrived up to the oldest waiting one, picks the smallest batch ``b`` whose throughput
    ``b / s(b)`` (per device serving the queue) is at least ``rate / utilization_target``,
    and waits for ``b`` requests at most ``max(0, latency_target_s - s(b))``. If the queue
    already holds more, it sends up to ``max_batch``.
    """

    latency_target_s: float = 0.02  # s, the latency the batching delay must leave room for
    max_batch: int = 64  # requests
    utilization_target: float = 0.7  # fraction of a device's throughput the load may use
    window: int = 32  # requests in the rate estimate

    def __post_init__(self):
        positive("Adaptive.latency_target_s", self.latency_target_s)
        positive("Adaptive.max_batch", self.max_batch, integer=True)
        u = fraction("Adaptive.utilization_target", self.utilization_target)
        if u == 0:
            raise ValueError("Adaptive.utilization_target must be > 0")
        positive("Adaptive.window", self.window, integer=True)

    def describe(self) -> str:
        return (
            f"adaptive target {self.latency_target_s * 1e3:g} ms, max batch {self.max_batch}, "
            f"utilization {self.utilization_target:.0%}"
        )


@dataclass(frozen=True)
class Continuous:
    """Iteration-level batching for generation; KV cache reserved for prompt + output at admission.

    ``chunk_tokens`` > 0 turns on chunked prefill (SARATHI, facts §7): an iteration runs at
    most that many tokens, the decodes first (one token each), and the prompts being
    prefilled take the rest in pieces, oldest first; 0 (default) prefills whole prompts in
    the iteration that admits them.
    """

    max_batch: int = 64  # sequences running at once
    kv_capacity_tokens: int = 200_000  # tokens the KV cache holds (all running sequences)
    chunk_tokens: int = 0  # tokens per iteration with chunked prefill; 0: off

    def __post_init__(self):
        positive("Continuous.max_batch", self.max_batch, integer=True)
        positive("Continuous.kv_capacity_tokens", self.kv_capacity_tokens, integer=True)
        positive("Continuous.chunk_tokens", self.chunk_tokens, integer=True, allow_zero=True)

    def describe(self) -> str:
        chunk = f", prefill chunks of {self.chunk_tokens:,} tokens" if self.chunk_tokens else ""
        return (
            f"continuous max batch {self.max_batch}, KV {self.kv_capacity_tokens:,} tokens{chunk}"
        )


POLICIES = ("static", "dynamic", "token", "buckets", "adaptive", "continuous")


def make(name: str, *, max_batch: int = 32, max_delay_s: float = 0.002, **kw):
    """Build a policy by name with the common knobs (for the CLI and the widget).

    ``max_delay_s`` must be >= 0 for every policy, also those that do not hold (a negative
    hold means nothing; it is refused rather than clamped or ignored)."""
    from ._validate import hold_seconds

    max_delay_s = hold_seconds("max_delay_s", max_delay_s)
    if name == "static":
        return Static(batch=max_batch, timeout_s=kw.get("timeout_s", max_delay_s))
    if name == "dynamic":
        return Dynamic(
            max_batch=max_batch, max_delay_s=max_delay_s, preferred=tuple(kw.get("preferred", ()))
        )
    if name == "token":
        return TokenBudget(
            max_tokens=kw.get("max_tokens", 128 * max_batch),
            max_delay_s=max_delay_s,
            max_batch=kw.get("token_max_batch", 4 * max_batch),
        )
    if name == "buckets":
        return LengthBuckets(
            edges=tuple(kw.get("edges", (128, 256, 512))),
            max_batch=max_batch,
            max_delay_s=max_delay_s,
        )
    if name == "adaptive":
        return Adaptive(latency_target_s=kw.get("latency_target_s", 0.02), max_batch=max_batch)
    if name == "continuous":
        return Continuous(
            max_batch=max_batch,
            kv_capacity_tokens=kw.get("kv_capacity_tokens", 200_000),
            chunk_tokens=kw.get("chunk_tokens", 0),
        )
    raise ValueError(f"unknown policy {name!r}; valid: {', '.join(POLICIES)}")
