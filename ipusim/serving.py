"""Serving simulation: requests through a batching policy onto one or more devices.

The pipeline is ``arrivals`` (when requests come) + ``sample_lengths`` (how long each is,
drawn from ``ipusim.lengths``) -> a policy from ``ipusim.policies`` (when and how many leave
the queue together) -> a ``ServiceModel`` per device (how long a batch takes) -> a
``ServingResult`` (per-request start and finish, latency percentiles, throughput,
utilization, padding waste).

Service times. A ``ServiceModel`` is a table ``time[rows, j]`` in seconds: a batch of
``rows`` rows, each padded to ``j * len_step`` tokens. ``chip_service`` fills it by calling
the machine model (``ipusim.machine.step_time_s``: the tile simulator for a tile chip, the
GPU simulator for a GPU) on representative batches; ``fixed_service`` and
``exponential_service`` need no machine (for checks against queueing theory). A padded
device runs ``batch size`` rows of the batch's longest request; a packed device packs
the batch's requests first-fit decreasing (``ipusim.packing``) into rows of ``pack_len``
tokens and runs those rows (attention over each packed row with a block mask, as
PackedBERT). Cells whose step does not fit are ``inf``; ``simulate`` refuses them.

The event loop (``_simulate_kernel``) is a Numba kernel; ``_simulate_reference`` is an
independent event-driven plain-Python model of the same policies, and ``simpy_dynamic``
a simpy model of the dynamic policy (a benchmark baseline). All three give identical
per-request results on the same inputs.
"""

from __future__ import annotations

import functools
import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from . import lengths as _lengths
from . import limits as _limits
from . import packing as _pk
from . import policies as P
from ._validate import lengths_array, positive

DEFAULT_SEED = 0
_INF = np.inf
# The CLI's cap on requests per run. A run holds about 100 bytes per request (arrival, length,
# start, finish, device, batch id and the summary's temporaries; measured in
# tests/test_serving.py::test_ten_million_requests_stay_within_100_bytes_each), so 20 million
# requests need about 2 GB: the most a laptop-sized machine holds without being OOM-killed.
MAX_REQUESTS = 20_000_000
BYTES_PER_REQUEST = 100
MAX_LENGTH = 2**31 - 1  # tokens per request, at most (so a batch's token sum cannot overflow int64)

# ----------------------------------------------------------------------------------------
# Per-request lengths (drawn from ipusim.lengths)
# ----------------------------------------------------------------------------------------


def sample_lengths(
    n: int,
    *,
    long_fraction: float = 0.0,
    short: tuple = _lengths.SHORT_RANGE,
    long: tuple = _lengths.LONG_RANGE,
    histogram=None,
    seed: int = DEFAULT_SEED,
) -> np.ndarray:
    """``n`` request lengths (tokens, int64), from ``ipusim.lengths``.

    Either the "x% long texts" mix (``lengths.sample_long_text_mix``: each request long
    with probability ``long_fraction``, its length uniform on ``long``, else on ``short``,
    both inclusive), or draws from ``histogram`` (``lengths.Histogram.sample``): a
    ``lengths.Histogram``, a path to a ``length,count`` CSV (``lengths.load_histogram``)
    or a pair ``(lengths, counts)`` of whole counts.
    """
    if histogram is None:
        return _lengths.sample_long_text_mix(n, long_fraction, short=short, long=long, seed=seed)
    if isinstance(histogram, _lengths.Histogram):
        h = histogram
    elif isinstance(histogram, tuple):
        lens, counts = histogram
        lens = lengths_array("histogram lengths", lens)
        counts = np.asarray(counts, dtype=np.float64)
        if counts.shape != lens.shape:
            raise ValueError(f"histogram needs one count per length; got {counts.size} counts for {lens.size} lengths")
        c = np.zeros(int(lens.max()))
        np.add.at(c, lens - 1, counts)
        h = _lengths.Histogram(c, "histogram")
    else:
        h = _lengths.load_histogram(histogram)
    return h.sample(n, seed=seed)


# ----------------------------------------------------------------------------------------
# Service models
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServiceModel:
    """How long a device takes for a batch; ``table[rows, j]`` seconds (row 0, column 0 unused).

    ``len_step`` = 0 marks a length-independent model (fixed / exponential service).
    """

    name: str
    table: np.ndarray = field(repr=False)  # float64 [max_rows + 1, n_len + 1], seconds
    len_step: int  # tokens per length column; 0: lengths do not matter
    packed: bool = False  # rows are packs of pack_len tokens instead of padded requests
    pack_len: int = 0  # tokens per packed row
    random: str = "none"  # "exp": each batch's time is the table value x an Exp(1) draw
    source: str = ""  # what filled the table

    @property
    def max_rows(self) -> int:
        return self.table.shape[0] - 1

    @property
    def max_len(self) -> int:
        return (self.table.shape[1] - 1) * self.len_step if self.len_step else MAX_LENGTH

    def time_s(self, lengths, *, rows: int | None = None) -> float:
        """Service time of one batch with these request lengths (mean for ``random='exp'``)."""
        lens = np.asarray(lengths, dtype=np.int64)
        r, j, _ = _batch_shape(self.len_step, self.packed, self.pack_len, lens.size if rows is None else rows,
                               int(lens.max()), int(lens.sum()))
        if self.packed:  # first-fit decreasing, as the simulator packs a batch
            r = _pk._ffd(np.sort(lens)[::-1].copy(), self.pack_len, self.pack_len, np.empty(lens.size, np.int64))
        return _lookup(self.table, r, j)

    def throughput_rps(self, length: int, batch: int) -> float:
        """Requests per second of back-to-back batches of ``batch`` requests of ``length``."""
        return batch / self.time_s([length] * batch)

    def __repr__(self):
        kind = "packed" if self.packed else "padded"
        return f"ServiceModel({self.name}: {kind}, up to {self.max_rows} rows, {self.source})"


def fixed_service(seconds: float, *, per_request_s: float = 0.0, max_batch: int = 1) -> ServiceModel:
    """A batch of b requests takes ``seconds + per_request_s * b``, whatever the lengths (M/D/1 when b = 1)."""
    s = positive("seconds", seconds, at_most=_limits.MAX_SECONDS, why="one batch's time, s")
    c = positive("per_request_s", per_request_s, allow_zero=True, at_most=_limits.MAX_SECONDS)
    b = positive("max_batch", max_batch, integer=True)
    _limits.check_memory("max_batch", b, 16 * b, "a service table of two float64 per batch size")
    tab = np.zeros((b + 1, 2))
    tab[1:, 1] = s + c * np.arange(1, b + 1)
    return ServiceModel(f"fixed {s * 1e3:g} ms", tab, 0, source="fixed")


def exponential_service(mean_s: float, *, max_batch: int = 1) -> ServiceModel:
    """Exponentially distributed batch time of mean ``mean_s`` (M/M/1 when batches are 1)."""
    m = positive("mean_s", mean_s, at_most=_limits.MAX_SECONDS, why="one batch's mean time, s")
    b = positive("max_batch", max_batch, integer=True)
    _limits.check_memory("max_batch", b, 16 * b, "a service table of two float64 per batch size")
    tab = np.zeros((b + 1, 2))
    tab[1:, 1] = m
    return ServiceModel(f"exponential mean {m * 1e3:g} ms", tab, 0, random="exp", source="exponential")


_ROW_GRID = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)


def _step_eval(chip_name, model_name, phase, rows, length, memo):
    """(seconds, regime) of one step; seconds = inf when the step does not fit (fit rule).

    ``regime`` is (fits, streams weights from DRAM): times are smooth within a regime and
    jump between regimes (a memory cliff), so the tables never interpolate across one.
    """
    key = (rows, length)
    if key not in memo:
        from . import machine, workloads

        pad = None if phase == "decode" else length
        res = machine.simulate(chip_name, workloads.step(model_name, [length] * rows, phase=phase, pad_to=pad))
        ok = bool(res.fits) and math.isfinite(res.time_s)
        streams = ok and float(res.split.get("streaming", 0.0)) > 0.0
        memo[key] = (res.time_s if ok else _INF, (ok, streams))
    return memo[key]


def _fill_rows(chip_name, model_name, phase, max_rows, rows_grid, length, memo):
    """Seconds for 1..max_rows rows at ``length``: grid rows computed, rows between two grid
    rows of the same regime interpolated linearly, rows between regimes computed exactly."""
    col = np.empty(max_rows + 1)
    col[0] = 0.0
    for r in rows_grid:
        col[r] = _step_eval(chip_name, model_name, phase, r, length, memo)[0]
    for a, b in zip(rows_grid[:-1], rows_grid[1:], strict=True):
        if b - a < 2:
            continue
        ta, ga = _step_eval(chip_name, model_name, phase, a, length, memo)
        tb, gb = _step_eval(chip_name, model_name, phase, b, length, memo)
        if ga == gb and math.isfinite(ta) and math.isfinite(tb):
            col[a + 1:b] = np.interp(np.arange(a + 1, b), [a, b], [ta, tb])
        elif ga == gb:  # both do not fit: rows in between need at least a's memory
            col[a + 1:b] = _INF
        else:
            for r in range(a + 1, b):
                col[r] = _step_eval(chip_name, model_name, phase, r, length, memo)[0]
    return col


@functools.lru_cache(maxsize=96)
def _time_table(chip_name, model_name, phase, max_rows, max_len, len_step, exact_rows):
    """Seconds of one step, ``tab[rows, j]``; ``inf`` where the step does not fit.

    ``phase`` "decode": one new token per sequence with ``j * len_step`` tokens of context
    (columns every ``len_step``). ``phase`` "forward"/"prefill": every sequence padded to
    ``L`` tokens, with one column per token length ``L`` (so ``len_step`` of the result is
    1): the machine model is run on the lengths ``len_step, 2 len_step, ...`` plus, for each
    grid row count, the last length before each memory cliff (found by bisection where the
    regime changes between two grid lengths); a length is charged the time of the next
    length computed, which is never on the other side of a cliff. Rows on a grid are
    linearly interpolated within a regime and computed exactly across one.
    """
    memo: dict = {}
    rows_grid = list(range(1, max_rows + 1)) if exact_rows else sorted({r for r in _ROW_GRID if r < max_rows} | {max_rows})
    n_len = -(-max_len // len_step)
    grid = sorted({min(j * len_step, max_len) for j in range(1, n_len + 1)})
    if phase == "decode":
        tab = np.zeros((max_rows + 1, n_len + 1))
        for j in range(1, n_len + 1):
            tab[:, j] = _fill_rows(chip_name, model_name, phase, max_rows, rows_grid, min(j * len_step, max_len), memo)
        tab.setflags(write=False)
        return tab
    cols = set(grid)
    for r in rows_grid:
        prev = None
        for L in grid:
            g = _step_eval(chip_name, model_name, phase, r, L, memo)[1]
            if prev is not None and g != prev[1]:
                lo, hi = prev[0], L  # regime(lo) = prev regime, regime(hi) differs
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    if _step_eval(chip_name, model_name, phase, r, mid, memo)[1] == prev[1]:
                        lo = mid
                    else:
                        hi = mid
                cols.add(lo)
            prev = (L, g)
    cols = sorted(cols)
    vals = {L: _fill_rows(chip_name, model_name, phase, max_rows, rows_grid, L, memo) for L in cols}
    tab = np.zeros((max_rows + 1, max_len + 1))
    ci = 0
    for L in range(1, max_len + 1):
        while cols[ci] < L:
            ci += 1
        tab[:, L] = vals[cols[ci]]
    tab.setflags(write=False)
    return tab


def largest_batch(service: ServiceModel, length: int) -> int:
    """Most rows of ``length`` tokens (padded) that fit the device in one step; 0 if none."""
    if not service.len_step:
        return service.max_rows
    j = 1 if service.packed else -(-int(length) // service.len_step)
    bad = np.flatnonzero(~np.isfinite(service.table[1:, j]))
    return int(bad[0]) if bad.size else service.max_rows


MAX_CHIP_ROWS = _ROW_GRID[-1]  # rows of a chip_service table, at most (the last grid point)


def chip_service(
    chip,
    model="bert-base",
    *,
    max_batch: int = 64,
    max_len: int | None = None,
    packed: bool = False,
    pack_len: int | None = None,
    len_step: int = 16,
    exact_rows: bool | None = None,
) -> ServiceModel:
    """Service-time table of ``model`` on ``chip`` from ``ipusim.machine.step_time_s``.

    Each column is a padded length in tokens (1 to ``max_len``, default the model's
    ``max_positions``); the machine model runs at multiples of ``len_step`` and at the last
    length before each memory cliff, and a length is charged the next length computed (see
    ``_time_table``). Cells whose step does not fit are ``inf`` (``largest_batch`` reads
    the fit limit); ``simulate`` refuses a policy whose batches would land on them. Rows are computed for every count (``exact_rows``,
    the default for GPU chips, whose wave quantization makes interpolation up to ~10%
    off) or on a grid (1, 2, 3, 4, 6, 8, 12, ...) and linearly interpolated (the default
    for tile chips, whose simulator costs ~10 ms a call). Tables are built for at least
    64 rows and sliced, so policies with different batch limits see the same times.
    ``surrogate_error`` measures the table against direct calls on mixed-length batches.
    """
    from . import hardware, workloads

    c = hardware.chip(chip)
    m = workloads.model(model)
    max_len = m.max_positions if max_len is None else positive("max_len", max_len, integer=True)
    if max_len > m.max_positions:
        raise ValueError(f"max_len {max_len} exceeds {m.name}'s max_positions {m.max_positions}")
    step = positive("len_step", len_step, integer=True)
    b = positive("max_batch", max_batch, integer=True, at_most=MAX_CHIP_ROWS,
                 why=f"the chip's time table is simulated on a row grid up to {MAX_CHIP_ROWS:,} rows "
                     "(a tile simulator call costs ~10 ms and grows with the rows)")
    _limits.check_step(b, max_len, name="max_batch")
    exact_rows = c.kind == "gpu" if exact_rows is None else bool(exact_rows)
    rows = max(64, b)
    if packed:
        pl = max_len if pack_len is None else positive("pack_len", pack_len, integer=True)
        if pl > m.max_positions:
            raise ValueError(f"pack_len {pl} exceeds {m.name}'s max_positions {m.max_positions}")
        # one column: every packed row has pack_len tokens; a batch of r rows of pack_len tokens
        tab = _time_table(c.name, m.name, "forward", rows, pl, pl, True)[:, :2]
        return ServiceModel(f"{c.name} {m.name} packed {pl}", _rows(tab, b), pl, packed=True, pack_len=pl,
                            source="machine")
    tab = _time_table(c.name, m.name, "forward", rows, max_len, step, exact_rows)
    return ServiceModel(f"{c.name} {m.name} padded", _rows(tab, b), 1, source="machine")


def _rows(tab, b):
    out = tab[: b + 1]
    out.setflags(write=False)
    return out


def surrogate_error(service: ServiceModel, chip, model, *, samples: int = 50, long_fraction: float = 0.3,
                    seed: int = DEFAULT_SEED) -> dict:
    """Relative error of a padded ``service`` table against direct machine-model calls.

    Each sample is a batch of random size (1..max_rows) of mixed lengths (``sample_lengths``);
    the direct call pads it to its longest request exactly, the table to the next length it
    computed (and interpolates rows if the table was built on a grid). Batches that do not
    fit are counted (``refused`` when both agree, ``fit_mismatches`` when they do not) and
    left out of the error statistics.
    """
    from . import machine, workloads

    if service.packed or not service.len_step:
        raise ValueError("surrogate_error checks padded chip tables (from chip_service with packed=False)")
    rng = np.random.default_rng(seed)
    errs, refused, mismatch = [], 0, 0
    for k in range(positive("samples", samples, integer=True)):
        r = int(rng.integers(1, service.max_rows + 1))
        lens = np.minimum(sample_lengths(r, long_fraction=long_fraction, seed=seed + k), service.max_len)
        res = machine.simulate(chip, workloads.step(model, lens, pad_to=int(lens.max())))
        fits = bool(res.fits) and math.isfinite(res.time_s)
        tab = service.time_s(lens)
        if fits != math.isfinite(tab):
            mismatch += 1  # the table and the machine disagree on whether the batch fits
        elif not fits:
            refused += 1  # both say it does not fit: no time to compare
        else:
            errs.append(tab / res.time_s - 1.0)
    e = np.abs(errs) if errs else np.array([math.nan])
    return {"samples": int(samples), "compared": len(errs), "refused": refused, "fit_mismatches": mismatch,
            "max_rel_error": float(e.max()), "mean_rel_error": float(e.mean()),
            "mean_signed_error": float(np.mean(errs)) if errs else math.nan}


# ----------------------------------------------------------------------------------------
# Kernel helpers (shared by the Numba kernel; the reference re-derives them in Python)
# ----------------------------------------------------------------------------------------


@njit(cache=True, error_model="numpy")
def _batch_shape(len_step, packed, pack_len, size, max_len, tokens):
    """(rows, length column, computed tokens) of a batch. Preconditions: size >= 1."""
    if len_step == 0:
        return size, 1, tokens
    if packed:  # ``size`` requests of ``max_len`` tokens each: pack_len // max_len to a row (first fit)
        per = pack_len // max_len
        rows = (size + per - 1) // per
        return rows, 1, rows * pack_len
    j = (max_len + len_step - 1) // len_step
    return size, j, size * j * len_step


@njit(cache=True, error_model="numpy")
def _lookup(table, rows, j):
    """Seconds for ``rows`` rows at column ``j``; beyond the table, whole extra tables in series."""
    rmax = table.shape[0] - 1
    if rows <= rmax:
        return table[rows, j]
    full = rows // rmax
    rest = rows - full * rmax
    t = full * table[rmax, j]
    if rest > 0:
        t += table[rest, j]
    return t


# Policy kinds inside the kernels
_STATIC, _DYNAMIC, _TOKEN, _ADAPTIVE = 0, 1, 2, 3


@dataclass(frozen=True)
class _Plan:
    """Everything the kernel and the reference read, as arrays (built by ``_prepare``)."""

    arrival: np.ndarray  # float64 [n], sorted
    lengths: np.ndarray  # int64 [n] (kept wide: a cast to int32 would wrap lengths >= 2**31 negative)
    mult: np.ndarray  # float64 [n] (exp service) or [0]
    qidx: np.ndarray  # int64 [n] request ids by queue then arrival, or [0] for one queue
    qoff: np.ndarray  # int64 [nq + 1]
    serves: np.ndarray  # bool [nd, nq]
    dev_model: np.ndarray  # int64 [nd]
    tables: np.ndarray  # float64 [n_models, R + 1, J + 1]
    m_len_step: np.ndarray  # int64 [n_models]
    m_packed: np.ndarray  # bool
    m_pack_len: np.ndarray  # int64
    m_rand: np.ndarray  # bool
    m_rows: np.ndarray  # int64: rows of each model's own table
    kind: int
    q_batch: np.ndarray  # int64 [nq]
    q_delay: np.ndarray  # float64 [nq]
    budget: int
    pad_full: bool
    pref_min: int  # smallest preferred size, 0 if none
    pref: np.ndarray  # int64 ascending
    ad_target: float
    ad_util: float
    ad_window: int
    max_waiting: int


@njit(cache=True, error_model="numpy")
def _rid(qidx, qoff, k, m):
    if qidx.shape[0] == 0:
        return m
    return qidx[qoff[k] + m]


@njit(cache=True, error_model="numpy")
def _svc(tables, mi, m_rows, rows, j):
    """Lookup in model ``mi``'s table (its own row count)."""
    rmax = m_rows[mi]
    if rows <= rmax:
        return tables[mi, rows, j]
    full = rows // rmax
    rest = rows - full * rmax
    t = full * tables[mi, rmax, j]
    if rest > 0:
        t += tables[mi, rest, j]
    return t


@njit(cache=True, error_model="numpy")
def _adaptive_target(arrival, lengths, qidx, qoff, k, h, tables, mi, m_rows, m_len_step, m_packed,
                     m_pack_len, B, n_serving, ad_target, ad_util, ad_window):
    """(fill target b, delay) of the adaptive policy for queue ``k`` with head position ``h``."""
    w = min(h, ad_window)
    rate = 0.0
    if w >= 1:
        span = arrival[_rid(qidx, qoff, k, h)] - arrival[_rid(qidx, qoff, k, h - w)]
        if span > 0.0:
            rate = w / span
    L = lengths[_rid(qidx, qoff, k, h)]
    need = rate / (ad_util * n_serving)
    b = B
    for c in range(1, B + 1):
        r, j, _ = _batch_shape(m_len_step[mi], m_packed[mi], m_pack_len[mi], c, L, c * L)
        if c / _svc(tables, mi, m_rows, r, j) >= need:
            b = c
            break
    r, j, _ = _batch_shape(m_len_step[mi], m_packed[mi], m_pack_len[mi], b, L, b * L)
    d = ad_target - _svc(tables, mi, m_rows, r, j)
    if d < 0.0:
        d = 0.0
    return b, d


@njit(cache=True, error_model="numpy")
def _simulate_kernel(arrival, lengths, mult, qidx, qoff, serves, dev_model, tables, m_len_step,
                     m_packed, m_pack_len, m_rand, m_rows, kind, q_batch, q_delay, budget, pad_full,
                     pref_min, pref, ad_target, ad_util, ad_window, max_waiting,
                     start, finish, device, batch_id, dev_busy, dev_real, dev_computed, info):
    """Event loop of batched serving. Writes per-request start/finish/device/batch_id.

    Preconditions: ``arrival`` sorted ascending, n >= 1; every queue is served by at least
    one device; ``start``/``finish`` pre-filled with NaN, ``device``/``batch_id`` with -1;
    ``dev_*`` zeroed. ``info`` gets [batches, stopped (0/1), dispatched requests].
    Each step picks the (device, queue) pair that can send a batch earliest (ties: the
    device free first, then the oldest head request, then lower indices), sends it, and
    repeats. Stops early when more than ``max_waiting`` requests wait.
    """
    n = arrival.shape[0]
    nd = serves.shape[0]
    nq = serves.shape[1]
    head = np.zeros(nq, dtype=np.int64)
    cnt = np.empty(nq, dtype=np.int64)
    for k in range(nq):
        cnt[k] = qoff[k + 1] - qoff[k]
    n_serving = np.zeros(nq, dtype=np.int64)
    for d in range(nd):
        for k in range(nq):
            if serves[d, k]:
                n_serving[k] += 1
    free = np.zeros(nd)
    qmax = 1
    for k in range(nq):
        if q_batch[k] > qmax:
            qmax = q_batch[k]
    pbuf = np.empty(qmax, dtype=np.int64)  # lengths of a packed batch
    prow = np.empty(qmax, dtype=np.int64)
    one = qidx.shape[0] == 0  # a single queue: queue position = request id
    dispatched = 0
    nb = 0
    tail = 0
    stopped = 0
    while dispatched < n:
        best_t = _INF
        best_f = _INF
        best_a = _INF
        bd = -1
        bk = -1
        for k in range(nq):
            h = head[k]
            if h >= cnt[k]:
                continue
            B = q_batch[k]
            fill = B
            D = q_delay[k]
            if kind == _ADAPTIVE:
                # any device serving k gives the same plan; take the first
                for d in range(nd):
                    if serves[d, k]:
                        fill, D = _adaptive_target(arrival, lengths, qidx, qoff, k, h, tables, dev_model[d],
                                                   m_rows, m_len_step, m_packed, m_pack_len, B, n_serving[k],
                                                   ad_target, ad_util, ad_window)
                        break
            # earliest time queue k may send a batch (written out here: helper calls that take
            # arrays cost reference counting on every call)
            a0 = arrival[h if one else qidx[qoff[k] + h]]
            r = a0 + D
            if kind == _TOKEN:
                tok = 0
                c = 0
                m = h
                while m < cnt[k]:
                    i = m if one else qidx[qoff[k] + m]
                    tok += lengths[i]
                    c += 1
                    if tok >= budget or c >= B:
                        if arrival[i] < r:
                            r = arrival[i]
                        break
                    m += 1
            else:
                if h + fill - 1 < cnt[k]:
                    x = arrival[h + fill - 1 if one else qidx[qoff[k] + h + fill - 1]]
                    if x < r:
                        r = x
                if kind == _DYNAMIC and pref_min > 0 and h + pref_min - 1 < cnt[k]:
                    x = arrival[h + pref_min - 1 if one else qidx[qoff[k] + h + pref_min - 1]]
                    if x < r:
                        r = x
            for d in range(nd):
                if not serves[d, k]:
                    continue
                f = free[d]
                t = r if r > f else f
                if (t < best_t or (t == best_t and (f < best_f or (f == best_f and a0 < best_a)))):
                    best_t = t
                    best_f = f
                    best_a = a0
                    bd = d
                    bk = k
        k = bk
        d = bd
        t = best_t
        h = head[k]
        B = q_batch[k]
        D = q_delay[k]
        # size of the batch sent at t
        size = 0
        tok = 0
        mx = 0
        m = h
        while m < cnt[k] and size < B:
            i = m if one else qidx[qoff[k] + m]
            if arrival[i] > t:
                break
            li = lengths[i]
            if kind == _TOKEN and size > 0 and tok + li > budget:
                break
            tok += li
            if li > mx:
                mx = li
            size += 1
            m += 1
        if kind == _DYNAMIC and size < B and pref_min > 0 and t < best_a + D:
            # sent early because a preferred size was reached: the largest preferred <= size
            p = 0
            for x in pref:
                if x <= size:
                    p = x
            if p < size:
                size = p
                tok = 0
                mx = 0
                for m in range(h, h + size):
                    li = lengths[m if one else qidx[qoff[k] + m]]
                    tok += li
                    if li > mx:
                        mx = li
        mi = dev_model[d]
        rows_req = B if (kind == _STATIC and pad_full) else size
        rows, j, computed = _batch_shape(m_len_step[mi], m_packed[mi], m_pack_len[mi], rows_req, mx, tok)
        if m_packed[mi]:  # a real packing of this batch: first-fit decreasing into pack_len rows
            for m in range(h, h + size):
                pbuf[m - h] = lengths[m if one else qidx[qoff[k] + m]]
            srt = np.sort(pbuf[:size])[::-1].copy()
            rows = _pk._ffd(srt, m_pack_len[mi], m_pack_len[mi], prow[:size])
            computed = rows * m_pack_len[mi]
        rmax = m_rows[mi]
        if rows <= rmax:
            s = tables[mi, rows, j]
        else:  # beyond the table: whole tables in series, then the rest
            s = (rows // rmax) * tables[mi, rmax, j]
            if rows % rmax > 0:
                s += tables[mi, rows % rmax, j]
        if m_rand[mi]:
            s = s * mult[h if one else qidx[qoff[k] + h]]
        fin = t + s
        for m in range(h, h + size):
            i = m if one else qidx[qoff[k] + m]
            start[i] = t
            finish[i] = fin
            device[i] = d
            batch_id[i] = nb
        free[d] = fin
        dev_busy[d] += s
        dev_real[d] += tok
        dev_computed[d] += computed if m_len_step[mi] > 0 else tok
        head[k] = h + size
        dispatched += size
        nb += 1
        while tail < n and arrival[tail] <= t:
            tail += 1
        if tail - dispatched > max_waiting:
            stopped = 1
            break
    info[0] = nb
    info[1] = stopped
    info[2] = dispatched


# ----------------------------------------------------------------------------------------
# Plain-Python reference: an event-driven model of the same policies (independent code)
# ----------------------------------------------------------------------------------------


def _ref_service(plan, mi, rows, mx, tok, batch_lens=None):
    """(seconds, computed tokens) of a batch; ``batch_lens`` (the requests' lengths) for a packed device."""
    step = int(plan.m_len_step[mi])
    if step == 0:
        r, j, comp = rows, 1, tok
    elif plan.m_packed[mi]:
        pl = int(plan.m_pack_len[mi])
        r = _pk._ffd_reference(list(batch_lens), pl, pl)[1]  # first-fit decreasing into rows of pl tokens
        j, comp = 1, r * pl
    else:
        j = (mx + step - 1) // step
        r, comp = rows, rows * j * step
    rmax = int(plan.m_rows[mi])
    tab = plan.tables[mi]
    if r <= rmax:
        t = tab[r, j]
    else:
        full, rest = divmod(r, rmax)
        t = full * tab[rmax, j]
        if rest > 0:
            t += tab[rest, j]
    return float(t), comp


def _simulate_reference(plan: _Plan):
    """Event-driven reference: arrivals, timers and device completions in time order.

    Returns (start, finish, device, batch_id, dev_busy, dev_real, dev_computed, info) like
    the kernel. Written from the policy definitions, not from the kernel.
    """
    arr, lens = plan.arrival.tolist(), plan.lengths.tolist()
    n, (nd, nq) = len(arr), plan.serves.shape
    if plan.qidx.size:
        members = [plan.qidx[plan.qoff[k]:plan.qoff[k + 1]].tolist() for k in range(nq)]
    else:
        members = [list(range(n))]
    queue_of = [0] * n
    for k, mem in enumerate(members):
        for i in mem:
            queue_of[i] = k
    pos_in_queue = [0] * n
    for mem in members:
        for p, i in enumerate(mem):
            pos_in_queue[i] = p
    queues = [deque() for _ in range(nq)]
    free = [0.0] * nd
    start, finish = [math.nan] * n, [math.nan] * n
    device, batch_id = [-1] * n, [-1] * n
    busy, real, comp = [0.0] * nd, [0] * nd, [0] * nd
    serving_count = [sum(bool(plan.serves[d, k]) for d in range(nd)) for k in range(nq)]
    first_dev = [next(d for d in range(nd) if plan.serves[d, k]) for k in range(nq)]
    kind = plan.kind
    nxt, done, nb, stopped = 0, 0, 0, 0

    def adaptive_plan(k):
        mem, h = members[k], pos_in_queue[queues[k][0]]
        w = min(h, plan.ad_window)
        rate = 0.0
        if w >= 1:
            span = arr[mem[h]] - arr[mem[h - w]]
            if span > 0.0:
                rate = w / span
        L = lens[mem[h]]
        mi = int(plan.dev_model[first_dev[k]])
        need = rate / (plan.ad_util * serving_count[k])
        B = int(plan.q_batch[k])
        b = B
        for c in range(1, B + 1):
            if c / _ref_service(plan, mi, c, L, c * L, [L] * c)[0] >= need:
                b = c
                break
        return b, max(0.0, plan.ad_target - _ref_service(plan, mi, b, L, b * L, [L] * b)[0])

    def delay(k):
        return adaptive_plan(k)[1] if kind == _ADAPTIVE else float(plan.q_delay[k])

    def ready_now(k, t):
        """Can queue k send a batch at time t (it holds only arrivals <= t)?"""
        q = queues[k]
        if not q:
            return False
        B = int(plan.q_batch[k])
        if t >= arr[q[0]] + delay(k):
            return True
        if kind == _TOKEN:
            tok = 0
            for c, i in enumerate(q, 1):
                tok += lens[i]
                if tok >= plan.budget or c >= B:
                    return True
            return False
        if kind == _ADAPTIVE:
            return len(q) >= adaptive_plan(k)[0]
        if len(q) >= B:
            return True
        return kind == _DYNAMIC and plan.pref_min > 0 and len(q) >= plan.pref_min

    def take(k, t):
        q, B = queues[k], int(plan.q_batch[k])
        out, tok = [], 0
        for i in q:
            if len(out) >= B or (kind == _TOKEN and out and tok + lens[i] > plan.budget):
                break
            out.append(i)
            tok += lens[i]
        if kind == _DYNAMIC and plan.pref_min > 0 and len(out) < B and t < arr[q[0]] + delay(k):
            p = max(x for x in plan.pref.tolist() if x <= len(out))
            out = out[:p]
        for _ in out:
            q.popleft()
        return out

    now = -math.inf
    while done < n:
        # next event: an arrival, a device becoming free, or a queue's delay expiring
        cands = [arr[nxt]] if nxt < n else []
        cands += [f for f in free if f > now]
        cands += [e for e in (arr[queues[k][0]] + delay(k) for k in range(nq) if queues[k]) if e > now]
        if not cands:
            raise RuntimeError("reference simulation stalled (no next event)")
        t = now = min(cands)
        while nxt < n and arr[nxt] <= t:
            queues[queue_of[nxt]].append(nxt)
            nxt += 1
        # send every batch that can go at t
        sent = True
        while sent and not stopped:
            sent = False
            best = None
            for d in range(nd):
                if free[d] > t:
                    continue
                for k in range(nq):
                    if plan.serves[d, k] and ready_now(k, t):
                        key = (free[d], arr[queues[k][0]], k, d)
                        if best is None or key < best:
                            best = key
            if best is None:
                break
            _, _, k, d = best
            B = int(plan.q_batch[k])
            batch = take(k, t)
            mi = int(plan.dev_model[d])
            mx, tok = max(lens[i] for i in batch), sum(lens[i] for i in batch)
            rows = B if (kind == _STATIC and plan.pad_full) else len(batch)
            s, c = _ref_service(plan, mi, rows, mx, tok, [lens[i] for i in batch])
            if plan.m_rand[mi]:
                s = s * float(plan.mult[batch[0]])
            fin = t + s
            for i in batch:
                start[i], finish[i], device[i], batch_id[i] = t, fin, d, nb
            free[d] = fin
            busy[d] += s
            real[d] += tok
            comp[d] += c if plan.m_len_step[mi] > 0 else tok
            done += len(batch)
            nb += 1
            sent = True
            if nxt - done > plan.max_waiting:
                stopped = 1
        if stopped:
            break
    return (np.array(start), np.array(finish), np.array(device), np.array(batch_id),
            np.array(busy), np.array(real, dtype=np.int64), np.array(comp, dtype=np.int64),
            np.array([nb, stopped, done], dtype=np.int64))


# ----------------------------------------------------------------------------------------
# Public wrapper
# ----------------------------------------------------------------------------------------


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


def _as_devices(devices) -> list[ServiceModel]:
    if isinstance(devices, ServiceModel):
        return [devices]
    devs = list(devices)
    if not devs or not all(isinstance(d, ServiceModel) for d in devs):
        raise ValueError("devices must be a ServiceModel or a non-empty list of them "
                         "(see chip_service, fixed_service, exponential_service)")
    return devs


def _prepare(arrival_s, lengths, policy, devices, router, seed, max_waiting) -> _Plan:
    arr = np.asarray(arrival_s, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError("arrival_s must be a non-empty one-dimensional array of times (s)")
    if not np.all(np.isfinite(arr)) or arr.min() < 0:
        raise ValueError("arrival_s must hold finite times >= 0 (s)")
    if np.any(arr[1:] < arr[:-1]):
        raise ValueError("arrival_s must be sorted ascending (results are per request in arrival order)")
    n = arr.size
    if np.isscalar(lengths) or np.ndim(lengths) == 0:
        lens = np.full(n, positive("lengths", lengths, integer=True), dtype=np.int64)
    else:
        lens = lengths_array("lengths", lengths)  # int64: no narrowing, so 1e12 tokens is rejected below
        if lens.size != n:
            raise ValueError(f"lengths has {lens.size} entries, arrival_s has {n}: give one length per request")
    devs = _as_devices(devices)
    if isinstance(policy, P.Continuous):
        raise ValueError("Continuous batching is for generation: use simulate_generation")
    if not isinstance(policy, (P.Static, P.Dynamic, P.TokenBudget, P.LengthBuckets, P.Adaptive)):
        raise ValueError(f"policy must be one of ipusim.policies' objects, got {policy!r}")
    lmax = int(lens.max())
    if lmax > MAX_LENGTH:
        raise ValueError(f"a request of {lmax:,} tokens is longer than the simulator accepts ({MAX_LENGTH:,}); "
                         "token sums per batch must stay far from int64 overflow")
    for d in devs:
        if d.len_step and lmax > d.max_len:
            raise ValueError(f"a request of {lmax} tokens is longer than device {d.name!r} handles ({d.max_len})")
    nd = len(devs)
    # queues
    if router is not None and isinstance(policy, P.LengthBuckets):
        raise ValueError("a Router and LengthBuckets cannot be combined; pick one way to split by length")
    if isinstance(policy, P.LengthBuckets):
        if lmax > policy.edges[-1]:
            raise ValueError(f"a request of {lmax} tokens is longer than the last bucket edge {policy.edges[-1]}")
        qid = np.searchsorted(np.asarray(policy.edges), lens, side="left")
        nq = len(policy.edges)
        serves = np.ones((nd, nq), dtype=np.bool_)
    elif router is not None:
        if not isinstance(router, Router):
            raise ValueError(f"router must be a serving.Router, got {router!r}")
        if max(router.short_devices + router.long_devices) >= nd or min(router.short_devices + router.long_devices) < 0:
            raise ValueError(f"router device numbers must lie in 0..{nd - 1}")
        qid = (lens > router.threshold).astype(np.int64)
        nq = 2
        serves = np.zeros((nd, 2), dtype=np.bool_)
        serves[list(router.short_devices), 0] = True
        serves[list(router.long_devices), 1] = True
    else:
        qid, nq = None, 1
        serves = np.ones((nd, 1), dtype=np.bool_)
    if qid is not None:
        counts = np.bincount(qid, minlength=nq)
        qoff = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        qidx = np.argsort(qid, kind="stable").astype(np.int64)
    else:
        qoff = np.array([0, n], dtype=np.int64)
        qidx = np.zeros(0, dtype=np.int64)
    # models
    uniq, dev_model = [], []
    for d in devs:
        if not any(d is u for u in uniq):
            uniq.append(d)
        dev_model.append(next(i for i, u in enumerate(uniq) if u is d))
    R = max(u.table.shape[0] for u in uniq)
    J = max(u.table.shape[1] for u in uniq)
    tables = np.zeros((len(uniq), R, J))
    for i, u in enumerate(uniq):
        tables[i, :u.table.shape[0], :u.table.shape[1]] = u.table
    m_rand = np.array([u.random == "exp" for u in uniq])
    mult = np.random.default_rng([seed, 0x5E7]).exponential(1.0, n) if m_rand.any() else np.zeros(0)
    # policy
    pref = np.zeros(0, dtype=np.int64)
    budget, pad_full, ad = 0, False, (0.0, 1.0, 1)
    if isinstance(policy, P.Static):
        kind, B, D, pad_full = _STATIC, policy.batch, policy.timeout_s, True
    elif isinstance(policy, (P.Dynamic, P.LengthBuckets)):
        kind, B, D = _DYNAMIC, policy.max_batch, policy.max_delay_s
        if isinstance(policy, P.Dynamic):
            pref = np.array(policy.preferred, dtype=np.int64)
    elif isinstance(policy, P.TokenBudget):
        kind, B, D, budget = _TOKEN, policy.max_batch, policy.max_delay_s, policy.max_tokens
    else:
        kind, B, D = _ADAPTIVE, policy.max_batch, 0.0
        ad = (policy.latency_target_s, policy.utilization_target, policy.window)
    _check_fit(policy, B, devs, lens, qid, nq, serves)
    mw = n if max_waiting is None else positive("max_waiting", max_waiting, integer=True)
    return _Plan(
        arrival=arr, lengths=lens, mult=mult, qidx=qidx, qoff=qoff, serves=serves,
        dev_model=np.array(dev_model, dtype=np.int64), tables=tables,
        m_len_step=np.array([u.len_step for u in uniq], dtype=np.int64),
        m_packed=np.array([u.packed for u in uniq]), m_pack_len=np.array([u.pack_len for u in uniq], dtype=np.int64),
        m_rand=m_rand, m_rows=np.array([u.table.shape[0] - 1 for u in uniq], dtype=np.int64),
        kind=kind, q_batch=np.full(nq, B, dtype=np.int64), q_delay=np.full(nq, float(D)), budget=int(budget),
        pad_full=bool(pad_full), pref_min=int(pref[0]) if pref.size else 0, pref=pref,
        ad_target=float(ad[0]), ad_util=float(ad[1]), ad_window=int(ad[2]), max_waiting=int(mw),
    )


def _check_fit(policy, B, devs, lens, qid, nq, serves):
    """Refuse a policy whose full batch at a queue's longest request does not fit a device.

    A batch of ``B`` requests padded to the longest one is the largest step the policy can
    send (a static policy always sends it); if the machine model says it does not fit,
    there is no honest time for it (the fit rule), so the configuration is an error that
    names the largest batch that fits. Token-budget and packed batches are checked batch
    by batch after the run (``_refuse_unfit``).
    """
    if isinstance(policy, P.TokenBudget):
        return
    for k in range(nq):
        ql = lens if qid is None else lens[qid == k]
        if ql.size == 0:
            continue
        L = int(ql.max())
        for d, dev in enumerate(devs):
            if not serves[d, k] or dev.packed or not dev.len_step:
                continue
            if not math.isfinite(dev.time_s([L] * B)):
                most = largest_batch(dev, L)
                fix = ("Lower the policy's max batch or route long requests elsewhere" if most else
                       "Not even one request fits: use a chip with more memory")
                raise ValueError(f"a batch of {B} requests of {L} tokens does not fit device {dev.name!r} (the machine "
                                 f"model has no time for it); largest batch that fits at {L} tokens: "
                                 f"{most or 'none'}. {fix}")


def _refuse_unfit(plan, finish, devs):
    """After a run: a batch whose step did not fit has an infinite finish time; refuse it."""
    bad = np.flatnonzero(np.isinf(finish))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"request {i} ({int(plan.lengths[i])} tokens) landed in a batch that does not fit its device "
                         f"(the machine model has no time for it); lower the policy's batch or token budget")


def _run_kernel(plan: _Plan):
    n, nd = plan.arrival.size, plan.serves.shape[0]
    start = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    device = np.full(n, -1, dtype=np.int16)
    batch_id = np.full(n, -1, dtype=np.int32)
    busy, real, comp = np.zeros(nd), np.zeros(nd, dtype=np.int64), np.zeros(nd, dtype=np.int64)
    info = np.zeros(3, dtype=np.int64)
    _simulate_kernel(plan.arrival, plan.lengths, plan.mult, plan.qidx, plan.qoff, plan.serves, plan.dev_model,
                     plan.tables, plan.m_len_step, plan.m_packed, plan.m_pack_len, plan.m_rand, plan.m_rows,
                     plan.kind, plan.q_batch, plan.q_delay, plan.budget, plan.pad_full, plan.pref_min, plan.pref,
                     plan.ad_target, plan.ad_util, plan.ad_window, plan.max_waiting,
                     start, finish, device, batch_id, busy, real, comp, info)
    return start, finish, device, batch_id, busy, real, comp, info


def simulate(
    arrival_s,
    lengths,
    policy,
    devices,
    *,
    router: Router | None = None,
    latency_target_s: float = 0.1,
    max_waiting: int | None = 100_000,
    seed: int = DEFAULT_SEED,
    engine: str = "numba",
) -> ServingResult:
    """Simulate requests (``arrival_s``, sorted, s; ``lengths``, tokens) through ``policy`` onto ``devices``.

    ``devices`` is a ``ServiceModel`` or a list (one per device). ``router`` splits
    requests by length between two device pools. ``latency_target_s`` defines goodput.
    The run stops early (and reports ``stable = False``) when more than ``max_waiting``
    requests wait at once; ``None`` never stops early. ``seed`` draws exponential service
    times. ``engine`` is "numba" (the kernel) or "python" (the event-driven reference).
    """
    positive("latency_target_s", latency_target_s, at_most=_limits.MAX_SECONDS, why="a latency target, s")
    if hasattr(arrival_s, "__len__"):
        _limits.check_at_most("requests (len(arrival_s))", len(arrival_s), MAX_REQUESTS,
                              "requests in one run; split longer runs")
        _limits.check_memory("requests (len(arrival_s))", len(arrival_s), BYTES_PER_REQUEST * len(arrival_s),
                             f"about {BYTES_PER_REQUEST} bytes per request")
    if engine not in ("numba", "python"):
        raise ValueError(f"unknown engine {engine!r}; valid: numba, python")
    devs = _as_devices(devices)
    plan = _prepare(arrival_s, lengths, policy, devs, router, seed, max_waiting)
    out = _run_kernel(plan) if engine == "numba" else _simulate_reference(plan)
    start, finish, device, batch_id, busy, real, comp, info = out
    _refuse_unfit(plan, finish, devs)
    return ServingResult(
        policy=policy.describe(), devices=tuple(d.name for d in devs), arrival_s=plan.arrival,
        lengths=plan.lengths, start_s=start, finish_s=finish, device=device.astype(np.int16),
        batch_id=batch_id.astype(np.int32), device_busy_s=busy, device_real_tokens=real,
        device_computed_tokens=comp, batches=int(info[0]), stopped_early=bool(info[1]),
        latency_target_s=float(latency_target_s), max_waiting=plan.max_waiting,
        capacity_rps=_capacity_rps(devs, plan),
    )


def _capacity_rps(devs, plan) -> float:
    """Rough service capacity: each device's best requests/s at the mean length and the policy's batch."""
    L = int(round(float(plan.lengths.mean())))
    B = int(plan.q_batch[0])
    cap = 0.0
    for d in devs:
        lens = [min(L, d.max_len)] * B
        rows = B if plan.kind == _STATIC else None
        cap += B / d.time_s(lens, rows=rows)
    return cap


@dataclass(frozen=True)
class ServingResult:
    """Per-request times of a serving run and its summary. Times in seconds.

    Requests not served (a run stopped early as unstable) have NaN start and finish.
    """

    policy: str
    devices: tuple
    arrival_s: np.ndarray = field(repr=False)
    lengths: np.ndarray = field(repr=False)
    start_s: np.ndarray = field(repr=False)
    finish_s: np.ndarray = field(repr=False)
    device: np.ndarray = field(repr=False)  # int16, -1 when not served
    batch_id: np.ndarray = field(repr=False)  # int32, -1 when not served
    device_busy_s: np.ndarray = field(repr=False)
    device_real_tokens: np.ndarray = field(repr=False)
    device_computed_tokens: np.ndarray = field(repr=False)
    batches: int = 0
    stopped_early: bool = False
    latency_target_s: float = 0.1
    max_waiting: int = 0
    capacity_rps: float = float("nan")  # rough a-priori estimate; the summary measures served per busy second
    first_token_s: np.ndarray | None = field(default=None, repr=False)  # generation only

    @property
    def n(self) -> int:
        return int(self.arrival_s.size)

    @property
    def latency_s(self) -> np.ndarray:
        return self.finish_s - self.arrival_s

    @property
    def queueing_s(self) -> np.ndarray:
        return self.start_s - self.arrival_s

    @functools.cached_property
    def _summary(self) -> dict:
        served = ~np.isnan(self.finish_s)
        ns = int(served.sum())
        lat = (self.finish_s - self.arrival_s)[served]
        t0 = float(self.arrival_s[0])
        t1 = float(np.max(self.finish_s[served])) if ns else t0
        dur = max(t1 - t0, 1e-300)
        q = np.percentile(lat, [50, 90, 99, 99.9]) if ns else [math.nan] * 4
        wait = (self.start_s - self.arrival_s)[served]
        real, comp = self.device_real_tokens.sum(), self.device_computed_tokens.sum()
        offered = (self.n - 1) / (self.arrival_s[-1] - self.arrival_s[0]) if self.n > 1 and self.arrival_s[-1] > t0 else math.inf
        backlog = self.n - ns + int(np.count_nonzero(self.start_s[served] > self.arrival_s[-1]))
        per_dev = np.bincount(self.device[served].astype(np.int64), minlength=len(self.devices))
        busy = self.device_busy_s
        cap = float(np.sum(np.divide(per_dev, busy, out=np.zeros(len(busy)), where=busy > 0)))
        if not cap:
            cap = self.capacity_rps
        stable, reason = True, ""
        if self.stopped_early:
            stable, reason = False, (f"stopped: more than {self.max_waiting:,} requests waiting; offered "
                                     f"{offered:,.0f} req/s vs capacity about {cap:,.0f} req/s")
        elif self.n >= 100 and backlog > max(50, 0.05 * self.n):
            stable, reason = False, (f"queue grew: {backlog:,} of {self.n:,} requests were still waiting when the "
                                     f"last arrived; offered {offered:,.0f} req/s vs capacity about "
                                     f"{cap:,.0f} req/s")
        elif ns and self.first_token_s is None and np.any(busy * offered / ns > 1.0):
            # A device given a share per_dev/ns of the offered rate serves per_dev/busy requests per
            # busy second; it keeps up only if share x offered <= per_dev / busy, i.e. busy x
            # offered / ns <= 1. Beyond that there is no steady state, whatever the run length (a short
            # run only hides the queue it would build); per device, so one overloaded pool of a
            # router counts. Not for generation: there "busy" is the time any sequence runs, which
            # nears 100% well below capacity.
            d = int(np.argmax(busy * offered / ns))
            off_d, cap_d = offered * per_dev[d] / ns, per_dev[d] / busy[d]
            stable, reason = False, (f"offered {off_d:,.0f} req/s to {self.devices[d]} exceeds its capacity about "
                                     f"{cap_d:,.0f} req/s (requests served per busy second)")
        out = {
            "policy": self.policy, "devices": list(self.devices), "requests": self.n, "served": ns,
            "batches": self.batches,
            "mean_batch": ((real / self.batches) if self.first_token_s is not None else ns / self.batches)
            if self.batches else 0.0,
            "offered_rps": float(offered), "capacity_rps": cap,
            "throughput_rps": ns / dur,
            "goodput_rps": float(np.count_nonzero(lat <= self.latency_target_s)) / dur,
            "latency_target_s": self.latency_target_s,
            "latency_mean_s": float(lat.mean()) if ns else math.nan,
            "latency_p50_s": float(q[0]), "latency_p90_s": float(q[1]),
            "latency_p99_s": float(q[2]), "latency_p999_s": float(q[3]),
            "queueing_mean_s": float(wait.mean()) if ns else math.nan,
            "queueing_p99_s": float(np.percentile(wait, 99)) if ns else math.nan,
            "utilization": float(self.device_busy_s.sum() / (dur * len(self.devices))),
            "device_utilization": (self.device_busy_s / dur).tolist(),
            "padded_token_waste": float(1.0 - real / comp) if comp else 0.0,
            "stable": stable, "unstable_reason": reason,
        }
        if self.first_token_s is not None:
            ft = (self.first_token_s - self.arrival_s)[served]
            out["ttft_p50_s"] = float(np.percentile(ft, 50)) if ns else math.nan
            out["ttft_p99_s"] = float(np.percentile(ft, 99)) if ns else math.nan
        return out

    def summary(self) -> dict:
        """Headline numbers (see ``to_dict``)."""
        return dict(self._summary)

    def __getattr__(self, name):
        s = type(self).__dict__["_summary"].__get__(self)
        if name in s:
            return s[name]
        raise AttributeError(name)

    def to_dict(self) -> dict:
        return self.summary()

    def __repr__(self):
        s = self._summary
        flag = "" if s["stable"] else f"  UNSTABLE: {s['unstable_reason']}"
        return (
            f"ServingResult({s['policy']} on {', '.join(self.devices)}: {s['served']:,}/{s['requests']:,} served, "
            f"{s['throughput_rps']:,.1f} req/s, p50 {s['latency_p50_s'] * 1e3:,.2f} ms, p99 "
            f"{s['latency_p99_s'] * 1e3:,.2f} ms, mean batch {s['mean_batch']:.1f}, utilization "
            f"{s['utilization']:.0%}, padding waste {s['padded_token_waste']:.0%}){flag}"
        )

    def _repr_html_(self):
        s = self._summary
        rows = "".join(
            f"<tr><td>{k}</td><td>{v:,.4g}</td></tr>" if isinstance(v, float) else f"<tr><td>{k}</td><td>{v}</td></tr>"
            for k, v in s.items() if k not in ("devices", "device_utilization")
        )
        return f"<table><caption>ServingResult</caption>{rows}</table>"


def theory_wait_s(rate_per_s: float, mean_service_s: float, kind: str) -> float:
    """Mean waiting time in queue for M/M/1 (``kind='mm1'``) or M/D/1 (``'md1'``), Pollaczek-Khinchine."""
    lam = positive("rate_per_s", rate_per_s)
    s = positive("mean_service_s", mean_service_s)
    rho = lam * s
    if rho >= 1:
        raise ValueError(f"utilization {rho:.3f} >= 1: the queue has no steady state")
    cs2 = {"mm1": 1.0, "md1": 0.0}.get(kind)
    if cs2 is None:
        raise ValueError(f"unknown kind {kind!r}; valid: mm1, md1")
    return rho * s * (1 + cs2) / (2 * (1 - rho))


def simpy_dynamic(arrival_s, lengths, policy: P.Dynamic, devices, *, seed: int = DEFAULT_SEED):
    """The dynamic batcher as a simpy model (a benchmark baseline; simpy is a test dependency).

    One queue, devices taking batches in the order they become free. Returns
    (start, finish, device, batch_id) arrays; times are kept as the exact sums the
    kernel forms (simpy's clock only orders the events).
    """
    import simpy

    if not isinstance(policy, P.Dynamic):
        raise ValueError("simpy_dynamic models the Dynamic policy only")
    devs = _as_devices(devices)
    plan = _prepare(arrival_s, lengths, policy, devs, None, seed, None)
    arr, lens = plan.arrival.tolist(), plan.lengths.tolist()
    n, B, D = len(arr), policy.max_batch, policy.max_delay_s
    pref = list(policy.preferred)
    start, finish = np.full(n, np.nan), np.full(n, np.nan)
    device, batch_id = np.full(n, -1, dtype=np.int16), np.full(n, -1, dtype=np.int32)
    env = simpy.Environment()
    queue = deque()
    idle = simpy.Store(env)
    for d in range(len(devs)):
        idle.put((0.0, d))
    state = {"arrived": env.event(), "nb": 0}

    def source():
        for i, a in enumerate(arr):
            yield env.timeout(a - env.now)
            queue.append(i)
            ev, state["arrived"] = state["arrived"], env.event()
            ev.succeed()

    def run_batch(d, t, batch):
        mi = int(plan.dev_model[d])
        s, _ = _ref_service(plan, mi, len(batch), max(lens[i] for i in batch), sum(lens[i] for i in batch),
                            [lens[i] for i in batch])
        if plan.m_rand[mi]:
            s = s * float(plan.mult[batch[0]])
        fin = t + s
        for i in batch:
            start[i], finish[i], device[i], batch_id[i] = t, fin, d, state["nb"]
        state["nb"] += 1
        yield env.timeout(fin - env.now)
        yield idle.put((fin, d))

    def batcher():
        t = 0.0  # logical time: exact sums, as in the kernel
        while True:
            f, d = yield idle.get()
            t = max(t, f)
            while not queue:
                yield state["arrived"]
                t = arr[queue[-1]]
            expiry = arr[queue[0]] + D
            while len(queue) < B and not (pref and len(queue) >= pref[0]) and t < expiry:
                arrived = state["arrived"]
                got = yield arrived | env.timeout(expiry - env.now)
                t = arr[queue[-1]] if arrived in got else expiry
            take = min(len(queue), B)
            if t < expiry and take < B and pref:
                take = max(p for p in pref if p <= take)
            batch = [queue.popleft() for _ in range(take)]
            env.process(run_batch(d, t, batch))

    env.process(source())
    env.process(batcher())
    env.run()
    return start, finish, device, batch_id


# ----------------------------------------------------------------------------------------
# Continuous (iteration-level) batching for generation
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GenerationModel:
    """Iteration times of a decoder on a chip: prefill of new prompts + one decode step of the rest.

    ``prefill`` is a padded ``ServiceModel`` (rows = new prompts, column = longest prompt);
    ``decode[b, j]`` is one decode step of ``b`` sequences whose mean context is
    ``j * ctx_step`` tokens (decode cost is linear in the total context for these models,
    so the mean stands for the mix).
    """

    name: str
    prefill: ServiceModel
    decode: np.ndarray = field(repr=False)
    ctx_step: int = 64
    source: str = ""


def generation_model(chip, model="gpt2", *, max_batch: int = 64, max_ctx: int | None = None,
                     ctx_step: int = 64, prompt_step: int = 32) -> GenerationModel:
    """Build a ``GenerationModel`` of ``model`` on ``chip`` from the machine model."""
    from . import hardware, workloads

    c, m = hardware.chip(chip), workloads.model(model)
    if m.kind != "decoder":
        raise ValueError(f"generation needs a decoder model; {m.name} is an {m.kind}")
    max_ctx = m.max_positions if max_ctx is None else positive("max_ctx", max_ctx, integer=True)
    b = positive("max_batch", max_batch, integer=True)
    exact = c.kind == "gpu"  # as in chip_service: GPU times are not linear in rows, tile calls are slow
    # phase "prefill": the prompt pass writes the KV cache (its bytes count in the fit check)
    tab = _time_table(c.name, m.name, "prefill", b, max_ctx, positive("prompt_step", prompt_step, integer=True), exact)
    pre = ServiceModel(f"{c.name} {m.name} prefill", tab, 1, source="machine")
    dec = _time_table(c.name, m.name, "decode", b, max_ctx, positive("ctx_step", ctx_step, integer=True), exact)
    return GenerationModel(f"{c.name} {m.name}", pre, dec, ctx_step, source="machine")


@njit(cache=True, error_model="numpy")
def _continuous_kernel(arrival, prompt, output, pre_tab, pre_step, dec_tab, ctx_step, max_batch, kv_cap,
                       start, first, finish, info, busy_out):
    """Iteration-level batching on one device (Orca-style: prefills join an iteration).

    Preconditions: ``arrival`` sorted; every ``prompt + output <= kv_cap`` and every
    context fits the tables; outputs NaN-filled. Admission is first-come first-served: the
    head request waits until a batch slot and its whole KV reservation (prompt + output
    tokens) are free. ``info[0]`` gets the iterations, ``busy_out[0]`` the busy seconds.
    """
    n = arrival.shape[0]
    run_id = np.empty(max_batch, dtype=np.int64)
    run_ctx = np.empty(max_batch, dtype=np.int64)
    run_left = np.empty(max_batch, dtype=np.int64)
    nrun = 0
    nxt = 0
    done = 0
    kv = 0
    t = 0.0
    iters = 0
    busy = 0.0
    while done < n:
        if nrun == 0 and arrival[nxt] > t:
            t = arrival[nxt]
        old = nrun
        ctx_sum = 0
        for r in range(old):
            ctx_sum += run_ctx[r]
        nnew = 0
        pmax = 0
        while nxt < n and arrival[nxt] <= t and nrun < max_batch and kv + prompt[nxt] + output[nxt] <= kv_cap:
            run_id[nrun] = nxt
            run_ctx[nrun] = prompt[nxt]
            run_left[nrun] = output[nxt]
            kv += prompt[nxt] + output[nxt]
            start[nxt] = t
            if prompt[nxt] > pmax:
                pmax = prompt[nxt]
            nrun += 1
            nnew += 1
            nxt += 1
        dt = 0.0
        if nnew > 0:
            dt += _lookup(pre_tab, nnew, (pmax + pre_step - 1) // pre_step)
        if old > 0:
            mean_ctx = (ctx_sum + old - 1) // old + 1  # context including the new token
            dt += _lookup(dec_tab, old, (mean_ctx + ctx_step - 1) // ctx_step)
        t = t + dt
        busy += dt
        iters += 1
        w = 0
        for r in range(nrun):
            i = run_id[r]
            if r >= old:  # prefilled this iteration: its first token is out
                first[i] = t
            left = run_left[r] - 1
            if left <= 0:
                finish[i] = t
                kv -= prompt[i] + output[i]
                done += 1
            else:
                run_id[w] = i
                run_ctx[w] = run_ctx[r] + 1
                run_left[w] = left
                w += 1
        nrun = w
    info[0] = iters
    busy_out[0] = busy


def _continuous_reference(arrival, prompt, output, gen: GenerationModel, max_batch, kv_cap):
    """Plain-Python continuous batching (lists of running requests), for tests and benchmarks."""
    arr, pr, out = arrival.tolist(), prompt.tolist(), output.tolist()
    n = len(arr)
    start, first, finish = [math.nan] * n, [math.nan] * n, [math.nan] * n
    running = []  # [id, ctx, left]
    nxt, done, kv, t, iters = 0, 0, 0, 0.0, 0
    pre, dec = gen.prefill.table, gen.decode
    while done < n:
        if not running and arr[nxt] > t:
            t = arr[nxt]
        old = list(running)
        new = []
        while (nxt < n and arr[nxt] <= t and len(old) + len(new) < max_batch
               and kv + pr[nxt] + out[nxt] <= kv_cap):
            new.append([nxt, pr[nxt], out[nxt]])
            kv += pr[nxt] + out[nxt]
            start[nxt] = t
            nxt += 1
        dt = 0.0
        if new:
            j = -(-max(x[1] for x in new) // gen.prefill.len_step)
            dt += _lookup(pre, len(new), j)
        if old:
            mean_ctx = -(-sum(x[1] for x in old) // len(old)) + 1
            dt += _lookup(dec, len(old), -(-mean_ctx // gen.ctx_step))
        t = t + dt
        iters += 1
        for x in new:
            first[x[0]] = t
        running = []
        for x in old + new:
            x[1] += 1
            x[2] -= 1
            if x[2] <= 0:
                finish[x[0]] = t
                kv -= pr[x[0]] + out[x[0]]
                done += 1
            else:
                running.append(x)
    return np.array(start), np.array(first), np.array(finish), iters


def simulate_generation(arrival_s, prompt_tokens, output_tokens, policy: P.Continuous, gen: GenerationModel, *,
                        latency_target_s: float = 10.0, engine: str = "numba") -> ServingResult:
    """Continuous batching of generation requests on one device.

    Each request brings ``prompt_tokens`` and generates ``output_tokens`` (>= 1; the first
    comes from the prefill). ``first_token_s`` of the result is the time to first token.
    """
    if not isinstance(policy, P.Continuous):
        raise ValueError("simulate_generation needs a policies.Continuous policy")
    if not isinstance(gen, GenerationModel):
        raise ValueError("gen must be a GenerationModel (see generation_model)")
    arr = np.asarray(arrival_s, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0 or np.any(arr[1:] < arr[:-1]) or not np.all(np.isfinite(arr)):
        raise ValueError("arrival_s must be a non-empty sorted array of finite times (s)")
    n = arr.size
    pr = lengths_array("prompt_tokens", np.broadcast_to(prompt_tokens, (n,)).copy())
    out = lengths_array("output_tokens", np.broadcast_to(output_tokens, (n,)).copy())
    need = pr + out
    if need.max() > policy.kv_capacity_tokens:
        raise ValueError(f"a request needs {int(need.max())} KV tokens, more than kv_capacity_tokens "
                         f"{policy.kv_capacity_tokens}")
    max_ctx = gen.decode.shape[1] - 1
    if need.max() > max_ctx * gen.ctx_step or pr.max() > gen.prefill.max_len:
        raise ValueError(f"prompt + output up to {int(need.max())} tokens exceeds the model's tables "
                         f"(context {max_ctx * gen.ctx_step}, prompt {gen.prefill.max_len})")
    B = policy.max_batch
    if engine == "numba":
        start, first, finish = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
        info, busy_out = np.zeros(1, dtype=np.int64), np.zeros(1)
        _continuous_kernel(arr, pr, out, gen.prefill.table, gen.prefill.len_step, gen.decode, gen.ctx_step, B,
                           policy.kv_capacity_tokens, start, first, finish, info, busy_out)
        iters = int(info[0])
    elif engine == "python":
        start, first, finish, iters = _continuous_reference(arr, pr, out, gen, B, policy.kv_capacity_tokens)
    else:
        raise ValueError(f"unknown engine {engine!r}; valid: numba, python")
    if np.isinf(finish).any() or np.isinf(first).any():
        raise ValueError(f"an iteration of up to {B} sequences does not fit {gen.name} (the machine model has no time "
                         "for it; prefill writes the KV cache too): lower the policy's max_batch")
    busy = _busy_from_iterations(start, finish)
    return ServingResult(
        policy=policy.describe(), devices=(gen.name,), arrival_s=arr, lengths=pr, start_s=start, finish_s=finish,
        device=np.zeros(n, dtype=np.int16), batch_id=np.full(n, -1, dtype=np.int32),
        device_busy_s=np.array([busy]), device_real_tokens=np.array([int(out.sum())]),
        device_computed_tokens=np.array([int(out.sum())]), batches=iters, stopped_early=False,
        latency_target_s=positive("latency_target_s", latency_target_s), max_waiting=n,
        capacity_rps=float("nan"), first_token_s=first,
    )


def _busy_from_iterations(start, finish) -> float:
    """Time the device had at least one request running (union of [start, finish] intervals)."""
    order = np.argsort(start, kind="stable")
    s, f = start[order], finish[order]
    busy, cur_s, cur_f = 0.0, s[0], f[0]
    for a, b in zip(s[1:].tolist(), f[1:].tolist(), strict=True):
        if a > cur_f:
            busy += cur_f - cur_s
            cur_s, cur_f = a, b
        else:
            cur_f = max(cur_f, b)
    return busy + (cur_f - cur_s)


def sweep_rates(rates, lengths_fn, policy, devices, *, n: int = 20_000, router: Router | None = None,
                latency_target_s: float = 0.1, seed: int = DEFAULT_SEED, progress=None) -> list[dict]:
    """Run ``simulate`` at each Poisson arrival rate; one summary dict per rate (with ``rate_rps``).

    ``lengths_fn(n, seed)`` draws the request lengths (the same for every rate).
    ``progress`` optionally wraps the rate iterable (e.g. ``ipusim.config.progress``).
    """
    from . import arrivals

    lens = lengths_fn(n, seed)
    out = []
    it = rates if progress is None else progress(rates)
    for rate in it:
        arr = arrivals.poisson(rate, n, seed=seed)
        r = simulate(arr, lens, policy, devices, router=router, latency_target_s=latency_target_s, seed=seed,
                     max_waiting=max(1000, n // 10))
        out.append({"rate_rps": float(rate), **r.summary()})
    return out
