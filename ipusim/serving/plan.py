"""From a serving run's inputs to the arrays the event kernel reads: ``make_plan`` and ``Plan``.

``make_plan`` checks the requests (arrival times, lengths), the policy and the devices
(every batch the policy may send must fit each device that may run it), splits the
requests into queues (one, one per length bucket, or one per pool of a ``Router``) and
puts the service-time tables and the policy's numbers into a ``Plan``; ``batching`` runs it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from numba import njit

from .. import policies as P
from .._validate import lengths_array, positive
from .service import MAX_LENGTH, ServiceModel

DEFAULT_SEED = 0
# The CLI's cap on requests per run. A run holds about 100 bytes per request (arrival, length,
# batch id, start, finish and device once read per request, and the summary's temporaries; measured in
# tests/test_serving.py::test_ten_million_requests_stay_within_100_bytes_each), so 20 million
# requests need about 2 GB: the most a laptop-sized machine holds without being OOM-killed.
MAX_REQUESTS = 20_000_000
BYTES_PER_REQUEST = 100

# Policy kinds inside the kernel
STATIC, DYNAMIC, TOKEN, ADAPTIVE = 0, 1, 2, 3


@dataclass(frozen=True)
class Router:
    """Hybrid pool: requests of at most ``threshold`` tokens go to ``short_devices``, longer to ``long_devices``.

    Device numbers index the ``devices`` list given to ``simulate``; each pool runs the
    policy on its own queue.
    """

    threshold: int = 256  # tokens
    short_devices: tuple = (0,)
    long_devices: tuple = (1,)

    def __post_init__(self):
        positive("Router.threshold", self.threshold, integer=True)
        s, lg = tuple(self.short_devices), tuple(self.long_devices)
        if not s or not lg or set(s) & set(lg):
            raise ValueError("Router needs non-empty, disjoint short_devices and long_devices")
        object.__setattr__(self, "short_devices", s)
        object.__setattr__(self, "long_devices", lg)


@dataclass(frozen=True)
class Plan:
    """Everything the kernel (and the tests' reference) reads, as arrays (built by ``make_plan``)."""

    arrival: np.ndarray  # float64 [n], sorted, s
    lengths: np.ndarray  # int64 [n], tokens (kept wide: int32 would wrap lengths >= 2**31)
    mult: np.ndarray  # float64 [n] Exp(1) service multipliers (exp service) or [0]
    qidx: np.ndarray  # int32 [n] request ids by queue then arrival (n <= MAX_REQUESTS < 2**31), or [0] for one queue
    qoff: np.ndarray  # int64 [nq + 1]
    serves: np.ndarray  # bool [nd, nq]
    dev_model: np.ndarray  # int64 [nd]
    tables: np.ndarray  # float64 [n_models, R + 1, J + 1], s
    m_len_step: np.ndarray  # int64 [n_models]
    m_packed: np.ndarray  # bool
    m_pack_len: np.ndarray  # int64
    m_rand: np.ndarray  # bool
    m_rows: np.ndarray  # int64: rows of each model's own table
    kind: int  # STATIC, DYNAMIC, TOKEN or ADAPTIVE
    q_batch: np.ndarray  # int64 [nq]
    q_delay: np.ndarray  # float64 [nq], s
    budget: int  # tokens (TOKEN)
    pad_full: bool  # STATIC: run the full compiled batch
    pref_min: int  # smallest preferred size, 0 if none
    pref: np.ndarray  # int64 ascending
    ad_target: float  # s (ADAPTIVE)
    ad_util: float
    ad_window: int
    max_waiting: int
    length_mean: float = float(
        "nan"
    )  # tokens, the mean request length (``capacity_rps``); NaN: not counted


def as_devices(devices) -> list[ServiceModel]:
    """``devices`` as a list of ``ServiceModel`` (one per device)."""
    if isinstance(devices, ServiceModel):
        return [devices]
    devs = list(devices)
    if not devs or not all(isinstance(d, ServiceModel) for d in devs):
        raise ValueError(
            "devices must be a ServiceModel or a non-empty list of them "
            "(see chip_service, fixed_service, exponential_service)"
        )
    return devs


_UNSORTED = (
    "arrival_s must be sorted ascending and finite (results are per request in arrival order)"
)


def arrival_array(arrival_s, *, order: bool = True) -> np.ndarray:
    """Arrival times as a float64 array (no copy when already one), checked sorted and finite
    (``order=False``: the first and last checked only; the caller checks the order)."""
    arr = np.asarray(arrival_s, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError("arrival_s must be a non-empty one-dimensional array of times (s)")
    if not (np.isfinite(arr[0]) and np.isfinite(arr[-1])) or arr[0] < 0:
        raise ValueError("arrival_s must hold finite times >= 0 (s)")
    if order and not _ordered(arr):
        raise ValueError(_UNSORTED)
    return arr


@njit(cache=True)
def _sorted_finite(a):
    for i in range(1, a.shape[0]):
        if not a[i] >= a[i - 1]:  # also false for NaN
            return False
    return True


@njit(cache=True)
def _min_max(a):
    lo = a[0]
    hi = a[0]
    for x in a:
        if x < lo:
            lo = x
        if x > hi:
            hi = x
    return lo, hi


@njit(cache=True)
def _requests_pass(arrival, lengths):
    """One pass over a run's requests (same size): (arrival sorted and finite, smallest
    length, largest length, sum of lengths); the sum wraps if the lengths are beyond
    ``MAX_LENGTH`` (the caller refuses those)."""
    ordered = True
    lo = lengths[0]
    hi = lengths[0]
    total = lengths[0]
    for i in range(1, arrival.shape[0]):
        ordered &= (
            arrival[i] >= arrival[i - 1]
        )  # also false for NaN; no branch: the loop vectorises
        x = lengths[i]
        lo = min(lo, x)
        hi = max(hi, x)
        total += x
    return ordered, lo, hi, total


# requests up to which make_plan's checks run in NumPy (well under a millisecond for 100,000)
# rather than compile the three kernels above (a few tenths of a second of CPU, cold)
_CHECK_NUMPY_MAX = 1 << 20


def _ordered(a) -> bool:
    """``_sorted_finite(a)``: in NumPy up to ``_CHECK_NUMPY_MAX`` entries (NaN compares false)."""
    if a.shape[0] <= _CHECK_NUMPY_MAX:
        return bool(np.all(a[1:] >= a[:-1]))
    return _sorted_finite(a)


def _lo_hi(values):
    """``_min_max(values)``: in NumPy up to ``_CHECK_NUMPY_MAX`` entries."""
    if values.shape[0] <= _CHECK_NUMPY_MAX:
        return values.min(), values.max()
    return _min_max(values)


def requests_pass(arrival, lengths):
    """``_requests_pass``'s numbers (the sum of int64 lengths wraps alike: integer addition),
    in NumPy up to ``_CHECK_NUMPY_MAX`` requests."""
    if arrival.shape[0] <= _CHECK_NUMPY_MAX:
        return _ordered(arrival), lengths.min(), lengths.max(), lengths.sum()
    return _requests_pass(arrival, lengths)


def token_array(name: str, values, n: int) -> np.ndarray:
    """Per-request token counts as int64 (a scalar repeats); whole numbers >= 1, one per request."""
    return tokens_and_max(name, values, n)[0]


def tokens_and_max(name, values, n):
    """(``token_array(name, values, n)``, its largest value)."""
    return _tokens_sum(name, values, n)[:2]


def _tokens_sum(name, values, n, arrival=None):
    """(``token_array``, its largest value, its sum or None when not counted); with ``arrival``
    (float64, n, ends checked by ``arrival_array(order=False)``), first checks it is sorted,
    in the same pass as the lengths when they are already an int64 array."""
    if np.isscalar(values) or np.ndim(values) == 0:
        if arrival is not None and not _ordered(arrival):
            raise ValueError(_UNSORTED)
        v = positive(name, values, integer=True)
        return np.full(n, v, dtype=np.int64), v, v * n
    fast = (
        isinstance(values, np.ndarray)
        and values.dtype == np.int64
        and values.ndim == 1
        and values.size
    )
    if arrival is not None:
        if fast and values.size == n:
            ordered, lo, hi, total = requests_pass(arrival, values)
            if not ordered:
                raise ValueError(_UNSORTED)
            if lo < 1:
                raise ValueError(f"{name} must be >= 1 token each; smallest given is {lo}")
            return values, int(hi), int(total)
        if not _ordered(arrival):
            raise ValueError(_UNSORTED)
    if fast:
        lo, hi = _lo_hi(values)
        if lo < 1:
            raise ValueError(f"{name} must be >= 1 token each; smallest given is {lo}")
        arr = values
    else:
        arr = lengths_array(name, values)  # int64: no narrowing, so 1e12 tokens is rejected below
        hi = arr.max()
    if arr.size != n:
        raise ValueError(
            f"{name} has {arr.size} entries, arrival_s has {n}: give one length per request (token counts)"
        )
    return arr, int(hi), None


def make_plan(
    arrival_s, lengths, policy, devices, router=None, seed=DEFAULT_SEED, max_waiting=None
) -> Plan:
    """Check the inputs of ``simulate`` and turn them into a ``Plan``."""
    arr = arrival_array(arrival_s, order=False)
    n = arr.size
    lens, lmax, lsum = _tokens_sum("lengths", lengths, n, arr)
    devs = as_devices(devices)
    if isinstance(policy, P.Continuous):
        raise ValueError("Continuous batching is for generation: use simulate_generation")
    if not isinstance(policy, (P.Static, P.Dynamic, P.TokenBudget, P.LengthBuckets, P.Adaptive)):
        raise ValueError(f"policy must be one of ipusim.policies' objects, got {policy!r}")
    if lmax > MAX_LENGTH:
        raise ValueError(
            f"a request of {lmax:,} tokens is longer than the simulator accepts ({MAX_LENGTH:,}); "
            "token sums per batch must stay far from int64 overflow"
        )
    for d in devs:
        if d.len_step and lmax > d.max_len:
            raise ValueError(
                f"a request of {lmax} tokens is longer than device {d.name!r} handles ({d.max_len})"
            )
    nd = len(devs)
    if router is not None and isinstance(policy, P.LengthBuckets):
        raise ValueError(
            "a Router and LengthBuckets cannot be combined; pick one way to split by length"
        )
    if isinstance(policy, P.LengthBuckets):
        if lmax > policy.edges[-1]:
            raise ValueError(
                f"a request of {lmax} tokens is longer than the last bucket edge {policy.edges[-1]}"
            )
        edges = np.asarray(policy.edges, dtype=np.int64)
        nq = len(policy.edges)
        serves = np.ones((nd, nq), dtype=np.bool_)
    elif router is not None:
        if not isinstance(router, Router):
            raise ValueError(f"router must be a serving.Router, got {router!r}")
        if (
            max(router.short_devices + router.long_devices) >= nd
            or min(router.short_devices + router.long_devices) < 0
        ):
            raise ValueError(f"router device numbers must lie in 0..{nd - 1}")
        edges = np.array([router.threshold, MAX_LENGTH], dtype=np.int64)  # short: <= threshold
        nq = 2
        serves = np.zeros((nd, 2), dtype=np.bool_)
        serves[list(router.short_devices), 0] = True
        serves[list(router.long_devices), 1] = True
    else:
        edges, nq = None, 1
        serves = np.ones((nd, 1), dtype=np.bool_)
    if edges is not None:
        if n > np.iinfo(np.int32).max:
            raise ValueError(
                f"{n:,} requests: split by length they are numbered in int32; at most "
                f"{np.iinfo(np.int32).max:,} (simulate takes {MAX_REQUESTS:,})"
            )
        qoff, qidx, qmax = _queues(lens, edges)
    else:
        qoff = np.array([0, n], dtype=np.int64)
        qidx = np.zeros(0, dtype=np.int32)
        qmax = np.array([lmax], dtype=np.int64)
    uniq, dev_model = [], []
    for d in devs:
        if not any(d is u for u in uniq):
            uniq.append(d)
        dev_model.append(next(i for i, u in enumerate(uniq) if u is d))
    R = max(u.table.shape[0] for u in uniq)
    J = max(u.table.shape[1] for u in uniq)
    tables = np.zeros((len(uniq), R, J))
    for i, u in enumerate(uniq):
        tables[i, : u.table.shape[0], : u.table.shape[1]] = u.table
    m_rand = np.array([u.random == "exp" for u in uniq])
    mult = np.random.default_rng([seed, 0x5E7]).exponential(1.0, n) if m_rand.any() else np.zeros(0)
    pref = np.zeros(0, dtype=np.int64)
    budget, pad_full, ad = 0, False, (0.0, 1.0, 1)
    if isinstance(policy, P.Static):
        kind, B, D, pad_full = STATIC, policy.batch, policy.timeout_s, True
    elif isinstance(policy, (P.Dynamic, P.LengthBuckets)):
        kind, B, D = DYNAMIC, policy.max_batch, policy.max_delay_s
        if isinstance(policy, P.Dynamic):
            pref = np.array(policy.preferred, dtype=np.int64)
    elif isinstance(policy, P.TokenBudget):
        kind, B, D, budget = TOKEN, policy.max_batch, policy.max_delay_s, policy.max_tokens
    else:
        kind, B, D = ADAPTIVE, policy.max_batch, 0.0
        ad = (policy.latency_target_s, policy.utilization_target, policy.window)
    _check_fit(policy, B, devs, qmax, serves)
    mw = n if max_waiting is None else positive("max_waiting", max_waiting, integer=True)
    return Plan(
        arrival=arr,
        lengths=lens,
        mult=mult,
        qidx=qidx,
        qoff=qoff,
        serves=serves,
        dev_model=np.array(dev_model, dtype=np.int64),
        tables=tables,
        m_len_step=np.array([u.len_step for u in uniq], dtype=np.int64),
        m_packed=np.array([u.packed for u in uniq]),
        m_pack_len=np.array([u.pack_len for u in uniq], dtype=np.int64),
        m_rand=m_rand,
        m_rows=np.array([u.table.shape[0] - 1 for u in uniq], dtype=np.int64),
        kind=kind,
        q_batch=np.full(nq, B, dtype=np.int64),
        q_delay=np.full(nq, float(D)),
        budget=int(budget),
        pad_full=bool(pad_full),
        pref_min=int(pref[0]) if pref.size else 0,
        pref=pref,
        ad_target=float(ad[0]),
        ad_util=float(ad[1]),
        ad_window=int(ad[2]),
        max_waiting=int(mw),
        # np.mean's value: its float64 partial sums are exact integers while the total stays below 2**53
        length_mean=lsum / n if lsum is not None and lmax * n < 2**53 else float("nan"),
    )


def with_arrivals(plan: Plan, arrival_s) -> Plan:
    """``plan`` with other arrival times (s, sorted, one per request): the rest of a plan does
    not depend on them, so a search that runs the same requests at many rates builds the
    plan once (``dataclasses.replace`` of the arrival array, checked as ``make_plan`` checks it)."""
    arr = arrival_array(arrival_s)
    if arr.size != plan.arrival.size:
        raise ValueError(
            f"arrival_s has {arr.size} entries, the plan has {plan.arrival.size} requests: "
            "give one arrival time per request (s)"
        )
    return dataclasses.replace(plan, arrival=arr)


@njit(cache=True)
def _queues(lengths, edges):
    """Queues by length: request i joins queue k, the first edge >= its length
    (``np.searchsorted`` side left). Preconditions: edges ascending, every length <= the
    last edge. Returns (offsets [nq + 1], request ids by queue then arrival [n], longest
    request per queue [nq]); two passes over the lengths, the queue found again in the
    second rather than kept in an n-long array."""
    n, nq = lengths.shape[0], edges.shape[0]
    qoff = np.zeros(nq + 1, dtype=np.int64)
    qmax = np.zeros(nq, dtype=np.int64)
    for i in range(n):
        k = 0
        for e in range(nq - 1):  # edges below the length, counted without branches
            k += edges[e] < lengths[i]
        qoff[k + 1] += 1
        qmax[k] = max(qmax[k], lengths[i])
    for k in range(nq):
        qoff[k + 1] += qoff[k]
    fill = qoff[:nq].copy()
    qidx = np.empty(n, dtype=np.int32)  # half the memory traffic of int64; n < 2**31
    for i in range(n):
        k = 0
        for e in range(nq - 1):
            k += edges[e] < lengths[i]
        qidx[fill[k]] = i
        fill[k] += 1
    return qoff, qidx, qmax


def _check_fit(policy, B, devs, qmax, serves):
    """Refuse a policy whose full batch at a queue's longest request does not fit a device.

    A batch of ``B`` requests padded to the longest one is the largest step the policy can
    send (a static policy always sends it); if the machine model says it does not fit,
    there is no honest time for it (the fit rule), so the configuration is an error that
    names the largest batch that fits. Token-budget and packed batches are checked batch
    by batch after the run.
    """
    if isinstance(policy, P.TokenBudget):
        return
    for k in range(qmax.size):
        L = int(qmax[k])
        if L == 0:  # an empty queue
            continue
        for d, dev in enumerate(devs):
            if not serves[d, k] or dev.packed or not dev.len_step:
                continue
            if not np.isfinite(dev.time_s([L] * B)):
                most = dev.fit_limit(L)
                fix = (
                    "Lower the policy's max batch or route long requests elsewhere"
                    if most
                    else "Not even one request fits: use a chip with more memory"
                )
                raise ValueError(
                    f"a batch of {B} requests of {L} tokens does not fit device {dev.name!r} (the machine "
                    f"model has no time for it); largest batch that fits at {L} tokens: "
                    f"{most or 'none'}. {fix}"
                )
