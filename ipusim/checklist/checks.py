"""The eight checks. Each is a function ``check_x(case, ctx=None) -> Check``.

A ``Check`` carries its evidence as numbers with units and the source (which model
produced them), so that every number in the verdict can be traced back. Work shared by
several checks (fitting each candidate, searching its batching policy) is done once by
``Context`` and reused.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass, field

import numpy as np

from .. import arrivals, workloads
from ..config import sweep_size
from ..serving import tables
from . import search
from .case import ANSWERS, ASSUMPTIONS, Case

STATUSES = ("pass", "warn", "fail", "info", "skipped")
CHECK_NAMES = {
    "C1": "Fit in on-chip memory",
    "C2": "Throughput at the latency target",
    "C3": "Padding and packing",
    "C4": "Cost and energy",
    "C5": "Sensitivity",
    "C6": "Training",
    "C7": "Software readiness",
    "C8": "What to measure in a proof of concept",
}
"""Each check's id and name, as its ``Check`` carries them (diagrams and tables name the checks from here)."""
HOUR_S = 3600.0
MAX_SERVING_BATCH = 128  # rows of a deployment's service tables, at most


@dataclass(frozen=True)
class Evidence:
    """One number a check rests on: ``value`` in ``unit``, with a note on where it comes from."""

    key: str
    value: float | str
    unit: str = ""
    note: str = ""

    def text(self) -> str:
        return f"{fmt(self.value, self.unit)}"

    def to_dict(self) -> dict:
        return {"key": self.key, "value": self.value, "unit": self.unit, "note": self.note}


@dataclass
class Check:
    """The result of one check: status, headline, reason, evidence, tables and sources."""

    id: str  # "C1" ... "C8"
    name: str
    status: str  # one of STATUSES
    summary: str  # the headline in one sentence
    reason: str  # why this status
    evidence: list = field(default_factory=list)  # Evidence records
    tables: dict = field(default_factory=dict)  # title -> list of row dicts
    source: str = ""  # which models produced the numbers
    data: dict = field(default_factory=dict)  # machine-readable extras for the verdict

    def ev(self, key: str):
        for e in self.evidence:
            if e.key == key:
                return e.value
        raise KeyError(f"{self.id} has no evidence {key!r}")

    def to_dict(self) -> dict:
        return {"id": self.id, "name": self.name, "status": self.status, "summary": self.summary,
                "reason": self.reason, "evidence": [e.to_dict() for e in self.evidence],
                "tables": self.tables, "source": self.source}

    def __repr__(self):
        return f"Check({self.id} {self.name}: {self.status.upper()} - {self.summary})"


def fmt(v, unit: str = "") -> str:
    """A number with its unit, readable (3 significant figures, thousands separated)."""
    if isinstance(v, str):
        return v + (f" {unit}" if unit else "")
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    if isinstance(v, float) and math.isinf(v):
        return "unbounded" if v > 0 else "-unbounded"
    if unit == "%":
        return f"{v:.1f}%"
    if unit == "x":
        return f"{v:.2f}x"
    a = abs(v)
    if isinstance(v, (int, np.integer)) or (a >= 100 and float(v).is_integer()):
        s = f"{int(v):,}"
    elif a >= 1000:
        s = f"{v:,.0f}"
    elif a >= 100:
        s = f"{v:.0f}"
    elif a >= 10:
        s = f"{v:.1f}"
    elif a >= 0.01 or a == 0:
        s = f"{v:.2f}"
    else:
        s = f"{v:.2e}"
    return f"{s} {unit}".strip()


# ---------------------------------------------------------------------------------------
# Shared work
# ---------------------------------------------------------------------------------------
@dataclass
class Placement:
    """How a model sits on a chip kind: ``chips`` per replica, streaming or not.

    Kind "placed" is a tensor/pipeline placement found by ``ipusim.placement`` on the chips given
    (``placed``, its ``Placement``), for a model that needs several chips; "spread" holds the
    layers in turn on ``chips`` chips."""

    kind: str  # "on-chip", "spread", "streaming", "hbm", "placed"
    chips: int
    streaming: bool
    max_batch: int  # largest batch whose working set fits the replica
    tile: bool = True  # a tile chip (SRAM) or a GPU (HBM)
    kv_tokens: int = 0  # KV-cache tokens the replica holds beside weights and activations
    placed: object = None  # placement.Placement of a "placed" replica

    @property
    def stages(self) -> int:
        """Pipeline stages of the replica: batches it can keep in flight."""
        return self.placed.pipeline if self.placed is not None else self.chips

    @property
    def label(self) -> str:
        if self.kind == "placed":
            where = "weights streamed, KV cache in SRAM" if self.streaming else (
                "on-chip SRAM" if self.tile else "HBM")
            return f"{where} over {self.chips} chips, tensor {self.placed.tensor} x pipeline {self.placed.pipeline}"
        if self.kind == "spread":
            return f"{'on-chip SRAM' if self.tile else 'HBM'} over {self.chips} chips"
        if self.kind == "streaming":
            return "weights streamed from off-chip DRAM"
        return "on-chip SRAM" if self.kind == "on-chip" else "HBM"


@dataclass
class Deployment:
    """The best (placement, mode, policy) found for one candidate, and what it costs."""

    placement: Placement
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
        if self.case.task == "generate":  # continuous batching; none if one request's KV does not fit
            need = self.case.max_len + self.case.output_tokens
            kv = getattr(svc, "kv_tokens", 0)
            return [search.Policy("continuous", b, 0.0, P.Continuous(max_batch=b, kv_capacity_tokens=kv))
                    for b in bs if b <= max_batch] if kv >= need else []
        out = []
        if cand.policy in ("auto", "dynamic"):
            out += [search.Policy("dynamic", b, d, P.Dynamic(max_batch=b, max_delay_s=d))
                    for b in bs if b <= max_batch for d in delays]
        if cand.policy in ("auto", "static"):
            out += [search.Policy("static", b, slo / 2, P.Static(batch=b, timeout_s=slo / 2))
                    for b in sweep_size((8, 32), (16,)) if b <= max_batch]
        if cand.policy == "auto":
            # A budget never asks for more rows of the longest length than fit (C1).
            most = max_batch * self.case.model.max_positions
            budgets = sorted({min(t, most) for t in sweep_size((2048, 8192), (4096,))})
            out += [search.Policy("token", max_batch, d, P.TokenBudget(max_tokens=t, max_delay_s=d, max_batch=max_batch))
                    for t in budgets for d in delays[-1:]]
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
        return {"weights": weights, "activations": act, "kv": kv, "total": weights + act + kv,
                "length": ln, "step": s}

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
            mb = search.largest_fitting_batch(c, model, length, phases, chips=m)
            if mb >= 1:
                kind = ("on-chip" if c.kind == "tile" else "hbm") if m == 1 else "spread"
                room = m * cap - ws["weights"]
                kv_tok = int((room - ws["activations"]) // kv_per_tok) if kv_per_tok else 0
                kv_tok = min(kv_tok, mb * m * length) if kv_per_tok else 0
                out["placements"].append(Placement(kind, m, False, mb, c.kind == "tile", kv_tok))
                m_chips = m
                break
        else:
            m_chips = max(m_chips, model.layers + 1)
        if (c.kind == "tile" and (m_chips > 1 or not out["placements"]) and c.offchip_bytes > 0
                and ws["weights"] <= c.offchip_bytes):
            mb = search.largest_fitting_batch(c, model, length, phases, streaming=True)
            if mb >= 1:
                kv_tok = int((cap - ws["activations"]) // kv_per_tok) if kv_per_tok else 0
                kv_tok = min(kv_tok, mb * length) if kv_per_tok else 0
                out["placements"].append(Placement("streaming", 1, True, mb, True, kv_tok))
            else:
                out["notes"].append("streaming: one sequence's activations (and KV) do not fit the tiles")
        out["given"] = [p for p in out["placements"] if p.chips <= cand.count]
        out["chips_on_chip"] = m_lower  # chip-wide bytes over memory per chip (a lower bound)
        on_chip = [p for p in out["placements"] if not p.streaming]
        out["chips_fit_rule"] = on_chip[0].chips if on_chip else None  # fewest whose stages fit the tiles
        # Multi-chip fit on the chips given: tensor, pipeline and data parallel (ipusim.placement).
        out["placed"] = self.placed(c, cand.count, length, phases) if cand.count > 1 and link_ok else None
        # A model that needs several chips is also served as replicas of that placement (its tensor x
        # pipeline chips; its data-parallel copies are serving replicas).
        pl = out["placed"]
        one_chip = any(p.chips == 1 and not p.streaming for p in out["placements"])
        if pl is not None and pl.fit != "does_not_fit" and pl.tensor * pl.pipeline > 1 and not one_chip:
            n = pl.tensor * pl.pipeline
            rep = tables.Replica(c, model, n, None, pl.tensor)
            mb = tables.largest_replica_batch(rep, length, phases, cap=MAX_SERVING_BATCH)
            if mb >= 1:
                held = 0.0 if pl.fit == "streams" else ws["weights"]  # streamed weights leave SRAM to the KV cache
                kv_tok = int((n * cap - held - ws["activations"]) // kv_per_tok) if kv_per_tok else 0
                kv_tok = min(kv_tok, mb * pl.pipeline * length) if kv_per_tok else 0
                out["placements"].append(Placement("placed", n, pl.fit == "streams", mb, c.kind == "tile", kv_tok, pl))
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
            pl = placement.place(c, workloads.step(self.case.model, [int(length)], phase=ph), chips=chips)
            if pl.fit == "does_not_fit":
                return pl
            out = pl if out is None or pl.time_s > out.time_s else out
        return out

    # --- policy search ----------------------------------------------------------------
    def depth(self, pl: Placement) -> int:
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

    def service(self, cand, placement: Placement, mode: str):
        if self.continuous():
            return search.setup(cand.chip, self.case.model, mode, chips=placement.chips,
                                streaming=placement.streaming, output_tokens=self.case.output_tokens,
                                max_batch=min(MAX_SERVING_BATCH, placement.max_batch),
                                kv_tokens=placement.kv_tokens // self.depth(placement), placement=placement.placed)
        return search.setup(cand.chip, self.case.model, mode, chips=placement.chips, streaming=placement.streaming,
                            max_batch=min(MAX_SERVING_BATCH, placement.max_batch), placement=placement.placed)

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
                out.append(self._best_policy(cand, pl, mode, svc, lengths))
        self._search[key] = out
        return out

    def _best_policy(self, cand, pl, mode, svc, lengths):
        """The policy with the highest capacity at the p99 target (the first listed of equals)."""
        key = (cand, id(pl), mode, id(svc), hashlib.sha256(np.ascontiguousarray(lengths).tobytes()).hexdigest())
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
                upper = 2.0 * b * servers / max(svc.time_at(b, min(mean_len, svc.max_prompt)), 1e-12)
                tops[b, pol.kind == "continuous"] = search.rate_bound(lengths, svc, pol, upper, servers=servers)
            order.append((tops[b, pol.kind == "continuous"], i, pol))
        # The capacity never exceeds a policy's rate bound: try the highest bounds first, and stop
        # a search once it can no longer beat the best found. Each search starts at a guess
        # (search.CapacitySearch); the winner's guess is checked, and if it does not hold every
        # policy is searched again plainly. Either way the same policy wins with the same capacity.
        for guess in (True, False):
            best, best_i, won = None, -1, None
            for top, i, pol in sorted(order, key=lambda t: (-t[0], t[1])):
                above = -math.inf
                if best is not None:
                    c = best.capacity_per_replica
                    above = c if best_i < i else math.nextafter(c, -math.inf)
                cs = search.CapacitySearch(lengths, svc, pol, slo, top, seed=self.case.seed, servers=servers,
                                           iters=self.quick_bisect)
                cap, res = cs.run(above, guess=guess)
                if cap is not None and (best is None or cap > best.capacity_per_replica
                                        or (cap == best.capacity_per_replica and i < best_i)):
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
        return search.serve(arr, lens, dep.service, dep.policy, replicas * self.depth(dep.placement))

    def sources(self) -> str:
        srcs = set()
        for deps in self._search.values():
            for d in deps:
                if d.service.source:
                    srcs.add(d.service.source)
        return ", ".join(sorted(srcs))


def _gb(x):
    return x / 1e9


# ---------------------------------------------------------------------------------------
# C1 Fit
# ---------------------------------------------------------------------------------------
def _placed_fits(f: dict) -> bool:
    """Whether ``ipusim.placement`` fits the case on the chips given (C1's multi-chip fit)."""
    return f.get("placed") is not None and f["placed"].fit != "does_not_fit"


def check_fit(case: Case, ctx: Context | None = None) -> Check:
    """C1: do weights, activations (and KV cache) fit on chip; if not, what it costs."""
    ctx = ctx or Context(case)
    rows, ev = [], []
    any_fit, all_fit = False, True
    for cand in case.candidates:
        f = ctx.fit(cand)
        c = cand.chip
        ws = f["need"]
        place = f["given"][0] if f["given"] else None
        placed = f.get("placed")
        placed_fits = placed is not None and placed.fit != "does_not_fit"
        options = "; ".join(p.label for p in f["placements"]) or "none"
        row = {
            "candidate": cand.label, "memory": "tile SRAM (after code)" if c.kind == "tile" else "HBM",
            "capacity_GB": _gb(f["capacity"]), "weights_GB": _gb(ws["weights"]),
            "activations_GB": _gb(ws["activations"]), "kv_cache_GB": _gb(ws["kv"]),
            "need_GB": _gb(ws["total"]), "chips_to_fit": f["chips_on_chip"],
            "chips_by_fit_rule": f["chips_fit_rule"] if f["chips_fit_rule"] is not None else "none",
            "placement": place.label if place else (
                f"{placed.label()} on {placed.chips_used} chips ({placed.fit})" if placed_fits else "does not fit"),
            "max_batch_fit": place.max_batch if place else 0,
            "other_options": options,
        }
        if placed is not None:
            row["placement_search"] = (f"{placed.label()} on {placed.chips_used} of {placed.chips} chips: "
                                       + (placed.fit if placed_fits else placed.reason))
        if "stream_s_per_pass" in f and f["chips_on_chip"] > 1:
            row["stream_ms_per_pass"] = f["stream_s_per_pass"] * 1e3
        rows.append(row)
        any_fit |= place is not None or placed_fits
        all_fit &= place is not None or placed_fits
        if placed is not None:
            ev.append(Evidence(f"placement.{cand.label.replace(' ', '')}", placed.fit, "",
                               f"ipusim.placement on the {cand.count} chips given: {placed.label()} "
                               "(tensor, pipeline, data parallel, micro-batches), one sequence of the longest length"))
        key = cand.label.replace(" ", "")
        ev.append(Evidence(f"need.{key}", _gb(ws["total"]), "GB",
                           f"weights + largest op's activations at {ws['length']} tokens"
                           + (" + KV cache" if ws["kv"] else "")))
        ev.append(Evidence(f"capacity.{key}", _gb(f["capacity"]), "GB", row["memory"]))
        ev.append(Evidence(f"chips_to_fit.{key}", f["chips_on_chip"], "chips",
                           "to hold everything in fast memory, chip-wide bytes (a lower bound)"))
        ev.append(Evidence(f"chips_by_fit_rule.{key}",
                           f["chips_fit_rule"] if f["chips_fit_rule"] is not None else "none",
                           "chips" if f["chips_fit_rule"] is not None else "",
                           "fewest whose pipeline stages fit each tile / the HBM (StepResult.fits)"))
        if "stream_s_per_pass" in f and f["chips_on_chip"] > 1:
            ev.append(Evidence(f"stream_time.{key}", f["stream_s_per_pass"] * 1e3, "ms",
                               "to stream the weights once from off-chip DRAM (per forward pass)"))
    placed_only = [c.label for c in case.candidates if not ctx.fit(c)["given"] and _placed_fits(ctx.fit(c))]
    if all_fit and not placed_only:
        status, reason = "pass", "every candidate holds the model in its fast memory with the chips given"
    elif any_fit:
        status = "warn"
        nowhere = [c.label for c in case.candidates if not ctx.fit(c)["placements"] and c.label not in placed_only]
        bad = [r["candidate"] for r in rows if r["placement"] == "does not fit" and r["candidate"] not in nowhere]
        parts = []
        if placed_only:
            parts.append(f"{', '.join(placed_only)}: fits by tensor/pipeline/data placement (ipusim.placement) "
                         "for one sequence, but no serving replica was built from it (it fits one chip, or no "
                         "batch fits its tensor x pipeline chips in every phase), so C2-C5 cannot price it")
        if bad:
            parts.append(f"{', '.join(bad)}: the model does not fit the chips given; the cost check prices "
                         "the chips it would need (spread or streamed) instead")
        if nowhere:
            parts.append(f"{', '.join(nowhere)}: no placement fits by the machine models' fit rule (no "
                         f"pipeline of 1 to {case.model.layers} chips, nor streamed weights, nor a tensor/pipeline/data "
                         f"placement on the chips given (placement_search), holds one sequence of "
                         f"{case.model.max_positions} tokens on each tile / in HBM), so it drops out of C2-C5")
        reason = "; ".join(parts)
    else:
        status = "fail"
        reason = "the model fits none of the candidates as given"
    fits_nowhere = not any(ctx.fit(c)["placements"] or _placed_fits(ctx.fit(c)) for c in case.candidates)
    if fits_nowhere:
        status, reason = "fail", ("the model fits nowhere: no candidate can hold it, even spread over "
                                  "more chips or streamed from off-chip DRAM")
    summary = "; ".join(f"{r['candidate']}: {r['placement']} ({fmt(r['need_GB'], 'GB')} of "
                        f"{fmt(r['capacity_GB'], 'GB')} per chip)" for r in rows)
    return Check("C1", "Fit in on-chip memory", status, summary, reason, ev, {"fit": rows},
                 "workloads.step op bytes (need, chip-wide); StepResult.fits of ipusim.tiles / ipusim.gpu "
                 "(tiles.largest_batch_that_fits per tile) for the placements and batch limits",
                 {"fits_nowhere": fits_nowhere})


# ---------------------------------------------------------------------------------------
# C2 Throughput at the latency target
# ---------------------------------------------------------------------------------------
def check_throughput(case: Case, ctx: Context | None = None) -> Check:
    """C2: the best batching policy of each candidate, its capacity at the p99 target."""
    ctx = ctx or Context(case)
    rows, ev = [], []
    slo = case.slo_p99_s
    fastest = math.inf
    median = int(np.median(ctx.lengths))
    for cand in case.candidates:
        dep = ctx.best(cand)
        f = ctx.fit(cand)
        key = cand.label.replace(" ", "")
        if f["placements"]:
            pl = f["given"][0] if f["given"] else f["placements"][0]
            svc = ctx.service(cand, pl, "packed")
            fastest = min(fastest, svc.batch_time(np.array([median])))
        if dep is None:
            rows.append({"candidate": cand.label, "placement": "-", "mode": "-", "policy": "none meets the target",
                         "capacity_req_s": 0.0, "replicas_given": 0, "p50_ms": math.nan,
                         "p99_ms": math.nan, "utilization_%": math.nan, "meets_slo": False})
            ev.append(Evidence(f"capacity.{key}", 0.0, "req/s", "no policy meets the p99 target"))
            continue
        given = [p for p in f["given"] if p.kind == dep.placement.kind]
        replicas = cand.count // dep.placement.chips if given else 0
        cap_given = replicas * dep.capacity_per_replica
        if replicas:
            r = ctx.offered(cand, dep, replicas)
            dep.offered = r
        else:
            r = None
        # Meets the target only if the p99 is within it, the run is not overloaded (queue
        # growing, or busy above MAX_UTILIZATION) and the capacity carries the offered rate.
        meets = (r is not None and search.p99_s(r) <= slo and not search.saturated(r)
                 and cap_given >= case.rate_per_s)
        rows.append({
            "candidate": cand.label, "placement": dep.placement.label, "mode": dep.mode,
            "policy": dep.policy.label, "capacity_req_s": cap_given, "replicas_given": replicas,
            "p50_ms": r.latency_p50_s * 1e3 if r else math.nan,
            "p99_ms": search.p99_s(r) * 1e3 if r else math.nan,
            "utilization_%": search.utilization(r) * 100 if r else math.nan, "meets_slo": meets,
        })
        ev.append(Evidence(f"capacity_per_replica.{key}", dep.capacity_per_replica, "req/s",
                           f"{dep.mode}, {dep.policy.label}, p99 <= {fmt(slo * 1e3, 'ms')}"))
        ev.append(Evidence(f"capacity.{key}", cap_given, "req/s", f"{replicas} replica(s) as given"))
        if r is not None:
            ev.append(Evidence(f"p99_at_rate.{key}", search.p99_s(r) * 1e3, "ms",
                               f"at {fmt(case.rate_per_s, 'req/s')}"))
            ev.append(Evidence(f"utilization.{key}", search.utilization(r) * 100, "%",
                               "busy share at the offered rate"))
    ev.append(Evidence("fastest_single_request", fastest * 1e3, "ms",
                       f"one request of the median length ({median} tokens) on the fastest candidate"))
    ok = [r for r in rows if r["meets_slo"]]
    impossible = fastest > slo
    if impossible:
        status = "fail"
        reason = (f"impossible target: one request of the median length alone takes {fmt(fastest * 1e3, 'ms')} "
                  f"on the fastest candidate, above the p99 target of {fmt(slo * 1e3, 'ms')}; no batching "
                  "policy can meet it (raise the target or pick a faster chip)")
    elif not any(r["capacity_req_s"] > 0 or r["policy"] != "none meets the target" for r in rows):
        status, reason = "fail", "no candidate meets the p99 target with any policy searched"
    elif len(ok) == len(rows):
        status, reason = "pass", "every candidate carries the offered rate within the p99 target as given"
    else:
        status = "warn"
        miss = [r["candidate"] for r in rows if not r["meets_slo"]]
        reason = (f"{', '.join(miss)} cannot carry {fmt(case.rate_per_s, 'req/s')} within the target "
                  "with the chips given; the cost check scales each to the chips it needs")
    summary = "; ".join(f"{r['candidate']}: {fmt(r['capacity_req_s'], 'req/s')} at p99 <= "
                        f"{fmt(slo * 1e3, 'ms')} ({r['policy']}, {r['mode']})" for r in rows)
    src = ctx.sources() + "; " + search.SERVING_SOURCE
    if ctx.continuous():
        src += " (continuous batching)"
    return Check("C2", "Throughput at the latency target", status, summary, reason, ev,
                 {"throughput": rows}, src, {"impossible_target": impossible})


# ---------------------------------------------------------------------------------------
# C3 Padding
# ---------------------------------------------------------------------------------------
def check_padding(case: Case, ctx: Context | None = None) -> Check:
    """C3: how much padding wastes, and what bucketing and packing recover."""
    ctx = ctx or Context(case)
    lens = ctx.lengths
    max_len = case.max_len
    from .. import packing

    def waste(p):
        return 1 - p.real_tokens / p.total_tokens

    pad_max = waste(packing.pack(lens, max_len, "pad"))
    rng = np.random.default_rng(case.seed)
    b = 16
    groups = rng.permutation(lens)[: (lens.size // b) * b].reshape(-1, b)
    pad_batch = 1 - groups.sum() / (groups.max(axis=1).sum() * b)
    buckets = np.array(sorted({128, 256, 384, max_len} & set(range(1, max_len + 1)) | {max_len}))
    pad_bucket = waste(packing.pack(lens, max_len, "bucket", buckets=[int(x) for x in buckets]))
    eff, packs, pack_src = search.pack_efficiency(lens, max_len)
    # FLOPs over every sampled request (a 64-request subsample moved the ratio by 25%).
    s_pad = workloads.step(case.model, lens, pad_to=max_len)
    s_real = workloads.step(case.model, lens)
    flop_ratio = s_pad.flops / s_real.flops
    ev = [
        Evidence("padding_to_max", pad_max * 100, "%", f"share of token slots that are padding at {max_len} tokens"),
        Evidence("padding_per_batch", pad_batch * 100, "%", f"padding to the longest in random batches of {b}"),
        Evidence("padding_bucketed", pad_bucket * 100, "%", f"padding with buckets at {', '.join(map(str, buckets))}"),
        Evidence("packing_efficiency", eff * 100, "%", f"real tokens per pack slot ({pack_src})"),
        Evidence("padded_flops_ratio", flop_ratio, "x",
                 f"FLOPs of all {lens.size} sampled requests padded to {max_len} over the same unpadded"),
        Evidence("mean_length", float(lens.mean()), "tokens", f"{lens.size} sampled requests"),
    ]
    rows = []
    for cand in case.candidates:
        deps = {d.mode: d for d in ctx.search(cand) if d.placement == (ctx.fit(cand)["placements"] or [None])[0]}
        if {"padded", "packed"} <= set(deps):
            cp, ck = deps["padded"].capacity_per_replica, deps["packed"].capacity_per_replica
            gain = ck / cp if cp > 0 else math.inf
            rows.append({"candidate": cand.label, "padded_req_s": cp, "packed_req_s": ck, "packing_gain_x": gain})
            ev.append(Evidence(f"packing_gain.{cand.label.replace(' ', '')}", gain, "x",
                               "capacity at the p99 target, packed over padded (per replica)"))
    tables = {"waste": [
        {"scheme": "pad to max length", "padding_%": pad_max * 100},
        {"scheme": f"pad to longest in batch of {b}", "padding_%": pad_batch * 100},
        {"scheme": "length buckets", "padding_%": pad_bucket * 100},
        {"scheme": f"pack ({pack_src.split(' (')[0].removeprefix('ipusim.packing ')})", "padding_%": (1 - eff) * 100},
    ]}
    if rows:
        tables["packing_gain"] = rows
    status = "warn" if pad_max > 0.3 else "info"
    reason = (f"padded to {max_len} tokens, {fmt(pad_max * 100, '%')} of the computed token slots are "
              f"padding; packing leaves {fmt((1 - eff) * 100, '%')}")
    summary = (f"padding wastes {fmt(pad_max * 100, '%')} of token slots at {max_len} tokens "
               f"({fmt(flop_ratio, 'x')} the FLOPs); packing reaches {fmt(eff * 100, '%')} efficiency")
    return Check("C3", "Padding and packing", status, summary, reason, ev, tables,
                 f"workloads.step FLOPs; {pack_src}; capacities from C2")


# ---------------------------------------------------------------------------------------
# C4 Cost and energy
# ---------------------------------------------------------------------------------------
def check_cost(case: Case, ctx: Context | None = None) -> Check:
    """C4: cost per million requests and energy per request, each candidate scaled to the rate."""
    ctx = ctx or Context(case)
    rows, ev = [], []
    for cand in case.candidates:
        dep = ctx.best(cand)
        key = cand.label.replace(" ", "")
        c = cand.chip
        price = case.prices.chip_hour(c)
        if dep is None:
            rows.append({"candidate": cand.label, "kind": c.kind, "deployment": "none meets the target",
                         "chips_needed": 0,
                         "usd_per_chip_hour": price, "usd_per_hour": math.nan,
                         "usd_per_million": math.inf, "usd_per_million_at_capacity": math.inf,
                         "energy_j_per_request": math.nan,
                         "busy_energy_j_per_request": math.nan, "price_assumed": case.prices.is_assumed(c.name)})
            continue
        joules_all = dep.chips_needed * c.power_w / case.rate_per_s
        # Busy-only energy: board power x the chip-seconds the scaled deployment is busy at
        # the offered rate (serving run), per request served. A pipeline batch occupies each
        # of its m chips for 1/m of its time, so its chip-seconds are its time.
        run = ctx.offered(cand, dep, max(1, dep.chips_needed // dep.placement.chips))
        busy_j = c.power_w * float(run.device_busy_s.sum()) / max(run.served, 1)
        rows.append({"candidate": cand.label, "kind": c.kind,
                     "deployment": f"{c.name} x{dep.chips_needed} ({dep.placement.label}, {dep.mode})",
                     "chips_needed": dep.chips_needed,
                     "usd_per_chip_hour": price, "usd_per_hour": dep.usd_per_hour,
                     "usd_per_million": dep.usd_per_million,
                     "usd_per_million_at_capacity": dep.usd_per_million_at_capacity,
                     "energy_j_per_request": joules_all,
                     "busy_energy_j_per_request": busy_j, "price_assumed": case.prices.is_assumed(c.name)})
        ev += [
            Evidence(f"chips_needed.{key}", dep.chips_needed, "chips",
                     f"to carry {fmt(case.rate_per_s, 'req/s')} at p99 <= {fmt(case.slo_p99_s * 1e3, 'ms')} (C2 capacity)"),
            Evidence(f"usd_per_million.{key}", dep.usd_per_million, "USD",
                     "per million requests, chips + energy" + (" (ASSUMED price)" if case.prices.is_assumed(c.name) else "")),
            Evidence(f"usd_per_million_at_capacity.{key}", dep.usd_per_million_at_capacity, "USD",
                     "per million requests if the chips ran at their C2 capacity (large deployments)"),
            Evidence(f"energy_per_request.{key}", joules_all, "J", "board power x chips / rate"),
            Evidence(f"busy_energy_per_request.{key}", busy_j, "J",
                     "board power x busy chip-seconds at the offered rate / requests served"),
        ]
    tile = _best_of_kind(rows, "tile")
    gpu = _best_of_kind(rows, "gpu")
    data = {"tile": tile, "gpu": gpu}
    if tile and gpu and math.isfinite(tile["usd_per_million"]) and math.isfinite(gpu["usd_per_million"]):
        saving = 1 - tile["usd_per_million"] / gpu["usd_per_million"]
        ev.append(Evidence("tile_saving", saving * 100, "%",
                           f"{tile['deployment']} vs {gpu['deployment']}, cost per million requests"))
        data["saving"] = saving
        status = "info"
        reason = "each candidate is scaled to the chips it needs for the offered rate at the target, then priced"
        cap_saving = 1 - tile["usd_per_million_at_capacity"] / gpu["usd_per_million_at_capacity"]
        data["saving_at_capacity"] = cap_saving
        ev.append(Evidence("tile_saving_at_capacity", cap_saving * 100, "%",
                           "cost per million requests with the chips at their C2 capacity"))
        # The tile chip-hour price at which the two cost the same per request at capacity
        # (cost at capacity is linear in the price: (price + energy) / requests per chip-hour).
        tc = next(c for c in case.candidates if c.label == tile["candidate"]).chip
        e_tile = tc.power_w / 1e3 * case.prices.usd_per_kwh
        per_chip_hour = (case.prices.chip_hour(tc) + e_tile) / tile["usd_per_million_at_capacity"]  # M req
        parity = gpu["usd_per_million_at_capacity"] * per_chip_hour - e_tile
        data["parity_price_at_capacity"] = parity
        ev.append(Evidence("parity_price_at_capacity", parity, "USD",
                           f"{tc.name} chip-hour price at which it costs the same per request as the GPU at capacity"))
        minimal = [d for d in (ctx.best(c) for c in case.candidates) if d is not None
                   and d.chips_needed == d.placement.chips and d.capacity_per_replica > 2 * case.rate_per_s]
        data["minimal"] = len(minimal) == len([r for r in rows if math.isfinite(r["usd_per_million"])])
        if data["minimal"]:
            reason += (f"; at {fmt(case.rate_per_s, 'req/s')} every deployment is its smallest (one replica, "
                       "under half used), so the cost per request is its hourly price over the traffic; with "
                       f"the chips fully used it would be {fmt(tile['usd_per_million_at_capacity'], 'USD')} (tile) vs "
                       f"{fmt(gpu['usd_per_million_at_capacity'], 'USD')} (GPU) per million")
        # Which view the verdict weighs, and why (verdict.POLICY["cost_points_per_pct"]): at the
        # offered rate a deployment that is its smallest is mostly idle, so its cost per request
        # says only how the hourly prices compare; with the chips at capacity it says what a
        # request costs once the traffic grows to fill them.
        if data["minimal"]:
            data["weighed_saving"] = cap_saving
            data["weighed_view"] = ("the verdict weighs the cost at capacity: every deployment is its smallest, "
                                    "so the cost at the offered rate is the price ratio only")
        else:
            data["weighed_saving"] = (saving + cap_saving) / 2
            data["weighed_view"] = ("the verdict weighs the mean of both views: the offered rate needs more "
                                    "than the smallest deployment, so both the traffic and the chips' capacity count")

        def _change(x):
            return f"tile cheaper by {fmt(x * 100, '%')}" if x > 0 else f"tile costs {fmt(1 - x, 'x')} the GPU"

        summary = (f"at the offered rate: {tile['deployment']} {fmt(tile['usd_per_million'], 'USD')}/M requests vs "
                   f"{gpu['deployment']} {fmt(gpu['usd_per_million'], 'USD')}/M ({_change(saving)}); with the chips at "
                   f"capacity: {fmt(tile['usd_per_million_at_capacity'], 'USD')}/M vs "
                   f"{fmt(gpu['usd_per_million_at_capacity'], 'USD')}/M ({_change(cap_saving)}); "
                   + data["weighed_view"].split(":")[0])
        reason += "; " + data["weighed_view"]
    else:
        finite = [r for r in rows if math.isfinite(r["usd_per_million"])]
        summary = "; ".join(f"{r['candidate']}: {fmt(r['usd_per_million'], 'USD')}/M" for r in finite) or \
            "no candidate can serve the traffic at the target, so none has a cost"
        status = "warn" if finite else "fail"
        reason = "a tile/GPU comparison needs at least one candidate of each kind that meets the target"
    ev.append(Evidence("usd_per_kwh", case.prices.usd_per_kwh, "USD/kWh",
                       "ASSUMED" if case.prices.is_assumed("kwh") else "user value"))
    return Check("C4", "Cost and energy", status, summary, reason + ". " + ASSUMPTIONS["prices"], ev,
                 {"cost": rows}, "C2 capacities; chip power from hardware presets; prices from the case", data)


def _best_of_kind(rows, kind):
    ok = [r for r in rows if r["kind"] == kind and math.isfinite(r["usd_per_million"])]
    return min(ok, key=lambda r: r["usd_per_million"]) if ok else None


# ---------------------------------------------------------------------------------------
# C5 Sensitivity
# ---------------------------------------------------------------------------------------
def check_sensitivity(case: Case, ctx: Context | None = None) -> Check:
    """C5: how the cheaper chip kind changes with price ratio, arrival rate and long share."""
    ctx = ctx or Context(case)
    best = {}
    for cand in case.candidates:
        d = ctx.best(cand)
        if d is not None:
            k = cand.chip.kind
            if k not in best or d.usd_per_million < best[k][1].usd_per_million:
                best[k] = (cand, d)
    if set(best) != {"tile", "gpu"}:
        return Check("C5", "Sensitivity", "skipped",
                     "needs one tile and one GPU candidate that meet the target",
                     "no comparison to move", [], {}, "")
    (tc, td), (gc, gd) = best["tile"], best["gpu"]
    ev, tables = [], {}
    # Price ratio: tile chip-hour price multiplied by k; cost is linear in k.
    e_tile = tc.chip.power_w / 1e3 * case.prices.usd_per_kwh
    p_tile = case.prices.chip_hour(tc.chip)
    gpu_per_hour_per_req = gd.usd_per_hour / case.rate_per_s
    k_star = (gpu_per_hour_per_req * case.rate_per_s / td.chips_needed - e_tile) / p_tile
    ratio_now = p_tile / case.prices.chip_hour(gc.chip)
    if k_star <= 0:  # the tile deployment's energy alone costs more than the GPU deployment
        k_star = math.nan
    ev.append(Evidence("price_crossover_usd_per_chip_hour", k_star * p_tile, "USD",
                       f"{tc.chip.name} chip-hour price at which it costs the same per request as {gc.label}"
                       + (" (none: its energy alone costs more)" if math.isnan(k_star) else "")))
    ev.append(Evidence("price_crossover_factor", k_star, "x", f"of the current {tc.chip.name} price"))
    ev.append(Evidence("price_ratio_now", ratio_now, "x", f"{tc.chip.name} / {gc.chip.name} chip-hour price"))
    # Arrival rate: chips scale in whole replicas.
    top = max(16 * case.rate_per_s, 4 * max(td.capacity_per_replica, gd.capacity_per_replica))
    rates = np.unique(np.concatenate([np.geomspace(case.rate_per_s / 16, top, sweep_size(13, 9)),
                                      [case.rate_per_s]]))
    rate_rows = []
    for r in rates:
        cost = {}
        for kind, (cand, d) in best.items():
            reps = math.ceil(r / d.capacity_per_replica * (1 - 1e-9))
            cost[kind] = reps * d.placement.chips * ctx.chip_hour_usd(cand.chip) / (r * HOUR_S) * 1e6
        rate_rows.append({"rate_req_s": float(r), "tile_usd_per_million": cost["tile"],
                          "gpu_usd_per_million": cost["gpu"],
                          "cheaper": _cheaper(cost["tile"], cost["gpu"])})
    tables["rate"] = rate_rows
    rate_cross = _crossings(rate_rows, "rate_req_s")
    ev.append(Evidence("rate_crossovers", ", ".join(fmt(x, "req/s") for x in rate_cross) or "none in range", "",
                       f"rates from {fmt(rates[0], 'req/s')} to {fmt(rates[-1], 'req/s')} where the cheaper kind changes"))
    # Long share: re-search the capacity with re-weighted lengths.
    # Cost per request with the chips fully used (a large deployment), so that it does not
    # hide behind whole-chip rounding at a small offered rate.
    fracs = sweep_size((0.0, 0.2, 0.4, 0.6, 0.8, 1.0), (0.0, 0.2, 0.5, 1.0))
    long_rows = []
    for fr in fracs:
        lens = search.traffic_lengths(case, ctx.n, long_fraction=fr)
        cost = {}
        for kind, (cand, d) in best.items():
            res = ctx._best_policy(cand, d.placement, d.mode, d.service, lens)
            if res.capacity_per_replica <= 0:
                cost[kind] = math.inf
                continue
            per_chip = res.capacity_per_replica / d.placement.chips
            cost[kind] = ctx.chip_hour_usd(cand.chip) / (per_chip * HOUR_S) * 1e6
        long_rows.append({"long_share_%": fr * 100, "tile_usd_per_million": cost["tile"],
                          "gpu_usd_per_million": cost["gpu"],
                          "cheaper": _cheaper(cost["tile"], cost["gpu"])})
    tables["long_share"] = long_rows
    long_cross = _crossings(long_rows, "long_share_%")
    ev.append(Evidence("long_share_crossovers", ", ".join(fmt(x, "%") for x in long_cross) or "none in range", "",
                       "long-text shares where the cheaper kind changes (cost with the chips at capacity)"))
    fragile = bool(0.8 <= k_star <= 1.25)
    near_rate = any(case.rate_per_s / 2 <= x <= case.rate_per_s * 2 for x in rate_cross)
    status = "warn" if (fragile or near_rate) else "pass"
    winner_now = "tile" if td.usd_per_million < gd.usd_per_million else "GPU"
    flip = (f"no {tc.chip.name} price flips it (its energy alone costs more)" if math.isnan(k_star) else
            f"the answer flips if the {tc.chip.name} price moves to {fmt(k_star * p_tile, 'USD')}/chip-hour "
            f"({fmt(k_star, 'x')} today's)")
    reason = (f"the {winner_now} deployment is cheaper now; {flip}"
              + ("; that is within 25% of today's price: a fragile answer" if fragile else "")
              + (f"; it also flips at {', '.join(fmt(x, 'req/s') for x in rate_cross)}" if rate_cross else ""))
    summary = ((f"no {tc.chip.name} price makes it cheaper" if math.isnan(k_star) else
                f"price crossover {fmt(k_star * p_tile, 'USD')}/chip-hour for {tc.chip.name}") + "; rate crossovers: "
               f"{', '.join(fmt(x, 'req/s') for x in rate_cross) or 'none'}; long-share crossovers: "
               f"{', '.join(fmt(x, '%') for x in long_cross) or 'none'}")
    data = {"k_star": k_star, "fragile": fragile, "near_rate": near_rate}
    return Check("C5", "Sensitivity", status, summary, reason, ev, tables,
                 "C2 policy search re-run per long share; C4 prices", data)


TIE_BAND = 0.03  # relative cost difference below which neither kind counts as cheaper


def _side(row) -> int:
    """+1 tile cheaper, -1 GPU cheaper, 0 a tie (within TIE_BAND of each other)."""
    t, g = row["tile_usd_per_million"], row["gpu_usd_per_million"]
    if not (math.isfinite(t) or math.isfinite(g)):
        return 0
    if not math.isfinite(t) or not math.isfinite(g):
        return 1 if math.isfinite(t) else -1
    if abs(t - g) <= TIE_BAND * min(t, g):
        return 0
    return 1 if t < g else -1


def _cheaper(t: float, g: float) -> str:
    side = _side({"tile_usd_per_million": t, "gpu_usd_per_million": g})
    return {1: "tile", -1: "gpu", 0: f"tie (within {TIE_BAND:.0%})"}[side]


def _crossings(rows, xkey):
    """Where the cheaper kind changes, interpolated between the last clear side and the next
    clear other side; costs within TIE_BAND of each other are ties and make no crossing."""
    out, last = [], None
    for b in rows:
        sb = _side(b)
        if sb == 0:
            continue
        if last is not None and _side(last) != sb:
            a = last
            da = a["tile_usd_per_million"] - a["gpu_usd_per_million"]
            db = b["tile_usd_per_million"] - b["gpu_usd_per_million"]
            if math.isfinite(da) and math.isfinite(db) and da != db:
                t = da / (da - db)
                out.append(a[xkey] + t * (b[xkey] - a[xkey]))
            else:
                out.append((a[xkey] + b[xkey]) / 2)
        last = b
    return out


# ---------------------------------------------------------------------------------------
# C6 Training
# ---------------------------------------------------------------------------------------
TRAINING_CLAIM = ("70B-175B parameter models trained on IPU clusters at 15-20% lower cost per dollar "
                  "than GPU clusters")


def training_chips(case: Case) -> list:
    """One chip per kind for the training check: the case's candidates, else GC200 and A100-80GB."""
    from .. import hardware

    seen = {}
    for cand in case.candidates:
        seen.setdefault(cand.chip.kind, cand.chip)
    seen.setdefault("tile", hardware.chip("gc200"))
    seen.setdefault("gpu", hardware.chip("a100-80gb"))
    return [seen["tile"], seen["gpu"]]


TRAIN_CHIPS = 1024  # chips per training run in C6 (Megatron-LM's GPT-3 run, NARAYANAN2021); more if none fits
TRAINING_MODEL_NOTE = (
    "Time from ipusim.training: the fastest placement (data, tensor, pipeline parallel, micro-batch, "
    "recomputation, optimizer-state sharding) on the chips, per-op rooflines, 1F1B bubble, collectives at "
    "published link rates, Streaming Memory for what does not fit in tile SRAM; one GPU matmul efficiency "
    "set from Megatron-LM's GPT-3 175B run, one tile GEMM efficiency from a measured GEMM (JIA-FT).")


def train_estimate(m, c, tr, prices) -> dict:
    """Memory, chips, time and cost to train ``m`` on ``tr.token_budget`` tokens on chip ``c``
    (``ipusim.training``: the best placement on ``TRAIN_CHIPS`` chips, or on the smallest power of
    two above it that fits)."""
    from .. import training

    seq, gb0 = training.recipe(m)
    gb = max(1, (seq * gb0) // tr.seq_len)
    chips_min = training.smallest_chip_count(m, c, seq_len=tr.seq_len, global_batch=gb)
    n = max(TRAIN_CHIPS, chips_min or TRAIN_CHIPS)
    r = training.best_placement(m, c, n, seq_len=tr.seq_len, global_batch=gb, explain=False)
    if r.fit == "does_not_fit":
        inf = math.inf
        return {"model": m.name, "params_B": m.params / 1e9, "chip": c.name, "kind": c.kind,
                "memory_GB": r.memory_total_bytes / 1e9, "placement": "does not fit", "fit": r.fit,
                "chips_min": chips_min or 0, "chips": n, "mfu": 0.0, "days": inf, "chip_hours": inf,
                "energy_MWh": inf, "usd": inf, "flops_per_token_6N": 6.0 * m.params}
    run = r.run(tr.token_budget, usd_per_chip_hour=prices.chip_hour(c), usd_per_kwh=prices.usd_per_kwh)
    return {"model": m.name, "params_B": m.params / 1e9, "chip": c.name, "kind": c.kind,
            "memory_GB": r.memory_total_bytes / 1e9, "placement": r.placement.label(), "fit": r.fit,
            "chips_min": chips_min, "chips": n, "mfu": r.mfu, "days": run.days,
            "chip_hours": run.chip_hours, "energy_MWh": run.energy_kwh / 1e3, "usd": run.cost_usd,
            "flops_per_token_6N": 6.0 * m.params}


def check_training(case: Case, ctx: Context | None = None) -> Check:
    """C6: footprint, chips, time and cost to train each model; the cost claim checked."""
    tr = case.training
    if tr is None:
        return Check("C6", "Training", "skipped", "not asked (add a [training] section or --train)",
                     "the case is about inference only", [], {}, "")
    chips = training_chips(case)
    rows = [train_estimate(m, c, tr, case.prices) for m in tr.models for c in chips]
    ev, ratios = [], {}
    for m in tr.models:
        t = next(r for r in rows if r["model"] == m.name and r["kind"] == "tile")
        g = next(r for r in rows if r["model"] == m.name and r["kind"] == "gpu")
        ratio = t["usd"] / g["usd"]
        ratios[m.name] = ratio
        ev.append(Evidence(f"cost_ratio.{m.name}", ratio, "x", f"{t['chip']} / {g['chip']} cost to train"))
        ev.append(Evidence(f"chips.{m.name}.{t['chip']}", t["chips_min"], "chips",
                           f"fewest chips (power of two) that fit; {t['fit']} on {t['chips']}: {t['placement']}"))
        ev.append(Evidence(f"chips.{m.name}.{g['chip']}", g["chips_min"], "chips",
                           f"fewest chips (power of two) that fit; on {g['chips']}: {g['placement']}"))
        ev.append(Evidence(f"memory.{m.name}", t["memory_GB"], "GB",
                           f"per {t['chip']} at the best placement (weights, grads, Adam state, activations)"))
    tile_c, gpu_c = chips
    # Price at which the tile chip would be 15% cheaper to train the largest model.
    # The case's own model when it is in the list (a training question is about it), else the largest.
    big = next((m for m in tr.models if m.name == case.model.name), max(tr.models, key=lambda m: m.params))
    e_tile = tile_c.power_w / 1e3 * case.prices.usd_per_kwh
    need = {}  # per model: the tile chip-hour price at which it trains 15% cheaper (cost is linear in it)
    for m in tr.models:
        t_m = next(r for r in rows if r["model"] == m.name and r["kind"] == "tile")
        g_m = next(r for r in rows if r["model"] == m.name and r["kind"] == "gpu")
        need[m.name] = 0.85 * g_m["usd"] / t_m["chip_hours"] - e_tile
    need_price = need[big.name]
    ev.append(Evidence("claim_price_needed", need_price, "USD",
                       f"{tile_c.name} chip-hour price for 15% lower cost than {gpu_c.name} on {big.name}"))
    judged = [m.name for m in tr.models if m.params >= 60e9] or [big.name]
    # The claim is "15-20% lower cost"; judged by the claim's one rule (ipusim.claims.rules.price_claim):
    # with any price ASSUMED it depends on the price (or is contradicted when no price gives it).
    from ..claims import rules as claim_rules

    assumed = any(case.prices.is_assumed(n) for n in (tile_c.name, gpu_c.name, "kwh"))
    state = claim_rules.price_claim(min(1 - ratios[n] for n in judged), min(need[n] for n in judged), 0.15, assumed)
    verdict = state if state != "depends" else (
        f"depends on the price (15% cheaper at or below {fmt(min(need[n] for n in judged), 'USD')}/chip-hour)")
    ev.append(Evidence("claim_verdict", verdict, "", TRAINING_CLAIM))
    status = "pass" if state == "supported" else ("fail" if state == "contradicted" else "warn")
    summary = (f"{tile_c.name} / {gpu_c.name} training cost ratio: "
               + ", ".join(f"{k} {fmt(v, 'x')}" for k, v in ratios.items())
               + f"; claim of 15-20% lower cost: {verdict}")
    reason = (f"at the case prices, training {big.name} on {tile_c.name} costs {fmt(ratios[big.name], 'x')} "
              f"what it costs on {gpu_c.name}; the claim needs {tile_c.name} at or below "
              f"{fmt(need_price, 'USD')}/chip-hour (today {fmt(case.prices.chip_hour(tile_c), 'USD')}). "
              + TRAINING_MODEL_NOTE)
    data = {"ratios": ratios, "verdict": verdict, "state": state, "big": big.name}
    return Check("C6", "Training", status, summary, reason, ev, {"training": rows},
                 "ipusim.training.best_placement (step time, MFU) and TrainingStep.run (days, cost)", data)


# ---------------------------------------------------------------------------------------
# C7 Software readiness
# ---------------------------------------------------------------------------------------
# Risk points per answer (ASSUMPTION: a judgement that ranks answers) and the reason.
QUESTIONS = {
    "custom_ops": ("Does the model use custom operators (hand-written CUDA kernels, fused ops)?", {
        "none": (0, "no custom operators to port"),
        "few": (10, "each custom operator must be rewritten for the tile chip's SDK (as codelets)"),
        "many": (25, "many custom operators: a porting project of its own"),
        "unknown": (8, "not answered: assumed a few custom operators"),
    }),
    "dynamic_shapes": ("Do input shapes change at run time (lengths, batch sizes)?", {
        "none": (0, "fixed shapes compile once"),
        "bucketed": (8, "each bucket is a separately compiled graph: compile time and memory per bucket"),
        "arbitrary": (25, "the tile chip compiles a static graph ahead of time and memory is allocated "
                          "at compile time (out-of-memory is a compile error, GC-OOM); arbitrary shapes "
                          "force padding, packing or recompilation"),
        "unknown": (8, "not answered: assumed bucketed shapes"),
    }),
    "framework_support": ("Is your framework and version supported by the tile chip's SDK?", {
        "yes": (0, "supported framework"),
        "partly": (12, "part of the framework's operator set is missing or slower"),
        "no": (30, "no framework support: a rewrite"),
        "unknown": (10, "not answered: assumed partial support"),
    }),
    "library_support": ("Do the libraries you depend on (kernels, serving, quantisation) run on the tile chip?", {
        "yes": (0, "libraries available"),
        "partly": (10, "some libraries need replacements"),
        "no": (20, "key libraries have no tile-chip version"),
        "unknown": (8, "not answered: assumed some replacements"),
    }),
    "team_experience": ("Has the team shipped on the tile chip's SDK before?", {
        "experienced": (0, "the team knows the SDK"),
        "some": (5, "some experience"),
        "none": (15, "a learning curve for the team"),
        "unknown": (6, "not answered: assumed some experience"),
    }),
}
RISK_LEVELS = ((20, "low"), (45, "medium"), (math.inf, "high"))

assert set(QUESTIONS) == set(ANSWERS)


def check_software(case: Case, ctx: Context | None = None) -> Check:
    """C7: software readiness from the questionnaire answers (risk points, with reasons)."""
    rows, ev, total = [], [], 0
    for key, (question, answers) in QUESTIONS.items():
        ans = case.answers.get(key, "unknown")
        pts, why = answers[ans]
        total += pts
        rows.append({"question": question, "answer": ans, "risk_points": pts, "reason": why})
        ev.append(Evidence(f"risk.{key}", pts, "points", f"answer '{ans}': {why}"))
    level = next(name for bound, name in RISK_LEVELS if total < bound)
    ev.append(Evidence("risk_total", total, "points", f"level {level} (low < 20 <= medium < 45 <= high)"))
    unanswered = [r["question"] for r in rows if r["answer"] == "unknown"]
    status = {"low": "pass", "medium": "warn", "high": "fail"}[level]
    summary = f"software risk {level} ({total} points)" + (f"; {len(unanswered)} of {len(rows)} questions unanswered" if unanswered else "")
    reason = "; ".join(f"{r['reason']} (+{r['risk_points']})" for r in sorted(rows, key=lambda r: -r["risk_points"]) if r["risk_points"]) or "no risk points"
    return Check("C7", "Software readiness", status, summary, reason + ". " + ASSUMPTIONS["questionnaire_points"],
                 ev, {"questionnaire": rows}, "questionnaire answers", {"points": total, "level": level})


# ---------------------------------------------------------------------------------------
# C8 What to measure in a proof of concept
# ---------------------------------------------------------------------------------------
def check_poc(case: Case, ctx: Context | None, checks: dict) -> Check:
    """C8: the short list of experiments, each with the prediction it confirms or refutes."""
    rows = []
    c1, c2, c3, c4, c6, c7 = (checks.get(k) for k in ("C1", "C2", "C3", "C4", "C6", "C7"))
    if c1 is not None and c1.tables.get("fit"):
        for r in c1.tables["fit"]:
            rows.append({"measure": f"memory occupancy on {r['candidate']}",
                         "prediction": f"{fmt(r['need_GB'], 'GB')} needed per replica vs {fmt(r['capacity_GB'], 'GB')} per chip ({r['placement']})",
                         "refuted_if": "the compiler reports out of memory, or more than 1.2x the predicted bytes",
                         "from": "C1"})
    if c2 is not None and c2.tables.get("throughput"):
        for r in c2.tables["throughput"]:
            if r["capacity_req_s"] > 0:
                rows.append({"measure": f"throughput at p99 <= {fmt(case.slo_p99_s * 1e3, 'ms')} on {r['candidate']}",
                             "prediction": f"{fmt(r['capacity_req_s'], 'req/s')} with {r['policy']}, {r['mode']}",
                             "refuted_if": "measured below 0.7x the prediction (the machine model is optimistic) or above 1.3x",
                             "from": "C2"})
    if c3 is not None and c3.evidence:
        rows.append({"measure": "padding waste and packing speed-up on your real traffic",
                     "prediction": f"{fmt(c3.ev('padding_to_max'), '%')} padding at max length; packing efficiency {fmt(c3.ev('packing_efficiency'), '%')}",
                     "refuted_if": "your logged length histogram gives a padding share more than 10 points away",
                     "from": "C3"})
    if c4 is not None and c4.tables.get("cost"):
        for r in c4.tables["cost"]:
            if math.isfinite(r["energy_j_per_request"]):
                rows.append({"measure": f"energy per request on {r['candidate']} (board power meter)",
                             "prediction": f"at most {fmt(r['energy_j_per_request'], 'J')} (board power all the time); busy-only {fmt(r['busy_energy_j_per_request'], 'J')}",
                             "refuted_if": "measured energy above the first figure", "from": "C4"})
    if c6 is not None and c6.status != "skipped":
        for r in c6.tables["training"]:
            if r["params_B"] == max(x["params_B"] for x in c6.tables["training"]):
                rows.append({"measure": f"convergence speed for training on {r['chip']} (tokens/s and loss vs tokens)",
                             "prediction": f"{fmt(r['chip_hours'] / (case.training.token_budget / 1e9), 'chip-hours')} per billion tokens for {r['model']}; same loss per token as the other machine at the same numerics",
                             "refuted_if": "tokens/s per chip below 0.7x, or loss per token worse (numerics or packing change convergence)",
                             "from": "C6"})
    if c7 is not None and case.answers.get("dynamic_shapes", "unknown") in ("bucketed", "arbitrary", "unknown"):
        rows.append({"measure": "compile time and memory per input shape (bucket)",
                     "prediction": "one compiled graph per shape; padding or packing to a few shapes keeps it bounded",
                     "refuted_if": "recompilation appears in the serving path", "from": "C7"})
    ev = [Evidence("experiments", len(rows), "experiments", "each with a prediction from the check it names")]
    return Check("C8", "What to measure in a proof of concept", "info",
                 f"{len(rows)} experiments, each confirming or refuting a simulated prediction",
                 "the simulation is a model: the proof of concept measures the numbers the verdict rests on",
                 ev, {"experiments": rows}, "checks C1-C7")
