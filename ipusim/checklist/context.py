"""Work several checks share, done once per case: ``Context`` fits each candidate (placements
and batch limits), searches its batching policy (capacity at the p99 target) and prices the
deployments (``ReplicaLayout``, ``Deployment``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass

import numpy as np

from .. import arrivals, workloads
from ..config import sweep_size
from ..serving import capacity, tables
from . import search
from .case import Case

P99_REPLICATIONS = 5
"""Seeded replications of the offered-rate run behind C2's p99 interval (a few: each is one run)."""


class _Unstable(Exception):
    """A replication whose queue grows without bound: no percentile to put in an interval."""


HOUR_S = 3600.0
MAX_SERVING_BATCH = 128  # rows of a deployment's service tables, at most


# ---------------------------------------------------------------------------------------
# Shared work
# ---------------------------------------------------------------------------------------
@dataclass
class ReplicaLayout:
    """How one serving replica holds a model on a chip kind: ``chips`` per replica, streaming or
    not (a layout for the serving tables; ``ipusim.placement.PlacedStep`` places one step).

    Kind "placed" is a tensor/pipeline placement found by ``ipusim.placement`` on the chips given
    (``placed``, its ``PlacedStep``), for a model that needs several chips; "spread" holds the
    layers in turn on ``chips`` chips."""

    kind: str  # "on-chip", "spread", "streaming", "hbm", "placed"
    chips: int
    streaming: bool
    max_batch: int  # largest batch whose working set fits the replica
    tile: bool = True  # a tile chip (SRAM) or a GPU (HBM)
    kv_tokens: int = 0  # KV-cache tokens the replica holds beside weights and activations
    placed: object = None  # placement.PlacedStep of a "placed" replica

    @property
    def stages(self) -> int:
        """Pipeline stages of the replica: batches it can keep in flight."""
        return self.placed.pipeline if self.placed is not None else self.chips

    @property
    def label(self) -> str:
        if self.kind == "placed":
            where = (
                "weights streamed, KV cache in SRAM"
                if self.streaming
                else ("on-chip SRAM" if self.tile else "HBM")
            )
            return f"{where} over {self.chips} chips, tensor {self.placed.tensor} x pipeline {self.placed.pipeline}"
        if self.kind == "spread":
            return f"{'on-chip SRAM' if self.tile else 'HBM'} over {self.chips} chips"
        if self.kind == "streaming":
            return "weights streamed from off-chip DRAM"
        return "on-chip SRAM" if self.kind == "on-chip" else "HBM"


@dataclass
class Deployment:
    """The best (placement, mode, policy) found for one candidate, and what it costs."""

    placement: ReplicaLayout
    mode: str
    policy: search.Policy
    capacity_per_replica: float  # req/s at the p99 target
    service: search.Setup
    at_capacity: object  # ServingResult at capacity
    chips_needed: int = 0
    usd_per_hour: float = 0.0
    usd_per_million: float = math.inf
    usd_per_million_at_capacity: float = math.inf  # chips fully used at the p99 target
    offered: object = None  # ServingResult at the offered rate on the scaled deployment


class Context:
    """Per-case cache of the work several checks share (fit, policy search, lengths)."""

    def __init__(self, case: Case):
        self.case = case
        self.n = sweep_size(8000, 2000)
        self.lengths = search.traffic_lengths(case, self.n)
        self.quick_bisect = sweep_size(12, 7)
        self._fit: dict = {}
        self._search: dict = {}
        self._policy_memo: dict = {}

    # --- policies searched ------------------------------------------------------------
    def policies(self, cand, max_batch: int, svc=None) -> list:
        """The ``ipusim.policies`` the search tries for a candidate (fewer under IPUSIM_QUICK)."""
        from .. import policies as P

        slo = self.case.slo_p99_s
        bs = sweep_size((1, 2, 4, 8, 16, 32, 64, 128), (1, 4, 16, 64))
        delays = sweep_size((0.0, slo / 10, slo / 4), (slo / 5,))
        if (
            self.case.task == "generate"
        ):  # continuous batching; none if one request's KV does not fit
            need = self.case.max_len + self.case.output_tokens
            kv = getattr(svc, "kv_tokens", 0)
            return (
                [
                    search.Policy(
                        "continuous", b, 0.0, P.Continuous(max_batch=b, kv_capacity_tokens=kv)
                    )
                    for b in bs
                    if b <= max_batch
                ]
                if kv >= need
                else []
            )
        out = []
        if cand.policy in ("auto", "dynamic"):
            out += [
                search.Policy("dynamic", b, d, P.Dynamic(max_batch=b, max_delay_s=d))
                for b in bs
                if b <= max_batch
                for d in delays
            ]
        if cand.policy in ("auto", "static"):
            out += [
                search.Policy("static", b, slo / 2, P.Static(batch=b, timeout_s=slo / 2))
                for b in sweep_size((8, 32), (16,))
                if b <= max_batch
            ]
        if cand.policy == "auto":
            # A budget never asks for more rows of the longest length than fit (C1).
            most = max_batch * self.case.model.max_positions
            budgets = sorted({min(t, most) for t in sweep_size((2048, 8192), (4096,))})
            out += [
                search.Policy(
                    "token",
                    max_batch,
                    d,
                    P.TokenBudget(max_tokens=t, max_delay_s=d, max_batch=max_batch),
                )
                for t in budgets
                for d in delays[-1:]
            ]
        return out or [search.Policy("dynamic", 1, 0.0, P.Dynamic(max_batch=1, max_delay_s=0.0))]

    # --- fit --------------------------------------------------------------------------
    def working_set(self, c, batch: int = 1) -> dict:
        """Bytes one replica must hold for a batch at the longest length (weights, act, KV)."""
        case = self.case
        m = case.model
        gen = case.task == "generate"
        ln = min(case.max_len, m.max_positions - (case.output_tokens if gen else 0))
        ln = max(ln, 1)
        s = workloads.step(m, [ln] * batch, phase="prefill" if gen else "forward")
        weights = m.weight_bytes(s.dtype_bytes)
        act = max((o.act_read_bytes + o.act_write_bytes) / o.count for o in s.ops)
        kv = m.kv_bytes_per_token(s.dtype_bytes) * batch * (ln + case.output_tokens) if gen else 0.0
        return {
            "weights": weights,
            "activations": act,
            "kv": kv,
            "total": weights + act + kv,
            "length": ln,
            "step": s,
        }

    def fit(self, cand) -> dict:
        key = (cand.chip, cand.count)
        if key in self._fit:
            return self._fit[key]
        c = cand.chip
        ws = self.working_set(c, 1)
        cap = c.data_bytes if c.kind == "tile" else c.hbm_bytes
        kv_per_tok = self.case.model.kv_bytes_per_token(2) if self.case.task == "generate" else 0
        out = {"need": ws, "capacity": cap, "placements": [], "notes": []}
        m_chips = m_lower = max(1, math.ceil(ws["total"] / cap))  # chip-wide bytes: a lower bound
        link_ok = c.link_bandwidth_bytes_per_s > 0
        model = self.case.model
        length = model.max_positions  # the service tables reach the model's longest sequence
        phases = ("prefill", "decode") if self.case.task == "generate" else ("forward",)
        # Fit by the machine models' fit rule (per tile on a tile chip, HBM on a GPU): the
        # fewest chips whose stage of ceil(layers / m) layers takes one sequence of the
        # longest length, and the largest batch that fits it (StepResult.fits).
        tried = set()
        for m in range(m_chips, model.layers + 1):
            if m > 1 and not link_ok:
                break
            per_stage = -(-model.layers // m)
            if per_stage in tried:
                continue
            tried.add(per_stage)
            mb = capacity.largest_batch(tables.Replica(c, model, m, False), length, phases)
            if mb >= 1:
                kind = ("on-chip" if c.kind == "tile" else "hbm") if m == 1 else "spread"
                room = m * cap - ws["weights"]
                kv_tok = int((room - ws["activations"]) // kv_per_tok) if kv_per_tok else 0
                kv_tok = min(kv_tok, mb * m * length) if kv_per_tok else 0
                out["placements"].append(
                    ReplicaLayout(kind, m, False, mb, c.kind == "tile", kv_tok)
                )
                m_chips = m
                break
        else:
            m_chips = max(m_chips, model.layers + 1)
        if (
            c.kind == "tile"
            and (m_chips > 1 or not out["placements"])
            and c.offchip_bytes > 0
            and ws["weights"] <= c.offchip_bytes
        ):
            mb = capacity.largest_batch(tables.Replica(c, model, 1, True), length, phases)
            if mb >= 1:
                kv_tok = int((cap - ws["activations"]) // kv_per_tok) if kv_per_tok else 0
                kv_tok = min(kv_tok, mb * length) if kv_per_tok else 0
                out["placements"].append(ReplicaLayout("streaming", 1, True, mb, True, kv_tok))
            else:
                out["notes"].append(
                    "streaming: one sequence's activations (and KV) do not fit the tiles"
                )
        out["given"] = [p for p in out["placements"] if p.chips <= cand.count]
        out["chips_on_chip"] = m_lower  # chip-wide bytes over memory per chip (a lower bound)
        on_chip = [p for p in out["placements"] if not p.streaming]
        out["chips_fit_rule"] = (
            on_chip[0].chips if on_chip else None
        )  # fewest whose stages fit the tiles
        # Multi-chip fit on the chips given: tensor, pipeline and data parallel (ipusim.placement).
        out["placed"] = (
            self.placed(c, cand.count, length, phases) if cand.count > 1 and link_ok else None
        )
        # A model that needs several chips is also served as replicas of that placement (its tensor x
        # pipeline chips; its data-parallel copies are serving replicas).
        pl = out["placed"]
        one_chip = any(p.chips == 1 and not p.streaming for p in out["placements"])
        if (
            pl is not None
            and pl.fit != "does_not_fit"
            and pl.tensor * pl.pipeline > 1
            and not one_chip
        ):
            n = pl.tensor * pl.pipeline
            rep = tables.Replica(c, model, n, None, pl.tensor)
            mb = capacity.largest_batch(rep, length, phases, cap=MAX_SERVING_BATCH)
            if mb >= 1:
                held = (
                    0.0 if pl.fit == "streams" else ws["weights"]
                )  # streamed weights leave SRAM to the KV cache
                kv_tok = (
                    int((n * cap - held - ws["activations"]) // kv_per_tok) if kv_per_tok else 0
                )
                kv_tok = min(kv_tok, mb * pl.pipeline * length) if kv_per_tok else 0
                out["placements"].append(
                    ReplicaLayout(
                        "placed", n, pl.fit == "streams", mb, c.kind == "tile", kv_tok, pl
                    )
                )
        ws_w = ws["weights"]
        if c.kind == "tile" and c.offchip_bandwidth_bytes_per_s > 0:
            out["stream_s_per_pass"] = ws_w / c.offchip_bandwidth_bytes_per_s
        self._fit[key] = out
        return out

    def placed(self, c, chips: int, length: int, phases):
        """``placement.place`` of one sequence of ``length`` tokens on ``chips`` chips, per phase:
        the first phase that does not fit, else the slowest phase's placement."""
        from .. import placement

        out = None
        for ph in phases:
            pl = placement.place(
                c, workloads.step(self.case.model, [int(length)], phase=ph), chips=chips
            )
            if pl.fit == "does_not_fit":
                return pl
            out = pl if out is None or pl.time_s > out.time_s else out
        return out

    # --- policy search ----------------------------------------------------------------
    def depth(self, pl: ReplicaLayout) -> int:
        """Batches a replica keeps in flight: one per pipeline stage, unless the KV cache
        (shared by the stages' streams) cannot hold a request per stream."""
        if pl.stages == 1:
            return 1
        if self.case.task == "generate":
            need = self.case.max_len + self.case.output_tokens
            return int(min(pl.stages, max(1, pl.kv_tokens // need)))
        return pl.stages

    def continuous(self) -> bool:
        """Generation, served by ``ipusim.serving``'s continuous batching."""
        return self.case.task == "generate"

    def modes(self, cand) -> tuple:
        if self.continuous():
            return ("padded",)  # prompts padded per iteration; packing does not apply
        return ("padded", "packed") if cand.mode == "auto" else (cand.mode,)

    def service(self, cand, placement: ReplicaLayout, mode: str):
        if self.continuous():
            return search.setup(
                cand.chip,
                self.case.model,
                mode,
                chips=placement.chips,
                streaming=placement.streaming,
                output_tokens=self.case.output_tokens,
                max_batch=min(MAX_SERVING_BATCH, placement.max_batch),
                kv_tokens=placement.kv_tokens // self.depth(placement),
                placement=placement.placed,
            )
        return search.setup(
            cand.chip,
            self.case.model,
            mode,
            chips=placement.chips,
            streaming=placement.streaming,
            max_batch=min(MAX_SERVING_BATCH, placement.max_batch),
            placement=placement.placed,
        )

    def search(self, cand, lengths=None, key_extra=None) -> list:
        """Every (placement, mode) of a candidate with its best policy (capacity at SLO)."""
        key = (cand, key_extra)
        if key in self._search:
            return self._search[key]
        lengths = self.lengths if lengths is None else lengths
        out = []
        for pl in self.fit(cand)["placements"]:
            for mode in self.modes(cand):
                svc = self.service(cand, pl, mode)
                out.append(self.best_policy(cand, pl, mode, svc, lengths))
        self._search[key] = out
        return out

    def best_policy(self, cand, pl, mode, svc, lengths):
        """The policy with the highest capacity at the p99 target (the first listed of equals)."""
        key = (
            cand,
            id(pl),
            mode,
            id(svc),
            hashlib.sha256(np.ascontiguousarray(lengths).tobytes()).hexdigest(),
        )
        if key not in self._policy_memo:  # C5 re-runs the case's own long share
            self._policy_memo[key] = (pl, svc, self._search_policies(cand, pl, mode, svc, lengths))
        return dataclasses.replace(self._policy_memo[key][2])

    def _search_policies(self, cand, pl, mode, svc, lengths):
        slo = self.case.slo_p99_s
        mean_len = float(np.mean(lengths))
        pols = self.policies(cand, svc.max_batch, svc)
        if not pols:  # e.g. no room for one request's KV cache
            return Deployment(pl, mode, search.Policy("continuous", 1, 0.0), 0.0, svc, None)
        servers = self.depth(pl)
        tops, order, seen = {}, [], set()
        for i, pol in enumerate(pols):
            same = search.same_runs(pol)
            if same in seen:  # runs exactly as an earlier policy: ties go to the earlier one
                continue
            seen.add(same)
            b = pol.max_batch
            if (b, pol.kind == "continuous") not in tops:
                upper = (
                    2.0 * b * servers / max(svc.time_at(b, min(mean_len, svc.max_prompt)), 1e-12)
                )
                tops[b, pol.kind == "continuous"] = search.rate_bound(
                    lengths, svc, pol, upper, servers=servers
                )
            order.append((tops[b, pol.kind == "continuous"], i, pol))
        # The capacity never exceeds a policy's rate bound: try the highest bounds first, and stop
        # a search once it can no longer beat the best found. Each search starts at a guess
        # (serving.capacity.CapacitySearch); the winner's guess is checked, and if it does not hold every
        # policy is searched again plainly. Either way the same policy wins with the same capacity.
        for guess in (True, False):
            best, best_i, won = None, -1, None
            for top, i, pol in sorted(order, key=lambda t: (-t[0], t[1])):
                above = -math.inf
                if best is not None:
                    c = best.capacity_per_replica
                    above = c if best_i < i else math.nextafter(c, -math.inf)
                cs = search.capacity_search(
                    lengths,
                    svc,
                    pol,
                    slo,
                    top,
                    seed=self.case.seed,
                    servers=servers,
                    iters=self.quick_bisect,
                )
                cap, res = cs.run(above, guess=guess)
                if cap is not None and (
                    best is None
                    or cap > best.capacity_per_replica
                    or (cap == best.capacity_per_replica and i < best_i)
                ):
                    best, best_i, won = Deployment(pl, mode, pol, cap, svc, res), i, cs
            if won.verify():
                return best
        raise AssertionError("unreachable: a plain search assumes nothing")

    def cost(self, cand, dep: Deployment) -> Deployment:
        """Chips to carry the offered rate at the SLO, and what they cost per hour."""
        case = self.case
        c = cand.chip
        if dep.capacity_per_replica <= 0:
            dep.chips_needed, dep.usd_per_million = 0, math.inf
            return dep
        reps = math.ceil(case.rate_per_s / dep.capacity_per_replica * (1 - 1e-9))
        dep.chips_needed = reps * dep.placement.chips
        dep.usd_per_hour = dep.chips_needed * self.chip_hour_usd(c)
        dep.usd_per_million = dep.usd_per_hour / (case.rate_per_s * HOUR_S) * 1e6
        per_chip = dep.capacity_per_replica / dep.placement.chips
        dep.usd_per_million_at_capacity = self.chip_hour_usd(c) / (per_chip * HOUR_S) * 1e6
        return dep

    def chip_hour_usd(self, c) -> float:
        """Price of one chip for one hour including its energy, USD."""
        p = self.case.prices
        return p.chip_hour(c) + c.power_w / 1e3 * p.usd_per_kwh

    def best(self, cand) -> Deployment | None:
        """The cheapest deployment of a candidate that meets the SLO (None if none does)."""
        deps = [self.cost(cand, d) for d in self.search(cand)]
        ok = [d for d in deps if d.capacity_per_replica > 0]
        if not ok:
            return None
        return min(ok, key=lambda d: (d.usd_per_million, -d.capacity_per_replica))

    def offered(self, cand, dep: Deployment, replicas: int):
        """Latency at the offered rate (trace or Poisson) on ``replicas`` replicas."""
        case = self.case
        n = self.lengths.size
        if case.arrivals is not None:
            arr = case.arrivals[:n]
            lens = self.lengths[: arr.size]
        else:
            arr = arrivals.poisson(case.rate_per_s, n, seed=case.seed + 1)
            lens = self.lengths
        return search.serve(
            arr, lens, dep.service, dep.policy, replicas * self.depth(dep.placement)
        )

    def offered_interval(self, cand, dep: Deployment, replicas: int, n: int = P99_REPLICATIONS):
        """The p99 at the offered rate with its interval: ``n`` independent seeded replications
        of ``offered``'s Poisson run (``serving.replications``: warm-up discarded, Student-t
        interval), each with its own arrivals and request order. None for an arrival trace
        (one trace, nothing to replicate) or a run that is not stable."""
        from ..serving import replications

        case = self.case
        if case.arrivals is not None:
            return None

        def one(seed):
            rng = np.random.default_rng(seed)
            arr = arrivals.poisson(case.rate_per_s, self.lengths.size, seed=seed)
            r = search.serve(
                arr,
                rng.permutation(self.lengths),
                dep.service,
                dep.policy,
                replicas * self.depth(dep.placement),
            )
            if not r.stable:
                raise _Unstable
            return r.arrival_s, r.latency_s

        try:
            return replications.replicate(one, n, seed=case.seed, qs=(99.0,))["latency_p99_s"]
        except _Unstable:
            return None

    def sources(self) -> str:
        srcs = set()
        for deps in self._search.values():
            for d in deps:
                if d.service.source:
                    srcs.add(d.service.source)
        return ", ".join(sorted(srcs))
