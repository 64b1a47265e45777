"""The serving capacity questions, answered in one place.

* ``largest_batch(device, length)``: the most sequences of ``length`` tokens one step of a
  device holds (the fit rule of the machine model): read from a ``ServiceModel``'s table, or
  searched on the machine model for a ``tables.Replica`` (cached in memory and on disk).
* ``capacity_at(target_s, lengths, policy, devices, top=...)``: the largest Poisson arrival rate
  (req/s) whose simulated p99 latency stays within ``target_s`` and whose run is not saturated
  (stable, busy less than ``MAX_UTILIZATION`` of the time), and the ``ServingResult`` there.
  Bisection in log rate between ``top / 1e4`` and ``top``; every probe runs the same requests
  (one Poisson draw at unit mean gap, scaled to the rate), so probes differ only in the rate.
  ``CapacitySearch`` is the same search with a head start, for a caller that weighs many
  policies (the checklist). ``tests/test_serving_capacity.py`` holds the plain bisection it is
  checked against.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from . import batching, result, table_cache, tables
from .plan import make_plan, with_arrivals
from .service import ServiceModel

MAX_UTILIZATION = 0.97  # busy share above which a finite run counts as overloaded


# ---------------------------------------------------------------------------------------
# Largest batch
# ---------------------------------------------------------------------------------------
def largest_batch(device, length: int, phases=("forward",), *, cap: int = 256) -> int:
    """Most sequences of ``length`` tokens whose step fits ``device``; 0 if none.

    ``device``: a ``ServiceModel`` (its table's first row without a time at ``length``, padded;
    ``ServiceModel.fit_limit``, at most its ``max_rows``), or a ``tables.Replica`` (0..``cap``
    sequences fitting one chip of the replica in every phase of ``phases``: tile chips
    ``tiles.tile_memory_batch_limit`` (the per-tile memory limit), GPUs and placements
    bisection on the machine model's fit; assumes fitting is monotone in the batch; cached in
    memory and on disk beside the tables, with the same key: code, chip, model, calibration).
    """
    if isinstance(device, ServiceModel):
        return device.fit_limit(length)
    if not isinstance(device, tables.Replica):
        raise ValueError(
            f"device must be a serving.ServiceModel or a serving.tables.Replica, "
            f"got {type(device).__name__}"
        )
    length, phases, cap = int(length), tuple(phases), int(cap)
    return int(
        tables.cached(
            lambda: [_largest_replica_batch(device, length, phases, cap)],
            "largest batch",
            device,
            length,
            phases,
            cap,
            shape=(1,),
            check=lambda t: table_cache.count_check(t, cap),
        )[0]
    )


def _largest_replica_batch(spec, length, phases, cap):
    from .. import tiles, workloads

    if spec.tensor:  # the placement's fit (assumed monotone in the batch, as below)

        def fits(rows, ph):
            pad = None if ph == "decode" else int(length)
            return math.isfinite(
                tables.replica_step_s(
                    spec, workloads.step(spec.model, [int(length)] * rows, phase=ph, pad_to=pad)
                )[0]
            )

        best = cap
        for ph in phases:
            # doubling first (the powers of two are the coarse tables' rows: their results are
            # cached for the tables), then bisection between the last fit and the first misfit
            lo, hi = 0, 1
            while hi <= best and fits(hi, ph):
                lo, hi = hi, 2 * hi
            hi = min(hi, best + 1) - 1
            while lo < hi:
                mid = (lo + hi + 1) // 2
                lo, hi = (mid, hi) if fits(mid, ph) else (lo, mid - 1)
            best = lo
            if best == 0:
                return 0
        return best
    m = tables.stage_model(spec.model, spec.chips)
    best = cap
    for ph in phases:
        if spec.chip.kind == "tile":
            s = workloads.step(m, [int(length)] * best, phase=ph)
            best = min(
                best,
                tiles.tile_memory_batch_limit(spec.chip, s, weights_on_chip=not spec.streaming),
            )
        else:
            lo, hi = 0, best
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if tables.step_result(
                    dataclasses.replace(spec, chips=1, model=m),
                    workloads.step(m, [int(length)] * mid, phase=ph),
                ).fits:
                    lo = mid
                else:
                    hi = mid - 1
            best = lo
        if best == 0:
            return 0
    return best


# ---------------------------------------------------------------------------------------
# Capacity at a latency target
# ---------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=8)
def unit_arrivals(n: int, seed: int) -> np.ndarray:
    """``n`` Poisson arrival times at mean gap 1 (realised mean exactly 1), read-only."""
    unit = np.cumsum(np.random.default_rng(seed).exponential(1.0, n))
    unit *= n / unit[-1]  # realised mean gap exactly 1, so the nominal rate is the real one
    unit.setflags(write=False)
    return unit


class Probe:
    """The same requests (``lengths`` tokens, arrivals ``unit`` at unit mean gap) run at any rate:
    the serving plan (service tables, queues, policy) is built once and only the arrival times
    change. ``run``: a function of the arrival times (s) returning a ``ServingResult``, used
    instead of the plan when given (e.g. ``serving.simulate_generation``).

    ``passes(rate)`` says whether the run at ``rate`` meets ``target_s`` at the p99, is stable
    and busy less than ``MAX_UTILIZATION`` of the time; a run stops as soon as more requests
    are later than ``target_s`` than a p99 within it allows (``batching.run_plan``'s
    ``late_limit``): the answer "no" is then certain. ``result(rate)`` is the whole run at
    ``rate`` as ``serving.simulate`` returns it (seed 0, ``max_waiting``, goodput at
    ``latency_target_s``). ``max_utilization`` replaces ``MAX_UTILIZATION``; above 1 it turns
    that gate off, as continuous batching needs: its devices count as busy whenever any sequence
    runs, so it saturates only when its queue grows (``stable``).
    """

    def __init__(
        self,
        unit,
        lengths,
        policy,
        devices,
        target_s: float,
        *,
        max_waiting: int | None = None,
        latency_target_s: float = 1.0,
        run=None,
        max_utilization: float = MAX_UTILIZATION,
    ):
        self.unit, self.lengths, self.policy, self.devs = unit, lengths, policy, list(devices)
        self.max_utilization = max_utilization
        self.target_s, self.latency_target_s, self.max_waiting, self.run = (
            target_s,
            latency_target_s,
            max_waiting,
            run,
        )
        self.plan = None
        self.kept: dict = {}
        if run is None:
            lens = np.asarray(lengths, dtype=np.int64)
            # seed 0 as serving.simulate; a writable copy: a read-only array is another Numba
            # type (one more cached kernel to load)
            self.plan = make_plan(np.array(unit), lens, policy, self.devs, None, 0, max_waiting)
            n = lens.size
            self.late_limit = n - result.percentile_rank(99.0, n)

    def _whole(self, rate: float):
        if self.run is not None:
            return self.run(self.unit / rate)
        return batching.simulate(
            self.unit / rate,
            self.lengths,
            self.policy,
            self.devs,
            latency_target_s=self.latency_target_s,
            max_waiting=self.max_waiting,
        )

    def passes(self, rate: float) -> bool:
        if self.plan is None:
            r = self.kept[rate] = self._whole(rate)
        else:
            plan = with_arrivals(self.plan, self.unit / rate)
            out = batching.run_plan(plan, late_s=self.target_s, late_limit=self.late_limit)
            if out[-1][1] == 2:  # stopped: the p99 is above the target
                return False
            r = self.kept[rate] = batching.result_of(
                plan, self.devs, self.policy, out, self.latency_target_s, capacity=False
            )
        v = r.slo_view(99.0)
        return (
            v["stable"]
            and v["latency_q_s"] <= self.target_s
            and v["utilization"] < self.max_utilization
        )

    def result(self, rate: float):
        """The run at ``rate`` as ``serving.simulate`` (or ``run``) returns it."""
        r = self.kept.get(rate)
        if r is None:  # a run stopped as soon as it failed: run it whole
            return self._whole(rate)
        if self.plan is not None:
            r = dataclasses.replace(r, capacity_rps=batching.capacity_rps(self.devs, self.plan))
        return r


class CapacitySearch:
    """``capacity_at``'s bisection of one policy, with a head start for a search over many policies.

    ``run(above, guess=True)`` first runs the rate the bisection reaches after ``GUESS_STEPS``
    passing probes (``1e4 ** -(2 ** -GUESS_STEPS)`` x ``top``, 0.56 x ``top``). If it passes, the
    bisection goes on from there and takes the lower probes of that path (``top / 1e4`` and
    the first midpoints) as passing without running them: where the probes pass and fail as
    the rate rises (a slower rate is no harder to serve), the answer is exactly the
    bisection's. Where that fails, the answer found is at least the bisection's (a lower
    probe that fails would have ended below the guess), so a caller that picks the best of
    several policies need only ``verify()`` the winner's assumed probes: if they pass, its
    capacity is exactly the bisection's and no other policy's bisection can be higher;
    if not, search again without the head start.

    ``probe``: a function returning the ``Probe`` (built on the first run).
    """

    GUESS_STEPS = 4

    def __init__(self, probe, top: float, *, iters: int = 10):
        self.top, self.iters = float(top), int(iters)
        self._make_probe = probe
        self.known: dict = {}  # rate -> passes (run)
        self.assumed: list = []  # rates taken as passing without a run

    @functools.cached_property
    def probe(self) -> Probe:
        return self._make_probe()

    def _passes(self, rate: float) -> bool:
        if rate not in self.known:
            if rate in self.assumed:
                return True
            self.known[rate] = self.probe.passes(rate)
        return self.known[rate]

    def run(self, above: float = -math.inf, guess: bool = False):
        """(capacity req/s, ``ServingResult`` there), or (None, None) once the capacity is known
        to be at most ``above``."""
        lo, hi = self.top / 1e4, self.top
        if hi <= above:
            return None, None
        if guess and self.iters >= self.GUESS_STEPS:
            path = [lo]  # the rates the bisection tries while every probe passes
            for _ in range(self.GUESS_STEPS):
                path.append(math.sqrt(path[-1] * hi))
            if self._passes(path[-1]):
                self.assumed = [r for r in path[:-1] if r not in self.known]
        if not self._passes(lo):
            return 0.0, self.probe.result(lo)
        best = lo
        if self._passes(hi):
            return hi, self.probe.result(hi)
        for _ in range(self.iters):
            if hi <= above:
                return None, None
            mid = math.sqrt(lo * hi)
            if self._passes(mid):
                lo = best = mid
            else:
                hi = mid
        return lo, self.probe.result(best)

    def verify(self) -> bool:
        """Run the rates ``run`` assumed to pass; True if every one does."""
        assumed, self.assumed = self.assumed, []
        return all(self._passes(r) for r in assumed)


def capacity_search(
    target_s: float,
    lengths,
    policy,
    devices,
    *,
    top: float,
    iters: int = 10,
    seed: int = 0,
    max_waiting: int | None = None,
    latency_target_s: float = 1.0,
    run=None,
    max_utilization: float = MAX_UTILIZATION,
) -> CapacitySearch:
    """The ``CapacitySearch`` of ``capacity_at`` (same arguments), not yet run."""
    lengths = np.asarray(lengths, dtype=np.int64)

    def probe():
        return Probe(
            unit_arrivals(lengths.size, seed),
            lengths,
            policy,
            devices,
            target_s,
            max_waiting=max_waiting,
            latency_target_s=latency_target_s,
            run=run,
            max_utilization=max_utilization,
        )

    return CapacitySearch(probe, top, iters=iters)


def capacity_at(
    target_s: float,
    lengths,
    policy,
    devices,
    *,
    top: float,
    iters: int = 10,
    seed: int = 0,
    above: float = -math.inf,
    max_waiting: int | None = None,
    latency_target_s: float = 1.0,
    run=None,
    max_utilization: float = MAX_UTILIZATION,
):
    """(capacity req/s, ``ServingResult`` there): the largest Poisson rate whose run of requests of
    ``lengths`` tokens through ``policy`` onto ``devices`` (``ServiceModel`` list) has a p99
    latency within ``target_s`` (s) and is not saturated (see the module docstring).

    Bisection in log rate between ``top / 1e4`` and ``top`` (req/s), ``iters`` steps: the
    capacity is within a factor ``1e4 ** (2 ** -iters)`` below a rate that fails (0 if
    ``top / 1e4`` fails, ``top`` if ``top`` passes); the result is the run at the capacity (at
    the lowest rate tried if none passes). Arrivals: one Poisson draw from ``seed`` at unit mean
    gap (``unit_arrivals``), scaled to each rate. ``max_waiting``, ``latency_target_s``: as in
    ``serving.simulate``; ``run``, ``max_utilization``: see ``Probe``.

    ``above`` (req/s): a caller that only wants a capacity greater than ``above`` gets
    ``(None, None)`` as soon as the upper end of the search is at most ``above``, without the
    remaining probes: the capacity would be at most ``above`` too.
    """
    return capacity_search(
        target_s,
        lengths,
        policy,
        devices,
        top=top,
        iters=iters,
        seed=seed,
        max_waiting=max_waiting,
        latency_target_s=latency_target_s,
        run=run,
        max_utilization=max_utilization,
    ).run(above)
