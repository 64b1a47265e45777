"""Request arrival processes: when requests reach the server.

Every function returns a sorted ``float64`` array of arrival times in seconds, starting
near 0, and takes a ``seed`` (default fixed) so that the same call gives the same times.

* ``poisson``: independent exponential gaps (the textbook "M" in M/M/1).
* ``gamma``: independent Gamma gaps with a chosen coefficient of variation (cv 1 is
  Poisson; cv > 1 burstier, cv < 1 more regular), as serving benchmarks draw them.
* ``two_rate``: a two-state Markov-modulated Poisson process; ``on_off`` is its special
  case with a silent state (bursty traffic).
* ``daily_ramp``: a non-homogeneous Poisson process whose rate follows one sinusoidal
  day (trough at midnight, peak at noon), compressed into ``period_s``.
* ``load_trace``: arrival time and sequence length per request from a CSV file.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np

from . import limits
from ._validate import fraction, in_range, positive, read_text_file

DEFAULT_SEED = 0


def _rate(name: str, value) -> float:
    """A mean arrival rate, requests/s, within ``limits``' physical range."""
    return in_range(name, value, limits.MIN_RATE_PER_S, limits.MAX_RATE_PER_S, why=limits.RATE_WHY)


def poisson(rate_per_s: float, n: int, *, seed: int = DEFAULT_SEED) -> np.ndarray:
    """``n`` arrival times of a Poisson process of ``rate_per_s`` requests per second."""
    rate = _rate("rate_per_s", rate_per_s)
    n = positive("n", n, integer=True)
    rng = np.random.default_rng(seed)
    t = rng.exponential(1.0 / rate, n)
    return np.cumsum(t, out=t)


def gamma(rate_per_s: float, n: int, *, cv: float = 1.0, seed: int = DEFAULT_SEED) -> np.ndarray:
    """``n`` arrival times with independent Gamma gaps of mean ``1 / rate_per_s`` and
    coefficient of variation ``cv`` (shape 1 / cv^2); ``cv = 1`` gives Poisson arrivals."""
    rate = _rate("rate_per_s", rate_per_s)
    n = positive("n", n, integer=True)
    c = in_range("cv", cv, limits.MIN_CV, limits.MAX_CV, why=limits.CV_WHY)
    shape = 1.0 / (c * c)
    t = np.random.default_rng(seed).gamma(shape, 1.0 / (rate * shape), n)
    return np.cumsum(t, out=t)


def two_rate(
    rate_high_per_s: float,
    rate_low_per_s: float,
    n: int,
    *,
    mean_high_s: float = 1.0,
    mean_low_s: float = 1.0,
    seed: int = DEFAULT_SEED,
) -> np.ndarray:
    """``n`` arrivals of a two-rate Markov-modulated Poisson process.

    The process alternates between a high-rate state and a low-rate state; each stay is
    exponential with mean ``mean_high_s`` or ``mean_low_s`` seconds. ``rate_low_per_s``
    may be 0 (an on/off source). The long-run mean rate is
    ``(r_h m_h + r_l m_l) / (m_h + m_l)``.
    """
    rh = positive(
        "rate_high_per_s", rate_high_per_s
    )  # any finite rate: the draw is O(n) at either extreme
    rl = positive("rate_low_per_s", rate_low_per_s, allow_zero=True)
    mh = positive("mean_high_s", mean_high_s)
    ml = positive("mean_low_s", mean_low_s)
    n = positive("n", n, integer=True)
    rng = np.random.default_rng(seed)
    if rh * mh + rl * ml < SPARSE_ARRIVALS_PER_CYCLE:
        return _two_rate_sparse(rh, rl, mh, ml, n, rng)
    out = np.empty(n)
    got, t, high = 0, 0.0, True
    while got < n:
        stay = rng.exponential(mh if high else ml)
        rate = rh if high else rl
        if rate > 0:
            k = rng.poisson(rate * stay)
            if k:
                # Given k Poisson events in an interval, their times are uniform order statistics.
                take = min(k, n - got)
                if k <= 4 * (n - got):
                    times = t + np.sort(rng.uniform(0.0, stay, k))[:take]
                else:  # only the first ``take`` of k: O(take) work and memory, same distribution
                    times = t + stay * _first_order_statistics(k, take, rng)
                out[got : got + take] = times
                got += take
        t += stay
        high = not high
    return out


def _first_order_statistics(k: int, m: int, rng) -> np.ndarray:
    """The m smallest of k uniform(0, 1) draws, sorted, in O(m): U_(i) = S_i / S_(k+1), where S
    are partial sums of Exp(1) draws and S_(k+1) = S_m + Gamma(k + 1 - m) (Devroye 1986, V.2)."""
    s = np.cumsum(rng.exponential(1.0, m))
    return s / (s[-1] + rng.gamma(k + 1 - m))


# Below this many arrivals per high+low cycle, most stays are empty and drawing them one by one
# would loop about n / (arrivals per cycle) times (rate 1e-9/s: ~1e9 loops for 5 requests);
# ``_two_rate_sparse`` skips runs of empty cycles in one draw instead.
SPARSE_ARRIVALS_PER_CYCLE = 0.5


def _two_rate_sparse(rh, rl, mh, ml, n, rng):
    """Two-rate MMPP event by event, skipping runs of empty cycles (work O(n), not O(n / rate)).

    In a state of arrival rate r and mean stay m, the next event comes after Exp(r + 1/m) and
    is an arrival with probability r m / (1 + r m) (competing exponentials), so a stay is
    empty with probability 1 / (1 + r m) and an empty stay lasts Exp(r + 1/m). At the start
    of each high stay the number K of empty high+low cycles is geometric; they last the sum
    of K empty stays of each kind (two gamma draws); the next cycle then holds an arrival,
    in its high stay with probability q_h / (1 - p0), else in its low stay.
    """
    qh, ql = rh * mh / (1 + rh * mh), rl * ml / (1 + rl * ml)
    eh, el = rh + 1 / mh, rl + 1 / ml  # event rates in each state
    p0 = (1 - qh) * (1 - ql)  # a whole cycle without an arrival
    out = np.empty(n)
    got, t, high, fresh_high = 0, 0.0, True, True
    while got < n:
        if fresh_high:
            k = int(rng.geometric(1 - p0)) - 1  # empty cycles before one with an arrival
            if k:
                t += rng.gamma(k, 1 / eh) + rng.gamma(k, 1 / el)
            if rng.uniform() < qh / (1 - p0):
                t += rng.exponential(1 / eh)  # the high stay's first event, an arrival
            else:
                t += rng.exponential(1 / eh) + rng.exponential(
                    1 / el
                )  # empty high stay, then a low arrival
                high = False
            out[got] = t
            got += 1
            fresh_high = False
            continue
        r, e = (rh, eh) if high else (rl, el)
        t += rng.exponential(1 / e)
        if rng.uniform() < r / e:
            out[got] = t
            got += 1
        elif high:
            high = False
        else:
            high, fresh_high = True, True
    return out


def on_off(
    rate_on_per_s: float,
    n: int,
    *,
    mean_on_s: float = 1.0,
    mean_off_s: float = 1.0,
    seed: int = DEFAULT_SEED,
) -> np.ndarray:
    """Bursty arrivals: Poisson at ``rate_on_per_s`` during "on" periods, silence when "off"."""
    return two_rate(rate_on_per_s, 0.0, n, mean_high_s=mean_on_s, mean_low_s=mean_off_s, seed=seed)


def daily_ramp(
    mean_rate_per_s: float,
    n: int,
    *,
    period_s: float = 86_400.0,
    swing: float = 0.8,
    seed: int = DEFAULT_SEED,
) -> np.ndarray:
    """``n`` arrivals whose rate follows a day: ``mean (1 - swing cos(2 pi t / period))``.

    The rate is lowest at t = 0 (midnight) and highest at ``period_s / 2`` (noon);
    ``swing`` in [0, 1) sets how deep the trough is. Drawn by thinning a Poisson process
    of the peak rate (Lewis and Shedler 1979).
    """
    mean = _rate("mean_rate_per_s", mean_rate_per_s)
    period = positive("period_s", period_s)
    sw = fraction("swing", swing, inclusive_one=False)
    n = positive("n", n, integer=True)
    peak = mean * (1.0 + sw)
    rng = np.random.default_rng(seed)
    out = np.empty(n)
    got, t0 = 0, 0.0
    chunk = max(1024, int(n / (1.0 - sw + 1e-9) * 0.5) + 16)
    while got < n:
        gaps = rng.exponential(1.0 / peak, chunk)
        t = t0 + np.cumsum(gaps)
        keep = rng.uniform(0.0, 1.0, chunk) * peak <= mean * (
            1.0 - sw * np.cos(2 * np.pi * t / period)
        )
        acc = t[keep]
        take = min(acc.size, n - got)
        out[got : got + take] = acc[:take]
        got += take
        t0 = t[-1]
    return out


def load_trace(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Read a request trace: a CSV with columns ``arrival_s`` and ``length`` (tokens).

    Returns ``(arrival_s, lengths)`` sorted by arrival time. A header row is required;
    the column names ``time``/``arrival``/``arrival_s`` and ``length``/``tokens``/
    ``seq_len`` are accepted.
    """
    text = read_text_file("trace file", path)
    path = Path(path)
    with io.StringIO(text, newline="") as fh:
        reader = csv.reader(fh)
        try:
            header = [h.strip().lower() for h in next(reader)]
        except StopIteration:
            raise ValueError(
                f"trace file {path} is empty; expected a header 'arrival_s,length'"
            ) from None
        t_col = next(
            (header.index(c) for c in ("arrival_s", "arrival", "time", "time_s") if c in header),
            None,
        )
        l_col = next(
            (header.index(c) for c in ("length", "tokens", "seq_len") if c in header), None
        )
        if t_col is None or l_col is None:
            raise ValueError(
                f"trace file {path} needs columns 'arrival_s' and 'length'; found {', '.join(header)}"
            )
        rows = []
        need = max(t_col, l_col) + 1
        for r in reader:
            if not r or not any(x.strip() for x in r):
                continue
            line = reader.line_num
            if len(r) < need:
                raise ValueError(
                    f"trace file {path} line {line}: {len(r)} field(s) {','.join(r)!r}; "
                    f"expected {len(header)} ({', '.join(header)})"
                )
            try:
                rows.append((float(r[t_col]), float(r[l_col])))
            except ValueError:
                raise ValueError(
                    f"trace file {path} line {line}: {','.join(r)!r} is not an arrival time "
                    "and a length (numbers)"
                ) from None
            if len(rows) > limits.MAX_REQUESTS_IN_TRACE:
                raise ValueError(
                    f"trace file {path}: over {limits.MAX_REQUESTS_IN_TRACE:,} requests "
                    "(the serving simulator's limit for one run); split the trace"
                )
    if not rows:
        raise ValueError(f"trace file {path} has a header but no requests")
    arr = np.array(rows)
    t, lens = arr[:, 0], arr[:, 1]
    if not np.all(np.isfinite(t)) or np.any(t < 0):
        bad = int(np.flatnonzero(~np.isfinite(t) | (t < 0))[0])
        raise ValueError(
            f"trace file {path}: arrival times must be finite and >= 0 (request {bad + 1}: {t[bad]!r})"
        )
    if not np.all(np.isfinite(lens)) or np.any(lens < 1) or np.any(lens != np.round(lens)):
        raise ValueError(f"trace file {path}: lengths must be whole numbers >= 1")
    if np.any(lens > limits.MAX_SEQUENCE_TOKENS):
        raise ValueError(
            f"trace file {path}: a length of {lens.max():,.0f} tokens is over the limit of "
            f"{limits.MAX_SEQUENCE_TOKENS:,} tokens per request"
        )
    order = np.argsort(t, kind="stable")
    return t[order].astype(np.float64), lens[order].astype(np.int64)


def save_trace(path: str | Path, arrival_s, lengths) -> None:
    """Write a trace CSV readable by ``load_trace`` (whole or not at all: ``_files.atomic_write``)."""
    from ._files import atomic_write

    with atomic_write(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["arrival_s", "length"])
        for t, ln in zip(np.asarray(arrival_s), np.asarray(lengths), strict=True):
            w.writerow([repr(float(t)), int(ln)])
