"""What one sweep point computes: a registry of tasks, name -> function(point dict) -> row dict.

Each task reads its parameters from the point (a chip preset in ``chip``, chip fields to
change, and its own workload settings, with the defaults in ``TASKS[name].params``) and
returns one flat row. Tasks here use only the public functions of the models they call:

* ``simulate``: one step on one chip (``ipusim.machine.simulate``);
* ``serve``: requests through a dynamic batcher onto one chip (``ipusim.serving.simulate``
  on a service table built from ``ipusim.machine.simulate`` of that chip), reported at the
  highest arrival rate whose p99 latency meets ``slo_p99_s``;
* ``embed``: one embedding step (tables, look-ups, skew) on one or more chips
  (``ipusim.embeddings.simulate``), throughput in samples/s;
* ``train``: the fastest placement of a model's training on ``chips`` chips and the run's
  days, chip-hours, cost and energy (``ipusim.training.best_placement``, ``TrainingStep.run``);
* ``checklist``: the migration checklist's verdict for the chip against a GPU
  (``ipusim.checklist.run_checklist``);
* ``spin``: burns ``seconds`` of CPU time and returns it (to measure the sweep's own overhead).

Every task that has a throughput reports the same headline columns, so that fronts and
break-even points work on any of them: ``throughput_per_s`` (the task's unit per second),
``per_usd`` (units per US dollar of chip time), ``per_j`` (units per joule of board power,
i.e. throughput per watt), ``usd_per_million`` and the ``fit`` state (``ipusim.result``).
Prices are the placeholder chip-hour prices of ``ipusim.prices`` (ASSUMPTION, see
``ipusim.prices.PRICE_ASSUMPTION``); a changed chip keeps its preset's price unless
the point gives ``usd_per_chip_hour``.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field

import numpy as np

from .. import hardware, limits

CHIP_PARAMS = ("chip", "usd_per_chip_hour")  # every task that takes a chip reads these


@dataclass(frozen=True)
class Task:
    """A registered task: its function, its parameters with defaults, and one line on what it does."""

    name: str
    fn: object  # callable(point: dict) -> dict
    params: dict = field(default_factory=dict)  # name -> default (None: required or computed)
    doc: str = ""
    takes_chip: bool = True


TASKS: dict[str, Task] = {}


def register(name: str, *, params: dict, doc: str = "", takes_chip: bool = True):
    """Decorator: register ``fn(point) -> row`` as task ``name`` with its ``params`` defaults."""

    def deco(fn):
        TASKS[name] = Task(
            name, fn, dict(params), doc or (fn.__doc__ or "").strip().split("\n")[0], takes_chip
        )
        return fn

    return deco


def task(name: str) -> Task:
    """The registered task called ``name``."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; valid: {', '.join(sorted(TASKS))}")
    return TASKS[name]


def chip_fields(kind: str | None = None) -> tuple:
    """Names of the numeric chip fields a point may set (of one kind, or of either)."""
    classes = {
        "tile": (hardware.TileChip,),
        "gpu": (hardware.GpuChip,),
        None: (hardware.TileChip, hardware.GpuChip),
    }
    names = []
    for cls in classes[kind]:
        names += [
            f.name for f in dataclasses.fields(cls) if f.name not in ("name", "sources", "notes")
        ]
    return tuple(dict.fromkeys(names))


def check_names(task_name: str, names) -> None:
    """Raise ValueError naming any parameter that neither the task nor a chip has."""
    t = task(task_name)
    allowed = set(t.params) | (set(CHIP_PARAMS) | set(chip_fields()) if t.takes_chip else set())
    bad = [n for n in names if n not in allowed]
    if bad:
        raise ValueError(
            f"unknown parameter {bad[0]!r} for task {task_name!r}; valid: "
            f"{', '.join(sorted(allowed))}"
        )


def make_chip(point: dict):
    """The chip of a point: preset ``point["chip"]`` with any chip fields the point names changed.

    A changed chip gets a name that says so (``gc200*``) so that nothing keyed by a preset
    name mistakes it for the preset. Invalid combinations raise ValueError (the sweep records
    a refused row)."""
    base = hardware.chip(point.get("chip", "gc200"))
    own = {f.name: f for f in dataclasses.fields(base)}
    changes = {}
    for k, v in point.items():
        if k in CHIP_PARAMS or k not in chip_fields():
            continue
        if k not in own:
            raise ValueError(f"{base.kind} chip {base.name!r} has no field {k!r}")
        if own[k].type in ("int", int):
            if isinstance(v, float) and not v.is_integer():
                v = int(round(v))
            v = int(v)
        elif isinstance(v, (int, np.integer)) and not isinstance(v, bool):
            v = float(v)
        if v != getattr(base, k):
            changes[k] = v
    if not changes:
        return base
    return base.replace(name=base.name + "*", **changes)


def price_usd_per_hour(point: dict, c) -> float:
    """The point's chip-hour price: ``usd_per_chip_hour`` if given, else the preset's (ASSUMPTION)."""
    from ..prices import DEFAULT_USD_PER_CHIP_HOUR

    p = point.get("usd_per_chip_hour")
    if p is None:
        p = DEFAULT_USD_PER_CHIP_HOUR.get(c.name.rstrip("*"))
    if p is None:
        raise ValueError(f"no chip-hour price for {c.name!r}: give usd_per_chip_hour")
    return float(p)


def headline(throughput_per_s: float, power_w: float, usd_per_hour: float) -> dict:
    """The columns every throughput task shares (see the module docstring)."""
    t = float(throughput_per_s)
    return {
        "throughput_per_s": t,
        "power_w": float(power_w),
        "usd_per_chip_hour": float(usd_per_hour),
        "per_usd": t * 3600.0 / usd_per_hour,
        "per_j": t / power_w,
        "usd_per_million": usd_per_hour / 3600.0 / t * 1e6 if t > 0 else math.inf,
    }


# ------------------------------------------------------------------------------------------
# simulate
# ------------------------------------------------------------------------------------------
_SPLITS = ("compute", "sync", "exchange", "streaming", "memory", "launch")


@register(
    "simulate",
    params={
        "model": "bert-base",
        "batch": 32,
        "seq_len": 128,
        "phase": "forward",
        "packed": False,
        "chips": 1,
    },
    doc="one step on one chip or placed on `chips` chips (ipusim.machine.simulate); throughput in sequences/s",
)
def simulate(point: dict) -> dict:
    """One step of ``model`` (``batch`` sequences of ``seq_len`` tokens, ``phase``) on the point's chip.

    With ``chips`` > 1 the step is placed on up to that many chips (``machine.simulate(...,
    chips=N)``: tensor, pipeline and data parallel over the chip's links); the throughput
    columns are then the deployment's (``power_w`` and ``usd_per_hour`` for all ``chips``,
    ``usd_per_chip_hour`` for one), ``chips_used`` and the placement degrees say how it was
    placed and ``split_link_s`` is its link time. Power and price count the chips the placement
    uses (``chips_used``; the rest could serve other work)."""
    from .. import machine, workloads

    p = {**TASKS["simulate"].params, **point}
    c = make_chip(point)
    batch, seq = int(p["batch"]), int(p["seq_len"])
    chips = p["chips"]
    chips = int(chips) if isinstance(chips, float) and chips.is_integer() else chips
    pad = None if (p["packed"] or p["phase"] == "decode") else seq
    limits.check_step(batch, seq, name="batch")  # before the list of ``batch`` lengths is built
    r = machine.simulate(
        c, workloads.step(p["model"], [seq] * batch, phase=p["phase"], pad_to=pad), chips=chips
    )
    thr = r.throughput_seq_per_s if r.fits else 0.0
    price = price_usd_per_hour(point, c)
    n = int(r.placement.chips_used) if r.placement is not None else 1
    row = {
        "chip_name": r.chip,
        "kind": r.kind,
        "fit": r.fit,
        "time_s": float(r.time_s),
        **headline(thr, c.power_w * n, price * n),
        "usd_per_chip_hour": price,
        "throughput_tokens_per_s": float(r.throughput_tokens_per_s) if r.fits else 0.0,
        "energy_j": float(r.energy_j),
        "latency_s": float(r.time_s),
    }
    if chips > 1:
        pl = r.placement
        row.update(
            usd_per_hour=price * n,
            chips_used=n,
            tensor=int(pl.tensor),
            pipeline=int(pl.pipeline),
            data=int(pl.data),
            micro_batches=int(pl.micro_batches),
        )
    for k in (*_SPLITS, *(("link",) if chips > 1 else ())):
        row[f"split_{k}_s"] = float(r.split[k]) if (r.fits and k in r.split) else math.nan
    row["message"] = r.fit_message
    return row


# ------------------------------------------------------------------------------------------
# serve
# ------------------------------------------------------------------------------------------
_ROWS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)


def service_table(c, model, seq_len: int, max_batch: int):
    """``serving.ServiceModel`` of chip ``c``: every batch padded to ``seq_len`` tokens (a static
    shape, as a compiled graph runs), rows 1..``max_batch`` from ``machine.simulate``.

    Row counts on a grid are simulated; rows between two grid rows of the same fit state are
    interpolated linearly, rows between states simulated (times jump at a memory cliff).
    Cells that do not fit are ``inf``. Returns (service model, fit state per row)."""
    from .. import machine, serving, workloads

    memo = {}

    def run(b):
        if b not in memo:
            r = machine.simulate(c, workloads.step(model, [seq_len] * b, pad_to=seq_len))
            memo[b] = (float(r.time_s) if r.fits else math.inf, r.fit)
        return memo[b]

    grid = sorted({b for b in _ROWS if b < max_batch} | {max_batch})
    tab = np.zeros((max_batch + 1, 2))
    fit = [""] * (max_batch + 1)
    for b in grid:
        tab[b, 1], fit[b] = run(b)
    for a, b in zip(grid[:-1], grid[1:], strict=True):
        (ta, fa), (tb, fb) = run(a), run(b)
        for r in range(a + 1, b):
            if fa == fb and math.isfinite(ta):
                tab[r, 1] = ta + (tb - ta) * (r - a) / (b - a)
                fit[r] = fa
            elif fa == fb:
                tab[r, 1], fit[r] = math.inf, fa
            else:
                tab[r, 1], fit[r] = run(r)
    return serving.ServiceModel(
        f"{c.name} {model} padded {seq_len}", tab, seq_len, source="machine"
    ), fit


def _serve_at(rate, n, seq_len, pol, svc, slo, seed):
    from .. import arrivals, serving

    arr = arrivals.poisson(rate, n, seed=seed)
    return serving.simulate(
        arr,
        np.full(n, seq_len),
        pol,
        svc,
        latency_target_s=slo,
        seed=seed,
        max_waiting=max(1000, n // 5),
    ).summary()


@register(
    "serve",
    params={
        "model": "bert-base",
        "seq_len": 128,
        "max_batch": 32,
        "rate_per_s": None,
        "slo_p99_s": 0.05,
        "max_delay_s": 0.002,
        "n_requests": 2000,
        "seed": 0,
        "search_steps": 11,
    },
    doc="dynamic batching on one chip (ipusim.serving.simulate); throughput in requests/s at the p99 target",
)
def serve(point: dict) -> dict:
    """Requests of ``seq_len`` tokens (Poisson) through ``policies.Dynamic(b, max_delay_s)`` onto
    the point's chip, ``b`` the largest batch up to ``max_batch`` that fits.

    With ``rate_per_s`` given, the run at that rate; without, the capacity at ``slo_p99_s``
    (``serving.capacity_at``: ``search_steps`` bisections in log rate below the table's peak
    capacity, the run stable, p99 latency <= ``slo_p99_s`` and busy less than
    ``serving.capacity.MAX_UTILIZATION`` of the time). ``throughput_per_s`` is that run's
    served requests/s (0 when even the lowest rate misses the target). The default 11 steps
    bracket the capacity within a factor ``1e4 ** (2 ** -11)``, 0.45 %."""
    from .. import policies
    from ..serving import capacity

    p = {**TASKS["serve"].params, **point}
    c = make_chip(point)
    seq, bmax, n = int(p["seq_len"]), int(p["max_batch"]), int(p["n_requests"])
    slo, seed = float(p["slo_p99_s"]), int(p["seed"])
    svc, fit = service_table(c, p["model"], seq, bmax)
    t = svc.table[1:, 1]
    b = capacity.largest_batch(svc, seq)  # rows 1..b all fit
    row = {"chip_name": c.name, "kind": c.kind}
    price = price_usd_per_hour(point, c)
    if b == 0:
        return {
            **row,
            "fit": fit[1],
            "largest_batch": 0,
            **headline(0.0, c.power_w, price),
            "message": f"no batch of {seq}-token requests fits {c.name}",
        }
    pol = policies.Dynamic(b, float(p["max_delay_s"]))
    peak = float(np.max(np.arange(1, b + 1) / t[:b]))
    if p["rate_per_s"] is not None:
        s = _serve_at(float(p["rate_per_s"]), n, seq, pol, svc, slo, seed)
        good = s["stable"] and s["latency_p99_s"] <= slo
    else:
        rate, r = capacity.capacity_at(
            slo,
            np.full(n, seq),
            pol,
            [svc],
            top=peak,
            iters=int(p["search_steps"]),
            seed=seed,
            max_waiting=max(1000, n // 5),
            latency_target_s=slo,
        )
        s, good = r.summary(), rate > 0
    thr = s["throughput_rps"] if good else 0.0
    return {
        **row,
        "fit": fit[b],
        "largest_batch": b,
        "batch_time_s": float(t[b - 1]),
        "peak_rps": peak,
        **headline(thr, c.power_w, price),
        "offered_rps": s["offered_rps"],
        "meets_slo": bool(good),
        "stable": bool(s["stable"]),
        "latency_p50_s": s["latency_p50_s"],
        "latency_p90_s": s["latency_p90_s"],
        "latency_p99_s": s["latency_p99_s"],
        "latency_p999_s": s["latency_p999_s"],
        "mean_batch": s["mean_batch"],
        "utilization": s["utilization"],
        "message": ""
        if good
        else (s["unstable_reason"] or f"p99 {s['latency_p99_s']:.4g} s > target {slo:g} s"),
    }


# ------------------------------------------------------------------------------------------
# embed
# ------------------------------------------------------------------------------------------
@register(
    "embed",
    params={
        "n_tables": 26,
        "rows": 1_000_000,
        "dim": 128,
        "pooling": 1,
        "batch": 2048,
        "zipf": 0.0,
        "training": False,
        "chips": 1,
        "cache": True,
        "seed": 0,
    },
    doc="one embedding step on chips of one kind (ipusim.embeddings.simulate); throughput in samples/s",
)
def embed(point: dict) -> dict:
    """``n_tables`` uniform tables of ``rows`` x ``dim`` (FP32), ``pooling`` look-ups per table per
    sample, ``batch`` samples, Zipf skew ``zipf``, on ``chips`` copies of the point's chip."""
    from .. import embeddings

    p = {**TASKS["embed"].params, **point}
    c = make_chip(point)
    tabs = embeddings.uniform_tables(
        int(p["n_tables"]), int(p["rows"]), int(p["dim"]), int(p["pooling"])
    )
    w = embeddings.Workload(
        f"{int(p['n_tables'])} x {int(p['rows'])} x {int(p['dim'])}",
        tabs,
        int(p["batch"]),
        zipf=float(p["zipf"]),
        training=bool(p["training"]),
    )
    r = embeddings.simulate(
        c, w, chips=int(p["chips"]), cache=bool(p["cache"]), seed=int(p["seed"])
    )
    ok = r.fits and math.isfinite(r.time_s)
    price = price_usd_per_hour(
        point, c
    )  # one chip's; the cluster's columns are for r.chips of them
    row = {
        "chip_name": r.chip,
        "kind": r.kind,
        "fit": r.fit,
        "time_s": float(r.time_s),
        **headline(r.samples_per_s if ok else 0.0, r.power_w, price * r.chips),
        "usd_per_chip_hour": price,
        "lookups_per_s": float(r.lookups_per_s) if ok else 0.0,
        "hit_rate": float(r.hit_rate),
        "energy_j": float(r.energy_j),
        "message": r.fit_message,
    }
    for k in ("compute", "sync", "exchange", "streaming", "memory", "launch", "links"):
        row[f"split_{k}_s"] = float(r.split[k]) if (ok and k in r.split) else math.nan
    return row


# ------------------------------------------------------------------------------------------
# train
# ------------------------------------------------------------------------------------------
_TRAIN_SPLITS = (
    "ops_compute",
    "ops_exchange",
    "ops_sync",
    "ops_streaming",
    "ops_memory",
    "ops_launch",
    "recompute",
    "tensor_parallel",
    "pipeline_bubble",
    "pipeline_p2p",
    "data_parallel",
    "optimizer",
)
"""training.model.evaluate's split: the ops' machine-model categories (``ops_``: a tile chip's
compute, exchange, sync, streaming; a GPU's compute, memory, launch), recomputation, then the
collectives, the pipeline and the optimizer; a category a chip does not have is NaN."""


def _modes(value, allowed, what):
    """``"any"`` -> every mode in ``allowed``; one mode -> a 1-tuple (validated by ``training``)."""
    if isinstance(value, str) and value.strip().lower() == "any":
        return tuple(allowed)
    if what == "sharding":
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float, np.integer))
            or value not in allowed
        ):
            raise ValueError(f"sharding must be 0, 1, 2, 3 or 'any', got {value!r}")
        return (int(value),)
    return (str(value),)


@register(
    "train",
    params={
        "model": "llama-2-70b",
        "chips": 1024,
        "tokens": 2e12,
        "seq_len": None,
        "global_batch": None,
        "recompute": "any",
        "sharding": "any",
        "usd_per_kwh": None,
    },
    doc="the fastest training placement on `chips` chips (ipusim.training.best_placement); throughput in tokens/s",
)
def train(point: dict) -> dict:
    """The fastest placement of ``model``'s training step on ``chips`` copies of the point's chip
    (``ipusim.training.best_placement``; ``seq_len``/``global_batch`` default to the model's
    published recipe, ``recompute``/``sharding`` to "any": every mode searched), and the whole
    run on ``tokens`` tokens (``TrainingStep.run``): days, chip-hours, cost (chip-hours at the
    point's price plus energy at ``usd_per_kwh``, both placeholder ASSUMPTIONS unless given) and
    energy (board power x time, an upper bound).

    A point where no placement fits is a row with ``fit == "does_not_fit"``, zero throughput,
    infinite time and cost, and ``message`` saying what does not fit and how many chips would;
    inputs the training model refuses (a batch that splits over no placement, a chip without
    links on more than one chip) raise, and the sweep records a refused row.

    Throughput columns are for the whole cluster: ``throughput_per_s`` is tokens/s,
    ``power_w`` the cluster's board power, ``usd_per_hour`` its price per hour;
    ``usd_per_chip_hour`` stays the price of one chip."""
    from .. import training

    p = {**TASKS["train"].params, **point}
    c = make_chip(point)
    chips = p["chips"]
    if isinstance(chips, float) and chips.is_integer():
        chips = int(chips)
    rc = _modes(p["recompute"], training.RECOMPUTE, "recompute")
    z = _modes(p["sharding"], training.SHARDING, "sharding")
    opt = {
        k: (int(p[k]) if isinstance(p[k], float) and float(p[k]).is_integer() else p[k])
        for k in ("seq_len", "global_batch")
        if p[k] is not None
    }
    r = training.best_placement(
        p["model"], c, chips, recompute=rc, sharding=z, explain=False, **opt
    )
    price = price_usd_per_hour(point, c)
    kwh = None if p["usd_per_kwh"] is None else float(p["usd_per_kwh"])
    fits = r.fit != "does_not_fit"
    run = r.run(float(p["tokens"]), usd_per_chip_hour=price, usd_per_kwh=kwh)
    pl = r.placement
    row = {
        "chip_name": r.chip,
        "kind": r.kind,
        "fit": r.fit,
        "time_s": float(r.step_time_s),
        "step_time_s": float(r.step_time_s),
        **headline(r.tokens_per_s if fits else 0.0, r.power_w * r.chips, price * r.chips),
        "usd_per_chip_hour": price,
        "usd_per_hour": price * r.chips,
        "tokens_per_s": float(r.tokens_per_s) if fits else 0.0,
        "mfu": float(r.mfu) if fits else 0.0,
        "hfu": float(r.hfu) if fits else 0.0,
        "seq_len_used": r.seq_len,
        "global_batch_used": r.global_batch,
        "data": pl.data,
        "tensor": pl.tensor,
        "pipeline": pl.pipeline,
        "micro_batch": pl.micro_batch,
        "recompute_used": pl.recompute,
        "sharding_used": pl.sharding,
        "micro_batches": r.micro_batches,
        "memory_per_chip_bytes": r.memory_total_bytes,
        "days": float(run.days),
        "chip_hours": float(run.chip_hours),
        "cost_usd": float(run.cost_usd),
        "energy_kwh": float(run.energy_kwh),
        "energy_j": float(run.energy_kwh) * 3.6e6,
        "message": r.fit_message,
    }
    unknown = set(r.split) - set(_TRAIN_SPLITS)
    if unknown:
        raise ValueError(
            f"training split categories {sorted(unknown)} have no sweep column (_TRAIN_SPLITS)"
        )
    for k in _TRAIN_SPLITS:
        row[f"split_{k}_s"] = float(r.split[k]) if (fits and k in r.split) else math.nan
    return row


# ------------------------------------------------------------------------------------------
# checklist
# ------------------------------------------------------------------------------------------
@register(
    "checklist",
    params={
        "gpu": "a100-80gb",
        "model": "bert-base",
        "rate_per_s": 300.0,
        "slo_p99_s": 0.05,
        "long_fraction": 0.4,
        "seed": 0,
    },
    doc="the migration checklist's verdict for the chip against a GPU (ipusim.checklist)",
)
def checklist(point: dict) -> dict:
    """Run the checklist (inference checks, no training) on the point's chip against ``gpu``."""
    from .. import checklist as cl

    p = {**TASKS["checklist"].params, **point}
    c = make_chip(point)
    g = hardware.chip(p["gpu"])
    prices = cl.Prices().with_prices({c.name: price_usd_per_hour(point, c)})
    case = cl.Case(
        model=p["model"],
        rate_per_s=float(p["rate_per_s"]),
        slo_p99_s=float(p["slo_p99_s"]),
        long_fraction=float(p["long_fraction"]),
        candidates=(cl.Candidate(c), cl.Candidate(g)),
        prices=prices,
        seed=int(p["seed"]),
    )
    rep = cl.run_checklist(case, show_progress=False)
    row = {
        "chip_name": c.name,
        "kind": c.kind,
        "gpu": g.name,
        "decision": rep.decision,
        "score": float(rep.verdict.score),
        "veto": rep.verdict.veto,
    }
    for cid, chk in rep.checks.items():
        row[f"{cid}_status"] = chk.status
    return row


# ------------------------------------------------------------------------------------------
# spin (for measuring the sweep machinery)
# ------------------------------------------------------------------------------------------
SPIN_CHUNK = 100  # loop steps of arithmetic between two reads of the thread's CPU clock (5-10 us)


@register(
    "spin",
    params={"seconds": 0.001, "rep": 0},
    takes_chip=False,
    doc="burn `seconds` of CPU in a busy loop and return it (measures the sweep's overhead)",
)
def spin(point: dict) -> dict:
    """Busy-loop until this thread has used ``seconds`` of CPU time (a fixed amount of work: on a
    busy machine it takes longer than ``seconds`` of wall time, as a real point would) and return
    the seconds asked for (``rep``, a replicate number, only makes otherwise equal points distinct).

    The loop does ``SPIN_CHUNK`` steps of floating-point arithmetic between reads of the clock:
    the thread's CPU clock is a system call (no vDSO), so reading it every step made a point
    mostly kernel time, unlike a real point's Python and Numba arithmetic. A point overshoots
    ``seconds`` by at most one chunk (5-10 us, under 1% of a 1 ms point), the same in every mode."""
    s = float(point.get("seconds", TASKS["spin"].params["seconds"]))
    if not (s >= 0 and math.isfinite(s)):
        raise ValueError(f"seconds must be finite and >= 0, got {s!r}")
    end = time.thread_time() + s
    x = 0.0
    while time.thread_time() < end:
        for _ in range(SPIN_CHUNK):
            x = x * 0.5 + 1.0
    return {"spun_s": s}


def warm_up() -> None:
    """Load the Numba caches of the machine models (one small step on a tile chip and a GPU)."""
    from .. import machine, workloads

    s = workloads.step("bert-base", [16], pad_to=16)
    machine.simulate("gc200", s)
    machine.simulate("a100-80gb", s)
