"""Generation on two chip kinds at one hourly cost: co-located, length-routed or disaggregated.

``equal_cost_counts`` finds the fewest chips of each kind that cost the same per hour (n_a of
chip A, n_b of chip B). ``compare`` spends twice that on each deployment and finds each one's
capacity at a p99 target with ``capacity.capacity_at`` (the same requests in each, Poisson
arrivals scaled to each rate):

* co-located on A (2 n_a chips) or on B (2 n_b chips): continuous batching on every chip (at
  most ``max_batch`` sequences, and no more than one prefill pass and one decode step of the
  chip hold: ``disaggregated.prompt_batch_limit``, ``decode_batch_limit``),
  requests dealt in turn (``simulate_generation``);
* length-routed on n_a A + n_b B: prompts of at most ``threshold`` tokens to one pool, longer
  ones to the other, each pool as co-located (both ways round);
* disaggregated on the same n_a A + n_b B: prefill on one kind, decode on the other, the KV
  cache over a link (``disaggregated.simulate_disaggregated``; both ways round).

Continuous batching keeps a device "busy" whenever any sequence runs, so the search's
utilization gate is off here: a deployment passes a rate while its run is stable (its queue does
not grow) and its p99 end-to-end latency is within the target, and no rate above
``MAX_UTILIZATION`` x its saturation throughput (every request waiting at once) is tried: a
finite run shorter than the target hides a growing queue.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import policies as P
from .. import workloads
from .._validate import positive
from .capacity import MAX_UTILIZATION, capacity_at
from .disaggregated import (
    DEFAULT_KV_LINK_BYTES_PER_S,
    decode_batch_limit,
    prompt_batch_limit,
    simulate_disaggregated,
)
from .generation import generation_model, simulate_generation, table_lengths
from .result import ServingResult
from .service import lookup_s

KINDS = ("co-located", "length-routed", "disaggregated")
MAX_SPLITS = 8  # prefill-pool sizes weighed per direction (all of them up to this many)


@dataclass(frozen=True)
class Deployment:
    """One deployment: its chips, hourly cost (USD) and capacity at the p99 target (req/s)."""

    name: str
    kind: str  # one of KINDS
    chips: tuple  # ((chip name, count), ...)
    usd_per_hour: float
    capacity_rps: float
    result: ServingResult | None = field(default=None, repr=False)  # the run at the capacity

    @property
    def key(self) -> str:
        """The name as one identifier (``disaggregated_prefill_a100_80gb_decode_gc200``)."""
        return "_".join("".join(ch if ch.isalnum() else " " for ch in self.name).split())

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "chips": ", ".join(f"{n} x {c}" for c, n in self.chips),
            "usd_per_hour": self.usd_per_hour,
            "capacity_rps": self.capacity_rps,
        }


@dataclass(frozen=True)
class Comparison:
    """The deployments ``compare`` ran, and the traffic and target they were judged on."""

    deployments: tuple
    slo_p99_s: float  # s, p99 end-to-end latency target
    threshold: int  # tokens: the longest prompt the length router counts as short
    requests: int
    max_batch: int = 32  # sequences of the decode steps in ``phase_s`` (both chips hold them)
    median_prompt: int = 0  # tokens
    # chip -> {"prefill_s": one prompt of the median length, "decode_s": a step of max_batch
    # sequences at the median prompt's context}, s: why a phase belongs on a chip
    phase_s: dict = field(default_factory=dict)

    def best(self, kind: str) -> Deployment:
        """The deployment of ``kind`` (one of ``KINDS``) with the highest capacity."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}; got {kind!r}")
        return max((d for d in self.deployments if d.kind == kind), key=lambda d: d.capacity_rps)

    def gain(self, kind: str) -> float:
        """Capacity of the best ``kind`` deployment over the best co-located one's (x)."""
        base = self.best("co-located").capacity_rps
        return self.best(kind).capacity_rps / base if base > 0 else math.inf

    def rows(self) -> list[dict]:
        return [d.to_dict() for d in self.deployments]

    def __repr__(self) -> str:
        lines = [f"at p99 <= {self.slo_p99_s:g} s, {self.requests:,} requests:"]
        lines += [
            f"  {d.name:45s} {d.usd_per_hour:6.2f} USD/h  {d.capacity_rps:9,.0f} req/s"
            for d in self.deployments
        ]
        return "\n".join(lines)


def equal_cost_counts(usd_a: float, usd_b: float, *, most: int = 10) -> tuple[int, int]:
    """(n_a, n_b): the fewest chips, at most ``most`` of either, with n_a x ``usd_a`` as close to
    n_b x ``usd_b`` as counts that small allow (exactly equal when the price ratio is a fraction
    with both terms at most ``most``; 2.00 and 1.60 USD/h give 4 and 5)."""
    usd_a, usd_b = positive("usd_a", usd_a), positive("usd_b", usd_b)
    most = positive("most", most, integer=True)
    best = None
    for n_a in range(1, most + 1):
        n_b = max(1, min(most, round(n_a * usd_a / usd_b)))
        err = abs(n_a * usd_a - n_b * usd_b) / (n_a * usd_a)
        if best is None or err < best[0] - 1e-12:
            best = (err, n_a, n_b)
    return best[1], best[2]


def merge(arrival_s, prompt_tokens, output_tokens, parts, policy: str) -> ServingResult:
    """One ``ServingResult`` of pools that served disjoint requests: ``parts`` is a list of (request
    indices, that pool's generation result); devices are numbered pool after pool."""
    arr = np.asarray(arrival_s, dtype=np.float64)
    n = arr.size
    start, finish, first = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    device = np.full(n, -1, dtype=np.int16)
    devices, busy, gaps, weights = (), [], [], []
    batches, real, comp, offset = 0, 0, 0, 0
    for idx, r in parts:
        start[idx], finish[idx], first[idx] = r.start_s, r.finish_s, r.first_token_s
        device[idx] = r.device + offset
        offset += len(r.devices)
        devices += tuple(r.devices)
        busy.append(r.device_busy_s)
        gaps.append(r.gap_s)
        weights.append(r.gap_weight)
        batches += r.batches
        real += int(r.device_real_tokens.sum())
        comp += int(r.device_computed_tokens.sum())
    return ServingResult(
        policy=policy,
        devices=devices,
        arrival_s=arr,
        lengths=np.asarray(prompt_tokens, dtype=np.int64),
        times=(start, finish, device),
        batch_id=np.broadcast_to(np.int32(-1), (n,)),
        device_busy_s=np.concatenate(busy),
        device_real_tokens=np.array([real]),
        device_computed_tokens=np.array([comp]),
        batches=batches,
        latency_target_s=parts[0][1].latency_target_s,
        max_waiting=n,
        first_token_s=first,
        output_tokens=np.asarray(output_tokens, dtype=np.int64),
        gap_s=np.concatenate(gaps),
        gap_weight=np.concatenate(weights),
    )


def simulate_routed(arrival_s, prompt_tokens, output_tokens, short, long, *, threshold):
    """Prompts of at most ``threshold`` tokens to pool ``short``, longer ones to pool ``long``; a
    pool is (``GenerationModel``, chips, policy), each chip running the policy on the requests
    dealt to it in turn (``simulate_generation``)."""
    arr = np.asarray(arrival_s, dtype=np.float64)
    pr = np.asarray(prompt_tokens, dtype=np.int64)
    out = np.asarray(output_tokens, dtype=np.int64)
    parts = []
    for (gen, count, pol), idx in (
        (short, np.flatnonzero(pr <= threshold)),
        (long, np.flatnonzero(pr > threshold)),
    ):
        if idx.size:
            r = simulate_generation(arr[idx], pr[idx], out[idx], pol, gen, replicas=count)
            parts.append((idx, r))
    return merge(
        arr,
        pr,
        out,
        parts,
        f"length-routed at {threshold} tokens: short to {short[1]} x {short[0].name} "
        f"({short[2].describe()}), long to {long[1]} x {long[0].name} ({long[2].describe()})",
    )


def compare(
    chip_a: str,
    chip_b: str,
    model,
    prompt_tokens,
    output_tokens,
    *,
    prices=None,
    slo_p99_s: float = 1.0,
    threshold: int = 255,
    max_batch: int = 32,
    kv_link_bytes_per_s: float = DEFAULT_KV_LINK_BYTES_PER_S,
    iters: int = 9,
    seed: int = 0,
) -> Comparison:
    """The deployments of the module docstring for ``model`` (a preset name or a
    ``workloads`` model) and requests of ``prompt_tokens`` and
    ``output_tokens`` (one entry per request; arrivals: a Poisson draw from ``seed``), at the
    counts ``equal_cost_counts`` gives for ``prices`` (an ``ipusim.prices.Prices``; None: its
    ASSUMED defaults). ``threshold``: the longest short prompt (default 255: ``lengths``'
    long texts start at 256 tokens); ``iters``: bisection steps of each capacity search."""
    from ..prices import Prices

    prices = Prices() if prices is None else prices
    pr = np.asarray(prompt_tokens, dtype=np.int64)
    out = np.asarray(output_tokens, dtype=np.int64)
    if pr.shape != out.shape or pr.ndim != 1 or pr.size < 100:
        raise ValueError(
            "prompt_tokens and output_tokens must be two lists of one length, at least 100 requests"
        )
    slo = positive("slo_p99_s", slo_p99_s)
    B = positive("max_batch", max_batch, integer=True)
    threshold = positive("threshold", threshold, integer=True)
    usd = {c: prices.chip_hour(c) for c in (chip_a, chip_b)}
    n_a, n_b = equal_cost_counts(usd[chip_a], usd[chip_b])
    # tables only as long as these requests read: the same values, a fraction of the build
    mp, mc = table_lengths(model, int(pr.max()), int((pr + out).max()))
    gen = {
        c: generation_model(c, model, max_batch=B, max_prompt=mp, max_ctx=mc)
        for c in (chip_a, chip_b)
    }
    kvb = workloads.model(model).kv_bytes_per_token()
    # each chip runs at most the sequences one of its decode steps holds at the longest context,
    # and admits at most the prompts one of its prefill passes holds
    ctx = int((pr + out).max())
    dec_b = {c: decode_batch_limit(g, ctx, B) for c, g in gen.items()}
    pol = {
        c: P.Continuous(max_batch=min(dec_b[c], prompt_batch_limit(g, int(pr.max()), B)))
        for c, g in gen.items()
    }
    half = {chip_a: n_a, chip_b: n_b}

    def search(run):
        # a finite run hides a slowly growing queue (its p99 can pass while the queue grows), so
        # the search stays below MAX_UTILIZATION x what the deployment serves with every request
        # waiting at once (its throughput at saturation), as the checklist's rate_bound does
        burst = run(np.zeros(pr.size))
        top = MAX_UTILIZATION * pr.size / float(np.nanmax(burst.finish_s))
        return capacity_at(
            slo, pr, None, [], top=top, iters=iters, seed=seed, run=run, max_utilization=math.inf
        )

    runs = []
    for c in (chip_a, chip_b):
        runs.append(
            (
                f"co-located: {2 * half[c]} x {c}",
                "co-located",
                ((c, 2 * half[c]),),
                lambda a, c=c: simulate_generation(
                    a, pr, out, pol[c], gen[c], replicas=2 * half[c]
                ),
            )
        )
    for s, lg in ((chip_a, chip_b), (chip_b, chip_a)):
        runs.append(
            (
                f"length-routed: short to {s}, long to {lg}",
                "length-routed",
                ((s, half[s]), (lg, half[lg])),
                lambda a, s=s, lg=lg: simulate_routed(
                    a,
                    pr,
                    out,
                    (gen[s], half[s], pol[s]),
                    (gen[lg], half[lg], pol[lg]),
                    threshold=threshold,
                ),
            )
        )
    budget = 2 * n_a * usd[chip_a]
    for p, d in ((chip_a, chip_b), (chip_b, chip_a)):
        # every split of the budget: k prefill chips, and as many decode chips as the rest buys
        top_k = int((budget - usd[d]) / usd[p] + 1e-9)  # leave the money for one decode chip
        ks = range(1, top_k + 1)
        if top_k > MAX_SPLITS:  # a big budget: MAX_SPLITS counts spread over the range
            ks = sorted({int(round(x)) for x in np.linspace(1, top_k, MAX_SPLITS)})
        for k in ks:
            m = int((budget - k * usd[p]) / usd[d] + 1e-9)
            runs.append(
                (
                    f"disaggregated: prefill {k} x {p}, decode {m} x {d}",
                    "disaggregated",
                    ((p, k), (d, m)),
                    lambda a, p=p, d=d, k=k, m=m: simulate_disaggregated(
                        a,
                        pr,
                        out,
                        prefill=gen[p],
                        decode=gen[d],
                        kv_bytes_per_token=kvb,
                        prefill_count=k,
                        decode_count=m,
                        max_batch=dec_b[d],
                        kv_link_bytes_per_s=kv_link_bytes_per_s,
                    )[0],
                )
            )
    med, rows = int(np.median(pr)), min(dec_b.values())
    look = lookup_s.py_func  # two look-ups from Python: no kernel compiled for them
    phase_s = {
        c: {
            "prefill_s": float(look(g.prefill.table, 1, -(-med // g.prefill.len_step))),
            "decode_s": float(look(g.decode, rows, -(-med // g.ctx_step))),
        }
        for c, g in gen.items()
    }
    deps = []
    for name, kind, chips, run in runs:
        cap, res = search(run)
        cost = sum(usd[c] * k for c, k in chips)
        deps.append(Deployment(name, kind, chips, cost, float(cap), res))
    return Comparison(tuple(deps), slo, threshold, int(pr.size), rows, med, phase_s)
