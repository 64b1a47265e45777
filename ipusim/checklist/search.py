"""The checklist's policy search, on the serving package.

Each deployment the checklist weighs is a ``Setup``: a replica (one chip, several chips
holding the layers in turn, or weights streamed), the serving package's service table for
it (``serving.chip_service`` or ``serving.generation_model`` on the coarse grid), and what
the search needs besides. ``serve`` runs a policy on replicas with ``serving.simulate`` or
``serving.simulate_generation``; ``capacity_search`` sets up ``serving.capacity``'s search
for the largest rate whose p99 meets a target, below ``rate_bound``. The traffic's lengths (``traffic_lengths``) and how well they pack
(``pack_efficiency``) come from ``ipusim.lengths`` and ``ipusim.packing``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import lengths as _lengths
from .. import serving
from ..serving import capacity, tables
from ..serving.capacity import MAX_UTILIZATION

SHORT_RANGE = _lengths.SHORT_RANGE  # tokens, ASSUMPTION (see case.ASSUMPTIONS["long_mix"])
LONG_FROM = _lengths.LONG_RANGE[0]  # tokens, ASSUMPTION: a "long" text starts here
SERVING_SOURCE = "ipusim.serving simulator"


# ---------------------------------------------------------------------------------------
# Traffic
# ---------------------------------------------------------------------------------------
def mix_lengths(long_fraction: float, n: int, max_len: int, seed: int = 0) -> np.ndarray:
    """``n`` lengths: a ``long_fraction`` share long (LONG_FROM..max_len), the rest short
    (``lengths.sample_long_text_mix`` with the ranges cut at ``max_len``)."""
    s_hi = min(SHORT_RANGE[1], max_len)
    short = (min(SHORT_RANGE[0], s_hi), s_hi)
    long = (min(LONG_FROM, max_len), max_len)
    return _lengths.sample_long_text_mix(n, long_fraction, short=short, long=long, seed=seed)


def traffic_lengths(
    case, n: int, long_fraction: float | None = None, seed: int | None = None
) -> np.ndarray:
    """``n`` request lengths for the case; ``long_fraction`` re-weights the long share."""
    seed = case.seed if seed is None else seed
    if case.lengths is None:
        f = case.long_fraction if long_fraction is None else long_fraction
        return mix_lengths(f, n, case.model.max_positions, seed)
    rng = np.random.default_rng(seed)
    pool = case.lengths
    if long_fraction is None:
        return rng.choice(pool, size=n)
    is_long = pool >= min(LONG_FROM, int(pool.max()))
    longs, shorts = pool[is_long], pool[~is_long]
    if longs.size == 0 or shorts.size == 0:
        return rng.choice(pool, size=n)
    pick_long = rng.random(n) < long_fraction
    return np.where(pick_long, rng.choice(longs, size=n), rng.choice(shorts, size=n))


# A packed row holds at most this many sequences (ASSUMPTION: the largest cap notebook 04
# measures, SPFHP <= 16 a row; Krell et al. 2021 pack Wikipedia at up to 3 a row of 512).
MAX_PER_ROW_CAP = 16
SHORT_QUANTILE = 0.10  # the request length that sets the cap: the 10th percentile


def max_per_row(lengths, max_len: int) -> int:
    """Sequences a packed row of ``max_len`` tokens may hold for this traffic.

    Rule (ASSUMPTION, stated): as many of the traffic's short requests (its 10th-percentile
    length, capped at the row) as fill one row, ``floor(max_len / p10)``, between 1 and
    ``MAX_PER_ROW_CAP``. A fixed cap of 3 suits rows of 512 with Wikipedia-like lengths but
    starves rows of 4,096 tokens holding 16-128-token prompts.
    """
    lens = np.asarray(lengths)
    if lens.size == 0 or not np.all(np.isfinite(lens)) or lens.min() < 1:
        raise ValueError("lengths must be a non-empty list of token counts >= 1")
    if int(max_len) != max_len or max_len < 1:
        raise ValueError(f"max_len must be a whole number of tokens >= 1; got {max_len!r}")
    short = min(float(np.quantile(lens, SHORT_QUANTILE)), float(max_len))
    return int(max(1, min(MAX_PER_ROW_CAP, max_len // short)))


def pack_efficiency(lengths: np.ndarray, max_len: int) -> tuple[float, int, str]:
    """Share of real tokens in rows of ``max_len`` tokens, rows used, and the method's name
    (``ipusim.packing`` SPFHP, Krell et al. 2021, at most ``max_per_row`` sequences a row)."""
    from .. import packing

    k = max_per_row(lengths, max_len)
    res = packing.pack(np.asarray(lengths), max_len, "spfhp", max_per_row=k)
    p10 = float(np.quantile(np.asarray(lengths), SHORT_QUANTILE))
    return (
        float(res.efficiency),
        int(res.rows),
        f"ipusim.packing SPFHP, at most {k} sequences a row ({max_len} tokens over the "
        f"10th-percentile length {p10:.0f}, capped at {MAX_PER_ROW_CAP})",
    )


# ---------------------------------------------------------------------------------------
# Deployments
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Policy:
    """A batching policy of ``ipusim.policies`` (``obj``) with its kind and size for the search."""

    kind: str  # "static", "dynamic", "token" or "continuous"
    max_batch: int  # requests (sequences for continuous batching)
    max_delay_s: float  # s the oldest request may wait for a batch to grow
    obj: object = None  # the ipusim.policies object the serving simulator runs

    @property
    def label(self) -> str:
        return (
            self.obj.describe()
            if self.obj is not None
            else f"{self.kind}, max batch {self.max_batch}"
        )

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "label": self.label,
            "max_batch": self.max_batch,
            "max_delay_s": self.max_delay_s if math.isfinite(self.max_delay_s) else None,
        }


@dataclass(frozen=True)
class Setup:
    """One deployment's replica and its serving tables (coarse grid), with what the search needs.

    ``service`` is a ``serving.ServiceModel`` (classification) or a
    ``serving.GenerationModel`` (generation, ``output_tokens`` > 0).
    """

    replica: tables.Replica
    mode: str  # "padded" or "packed"
    max_batch: int  # rows of the tables
    service: object  # serving.ServiceModel or serving.GenerationModel
    output_tokens: int = 0  # reply tokens (generation)
    kv_tokens: int = 0  # KV-cache tokens a replica stream holds (generation)

    @property
    def generation(self) -> bool:
        return isinstance(self.service, serving.GenerationModel)

    @property
    def max_prompt(self) -> int:
        """Longest prompt (tokens) the tables take."""
        m = self.replica.model.max_positions
        return max(8, m - self.output_tokens) if self.generation else m

    @property
    def source(self) -> str:
        return self.service.source

    @property
    def b_grid(self) -> np.ndarray:
        """Rows at which the machine model is run (powers of two, then ``max_batch``)."""
        return tables.coarse_grid(self.replica, "forward", self.max_batch)[0]

    @property
    def l_grid(self) -> np.ndarray:
        """Lengths (tokens) at which the machine model is run."""
        return tables.coarse_grid(self.replica, "forward", self.max_batch)[1]

    def grid(self, phase: str = "forward") -> np.ndarray:
        """Machine seconds at the grid points (rows ``b_grid``, columns ``l_grid``)."""
        return tables.coarse_grid(self.replica, phase, self.max_batch)[2]

    def time_at(self, b: float, ln: float) -> float:
        """Seconds for a batch of ``b`` sequences of ``ln`` tokens (interpolated); for
        generation, a static batch: the prompt pass plus every reply token at the mean context."""

        def at(phase, length):
            return float(tables.coarse_time_s(self.replica, phase, self.max_batch, b, length)[0, 0])

        if not self.generation:
            return at("forward", ln)
        ctx = min(self.replica.model.max_positions, ln + self.output_tokens / 2)
        return at("prefill", ln) + self.output_tokens * at("decode", ctx)

    def batch_time(self, lengths) -> float:
        """Seconds for one batch of requests with these lengths (tokens): padded at the longest,
        packed at the mean length (ideal packing)."""
        lengths = np.asarray(lengths)
        b = int(lengths.size)
        if self.generation:
            return self.time_at(min(b, self.max_batch), float(lengths.max()))
        ln = float(lengths.max() if self.mode == "padded" else lengths.mean())
        if b <= self.max_batch:
            return self.time_at(b, min(math.ceil(ln), self.max_prompt))
        return self.time_at(self.max_batch, min(ln, self.max_prompt)) * (b / self.max_batch)


def setup(
    chip,
    model,
    mode: str,
    *,
    chips: int = 1,
    streaming: bool = False,
    max_batch: int = 128,
    output_tokens: int = 0,
    kv_tokens: int = 0,
    placement=None,
) -> Setup:
    """The ``Setup`` of ``model`` on a replica of ``chips`` chips (or of a ``placement.PlacedStep``'s
    tensor x pipeline chips); generation when ``output_tokens`` > 0."""
    if placement is not None:
        rep = tables.replica(chip, model, placement=placement)
        stream, n = None, 1
    else:
        rep = tables.Replica(chip, model, chips, bool(streaming))
        stream, n = bool(streaming), chips
    if output_tokens:
        svc = serving.generation_model(
            chip,
            model,
            max_batch=max_batch,
            chips=n,
            streaming=stream,
            max_prompt=max(8, model.max_positions - output_tokens),
            grid="coarse",
            placement=placement,
        )
    else:
        svc = serving.chip_service(
            chip,
            model,
            max_batch=max_batch,
            packed=mode == "packed",
            chips=n,
            streaming=stream,
            grid="coarse",
            placement=placement,
        )
    return Setup(rep, mode, max_batch, svc, output_tokens, kv_tokens)


# ---------------------------------------------------------------------------------------
# Serving runs
# ---------------------------------------------------------------------------------------
def serve(arrivals, lengths, su: Setup, policy: Policy, servers: int) -> serving.ServingResult:
    """Serve requests (``arrivals`` s, ``lengths`` tokens) with ``policy`` on ``servers`` replicas."""
    arrivals = np.asarray(arrivals, dtype=float)
    lens = np.minimum(np.asarray(lengths, dtype=np.int64), su.max_prompt)
    if su.generation:
        return serving.simulate_generation(
            arrivals,
            lens,
            su.output_tokens,
            policy.obj,
            su.service,
            latency_target_s=1.0,
            replicas=servers,
        )
    return serving.simulate(
        arrivals,
        lens,
        policy.obj,
        [su.service] * servers,
        latency_target_s=1.0,
        max_waiting=max(1000, lens.size // 4),
    )


def p99_s(r: serving.ServingResult) -> float:
    """The run's p99 latency (s); infinite when the run is not stable."""
    return r.latency_p99_s if r.stable else math.inf


def utilization(r: serving.ServingResult) -> float:
    """Busy share of the replicas; 1 when the run is not stable."""
    return r.utilization if r.stable else 1.0


def saturated(r: serving.ServingResult) -> bool:
    """The run's queue would grow without bound at this rate (or the replicas are busy
    ``MAX_UTILIZATION`` of the time or more)."""
    return not r.stable or utilization(r) >= MAX_UTILIZATION


def saturation_rate(lengths, su: Setup, batch: int) -> float:
    """Requests/s one replica carries when every batch is full (``batch`` requests)."""
    batch = min(batch, su.max_batch)
    k = max(1, lengths.size // batch)
    groups = np.resize(lengths, (k, batch)) if lengths.size >= batch else lengths[None, :]
    b = groups.shape[1]
    ln = groups.max(axis=1) if su.mode == "padded" else -(-groups.sum(axis=1) // b)
    t = tables.coarse_time_s(su.replica, "forward", su.max_batch, b, np.minimum(ln, su.max_prompt))[
        0
    ]
    return b / float(np.mean(t))


def rate_bound(lengths, su: Setup, policy: Policy, upper: float, *, servers: int = 1) -> float:
    """The top of the capacity search (req/s, ``capacity_search``): ``upper``, capped below what full batches
    carry (``MAX_UTILIZATION`` x the saturation throughput of ``servers`` replicas). A finite
    run hides a slowly growing queue, so no capacity above it is reported, whatever the run's
    p99 says; the capacity found is never above this bound."""
    if policy.kind == "continuous":
        return float(upper)
    return min(upper, MAX_UTILIZATION * (servers * saturation_rate(lengths, su, policy.max_batch)))


def same_runs(policy: Policy) -> tuple:
    """A key equal for policies whose serving runs are identical: a dynamic policy of batch 1
    sends each request when it arrives whatever its delay (its one-request batch is full at
    once), so the delay drops out of its key."""
    obj = policy.obj
    if policy.kind == "dynamic" and policy.max_batch == 1 and not getattr(obj, "preferred", ()):
        return ("dynamic", 1)
    return (policy.kind, repr(obj))


def capacity_search(
    lengths,
    su: Setup,
    policy: Policy,
    slo_s: float,
    top: float,
    *,
    servers: int = 1,
    seed: int = 0,
    iters: int = 10,
) -> capacity.CapacitySearch:
    """``serving.capacity``'s search of ``policy`` on ``servers`` replicas of ``su`` below ``top``
    (req/s), run as ``serve`` runs: the lengths cut at the tables' longest prompt, goodput at 1 s,
    at most ``max(1000, n // 4)`` requests waiting, generation through ``serve``."""
    lens = np.minimum(np.asarray(lengths, dtype=np.int64), su.max_prompt)
    run = None
    if su.generation:

        def run(arrivals):
            return serve(arrivals, lengths, su, policy, servers)

    return capacity.capacity_search(
        slo_s,
        lens,
        policy.obj,
        [su.service] * servers,
        top=top,
        iters=iters,
        seed=seed,
        max_waiting=max(1000, lens.size // 4),
        run=run,
    )
