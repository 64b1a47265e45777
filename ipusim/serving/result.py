"""The result of a serving run: per-request times and their summary.

``ServingResult`` holds per-request arrays (seconds) and the device totals a kernel wrote;
``summary()`` reduces them with ``percentiles.summarize`` (totals and exact percentiles,
in one pass in the usual case), ``slo_view`` with ``percentiles.slo_numbers``. ``quantiles``
and ``weighted.weighted_quantiles`` are re-exported here.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from .percentiles import (
    percentile_rank,
    quantiles,
    slo_numbers,
    summarize,
)
from .weighted import weighted_quantiles

__all__ = [
    "STABLE_SERVED_SHARE",
    "ServingResult",
    "percentile_rank",
    "quantiles",
    "weighted_quantiles",
]

# A run of 100+ requests that serves less than this share of the offered rate is not stable: its
# requests wait for a delay (or a batch that never fills) longer than the run.
STABLE_SERVED_SHARE = 0.5
_SUMMARY_QS = {
    50.0: "latency_p50_s",
    90.0: "latency_p90_s",
    99.0: "latency_p99_s",
    99.9: "latency_p999_s",
}
# the percentiles the summary takes of latency, queueing delay and time to first token (rows
# padded with repeats: only the first, and the first two of the last, are reported)
_SUMMARY_Q_TABLE = np.array([list(_SUMMARY_QS), [99.0] * 4, [50.0, 99.0, 99.0, 99.0]])
_NO_INDEX = np.zeros(0, dtype=np.int32)  # the kernels' "times per request" (``_index``)


@dataclass(frozen=True)
class ServingResult:
    """Per-request times of a serving run and its summary. Times in seconds.

    Requests not served (a run stopped early as unstable) have NaN start and finish.
    A batched run stores start, finish and device once per batch (``times``, with
    ``by_batch``): ``start_s``, ``finish_s`` and ``device`` are made per request the first
    time they are read (a gather by ``batch_id``); the summary reads the batches directly.
    Generation runs also carry ``first_token_s`` (time the first token is out),
    ``output_tokens`` (tokens generated per request) and the time between tokens over all
    tokens (``gap_s`` with ``gap_weight`` tokens each): the summary's ``tbt_p50_s`` and
    ``tbt_p99_s`` are percentiles over every inter-token gap, not over per-request means.
    """

    policy: str
    devices: tuple
    arrival_s: np.ndarray = field(repr=False)
    lengths: np.ndarray = field(repr=False)
    # (start s, finish s, device int16): per request, or per batch when ``by_batch`` (then with
    # one entry more, NaN, NaN, -1, that a batch id of -1 reads: not served)
    times: tuple = field(repr=False)
    # int32, -1 when not served; generation runs have no batches: a read-only view of -1 (no memory)
    batch_id: np.ndarray = field(repr=False)
    device_busy_s: np.ndarray = field(repr=False)
    device_real_tokens: np.ndarray = field(repr=False)
    device_computed_tokens: np.ndarray = field(repr=False)
    batches: int = 0
    by_batch: bool = False  # ``times`` per batch, indexed by ``batch_id``
    stopped_early: bool = False
    latency_target_s: float = 0.1
    max_waiting: int = 0
    capacity_rps: float = float(
        "nan"
    )  # rough a-priori estimate; the summary measures served per busy second
    first_token_s: np.ndarray | None = field(default=None, repr=False)  # generation only
    output_tokens: np.ndarray | None = field(default=None, repr=False)  # generation only
    # generation only: the gaps between consecutive tokens of every request, as distinct gaps
    # (s) and how many tokens waited each (sum of weights = output tokens - requests)
    gap_s: np.ndarray | None = field(default=None, repr=False)
    gap_weight: np.ndarray | None = field(default=None, repr=False)
    # several queues (length buckets, a router's pools): the plan's (offsets [nq + 1], request
    # ids by queue then arrival), shared, not copied; None for one queue
    queues: tuple | None = field(default=None, repr=False)

    def _per_request(self, j: int) -> np.ndarray:
        a = self.times[j]
        return a[self.batch_id] if self.by_batch else a

    @functools.cached_property
    def start_s(self) -> np.ndarray:
        """Start of each request's batch (s), NaN when not served."""
        return self._per_request(0)

    @functools.cached_property
    def finish_s(self) -> np.ndarray:
        """Finish of each request (s), NaN when not served."""
        return self._per_request(1)

    @functools.cached_property
    def device(self) -> np.ndarray:
        """Device of each request (int16), -1 when not served."""
        return self._per_request(2)

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
        arr = self.arrival_s
        nd = len(self.devices)
        gen = self.first_token_s is not None
        first = self.first_token_s if gen else np.zeros(0)
        start, finish, device = self.times
        series = (finish, start, first) if gen else (finish, start)
        qs = np.full((len(series), 4), math.nan)
        ns, lat_sum, _, _, wait_sum, _, _, t1, good, late, per_dev, _, _ = summarize(
            series,
            arr,
            start,
            finish,
            first,
            device,
            self._index,
            self.latency_target_s,
            nd,
            _SUMMARY_Q_TABLE[: len(series)],
            qs,
        )
        t0 = float(arr[0])
        dur = max(float(t1) - t0, 1e-300)
        q, wait_p99 = qs[0], qs[1, 0]
        real, comp = int(self.device_real_tokens.sum()), int(self.device_computed_tokens.sum())
        offered, cap, throughput, stable, reason = self._load(ns, late, per_dev, dur, gen)
        busy = self.device_busy_s
        out = {
            "policy": self.policy,
            "devices": list(self.devices),
            "requests": self.n,
            "served": ns,
            "batches": self.batches,
            "mean_batch": ((real / self.batches) if gen else ns / self.batches)
            if self.batches
            else 0.0,
            "offered_rps": float(offered),
            "capacity_rps": cap,
            "throughput_rps": throughput,
            "goodput_rps": float(good) / dur,
            "latency_target_s": self.latency_target_s,
            "latency_mean_s": lat_sum / ns if ns else math.nan,
            "latency_p50_s": float(q[0]),
            "latency_p90_s": float(q[1]),
            "latency_p99_s": float(q[2]),
            "latency_p999_s": float(q[3]),
            "queueing_mean_s": wait_sum / ns if ns else math.nan,
            "queueing_p99_s": float(wait_p99),
            "utilization": float(busy.sum() / (dur * nd)),
            "device_utilization": (busy / dur).tolist(),
            "padded_token_waste": float(1.0 - real / comp) if comp else 0.0,
            "stable": stable,
            "unstable_reason": reason,
        }
        if gen:
            out["ttft_p50_s"], out["ttft_p99_s"] = float(qs[2, 0]), float(qs[2, 1])
            out.update(_between_tokens(self.gap_s, self.gap_weight))
        return out

    def _load(self, ns, late, per_dev, dur, gen):
        """(offered req/s, capacity req/s, throughput req/s, stable, reason) from the one-pass totals."""
        arr = self.arrival_s
        nd = len(self.devices)
        t0 = float(arr[0])
        # one request offers no rate (NaN: it cannot overload anything); requests all at one instant an infinite one
        offered = (
            math.nan
            if self.n < 2
            else ((self.n - 1) / (arr[-1] - t0) if arr[-1] > t0 else math.inf)
        )
        backlog = self.n - ns + int(late)
        busy = self.device_busy_s
        cap = float(np.sum(np.divide(per_dev, busy, out=np.zeros(nd), where=busy > 0)))
        if not cap:
            cap = self.capacity_rps
        throughput = ns / dur
        stable, reason = True, ""
        if self.stopped_early:
            stable, reason = (
                False,
                (
                    f"stopped: more than {self.max_waiting:,} requests waiting; offered "
                    f"{offered:,.0f} req/s vs capacity about {cap:,.0f} req/s"
                ),
            )
        elif self.n >= 100 and backlog > max(50, 0.05 * self.n):
            stable, reason = (
                False,
                (
                    f"queue grew: {backlog:,} of {self.n:,} requests were still waiting when the "
                    f"last arrived; offered {offered:,.0f} req/s vs capacity about "
                    f"{cap:,.0f} req/s"
                ),
            )
        elif ns and not gen and (over := self._overloaded(busy, per_dev, ns, offered)):
            d, off_d, cap_d = over
            stable, reason = (
                False,
                (
                    f"offered {off_d:,.0f} req/s to {self.devices[d]} exceeds its capacity about "
                    f"{cap_d:,.0f} req/s (requests served per busy second in its batches that left "
                    "requests waiting)"
                ),
            )
        elif (
            self.n >= 100 and math.isfinite(offered) and throughput < STABLE_SERVED_SHARE * offered
        ):
            stable, reason = (
                False,
                (
                    f"served {throughput:,.4g} req/s of {offered:,.0f} offered: requests wait for the "
                    "policy's longest delay (or a batch that never fills) longer than the run"
                ),
            )
        return float(offered), cap, throughput, stable, reason

    def _overloaded(self, busy, per_dev, ns, offered):
        """(device, offered req/s, capacity req/s) of the device most overloaded, or None.

        A device given a share per_dev/ns of the offered rate and busy ``busy`` seconds has
        busy x offered / ns = its busy time over the time the arrivals it served took. With a
        fixed batch (one request at a time, say) that is the run's own load, and above 1 there
        is no steady state, whatever the run length. A batcher whose batch grows with the queue
        is different: below capacity it keeps the device busy by choice (smaller batches, more
        of them), so at high load the ratio sits at 1 + the end-of-run drain over the arrival
        span (1.0005 and 1.0009 in two seeded 20,000-request runs of claim 6's batcher at 90% of
        the GC200's batch-32 rate, whose queue stays bounded): requests per busy second over all
        batches measure the batches it chose, not what the device can serve. So a device counts
        as overloaded when its offered share exceeds its requests per busy second over its
        batches that left requests waiting (arrived, not started) when they started: the
        batches the policy's size limit cut (max batch, token budget), the largest it sends. A
        device with no such batch is judged by the ratio itself: a short burst (64 requests in
        1 ms, batches of 32 that take 10 ms each) leaves none waiting behind its last batch, yet
        its offer is 20 times what the device serves. In real overload nearly every batch is
        one of them, and the capacity is the ratio's. Only
        devices whose ratio exceeds 1 are checked, so this flags no run the ratio let pass.
        With several queues (length buckets, a router's pools) a batch counts when requests of
        its own queue were waiting: one counted across all queues took nearly every batch of a
        bucketed batcher at 90% of its rate, moving the capacity to the ratio's (all batches)
        and flagging runs whose queue stays bounded."""
        with np.errstate(invalid="ignore"):  # 0 busy s x an infinite offer
            over = np.flatnonzero(busy * offered / ns > 1.0)
        if not over.size:
            return None
        bid = self.batch_id
        ok = bid >= 0
        nb = int(bid.max()) + 1 if ok.any() else 0
        size = np.bincount(bid[ok], minlength=nb)
        if self.by_batch:
            st, fi, dv = (a[:nb] for a in self.times)
        else:  # per request: each served request carries its batch's times
            st, fi, dv = np.empty(nb), np.empty(nb), np.empty(nb, dtype=np.int16)
            for out, a in zip((st, fi, dv), self.times, strict=True):
                out[bid[ok]] = a[ok]
        if self.queues is None:
            cut = _left_waiting(np.argsort(st, kind="stable"), st, size, self.arrival_s)
        else:  # per queue: a batch leaves waiting only requests it could have taken
            qoff, qidx = self.queues
            parts = [np.zeros(0, dtype=np.int64)]
            for k in range(len(qoff) - 1):
                ids = qidx[qoff[k] : qoff[k + 1]]
                b = np.unique(bid[ids])
                b = b[b >= 0]
                order = b[np.argsort(st[b], kind="stable")]
                parts.append(_left_waiting(order, st, size, self.arrival_s[ids]))
            cut = np.concatenate(parts)
        nd = len(self.devices)
        req = np.bincount(dv[cut], weights=size[cut], minlength=nd)
        sec = np.bincount(dv[cut], weights=fi[cut] - st[cut], minlength=nd)
        with np.errstate(invalid="ignore", divide="ignore"):  # an infinite offer; 0 busy s
            off = offered * per_dev / ns
            every = np.divide(per_dev, busy, out=np.full(nd, math.inf), where=busy > 0)
            cap = np.divide(req, sec, out=every, where=sec > 0)  # no cut batch: all batches
            load = np.zeros(nd)
            load[over] = np.nan_to_num(off[over] / cap[over], nan=0.0)
        d = int(np.argmax(load))
        return (d, float(off[d]), float(cap[d])) if load[d] > 1.0 else None

    def slo_view(self, q: float = 99.0) -> dict:
        """The summary's ``stable``, ``utilization`` and latency percentile ``q`` (0..100, s, as
        ``latency_q_s``), without the rest of the summary: one pass for the totals and one
        selection of the two order statistics the percentile lies between (numpy.percentile's
        linear rule, the same value the summary's histogram method gives). For a search that
        runs many simulations and reads only these (the checklist's capacity at a p99 target)."""
        q = float(q)
        if not 0.0 <= q <= 100.0:
            raise ValueError(f"q must be a percentile between 0 and 100; got {q!r}")
        cached = self.__dict__.get("_summary")
        gen = self.first_token_s is not None
        if cached is not None and q in _SUMMARY_QS:
            return {
                "latency_q_s": cached[_SUMMARY_QS[q]],
                "stable": cached["stable"],
                "utilization": cached["utilization"],
            }
        arr = self.arrival_s
        start, finish, device = self.times
        ns, t1, late, per_dev, lat = slo_numbers(
            arr, start, finish, device, self._index, len(self.devices), q
        )
        dur = max(float(t1) - float(arr[0]), 1e-300)
        stable = self._load(ns, late, per_dev, dur, gen)[3]
        return {
            "latency_q_s": float(lat),
            "stable": stable,
            "utilization": float(self.device_busy_s.sum() / (dur * len(self.devices))),
        }

    @property
    def _index(self) -> np.ndarray:
        """Where the kernels read request i's times: ``batch_id`` when per batch, else none (i)."""
        return self.batch_id if self.by_batch else _NO_INDEX

    def summary(self) -> dict:
        """Headline numbers (see ``to_dict``)."""
        return dict(self._summary)

    def __getattr__(self, name):
        # summary keys only: a private or special name (pickle and copy look up __setstate__ on an
        # instance not yet filled) is not one, and must not start the summary
        if name.startswith("_"):
            raise AttributeError(name)
        s = type(self).__dict__["_summary"].__get__(self)
        if name in s:
            return s[name]
        raise AttributeError(name)

    def to_dict(self) -> dict:
        return self.summary()

    def __repr__(self):
        s = self._summary
        flag = "" if s["stable"] else f"  UNSTABLE: {s['unstable_reason']}"
        gen = (
            f", TTFT p99 {s['ttft_p99_s'] * 1e3:,.1f} ms, TBT p99 {s['tbt_p99_s'] * 1e3:,.2f} ms"
            if "ttft_p99_s" in s
            else ""
        )
        return (
            f"ServingResult({s['policy']} on {', '.join(self.devices)}: {s['served']:,}/{s['requests']:,} served, "
            f"{s['throughput_rps']:,.1f} req/s, p50 {s['latency_p50_s'] * 1e3:,.2f} ms, p99 "
            f"{s['latency_p99_s'] * 1e3:,.2f} ms{gen}, mean batch {s['mean_batch']:.1f}, utilization "
            f"{s['utilization']:.0%}, padding waste {s['padded_token_waste']:.0%}){flag}"
        )

    def _repr_html_(self):
        s = self._summary
        rows = "".join(
            f"<tr><td>{k}</td><td>{v:,.4g}</td></tr>"
            if isinstance(v, float)
            else f"<tr><td>{k}</td><td>{v}</td></tr>"
            for k, v in s.items()
            if k not in ("devices", "device_utilization")
        )
        return f"<table><caption>ServingResult</caption>{rows}</table>"


def _between_tokens(gap_s, gap_weight) -> dict:
    """Time between tokens (s) over every gap between two consecutive tokens of a request:
    p50, p99 and mean, each gap ``gap_s[i]`` counted ``gap_weight[i]`` times."""
    if gap_s is None or not gap_weight.sum():
        return {"tbt_p50_s": math.nan, "tbt_p99_s": math.nan, "tbt_mean_s": math.nan}
    q = weighted_quantiles(gap_s, gap_weight, (50, 99))
    return {
        "tbt_p50_s": float(q[0]),
        "tbt_p99_s": float(q[1]),
        "tbt_mean_s": float(np.dot(gap_s, gap_weight) / gap_weight.sum()),
    }


def _left_waiting(order, st, size, arrival_s):
    """The batches of ``order`` (batch ids of one queue, by start) that left requests waiting:
    more of ``arrival_s`` (that queue's arrivals, sorted) had arrived by their start than
    batches starting by then took (``size`` requests each, starting at ``st``)."""
    st_o = st[order]
    started = np.cumsum(size[order])[np.searchsorted(st_o, st_o, "right") - 1]
    return order[np.searchsorted(arrival_s, st_o, "right") > started]
