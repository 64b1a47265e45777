"""Percentiles with their uncertainty: independent seeded replications of one serving run.

Method: ``n`` replications, each with its own seed (``numpy.random.SeedSequence(seed).spawn``,
so the streams are independent). In each, the requests that arrive in the first
``WARMUP_FRACTION`` of the run's arrival span are discarded (the queue starts empty, which
biases early latencies low), and the percentile is taken over the rest. The interval is the
Student-t interval over the ``n`` replication percentiles: mean +- t(n-1) x sd / sqrt(n), at
``CONFIDENCE``. Replications, not batch means: runs are short enough to repeat, and
independent runs need no batch-size rule. ``mean_batch`` applies the same warm-up rule to a run's
mean batch size (claim 6 averages it over replications, ``ipusim.claims.rules.BATCHING_RULE``).
"""

from __future__ import annotations

import math

import numpy as np

WARMUP_FRACTION = 0.10
"""Share of the arrival span discarded at the start of each replication (ASSUMPTION: a tenth
is many relaxation times for the loads the commands are run at; at rho 0.8 an M/M/1 queue
relaxes in about 1 / (mu (1 - sqrt(rho))^2), ~90 service times, against 2,000 discarded of
20,000 requests)."""

CONFIDENCE = 0.95

_T975 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)
"""Two-sided 95 % Student-t quantiles t(0.975, df) for df = 1 .. 30 (any statistics table); 1.96 above."""


def t_quantile(df: int) -> float:
    """t(0.975, df): the half-width factor of a 95 % interval from ``df + 1`` values."""
    if df < 1:
        raise ValueError(f"an interval needs at least 2 replications (df >= 1), got df = {df}")
    return _T975[df - 1] if df <= len(_T975) else 1.96


def seeds(seed: int, n: int) -> list[int]:
    """``n`` independent replication seeds derived from ``seed``."""
    return [int(s.generate_state(1)[0]) for s in np.random.SeedSequence(seed).spawn(n)]


def warmup_rule(warmup_fraction: float = WARMUP_FRACTION) -> str:
    """The warm-up rule in words, as the commands and the claims state it."""
    return (
        f"requests arriving in the first {warmup_fraction:.0%} of each run's arrival span discarded"
    )


def kept(arrival_s, warmup_fraction: float = WARMUP_FRACTION) -> np.ndarray:
    """Mask of the requests kept: those arriving after ``warmup_fraction`` of the arrival span."""
    a = np.asarray(arrival_s, float)
    if not 0 <= warmup_fraction < 1:
        raise ValueError(f"warmup_fraction must lie in [0, 1), got {warmup_fraction}")
    return a >= a.min() + warmup_fraction * (a.max() - a.min())


def mean_batch(result, warmup_fraction: float = WARMUP_FRACTION) -> float:
    """Mean size of the batches of a batched ``ServingResult`` that carry a request kept after the
    warm-up (``kept``): each such batch counted once, at its full size (a batch that straddles
    the cut counts whole). A run's own ``mean_batch`` counts the batches of the warm-up too, which
    starts from an empty queue and so biases a heavily loaded run's mean low."""
    ids = np.asarray(result.batch_id)
    served = ids >= 0
    if not served.any():
        raise ValueError(
            "mean_batch needs a batched run with at least one request served "
            "(generation runs have no batches)"
        )
    sizes = np.bincount(ids[served])
    # The batches carrying a kept request, in id order: a count per batch id, not np.unique
    # (which sorts or hashes every kept id; the same ids, so the same mean bit for bit).
    carried = np.bincount(
        ids[served & kept(result.arrival_s, warmup_fraction)], minlength=sizes.size
    )
    carried = carried > 0
    if not carried.any():
        raise ValueError(
            "mean_batch: no request after the warm-up was served (a run stopped early)"
        )
    return float(sizes[carried].mean())


def interval(values) -> dict:
    """Mean and 95 % Student-t interval of independent replication values."""
    v = np.asarray(values, float)
    n = v.size
    half = t_quantile(n - 1) * v.std(ddof=1) / math.sqrt(n)
    m = float(v.mean())
    return {"mean": m, "lo": float(m - half), "hi": float(m + half), "n": n}


def replicate(
    run_one, n: int, *, seed: int = 0, qs=(50.0, 99.0), warmup_fraction: float = WARMUP_FRACTION
) -> dict:
    """``run_one(seed) -> (arrival_s, latency_s)`` run ``n`` times with independent seeds;
    for each percentile in ``qs`` the interval of ``interval`` (keys ``latency_p50_s``, ...)."""
    if not isinstance(n, (int, np.integer)) or n < 2:
        raise ValueError(f"replications must be a whole number >= 2, got {n!r}")
    per = {q: [] for q in qs}
    for s in seeds(seed, int(n)):
        arr, lat = run_one(s)
        lat = np.asarray(lat, float)[kept(arr, warmup_fraction)]
        for q in qs:
            per[q].append(float(np.percentile(lat, q)))
    out = {f"latency_p{q:g}_s": interval(v) for q, v in per.items()}
    out["replications"] = int(n)
    out["warmup_rule"] = warmup_rule(warmup_fraction)
    out["interval"] = f"{CONFIDENCE:.0%} Student-t over independent seeded replications"
    return out
