"""The checklist's connection to the rest of the pipeline, in one place.

Each function here answers one question the checks ask and names the model that answered
it (``source``), so that the report can trace every number:

* the time of a step on a replica of one or more chips: ``ipusim.machine`` (the tile and
  GPU simulators), sampled on a grid and interpolated (``ServiceModel``, ``GenService``);
* the lengths of the traffic and how well they pack: ``ipusim.lengths``-style mixes and
  ``ipusim.packing`` (SPFHP);
* the latencies of a batching policy: ``ipusim.serving`` (batching for classification,
  continuous batching for generation), and the largest rate that meets a p99 target.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import lengths as _lengths
from .. import machine, workloads

SHORT_RANGE = _lengths.SHORT_RANGE  # tokens, ASSUMPTION (see case.ASSUMPTIONS["long_mix"])
LONG_FROM = _lengths.LONG_RANGE[0]  # tokens, ASSUMPTION: a "long" text starts here


# ---------------------------------------------------------------------------------------
# Lengths
# ---------------------------------------------------------------------------------------
def mix_lengths(long_fraction: float, n: int, max_len: int, seed: int = 0) -> np.ndarray:
    """``n`` lengths: a ``long_fraction`` share long (LONG_FROM..max_len), the rest short
    (``lengths.sample_long_text_mix`` with the ranges cut at ``max_len``)."""
    s_hi = min(SHORT_RANGE[1], max_len)
    short = (min(SHORT_RANGE[0], s_hi), s_hi)
    long = (min(LONG_FROM, max_len), max_len)
    return _lengths.sample_long_text_mix(n, long_fraction, short=short, long=long, seed=seed)


def traffic_lengths(case, n: int, long_fraction: float | None = None, seed: int | None = None) -> np.ndarray:
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


# ---------------------------------------------------------------------------------------
# Packing
# ---------------------------------------------------------------------------------------
def pack_efficiency(lengths: np.ndarray, max_len: int) -> tuple[float, int, str]:
    """Share of real tokens in rows of ``max_len`` tokens, rows used, and the method's name.

    ``ipusim.packing`` SPFHP (Krell et al. 2021) with at most 3 sequences a row.
    """
    from .. import packing

    res = packing.pack(np.asarray(lengths), max_len, "spfhp", max_per_row=3)
    return float(res.efficiency), int(res.rows), "ipusim.packing SPFHP, at most 3 sequences a row"


# ---------------------------------------------------------------------------------------
# Machine time
# ---------------------------------------------------------------------------------------
def machine_time(c, s: workloads.Step, *, weights_on_chip: bool = True) -> tuple[float, str]:
    """Seconds for step ``s`` on one chip (``ipusim.machine``) and the name of the model.

    On a tile chip the checklist decides the placement (C1): weights in SRAM, or streamed
    from off-chip DRAM. A step that does not fit (``StepResult.fits`` False) takes
    ``math.inf`` seconds (the fit rule of ``ipusim.machine``): its time is never used.
    """
    name = f"ipusim.{'tiles' if c.kind == 'tile' else 'gpu'} simulator"
    if c.kind == "tile":
        r = machine.simulate(c, s, weights="on_chip" if weights_on_chip else "stream")
    else:
        r = machine.simulate(c, s)
    return (float(r.time_s) if r.fits else math.inf), name


def step_fits(c, s: workloads.Step, *, streaming: bool = False) -> bool:
    """Does step ``s`` fit one chip (``StepResult.fits``), weights on chip or streamed."""
    return math.isfinite(machine_time(c, s, weights_on_chip=not streaming)[0])


def stage_model(model: workloads.TransformerConfig, chips: int) -> workloads.TransformerConfig:
    """The part of ``model`` one chip of a ``chips``-stage pipeline runs: ceil(layers / chips)
    transformer layers. ASSUMPTION (case.ASSUMPTIONS["multi_chip"]): the embedding table and
    output head are left out of the stage (a 2-token vocabulary); they sit on the first and
    last stages, whose extra bytes C1 counts chip-wide but the stage simulation does not."""
    if chips <= 1:
        return model
    import dataclasses

    return dataclasses.replace(model, name=f"{model.name} stage of {chips}", layers=-(-model.layers // chips),
                               vocab=2, type_vocab=0, learned_positions=False, tied_embeddings=True,
                               published_params=0.0)


def largest_fitting_batch(c, model, length: int, phases=("forward",), *, chips: int = 1,
                          streaming: bool = False, cap: int = 256) -> int:
    """Most sequences of ``length`` tokens (0..cap) whose step fits one chip of the replica
    in every phase of ``phases``; a replica of ``chips`` chips holds one stage per chip.

    Tile chips: ``tiles.largest_batch_that_fits`` (the per-tile limit); GPUs: bisection on
    ``StepResult.fits``. Assumes fitting is monotone in the batch (fewer sequences need
    fewer bytes), which the checklist's tests check on the grid it uses.
    """
    from .. import tiles

    m = stage_model(model, chips)
    best = cap
    for ph in phases:
        s = workloads.step(m, [int(length)] * best, phase=ph)
        if c.kind == "tile":
            best = min(best, tiles.largest_batch_that_fits(c, s, weights_on_chip=not streaming))
        else:
            lo, hi = 0, best
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if step_fits(c, workloads.step(m, [int(length)] * mid, phase=ph)):
                    lo = mid
                else:
                    hi = mid - 1
            best = lo
        if best == 0:
            return 0
    return best


def _pow2_grid(lo: int, hi: int) -> list[int]:
    g = []
    v = lo
    while v < hi:
        g.append(v)
        v *= 2
    g.append(hi)
    return g


@dataclass
class ServiceModel:
    """Seconds for one classification batch on one replica (``chips`` chips of ``c``).

    ``table()[b - 1, L - 1]`` is a batch of ``b`` sequences of ``L`` tokens, interpolated
    (bilinear in log batch and log length) between machine times on a power-of-two grid.
    ``batch_time`` costs a padded batch at its longest sequence and a packed one at its
    mean length; the serving simulator gets the table as padded rows, or as packed rows of
    ``max_prompt`` tokens (see ``_serving_service``).
    """

    c: object
    model: workloads.TransformerConfig
    mode: str  # "padded" or "packed"
    chips: int = 1
    streaming: bool = False
    max_batch: int = 128

    def __post_init__(self):
        self._cache: dict = {}
        self.source = ""
        self.max_prompt = self.model.max_positions
        self.b_grid = np.array(_pow2_grid(1, self.max_batch), dtype=float)
        self.l_grid = np.array(_pow2_grid(8, self.max_prompt), dtype=float)

    def _exact(self, b: int, ln: int) -> float:
        key = (b, ln)
        if key not in self._cache:
            s = workloads.step(self.model, [ln] * b, phase="forward")
            self._cache[key], self.source = replica_time(self.c, s, chips=self.chips, streaming=self.streaming,
                                                         tokens=b * ln)
        return self._cache[key]

    def batch_time(self, lengths) -> float:
        """Seconds for one batch of requests with these lengths (tokens)."""
        lengths = np.asarray(lengths)
        ln = float(lengths.max() if self.mode == "padded" else lengths.mean())
        b = int(lengths.size)
        if b <= self.max_batch:
            return float(self.table()[b - 1, min(math.ceil(ln), self.max_prompt) - 1])
        return self.time_at(self.max_batch, min(ln, self.max_prompt)) * (b / self.max_batch)

    def table(self) -> np.ndarray:
        """Seconds for every batch size 1..max_batch (rows) and length 1..max_prompt (columns)."""
        if getattr(self, "_table", None) is None:
            b = np.arange(1, self.max_batch + 1, dtype=float)
            ln = np.arange(1, self.max_prompt + 1, dtype=float)
            self._table = _bilinear_log(self.b_grid, self.l_grid, self.grid(), b, ln)
        return self._table

    def grid(self) -> np.ndarray:
        """Machine seconds at the grid points (rows ``b_grid``, columns ``l_grid``)."""
        if getattr(self, "_grid", None) is None:
            self._grid = np.array([[self._exact(int(b), int(ln)) for ln in self.l_grid] for b in self.b_grid])
        return self._grid

    def time_at(self, b: float, ln: float) -> float:
        """Seconds for a batch of ``b`` sequences of ``ln`` tokens (interpolated)."""
        return float(_bilinear_log(self.b_grid, self.l_grid, self.grid(),
                                   np.array([float(b)]), np.array([float(ln)]))[0, 0])


def _bilinear_log(bg, lg, grid, b, ln):
    """Interpolate ``grid`` (rows ``bg``, columns ``lg``) bilinearly in log b and log ln."""
    def weights(g, x):
        if g.size == 1:
            return np.zeros(x.size, dtype=np.int64), np.zeros(x.size)
        i = np.clip(np.searchsorted(g, x) - 1, 0, g.size - 2)
        w = (np.log(np.clip(x, g[0], g[-1])) - np.log(g[i])) / (np.log(g[i + 1]) - np.log(g[i]))
        return i, np.clip(w, 0.0, 1.0)

    i, u = weights(bg, b)
    j, v = weights(lg, ln)
    i1 = np.minimum(i + 1, bg.size - 1)
    j1 = np.minimum(j + 1, lg.size - 1)
    u, v = u[:, None], v[None, :]
    with np.errstate(invalid="ignore"):
        out = ((1 - u) * (1 - v) * grid[np.ix_(i, j)] + u * (1 - v) * grid[np.ix_(i1, j)]
               + (1 - u) * v * grid[np.ix_(i, j1)] + u * v * grid[np.ix_(i1, j1)])
    # A cell next to a grid point that does not fit (inf) is unavailable too (0 x inf = nan).
    return np.where(np.isnan(out), np.inf, out)


def replica_time(c, s: workloads.Step, *, chips: int, streaming: bool, tokens: int) -> tuple[float, str]:
    """Seconds for step ``s`` on a replica of ``chips`` chips holding its layers in turn.

    One batch passes the chips one after another (pipeline stages): each chip runs a stage
    of ceil(layers / chips) layers (``stage_model``, simulated, so that its fit is the
    stage's), the batch takes ``chips`` x the stage time plus the activation hops over the
    links, and the replica keeps ``chips`` batches in flight (see ``Context.depth``).
    ``math.inf`` if the stage does not fit. ASSUMPTION, see case.ASSUMPTIONS["multi_chip"].
    """
    if chips > 1:
        s = workloads.step(stage_model(s.model, chips), list(s.lengths), phase=s.phase,
                           pad_to=s.row_len or None, dtype_bytes=s.dtype_bytes)
    t, src = machine_time(c, s, weights_on_chip=not streaming)
    if chips > 1:
        link = c.link_bandwidth_bytes_per_s
        hop = tokens * s.model.d_model * s.dtype_bytes * (chips - 1) / link if link > 0 else math.inf
        t = chips * t + hop  # layers run in turn on the chips (pipeline stages)
    return t, src


@dataclass
class GenService:
    """Iteration times of generation on one replica, for continuous batching (``ipusim.serving``).

    ``prefill[b, L]``: a prompt pass of ``b`` prompts of ``L`` tokens; ``decode[b, ctx]``: one
    new token for ``b`` sequences of mean context ``ctx``. Both sampled on a power-of-two grid
    and interpolated as ``ServiceModel`` does.
    """

    c: object
    model: workloads.TransformerConfig
    chips: int = 1
    streaming: bool = False
    output_tokens: int = 128
    max_batch: int = 64
    kv_tokens: int = 0  # KV-cache capacity of the replica, tokens
    mode: str = "padded"
    prompt_step: int = 32
    ctx_step: int = 64

    def __post_init__(self):
        self.source = ""
        self.max_prompt = max(8, self.model.max_positions - self.output_tokens)
        self.b_grid = np.array(_pow2_grid(1, self.max_batch), dtype=float)
        self.l_grid = np.array(_pow2_grid(8, self.model.max_positions), dtype=float)
        self._g = {}

    def _grid(self, phase: str) -> np.ndarray:
        if phase not in self._g:
            vals = np.empty((self.b_grid.size, self.l_grid.size))
            for i, b in enumerate(self.b_grid):
                for j, ln in enumerate(self.l_grid):
                    st = workloads.step(self.model, [int(ln)] * int(b), phase=phase)
                    toks = int(b) * (int(ln) if phase == "prefill" else 1)
                    vals[i, j], self.source = replica_time(self.c, st, chips=self.chips,
                                                           streaming=self.streaming, tokens=toks)
            self._g[phase] = vals
        return self._g[phase]

    def _interp(self, phase, b, ln):
        return _bilinear_log(self.b_grid, self.l_grid, self._grid(phase), np.atleast_1d(np.asarray(b, float)),
                             np.atleast_1d(np.asarray(ln, float)))

    def time_at(self, b: float, ln: float) -> float:
        """A static batch: prompt pass plus every reply token at the mean context, seconds."""
        ctx = min(self.model.max_positions, ln + self.output_tokens / 2)
        return float(self._interp("prefill", b, ln)[0, 0] + self.output_tokens * self._interp("decode", b, ctx)[0, 0])

    def batch_time(self, lengths) -> float:
        lengths = np.asarray(lengths)
        return self.time_at(min(lengths.size, self.max_batch), float(lengths.max()))

    def generation_model(self, serving):
        gm = getattr(self, "_gm", None)
        if gm is None:
            rows = np.arange(1, self.max_batch + 1, dtype=float)
            pl = np.arange(1, -(-self.max_prompt // self.prompt_step) + 1) * self.prompt_step
            pre = np.zeros((self.max_batch + 1, pl.size + 1))
            pre[1:, 1:] = self._interp("prefill", rows, np.minimum(pl, self.model.max_positions))
            cl = np.arange(1, -(-self.model.max_positions // self.ctx_step) + 1) * self.ctx_step
            dec = np.zeros((self.max_batch + 1, cl.size + 1))
            dec[1:, 1:] = self._interp("decode", rows, np.minimum(cl, self.model.max_positions))
            name = f"{self.c.name} x{self.chips} {self.model.name}"
            prefill = serving.ServiceModel(name + " prefill", pre, self.prompt_step, source=self.source)
            gm = serving.GenerationModel(name, prefill, dec, self.ctx_step, source=self.source)
            self._gm = gm
        return gm


# ---------------------------------------------------------------------------------------
# Serving (ipusim.serving)
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
        return self.obj.describe() if self.obj is not None else f"{self.kind}, max batch {self.max_batch}"

    def to_dict(self) -> dict:
        return {"kind": self.kind, "label": self.label, "max_batch": self.max_batch,
                "max_delay_s": self.max_delay_s if math.isfinite(self.max_delay_s) else None}


@dataclass(frozen=True)
class ServingResult:
    """Latencies (s) of one run of a policy; ``utilization`` = busy share of the replicas."""

    p50_s: float
    p99_s: float
    mean_s: float
    utilization: float
    mean_batch: float
    served: int
    source: str
    saturated: bool = False  # the run's queue would grow without bound at this rate
    busy_s: float = math.nan  # device-seconds the replicas were busy over the run

    def to_dict(self) -> dict:
        return {"p50_s": self.p50_s, "p99_s": self.p99_s, "mean_s": self.mean_s, "utilization": self.utilization,
                "mean_batch": self.mean_batch, "served": self.served, "source": self.source,
                "saturated": self.saturated, "busy_s": self.busy_s}


def simulate(arrivals, lengths, service, policy: Policy, servers: int) -> ServingResult:
    """Serve requests (``arrivals`` s, ``lengths`` tokens) with ``policy`` on ``servers`` replicas."""
    from .. import serving

    if policy.kind == "continuous":
        return _simulate_generation(serving, arrivals, lengths, service, policy, servers)
    return _simulate_serving(serving, arrivals, lengths, service, policy, servers)


def _serving_service(serving, service: ServiceModel):
    """The checklist's service table as an ``ipusim.serving.ServiceModel`` (cached on it)."""
    sm = getattr(service, "_serving_model", None)
    if sm is None:
        name = f"{service.c.name} {service.model.name} {service.mode}"
        if service.mode == "padded":
            tab = np.zeros((service.max_batch + 1, service.max_prompt + 1))
            tab[1:, 1:] = service.table()
            sm = serving.ServiceModel(name, tab, 1, source=service.source)
        else:  # rows of max_prompt tokens, packed ideally (as PackedBERT)
            tab = np.zeros((service.max_batch + 1, 2))
            tab[1:, 1] = service.table()[:, service.max_prompt - 1]
            sm = serving.ServiceModel(name, tab, service.max_prompt, packed=True, pack_len=service.max_prompt,
                                      source=service.source)
        service._serving_model = sm
    return sm


def _simulate_serving(serving, arrivals, lengths, service, policy, servers) -> ServingResult:
    sm = _serving_service(serving, service)
    lens = np.minimum(np.asarray(lengths, dtype=np.int64), service.max_prompt)
    r = serving.simulate(np.asarray(arrivals, dtype=float), lens, policy.obj, [sm] * servers,
                         latency_target_s=1.0, max_waiting=max(1000, lens.size // 4))
    d = r.summary()
    util = d["utilization"] if d["stable"] else 1.0
    return ServingResult(d["latency_p50_s"], d["latency_p99_s"] if d["stable"] else math.inf,
                         d["latency_mean_s"], util, d["mean_batch"], d["served"], SERVING_MODULE_SOURCE,
                         saturated=not d["stable"] or util >= MAX_UTILIZATION,
                         busy_s=float(np.sum(r.device_busy_s)))


SERVING_MODULE_SOURCE = "ipusim.serving simulator"


def _simulate_generation(serving, arrivals, lengths, service: GenService, policy, servers) -> ServingResult:
    """Continuous batching on ``servers`` replicas, requests dealt to them in turn."""
    gm = service.generation_model(serving)
    arrivals = np.asarray(arrivals, dtype=float)
    prompts = np.minimum(np.asarray(lengths, dtype=np.int64), service.max_prompt)
    lat, busy, iters, spans, stable = [], 0.0, 0, [], True
    for k in range(servers):
        arr, pr = arrivals[k::servers], prompts[k::servers]
        if arr.size == 0:
            continue
        r = serving.simulate_generation(arr, pr, service.output_tokens, policy.obj, gm, latency_target_s=1.0)
        d = r.summary()
        stable &= bool(d["stable"])
        lat.append(r.latency_s)
        busy += float(r.device_busy_s.sum())
        iters += r.batches
        spans.append(float(np.nanmax(r.finish_s)) - float(arr[0]))
    lat = np.concatenate(lat)
    span = max(max(spans), 1e-12)
    p99 = float(np.nanpercentile(lat, 99)) if stable else math.inf
    # utilization here is the share of time with at least one request running (not a
    # capacity measure under continuous batching); stability comes from the simulator.
    util = min(1.0, busy / (servers * span)) if stable else 1.0
    return ServingResult(float(np.nanpercentile(lat, 50)), p99, float(np.nanmean(lat)), util,
                         lat.size * service.output_tokens / max(iters, 1), int(lat.size),
                         SERVING_MODULE_SOURCE + " (continuous batching)",
                         saturated=not stable or util >= MAX_UTILIZATION, busy_s=busy)


def saturation_rate(lengths, service: ServiceModel, batch: int) -> float:
    """Requests/s one replica carries when every batch is full (``batch`` requests)."""
    batch = min(batch, service.max_batch)
    k = max(1, lengths.size // batch)
    groups = np.resize(lengths, (k, batch)) if lengths.size >= batch else lengths[None, :]
    b = groups.shape[1]
    ln = groups.max(axis=1) if service.mode == "padded" else -(-groups.sum(axis=1) // b)
    t = service.table()[b - 1, np.minimum(ln, service.max_prompt) - 1]
    return b / float(np.mean(t))


MAX_UTILIZATION = 0.97  # busy share above which a finite run counts as overloaded


def capacity_at_slo(lengths, service, policy: Policy, slo_s: float, *, servers: int = 1,
                    seed: int = 0, iters: int = 10, upper: float) -> tuple[float, ServingResult | None]:
    """Largest Poisson rate (req/s) whose simulated p99 stays within ``slo_s`` (bisection)."""
    n = lengths.size
    unit = np.cumsum(np.random.default_rng(seed).exponential(1.0, n))
    unit *= n / unit[-1]  # realised mean gap exactly 1, so the nominal rate is the real one
    # A finite run hides a slowly growing queue: cap the rate below what full batches can
    # carry (the saturation throughput), whatever the run's p99 says.
    if policy.kind != "continuous":
        sat = servers * saturation_rate(lengths, service, policy.max_batch)
        upper = min(upper, MAX_UTILIZATION * sat)
    lo, hi = upper / 1e4, upper

    def run(rate):
        return simulate(unit / rate, lengths, service, policy, servers)

    def ok(r):
        # The serving simulator flags a queue that grew during the run; servers busy
        # >= MAX_UTILIZATION of the time also count as overloaded.
        return r.p99_s <= slo_s and not r.saturated and math.isfinite(r.p99_s)

    r_lo = run(lo)
    if not ok(r_lo):
        return 0.0, r_lo
    best = r_lo
    r_hi = run(hi)
    if ok(r_hi):
        return hi, r_hi
    for _ in range(iters):
        mid = math.sqrt(lo * hi)
        r = run(mid)
        if ok(r):
            lo, best = mid, r
        else:
            hi = mid
    return lo, best
