"""Who asks for which row, who owns it, and how often a cache already holds it.

* ``harmonic(n, s)``: the generalised harmonic number sum_{k=1..n} k**-s (the Zipf normaliser).
* ``cache_rows``: which rows an ideal cache of a given size keeps (the hottest per byte, over
  all tables), and ``hit_rate``: the share of look-ups that find their row there (closed form).
* ``lookup_stream``: one step's look-ups drawn with a seed (sample, table, popularity rank).
* ``tally``: the hot path. For every look-up: the owning unit (tile, or chip), the requesting
  unit (where the sample's pooling runs), whether the cache holds the row; summed per unit. A
  Numba kernel (``_tally``; its plain-Python twin is ``tests/embeddings_reference.py``).

Rows are sharded by row, each table over all ``U`` units: row ``j`` of table ``t`` (of ``R_t``
rows) lives on unit ``(j * U // R_t + rot_t) mod U``, equal blocks (as ``tiles._distribute`` deals
pieces) rotated by ``rot_t = t * U // tables`` so that small tables do not all start on unit 0.
A popularity rank is scattered to a row id by ``rank * SCATTER_MULTIPLIER mod rows`` (a
bijection: the multiplier is a prime larger than any table), so hot rows spread over units as
hashed categorical ids do. Samples are dealt to requesting units the same way:
sample ``b`` of ``B`` runs on unit ``b * U // B``.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numba import njit

from .._validate import positive
from .workload import Workload

SCATTER_MULTIPLIER = 2_654_435_761  # Knuth's multiplicative-hash prime (2**32 / golden ratio)
_HEAD = 1 << 16  # ranks sampled from the exact CDF; beyond, from the continuous inverse CDF


@functools.lru_cache(maxsize=4096)
def harmonic(n: int, s: float) -> float:
    """sum_{k=1..n} k**-s; exact up to 100,000 terms, then Euler-Maclaurin (relative error < 1e-12)."""
    n = int(n)
    if n <= 0:
        return 0.0
    if s == 0:
        return float(n)
    k = min(n, 100_000)
    head = float(np.sum(np.arange(1, k + 1, dtype=np.float64) ** -s))
    if n == k:
        return head
    a, b = k + 1.0, float(n)
    integral = math.log(b / a) if s == 1 else (b ** (1 - s) - a ** (1 - s)) / (1 - s)
    return head + integral + (a**-s + b**-s) / 2 + (-s * b ** (-s - 1) + s * a ** (-s - 1)) / 12


def _mass(table, s: float, c: int) -> float:
    """Probability that one look-up of ``table`` hits one of its ``c`` hottest rows."""
    c = min(int(c), table.rows)
    if c <= 0:
        return 0.0
    if table.weights is not None:
        return float(np.sum(table.weights[:c]))
    if s == 0:
        return c / table.rows
    return harmonic(c, s) / harmonic(table.rows, s)


def traffic_weights(w: Workload) -> np.ndarray:
    """Look-ups per sample of each table (the share of traffic a table gets)."""
    if w.bag_sizes is not None:
        return np.array([w.lookups_per_sample])
    return np.array([t.pooling for t in w.tables], dtype=np.float64)


def cache_rows(w: Workload, capacity_bytes: float, row_bytes) -> np.ndarray:
    """Rows of each table an ideal cache of ``capacity_bytes`` keeps (its hottest ones).

    ``row_bytes`` (one per table, or one for all) is what a cached row costs. The cache keeps
    the rows with the most look-ups per byte over all tables: for Zipf tables every row above a
    threshold (found by bisection), for uniform tables whole tables in order of look-ups per byte.
    ASSUMPTION: a static cache of the hottest rows (an upper bound on what an LRU cache holds).
    """
    cap = positive("capacity_bytes", capacity_bytes, allow_zero=True)
    tabs = w.tables
    rb = np.broadcast_to(np.asarray(row_bytes, dtype=np.float64), (len(tabs),))
    rows = np.array([t.rows for t in tabs], dtype=np.int64)
    if cap <= 0:
        return np.zeros(len(tabs), dtype=np.int64)
    if rows @ rb <= cap:
        return rows
    pool = traffic_weights(w)
    s = w.zipf
    explicit = any(t.weights is not None for t in tabs)
    if s == 0 and not explicit:  # uniform: fill whole tables by look-ups per byte per row
        out = np.zeros(len(tabs), dtype=np.int64)
        left = cap
        for i in np.argsort(-(pool / (rows * rb)), kind="stable"):
            take = min(rows[i], int(left // rb[i]))
            out[i] = take
            left -= take * rb[i]
        return out

    weighted = [i for i, t in enumerate(tabs) if t.weights is not None]
    log_h = np.log([harmonic(t.rows, s) if t.weights is None else 1.0 for t in tabs])
    log_pool_per_byte = np.log(pool) - np.log(rb)

    def count(lam):  # rows per table whose per-byte traffic is >= lam
        if s == 0:
            out = np.where(pool / (rows * rb) >= lam, rows, 0)
        else:  # Zipf: rank k qualifies while pool k**-s / (H rb) >= lam
            log_k = (log_pool_per_byte - log_h - math.log(lam)) / s
            out = np.where(
                log_k >= np.log(rows), rows, np.floor(np.exp(np.minimum(log_k, np.log(rows))))
            )
        out = out.astype(np.int64)
        for i in weighted:
            out[i] = int(np.searchsorted(tabs[i].neg_weights, -lam * rb[i] / pool[i], side="right"))
        return out

    lo, hi = 1e-300, 1e300  # bisection on log(lam): count() falls as lam grows
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if count(mid) @ rb <= cap:
            hi = mid
        else:
            lo = mid
        if hi / lo < 1 + 1e-12:
            break
    return count(hi)


def hit_rate(w: Workload, cached: np.ndarray) -> float:
    """Share of look-ups whose row is among the ``cached`` hottest rows of its table (closed form)."""
    pool = traffic_weights(w)
    hits = sum(p * _mass(t, w.zipf, c) for p, t, c in zip(pool, w.tables, cached, strict=True))
    return float(hits / pool.sum())


def sample_ranks(table, s: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` popularity ranks (0 = hottest) of ``table`` under Zipf ``s`` (or its weights).

    Exact for the first 65,536 ranks and for uniform or weighted tables; beyond rank 65,536 a
    Zipf rank comes from the continuous density x**-s on [65,536.5, rows + 0.5], rounded (the
    discrete and continuous laws differ there by less than 1e-5 relative).
    """
    if table.weights is not None:
        cdf = table.weights_cdf
        return np.minimum(
            np.searchsorted(cdf, rng.random(n) * cdf[-1], side="right"), table.rows - 1
        )
    if s == 0:
        return rng.integers(0, table.rows, n)
    head = min(table.rows, _HEAD)
    cdf = _head_cdf(table.rows, float(s))
    u = rng.random(n)
    out = np.searchsorted(cdf, u, side="right").astype(np.int64)
    tail = out >= head
    if tail.any():
        a, b = head + 0.5, table.rows + 0.5
        v = (u[tail] - cdf[-1]) / (1.0 - cdf[-1])
        if s == 1:
            x = a * (b / a) ** v
        else:
            x = (a ** (1 - s) + v * (b ** (1 - s) - a ** (1 - s))) ** (1.0 / (1 - s))
        out[tail] = np.clip(np.floor(x + 0.5).astype(np.int64), head + 1, table.rows) - 1
    return out


@functools.lru_cache(maxsize=256)
def _head_cdf(rows: int, s: float) -> np.ndarray:
    """P(rank <= k) for the first 65,536 ranks of a Zipf table (read-only, cached)."""
    head = min(rows, _HEAD)
    cdf = np.cumsum(np.arange(1, head + 1, dtype=np.float64) ** -s) / harmonic(rows, s)
    cdf.setflags(write=False)
    return cdf


def lookup_stream(w: Workload, seed: int = 0):
    """One step's look-ups: (sample, table, rank) int64 arrays, drawn with ``seed``."""
    rng = np.random.default_rng(seed)
    samples, tables, ranks = [], [], []
    for i, t in enumerate(w.tables):
        bags = (
            w.bag_sizes if w.bag_sizes is not None else np.full(w.batch, t.pooling, dtype=np.int64)
        )
        n = int(bags.sum())
        samples.append(np.repeat(np.arange(w.batch, dtype=np.int64), bags))
        tables.append(np.full(n, i, dtype=np.int64))
        ranks.append(sample_ranks(t, w.zipf, n, rng))
    return np.concatenate(samples), np.concatenate(tables), np.concatenate(ranks).astype(np.int64)


@njit(cache=True)
def _tally(
    sample,
    table,
    rank,
    rows,
    offsets,
    cached,
    rot,
    n_units,
    units_per_chip,
    batch,
    by_lookup,
    mult,
    out_miss,
    out_hit,
    out_req,
    out_req_hit,
    out_local,
    out_chip_send,
    out_chip_recv,
    out_row,
    out_owner,
):
    """Count, per unit, the look-ups it serves (cache misses and hits) and the ones it requests
    (all, and those that hit the cache).

    Look-up ``i`` is row ``rank[i]`` (a popularity rank) of table ``table[i]`` for sample
    ``sample[i]``. Its row id is ``offsets[t] + rank * mult mod rows[t]``; its owner is
    ``row_id * n_units // total_rows``; its requester ``sample * n_units // batch``; it hits
    the cache when ``rank < cached[t]``. Units ``u`` and ``v`` are on the same chip when
    ``u // units_per_chip == v // units_per_chip``.

    Preconditions: the three input arrays have one length; ``0 <= rank < rows[table]``;
    ``0 <= sample < batch``; ``rank * mult`` fits in int64; ``out_*`` are int64 zeros of length
    ``n_units`` (``out_chip_*``: chips; ``out_row``, ``out_owner``: one per look-up, receive its
    global row id and owner).
    """
    for i in range(sample.size):
        t = table[i]
        r = rank[i]
        j = (r * mult) % rows[t]
        out_row[i] = offsets[t] + j
        owner = ((j * n_units) // rows[t] + rot[t]) % n_units
        out_owner[i] = owner
        req = (i * n_units) // sample.size if by_lookup else (sample[i] * n_units) // batch
        if r < cached[t]:
            out_hit[owner] += 1
        else:
            out_miss[owner] += 1
        out_req[req] += 1
        if r < cached[t]:
            out_req_hit[req] += 1
        if owner == req:
            out_local[req] += 1
        co = owner // units_per_chip
        cr = req // units_per_chip
        if co != cr:
            out_chip_send[co] += 1
            out_chip_recv[cr] += 1


class Tally:
    """Per-unit look-up counts of one step (arrays of int64; ``chip_*`` per chip).

    ``unique``/``unique_hit``: distinct rows (all, and cached ones) each unit owns among the
    step's look-ups: what an owner sends when one send reaches every tile that asked for the
    row (multicast, the assumption ``ipusim.tiles`` makes for op inputs).
    """

    __slots__ = (
        "miss",
        "hit",
        "requested",
        "requested_hit",
        "local",
        "chip_send",
        "chip_recv",
        "unique",
        "unique_hit",
    )

    def __init__(
        self, miss, hit, requested, requested_hit, local, chip_send, chip_recv, unique, unique_hit
    ):
        self.miss, self.hit, self.requested, self.local = miss, hit, requested, local
        self.requested_hit = requested_hit
        self.chip_send, self.chip_recv = chip_send, chip_recv
        self.unique, self.unique_hit = unique, unique_hit

    @property
    def served(self) -> np.ndarray:
        """Look-ups each unit owns (misses + hits)."""
        return self.miss + self.hit

    @property
    def lookups(self) -> int:
        return int(self.requested.sum())

    @property
    def hit_rate(self) -> float:
        """Share of look-ups that hit the cache, counted on the stream."""
        return float(self.hit.sum() / max(self.lookups, 1))


def tally(
    w: Workload,
    n_units: int,
    *,
    units_per_chip: int | None = None,
    cached=None,
    seed: int = 0,
    stream=None,
) -> Tally:
    """Draw one step's look-ups (``seed``) and count them per unit (see ``_tally``).

    ``cached``: rows cached per table (default none); ``stream``: a ``lookup_stream`` to reuse.
    """
    n_units = positive("n_units", n_units, integer=True)
    per = (
        n_units
        if units_per_chip is None
        else positive("units_per_chip", units_per_chip, integer=True)
    )
    if n_units % per:
        raise ValueError(f"n_units ({n_units}) must be a multiple of units_per_chip ({per})")
    rows = np.array([t.rows for t in w.tables], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(rows)[:-1]]).astype(np.int64)
    rot = rotations(len(rows), n_units)
    cached = (
        np.zeros(len(rows), dtype=np.int64)
        if cached is None
        else np.asarray(cached, dtype=np.int64)
    )
    if cached.shape != rows.shape:
        raise ValueError(
            f"cached must give one row count per table ({rows.size}), got shape {cached.shape}"
        )
    sample, table, rank = lookup_stream(w, seed) if stream is None else stream
    # Bags of very different sizes (the GNN case) are split evenly over units by look-up.
    args = (
        sample,
        table,
        rank,
        rows,
        offsets,
        cached,
        rot,
        n_units,
        per,
        w.batch,
        w.bag_sizes is not None,
        SCATTER_MULTIPLIER,
    )
    chips = n_units // per
    out = [np.zeros(n_units, dtype=np.int64) for _ in range(5)] + [
        np.zeros(chips, dtype=np.int64) for _ in range(2)
    ]
    row_ids, owners = np.empty(sample.size, dtype=np.int64), np.empty(sample.size, dtype=np.int64)
    _tally(*args, *out, row_ids, owners)
    uniq = []
    for ids in (row_ids, row_ids[rank < cached[table]]):
        g = np.sort(ids)
        g = g[
            np.concatenate((np.ones(min(g.size, 1), dtype=bool), g[1:] != g[:-1]))
        ]  # distinct ids
        t = np.searchsorted(offsets, g, side="right") - 1
        own = ((g - offsets[t]) * n_units // rows[t] + rot[t]) % n_units
        uniq.append(np.bincount(own, minlength=n_units).astype(np.int64))
    return Tally(*out, *uniq)


def rotations(n_tables: int, n_units: int) -> np.ndarray:
    """The unit each table's first row block lives on: ``t * n_units // n_tables``."""
    return (np.arange(n_tables, dtype=np.int64) * n_units) // n_tables


def owned_rows(w: Workload, n_units: int) -> np.ndarray:
    """(tables, units) rows each unit owns of each table under the sharding above."""
    rot = rotations(len(w.tables), n_units)
    out = np.empty((len(w.tables), n_units), dtype=np.int64)
    for i, t in enumerate(w.tables):
        blocks = np.diff(-(-np.arange(n_units + 1, dtype=np.int64) * t.rows // n_units))
        out[i] = np.roll(blocks, rot[i])
    return out
