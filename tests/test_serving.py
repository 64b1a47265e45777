"""Serving simulator: kernel vs reference vs simpy, queueing theory, properties, stability."""

import math

import numpy as np
import pytest
import serving_reference as R
from hypothesis import given, settings
from hypothesis import strategies as st

from ipusim import arrivals as A
from ipusim import lengths
from ipusim import policies as P
from ipusim import serving as S
from ipusim.serving import batching, service
from ipusim.serving.plan import _queues, as_devices, make_plan


@pytest.fixture(scope="module")
def svc():
    return {
        "gc200": S.chip_service("gc200", "bert-base", max_batch=32),
        "a100": S.chip_service("a100-40gb", "bert-base", max_batch=32),
        "packed": S.chip_service("gc200", "bert-base", max_batch=32, packed=True),
    }


def _cases(svc):
    # GC200 batches stay at 16 or fewer: 18 rows of BERT-base at 512 tokens is the most that fits
    # (test_a_batch_that_does_not_fit_is_refused); 32 would be refused
    return [
        ("static", P.Static(8, 0.005), [svc["gc200"]], None),
        ("dynamic", P.Dynamic(16, 0.002), [svc["gc200"]], None),
        ("dynamic-pref-2dev", P.Dynamic(16, 0.002, (4, 8)), [svc["gc200"], svc["a100"]], None),
        ("token", P.TokenBudget(4096, 0.002, 64), [svc["packed"]], None),
        ("buckets", P.LengthBuckets((128, 256, 512), 16, 0.003), [svc["gc200"], svc["a100"]], None),
        ("adaptive", P.Adaptive(0.02, 16), [svc["gc200"]], None),
        ("router", P.Dynamic(16, 0.002), [svc["gc200"], svc["a100"]], S.Router(200, (1,), (0,))),
        ("exp-service", P.Dynamic(4, 0.001), [S.exponential_service(0.002, max_batch=4)], None),
    ]


def _reference(arr, lens, pol, devs, router=None, seed=0):
    """The plain-Python reference's run of the same inputs, as a ServingResult."""
    devs = as_devices(devs)
    plan = make_plan(arr, lens, pol, devs, router, seed, 100_000)
    return batching.result_of(plan, devs, pol, R.simulate_reference(plan), 0.1, by_batch=False)


def _same(a, b):
    return all(
        np.array_equal(x, y, equal_nan=True)
        for x, y in (
            (a.start_s, b.start_s),
            (a.finish_s, b.finish_s),
            (a.device, b.device),
            (a.batch_id, b.batch_id),
        )
    )


@pytest.mark.parametrize("n", [1, 7, 300, 3000])
@pytest.mark.parametrize("rate", [300.0, 3000.0])
def test_kernel_matches_reference_every_policy(svc, n, rate):
    arr = A.poisson(rate, n, seed=n)
    lens = lengths.sample(n, long_fraction=0.3, seed=n)
    for name, pol, devs, router in _cases(svc):
        a = S.simulate(arr, lens, pol, devs, router=router, seed=5)
        b = _reference(arr, lens, pol, devs, router=router, seed=5)
        assert _same(a, b), name
        assert np.array_equal(a.device_busy_s, b.device_busy_s), name
        assert a.batches == b.batches, name


@pytest.mark.parametrize(
    "pol", [P.Dynamic(16, 0.002), P.Dynamic(8, 0.0), P.Dynamic(16, 0.003, (4, 8))]
)
def test_kernel_matches_simpy_model(svc, pol):
    arr = A.poisson(2000, 5000, seed=1)
    lens = lengths.sample(5000, long_fraction=0.3, seed=1)
    devs = [svc["gc200"], svc["a100"]]
    a = S.simulate(arr, lens, pol, devs)
    st_, fi, de, bi = R.simpy_dynamic(arr, lens, pol, devs)
    assert np.array_equal(a.start_s, st_) and np.array_equal(a.finish_s, fi)
    assert np.array_equal(a.device, de) and np.array_equal(a.batch_id, bi)


# Replications of 10^6 requests each; more where the estimator is noisier (M/M/1 at 0.9
# has a relative standard error of about 2% per 10^6 requests).
THEORY = [
    (0.3, "mm1", 1),
    (0.6, "mm1", 2),
    (0.9, "mm1", 16),
    (0.3, "md1", 1),
    (0.6, "md1", 1),
    (0.9, "md1", 4),
]


@pytest.mark.parametrize("rho,kind,reps", THEORY)
def test_batch_one_matches_pollaczek_khinchine(rho, kind, reps):
    s = 0.01
    svc = S.exponential_service(s) if kind == "mm1" else S.fixed_service(s)
    waits = []
    for rep in range(reps):
        arr = A.poisson(rho / s, 1_000_000, seed=100 + rep)
        r = S.simulate(arr, 1, P.Dynamic(1, 0.0), svc, seed=200 + rep, max_waiting=None)
        assert r.stable
        waits.append(r.queueing_mean_s)
    ratio = np.mean(waits) / S.theory_wait_s(rho / s, s, kind)
    assert abs(ratio - 1) < 0.02, f"{kind} rho={rho}: simulated / theory = {ratio:.4f}"


def test_overload_is_reported_unstable_and_stops_early():
    arr = A.poisson(200.0, 200_000, seed=0)
    r = S.simulate(arr, 1, P.Dynamic(1, 0.0), S.fixed_service(0.01), max_waiting=1000)
    assert not r.stable and r.stopped_early
    assert "waiting" in r.unstable_reason
    assert r.served < 10_000  # stopped long before serving everything
    r2 = S.simulate(arr[:20_000], 1, P.Dynamic(1, 0.0), S.fixed_service(0.01), max_waiting=None)
    assert not r2.stable and "queue grew" in r2.unstable_reason


def test_batching_raises_capacity(svc):
    """At a load one request at a time cannot carry, batches of up to 32 keep the queue stable."""
    # a batch costs a fixed 2 ms plus 0.2 ms per request (launch/weight traffic amortized)
    gpu = S.fixed_service(0.002, per_request_s=0.0002, max_batch=32)
    cap_one, cap_32 = gpu.throughput_rps(128, 1), gpu.throughput_rps(128, 32)
    rate = 1.5 * cap_one
    assert cap_32 > 1.5 * rate  # precondition of the test, from the service table
    arr = A.poisson(rate, 20_000, seed=3)
    one = S.simulate(arr, 128, P.Dynamic(1, 0.0), gpu)
    many = S.simulate(arr, 128, P.Dynamic(32, 0.001), gpu)
    assert not one.stable
    assert many.stable and many.mean_batch > 1


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(1, 400),
    rate=st.floats(50, 20_000),
    seed=st.integers(0, 2**16),
    which=st.integers(0, 7),
    long_fraction=st.floats(0, 1),
)
def test_properties(svc, n, rate, seed, which, long_fraction):
    arr = A.poisson(rate, n, seed=seed)
    lens = lengths.sample(n, long_fraction=long_fraction, seed=seed)
    name, pol, devs, router = _cases(svc)[which]
    r = S.simulate(arr, lens, pol, devs, router=router, seed=seed, max_waiting=None)
    # served exactly once: every request has one start, one batch, and batches partition them
    assert np.all(r.batch_id >= 0) and np.all(r.device >= 0)
    assert np.unique(r.batch_id).size == r.batches
    assert np.all(r.start_s >= r.arrival_s)  # never before it arrives
    # latency at least its own service time: finish - start equals the batch time
    for b in np.unique(r.batch_id)[:50]:
        idx = np.flatnonzero(r.batch_id == b)
        d = int(r.device[idx[0]])
        assert np.all(r.start_s[idx] == r.start_s[idx[0]]) and np.all(r.device[idx] == d)
        lim = getattr(pol, "max_batch", getattr(pol, "batch", None))
        assert idx.size <= lim  # no batch larger than its limit
        if isinstance(pol, P.TokenBudget) and idx.size > 1:
            assert r.lengths[idx].sum() <= pol.max_tokens
        if devs[d].random == "none":
            rows = pol.batch if isinstance(pol, P.Static) else None
            expect = devs[d].time_s(r.lengths[idx], rows=rows)
            assert r.finish_s[idx[0]] - r.start_s[idx[0]] == pytest.approx(expect, rel=1e-12)
    assert np.all(r.finish_s > r.start_s)  # every batch takes time
    # a device runs one batch at a time
    for d in range(len(devs)):
        m = r.device == d
        _, first = np.unique(r.batch_id[m], return_index=True)
        s, f = r.start_s[m][first], r.finish_s[m][first]
        o = np.argsort(s)
        assert np.all(s[o][1:] >= f[o][:-1] - 1e-15)
    # same seed, same results
    r2 = S.simulate(arr, lens, pol, devs, router=router, seed=seed, max_waiting=None)
    assert _same(r, r2)


def test_preferred_sizes_are_respected():
    arr = A.poisson(3000, 3000, seed=9)
    pol = P.Dynamic(16, 0.01, (4, 8))
    r = S.simulate(arr, 1, pol, S.fixed_service(0.002, per_request_s=1e-4, max_batch=16))
    sizes = np.bincount(r.batch_id)
    # batches sent before the delay expired have a preferred size or the maximum
    early = [
        s
        for b, s in enumerate(sizes)
        if r.start_s[r.batch_id == b][0] < r.arrival_s[r.batch_id == b][0] + 0.01
    ]
    assert early and set(early) <= {4, 8, 16}
    # and the preferred sizes are used: without them the same traffic runs (almost) only full batches
    plain = S.simulate(
        arr, 1, P.Dynamic(16, 0.01), S.fixed_service(0.002, per_request_s=1e-4, max_batch=16)
    )
    assert {4, 8} <= set(early)
    assert r.batches > plain.batches and np.mean(sizes) < np.mean(np.bincount(plain.batch_id))


def test_static_pads_to_the_compiled_batch(svc):
    arr = A.poisson(
        100, 500, seed=2
    )  # low load: most static batches leave on timeout, partly empty
    r = S.simulate(arr, 128, P.Static(16, 0.005), svc["gc200"])
    assert r.mean_batch < 16
    assert r.padded_token_waste > 0.3  # empty rows of the fixed shape count as waste


def test_packed_wastes_less_than_padded(svc):
    n = 5000
    # 1,000 req/s: both queues stable on the calibrated GC200 with the serialising planner (waste
    # padded 0.65, packed 0.35); at 600 batches are ~2 and a packed row's empty tail outweighs padding
    arr = A.poisson(1000, n, seed=1)
    lens = lengths.sample(n, long_fraction=0.2, seed=1)
    pad = S.simulate(arr, lens, P.TokenBudget(4096, 0.002, 64), svc["gc200"])
    pack = S.simulate(arr, lens, P.TokenBudget(4096, 0.002, 64), svc["packed"])
    assert pack.padded_token_waste < pad.padded_token_waste


def _generation_requests(n, rate):
    """Seeded arrivals (Poisson at ``rate``), prompts of 8-399 and replies of 1-199 tokens."""
    rng = np.random.default_rng(n)
    return A.poisson(rate, n, seed=n), rng.integers(8, 400, n), rng.integers(1, 200, n)


def _same_gaps(res, gaps, out, steps=None):
    """The result's token gaps are the reference's: one per token after a request's first,
    the same TBT percentiles and mean. Tolerance 1e-9 relative: the reference measures a
    gap as the difference of two token times, the kernel as the iteration's time. With the
    reference's ``steps`` (iteration time, decoding sequences): the kernel's counted gaps are
    exactly those iteration times, each once per decoding sequence, and the TBT mean is their
    mean to 1e-12 relative (the kernel sums them in another order)."""
    assert int(res.gap_weight.sum()) == int((out - 1).sum()) == len(gaps)
    if steps is not None:
        dt, w = np.array([s[0] for s in steps]), np.array([s[1] for s in steps], dtype=np.int64)
        assert np.array_equal(
            np.sort(np.repeat(res.gap_s, res.gap_weight)), np.sort(np.repeat(dt, w))
        )
        if w.sum():
            assert res.summary()["tbt_mean_s"] == pytest.approx(np.dot(dt, w) / w.sum(), rel=1e-12)
    s = res.summary()
    if len(gaps):
        for q in (50, 99):
            assert s[f"tbt_p{q}_s"] == pytest.approx(np.percentile(gaps, q), rel=1e-9)
        assert s["tbt_mean_s"] == pytest.approx(np.mean(gaps), rel=1e-9)
    else:
        assert np.isnan(s["tbt_p50_s"])


def test_continuous_matches_reference_and_kv_limit():
    g = S.generation_model("a100-80gb", "gpt2", max_batch=16)
    for n in (1, 50, 800):
        arr, pr, out = _generation_requests(n, 30)
        # Continuous(40, ...) runs more sequences than the 16-row tables: whole tables in series
        for pol in (
            P.Continuous(16, 100_000),
            P.Continuous(16, 1500),
            P.Continuous(1, 5000),
            P.Continuous(40, 100_000),
        ):
            a = S.simulate_generation(arr, pr, out, pol, g)
            steps = []
            st_, first, fin, iters, gaps = R.continuous_reference(
                arr, pr, out, g, pol.max_batch, pol.kv_capacity_tokens, steps
            )
            assert np.array_equal(a.finish_s, fin) and np.array_equal(a.first_token_s, first)
            assert np.array_equal(a.start_s, st_) and a.batches == iters
            _same_gaps(a, gaps, out, steps)
            assert np.all(a.start_s >= arr) and np.all(a.first_token_s > a.start_s)
            assert np.all(a.finish_s >= a.first_token_s)
            # at most max_batch running at once and the KV reservation never exceeds capacity
            ev_t = np.concatenate([a.start_s, a.finish_s])
            ev_k = np.concatenate([pr + out, -(pr + out)])
            ev_c = np.concatenate([np.ones(n), -np.ones(n)])
            o = np.lexsort((ev_c, ev_t))  # at equal times, finishes (-1) before starts
            assert np.cumsum(ev_k[o]).max() <= pol.kv_capacity_tokens
            assert np.cumsum(ev_c[o]).max() <= pol.max_batch


def test_bad_inputs_raise(svc):
    with pytest.raises(ValueError, match="sorted"):
        S.simulate([1.0, 0.5], 1, P.Dynamic(), S.fixed_service(0.01))
    with pytest.raises(ValueError, match="longer"):
        S.simulate([0.0], 600, P.Dynamic(), svc["gc200"])
    with pytest.raises(ValueError, match="max_batch"):
        P.Dynamic(max_batch=0)
    with pytest.raises(ValueError, match="preferred"):
        P.Dynamic(max_batch=4, preferred=(8,))
    with pytest.raises(ValueError, match="one length per request"):
        S.simulate([0.0, 1.0], [3, 4, 5], P.Dynamic(), S.fixed_service(0.01))
    with pytest.raises(ValueError, match="no steady state"):
        S.theory_wait_s(200, 0.01, "mm1")


def test_lengths_mix_and_histogram(tmp_path):
    lens = lengths.sample(100_000, long_fraction=0.4, short=(10, 100), long=(300, 500), seed=1)
    assert abs(np.mean(lens >= 300) - 0.4) < 0.01
    p = tmp_path / "h.csv"
    p.write_text("length,count\n5,1\n7,3\n9,0\n")
    h = lengths.sample(40_000, histogram=str(p), seed=2)
    assert set(np.unique(h)) == {5, 7}
    assert abs(np.mean(h == 7) - 0.75) < 0.01
    # the same histogram given as a file, a (lengths, counts) pair or a Histogram: same draws
    assert np.array_equal(h, lengths.sample(40_000, histogram=([5, 7, 9], [1, 3, 0]), seed=2))
    assert np.array_equal(h, lengths.sample(40_000, histogram=lengths.load_histogram(p), seed=2))


def test_result_repr_and_dict(svc):
    r = S.simulate(A.poisson(500, 1000), 128, P.Dynamic(), svc["gc200"])
    d = r.to_dict()
    for k in (
        "throughput_rps",
        "latency_p50_s",
        "latency_p99_s",
        "utilization",
        "stable",
        "goodput_rps",
    ):
        assert k in d
    assert "req/s" in repr(r) and "<table>" in r._repr_html_()


@pytest.mark.slow
def test_ten_million_requests_stay_within_100_bytes_each():
    """Memory of a whole 10^7-request run (inputs, per-request results, summary), by tracemalloc:
    with start, finish and device made per request from the batches, as a user reading them."""
    import tracemalloc

    n = 10_000_000
    dev = S.chip_service("gc200", "bert-base", max_batch=32)
    tracemalloc.start()
    arr = A.poisson(2000.0, n, seed=0)
    lens = lengths.sample(n, long_fraction=0.3, seed=1)
    r = S.simulate(
        arr, lens, P.Dynamic(S.largest_batch(dev, 512), 0.002), dev, max_waiting=None
    )  # 32 does not fit
    s = r.summary()
    per_request = (r.start_s, r.finish_s, r.device)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert s["served"] == n and all(a.shape == (n,) for a in per_request)
    assert peak / n <= 100, f"{peak / n:.0f} bytes/request"


def test_adaptive_batches_grow_with_load_and_stay_small_when_quiet():
    dev = S.fixed_service(0.002, per_request_s=0.0002, max_batch=32)  # 2 ms + 0.2 ms per request
    pol = P.Adaptive(latency_target_s=0.02, max_batch=32)
    low = S.simulate(A.poisson(50, 5000, seed=1), 1, pol, dev)
    high = S.simulate(A.poisson(1500, 5000, seed=1), 1, pol, dev)
    # at 50 req/s one request per batch already covers the load: no waiting for company
    assert low.mean_batch < 1.2 and low.latency_p99_s < 0.01
    assert high.stable and high.mean_batch > 3 * low.mean_batch
    assert high.latency_p99_s < pol.latency_target_s


def test_daily_ramp_and_bursts_run_through_the_simulator():
    dev = S.fixed_service(0.001, per_request_s=0.0001, max_batch=16)
    for arr in (
        A.on_off(800, 4000, mean_on_s=0.05, mean_off_s=0.05, seed=3),
        A.daily_ramp(300, 4000, period_s=10.0, seed=3),
    ):
        r = S.simulate(arr, 1, P.Dynamic(16, 0.001), dev)
        assert r.served == 4000 and np.all(r.start_s >= r.arrival_s)


def test_huge_length_is_refused_not_wrapped():
    """1e12 tokens (past int32) is a ValueError, never a negative count narrowed from it."""
    for dev in (S.fixed_service(0.01), S.chip_service("gc200", "bert-base", max_batch=4)):
        with pytest.raises(ValueError, match="tokens"):
            S.simulate([0.0, 0.1], [64, 10**12], P.Dynamic(4, 0.0), dev)
        with pytest.raises(ValueError, match="tokens"):
            S.simulate([0.0, 0.1], [64, 2**31 + 5], P.Dynamic(4, 0.0), dev)


def test_short_overloaded_run_is_unstable():
    """838k req/s offered to a 100 req/s server is unstable even with 99 requests."""
    arr = A.poisson(1e6, 99, seed=0)
    r = S.simulate(arr, 1, P.Dynamic(1, 0.0), S.fixed_service(0.01))
    assert (
        r.offered_rps > 100 * r.capacity_rps
        and not r.stable
        and "exceeds its capacity" in r.unstable_reason
    )
    for n in (5, 20, 99):  # and at any length, a load below capacity stays stable
        ok = S.simulate(A.poisson(10.0, n, seed=1), 1, P.Dynamic(1, 0.0), S.fixed_service(0.01))
        assert ok.stable, ok.unstable_reason
    one = S.simulate(
        [0.0], 1, P.Dynamic(1, 0.0), S.fixed_service(0.01)
    )  # one request: no rate to exceed
    assert one.stable and math.isnan(one.offered_rps) and one.served == 1, one.unstable_reason
    burst = S.simulate(
        np.zeros(99), 1, P.Dynamic(1, 0.0), S.fixed_service(0.01)
    )  # 99 at once: unbounded rate
    assert burst.offered_rps == math.inf and not burst.stable


def test_a_batch_that_does_not_fit_is_refused():
    """A batch past the chip's fit limit gets no time, never a silent number.

    A quarter of a GC200 (368 tiles) keeps the table small: BERT-base at 512 tokens has a fit
    limit (weights streamed when that is what fits) below the table's 32 rows, taken from the
    tile model itself; one row more does not fit."""
    from ipusim import hardware, machine, tiles, workloads

    chip = hardware.chip("gc200").replace(name="gc200-quarter", tiles=368)
    dev = S.chip_service(
        chip, "bert-base", max_batch=32, len_step=128
    )  # coarse columns: fast to build
    limit = tiles.tile_memory_batch_limit(
        chip, workloads.step("bert-base", [512] * 32, pad_to=512), weights_on_chip=False
    )
    assert 1 <= limit < 32
    assert S.largest_batch(dev, 512) == limit and S.largest_batch(dev, 128) == 32
    assert not np.isfinite(dev.time_s([512] * (limit + 1))) and np.isfinite(
        dev.time_s([512] * limit)
    )
    with pytest.raises(ValueError, match=f"largest batch that fits at 512 tokens: {limit}"):
        S.simulate([0.0, 0.001], [512, 512], P.Dynamic(32, 0.002), dev)
    with pytest.raises(ValueError, match="largest batch that fits"):
        S.simulate([0.0, 0.001], [64, 512], P.Static(32, 0.002), dev)
    # a token budget that lands on an unfit step is refused after the run
    n = limit + 1
    with pytest.raises(ValueError, match="does not fit"):
        S.simulate(np.zeros(n), [512] * n, P.TokenBudget(n * 512, 0.01, n), dev)
    # every table cell is inf exactly when the direct machine call does not fit (sampled)
    for rows, L in ((limit, 512), (limit + 1, 512), (32, 384), (32, 256)):
        res = machine.simulate(chip, workloads.step("bert-base", [L] * rows, pad_to=L))
        fits = res.fits and np.isfinite(res.time_s)
        assert np.isfinite(dev.time_s([L] * rows)) == fits, (rows, L, res.fit)


def test_table_is_honest_at_the_weight_streaming_cliff(svc):
    """12 rows of BERT-base on GC200, 480..512 tokens. The old 16-token columns charged 12 x 502
    the 512-token (streaming) time, 43% over; the table computes the last length before a change
    of regime (with the serialising planner and the calibrated tile model 12 rows stay on chip
    up to 512 tokens), so every length is charged the next length computed, in the same regime:
    never lower, and at most 15 tokens more, whose time grows at most quadratically in the
    length (attention): ratio < (1 + 15 / L)^2 (6.3% at 482; 482 -> 496 is 4.1% over)."""
    from ipusim import machine, workloads

    dev = svc["gc200"]
    for L in range(480, 513, 2):
        direct = machine.step_time_s("gc200", workloads.step("bert-base", [L] * 12, pad_to=L))
        ratio = dev.time_s([L] * 12) / direct
        assert 1 - 1e-12 <= ratio < (1 + 15 / L) ** 2, (L, ratio)


def test_packed_batches_use_a_real_packing(svc):
    """A packed batch runs the rows first-fit decreasing needs (ipusim.packing's FFD and
    the tests' plain first fit agree), never fewer than ceil(tokens / pack_len)."""
    from ipusim import packing

    dev = svc["packed"]
    rng = np.random.default_rng(3)
    for _ in range(20):
        lens = rng.integers(100, 400, rng.integers(2, 30))
        rows = R._first_fit_rows(
            lens.tolist(), dev.pack_len
        )  # plain Python, shares no code with the kernel
        assert rows == packing.pack(lens, dev.pack_len, "ffd").rows
        assert rows >= -(-int(lens.sum()) // dev.pack_len)
        assert dev.time_s(lens) == service.lookup_s(dev.table, rows, 1)
    # three 300-token requests: ideal packing says 2 rows of 512, a real packing needs 3
    assert dev.time_s([300, 300, 300]) == dev.table[3, 1] > dev.table[2, 1]
    arr = A.poisson(3000, 3000, seed=2)
    lens = lengths.sample(3000, long_fraction=0.3, seed=2)
    r = S.simulate(arr, lens, P.TokenBudget(4096, 0.002, 64), dev)
    ref = _reference(arr, lens, P.TokenBudget(4096, 0.002, 64), dev)
    assert _same(r, ref)
    for b in np.unique(r.batch_id)[:100]:
        idx = np.flatnonzero(r.batch_id == b)
        rows = R._first_fit_rows(r.lengths[idx].tolist(), dev.pack_len)
        assert r.finish_s[idx[0]] - r.start_s[idx[0]] == pytest.approx(
            service.lookup_s(dev.table, rows, 1), rel=1e-12
        )


def test_one_overloaded_pool_makes_the_run_unstable(svc):
    """A router's long pool on one device can be overloaded while the pool total looks fine:
    the stability check is per device (busy x offered / served <= 1 for each)."""
    fast = S.fixed_service(0.001, max_batch=4)
    slow = S.fixed_service(0.010, max_batch=4)  # 400 req/s at batch 4
    arr = A.poisson(2000.0, 99, seed=3)
    lens = np.where(
        np.arange(99) % 2 == 0, 64, 300
    )  # half go to the slow device: ~1000 req/s > 400
    r = S.simulate(arr, lens, P.Dynamic(4, 0.0), [fast, slow], router=S.Router(128, (0,), (1,)))
    assert not r.stable and "fixed 10 ms" in r.unstable_reason
    ok = S.simulate(
        A.poisson(200.0, 99, seed=3),
        lens,
        P.Dynamic(4, 0.0),
        [fast, slow],
        router=S.Router(128, (0,), (1,)),
    )
    assert ok.stable, ok.unstable_reason


def test_generation_prefill_table_uses_the_prefill_phase():
    """The prefill table is built with phase="prefill" (KV-cache writes count in the fit
    check). GPT-2, 32 prompts of 256 tokens on a quarter of a GC200 (368 tiles): a forward pass
    fits (streaming its weights), a prefill does not."""
    from ipusim import hardware, machine, workloads

    chip = hardware.chip("gc200").replace(name="gc200-quarter", tiles=368)
    gen = S.generation_model(chip, "gpt2", max_batch=32, max_ctx=256, mixed=False)
    for rows, L in ((32, 256), (8, 256), (4, 128)):
        pre = machine.simulate(chip, workloads.step("gpt2", [L] * rows, phase="prefill", pad_to=L))
        fits = pre.fits and np.isfinite(pre.time_s)
        assert np.isfinite(gen.prefill.table[rows, L]) == fits
        if fits:
            assert gen.prefill.table[rows, L] == pytest.approx(pre.time_s, rel=1e-12)
    fwd = machine.simulate(chip, workloads.step("gpt2", [256] * 32, phase="forward", pad_to=256))
    pre = machine.simulate(chip, workloads.step("gpt2", [256] * 32, phase="prefill", pad_to=256))
    assert fwd.fits and not pre.fits  # a table of forward steps would hide this case
    # an iteration that lands on such a cell is refused, not timed
    n = 64
    with pytest.raises(ValueError, match="does not fit"):
        S.simulate_generation(
            np.zeros(n), np.full(n, 200), np.full(n, 8), P.Continuous(32, 10**6), gen
        )


def test_gc200_table_is_monotone_where_it_fits(svc):
    """More rows or longer rows never take less time in the table (a cell that does not fit is
    not timed as if it did). Tolerance 1 % along the length: the planner ranks matmul grids on its estimate (the largest
    block, no exchange-bus contention), so a longer step can land on a grid the simulation times
    up to 0.7 % faster (30-32 rows, 464 -> 480 tokens); along the rows it is exact."""
    t = svc["gc200"].table[1:, 1:]
    for (a, b), tol in (((t[:-1], t[1:]), 0.0), ((t[:, :-1], t[:, 1:]), 0.01)):
        both = np.isfinite(a) & np.isfinite(b)
        assert both.sum() > 5000 and np.all(b[both] >= a[both] * (1 - tol))
        assert not np.any(
            np.isinf(a) & np.isfinite(b)
        )  # once a step does not fit, a bigger one does not either


def test_static_generation_matches_reference_and_continuous_wins_on_latency():
    g = S.generation_model("a100-80gb", "gpt2", max_batch=16)
    for n in (1, 40, 600):
        arr, pr, out = _generation_requests(n, 20)
        # Static(24): batches beyond the 16-row tables (whole tables in series, as the reference's lookup)
        for pol in (P.Static(16, 0.05), P.Static(1, 0.0), P.Static(4, 0.5), P.Static(24, 0.05)):
            a = S.simulate_generation(arr, pr, out, pol, g)
            st_, first, fin, _, gaps = R.static_reference(arr, pr, out, g, pol.batch, pol.timeout_s)
            assert np.array_equal(a.start_s, st_) and np.array_equal(a.first_token_s, first)
            assert np.array_equal(a.finish_s, fin)
            _same_gaps(a, gaps, out)
    # the same load: run-to-completion holds short replies until the batch's longest is done
    n = 3000
    arr = A.poisson(20, n, seed=1)
    rng = np.random.default_rng(1)
    pr, out = rng.integers(32, 256, n), rng.integers(16, 256, n)
    cont = S.simulate_generation(arr, pr, out, P.Continuous(16, 10**6), g)
    stat = S.simulate_generation(arr, pr, out, P.Static(16, 0.05), g)
    assert cont.stable and stat.stable
    assert cont.latency_p50_s < stat.latency_p50_s
    assert stat.padded_token_waste > 0.2 and cont.padded_token_waste == 0.0


def test_time_between_tokens_and_ttft_in_the_summary():
    """TBT percentiles are over every gap between two tokens (per token, not per-request
    means); at a load where prefills interrupt decodes, the p99 gap is a decode step plus a
    prefill, above the p50 (a decode step alone)."""
    g = S.generation_model("a100-80gb", "gpt2", max_batch=16)
    n = 500
    arr = A.poisson(5, n, seed=2)
    rng = np.random.default_rng(2)
    pr, out = rng.integers(8, 300, n), rng.integers(1, 100, n)
    r = S.simulate_generation(arr, pr, out, P.Continuous(16, 10**6), g)
    s = r.summary()
    gaps = R.continuous_reference(arr, pr, out, g, 16, 10**6)[4]
    assert s["tbt_p50_s"] == pytest.approx(np.percentile(gaps, 50), rel=1e-9)
    assert s["tbt_p99_s"] == pytest.approx(np.percentile(gaps, 99), rel=1e-9)
    assert s["ttft_p99_s"] == np.percentile(r.first_token_s - arr, 99)
    # a decode step of one short sequence bounds the gap from below
    assert s["tbt_p50_s"] >= g.decode[1, 1] * (1 - 1e-12)
    assert s["tbt_p99_s"] > s["tbt_p50_s"]
    assert "TBT p99" in repr(r)


def test_generation_replicas_deal_requests_in_turn():
    g = S.generation_model("a100-80gb", "gpt2", max_batch=8)
    n = 300
    arr = A.poisson(40, n, seed=4)
    pr, out = np.full(n, 64), np.full(n, 32)
    two = S.simulate_generation(arr, pr, out, P.Continuous(8, 10**6), g, replicas=2)
    one = S.simulate_generation(arr[1::2], pr[1::2], out[1::2], P.Continuous(8, 10**6), g)
    assert np.array_equal(two.finish_s[1::2], one.finish_s) and np.array_equal(
        two.device[1::2], np.ones(150)
    )
    assert two.device_busy_s.size == 2


def test_tables_cache_on_disk_and_without_a_writable_folder(tmp_path, monkeypatch):
    from ipusim.serving import tables

    calls = []

    def build():
        calls.append(1)
        return np.arange(6.0).reshape(2, 3)

    monkeypatch.setenv("IPUSIM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(tables, "_memory", {})
    a = tables.cached(build, "test", 1)
    monkeypatch.setattr(tables, "_memory", {})  # a new process: memory empty, disk holds the table
    b = tables.cached(build, "test", 1)
    assert np.array_equal(a, b) and len(calls) == 1 and not a.flags.writeable
    assert [p.suffix for p in (tmp_path / "cache").iterdir()] == [
        ".tab"
    ]  # no temporary left behind
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("IPUSIM_CACHE_DIR", str(blocked / "cache"))
    monkeypatch.setattr(tables, "_memory", {})
    c = tables.cached(build, "test", 1)  # nothing writable: built again, no error
    assert np.array_equal(a, c) and len(calls) == 2


def test_two_processes_building_one_table_at_once(tmp_path):
    """Both write the same key (temporary file + rename): the file is whole and loads."""
    import subprocess
    import sys

    code = (
        "from ipusim.serving import tables; import numpy as np; "
        "tables.cached(lambda: np.full((200, 300), 7.0), 'race', 1)"
    )
    env = {**__import__("os").environ, "IPUSIM_CACHE_DIR": str(tmp_path)}
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env) for _ in range(2)]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    files = list(tmp_path.iterdir())
    from ipusim.serving import table_cache

    tab, why = table_cache.decode(files[0].stem, files[0].read_bytes())
    assert len(files) == 1 and why == "" and np.array_equal(tab, np.full((200, 300), 7.0))


def test_tables_skip_the_out_of_memory_explanation_but_keep_the_fit():
    from ipusim import hardware, machine, workloads
    from ipusim.serving import tables

    s = workloads.step("bert-base", [512] * 128, pad_to=512)  # 96 rows stream, 128 do not fit
    spec = tables.Replica(hardware.chip("gc200"), workloads.model("bert-base"), 1, False)
    quiet, full = tables.step_result(spec, s), machine.simulate("gc200", s, weights="on_chip")
    assert not quiet.fits and not full.fits and quiet.time_s == full.time_s
    assert "Out of memory" in full.fit_message and "Out of memory" not in quiet.fit_message


def test_service_on_a_placement_is_timed_by_placement_assess(monkeypatch):
    """A replica of a tensor/pipeline placement: its table's grid points are ``placement.assess``
    times of the whole model (rows 2 and 128 tokens are a coarse grid point: no interpolation)."""
    from ipusim import hardware, placement, workloads
    from ipusim.serving import tables

    monkeypatch.setenv("IPUSIM_CACHE_DIR", "off")
    pl = placement.assess("gc200", workloads.step("bert-base", [128]), tensor=2, pipeline=2)
    svc = S.chip_service("gc200", "bert-base", placement=pl, grid="coarse", max_batch=2)
    want = placement.assess(
        "gc200", workloads.step("bert-base", [128] * 2), tensor=2, pipeline=2
    ).time_s
    assert svc.table[2, 128] == pytest.approx(want, rel=1e-12)
    assert "t=2 p=2" in svc.name and "ipusim.placement" in svc.source
    rep = tables.replica("gc200", "bert-base", placement=pl)
    assert (rep.chips, rep.tensor, rep.pipeline) == (4, 2, 2)
    for kwargs, match in [
        ({"placement": "bogus"}, "placement must be"),
        ({"placement": pl, "streaming": True}, "streaming"),
        (
            {
                "placement": placement.assess(
                    "a100-80gb", workloads.step("bert-base", [128]), tensor=2, pipeline=1
                )
            },
            "chip",
        ),
    ]:
        with pytest.raises(ValueError, match=match):
            tables.replica("gc200", "bert-base", **kwargs)
    m = workloads.model("bert-base")
    for kwargs, match in [
        ({"chips": 6, "tensor": 4}, "multiple"),
        ({"chips": 5, "tensor": 5}, "divide"),
        ({"chips": 26, "tensor": 2}, "stages exceed"),
    ]:
        with pytest.raises(ValueError, match=match):
            tables.Replica(hardware.chip("gc200"), m, **kwargs)


def test_mixed_prefill_and_decode_is_one_step():
    """An iteration with prefills and decodes is one machine-model step (weights read once):
    at a grid point the mixed table is the machine model's prefill step of the prompts plus one
    row per decoding sequence; it costs less than the prefill step plus the decode step; with
    no decodes the iteration is the prefill step, with no prompts the decode step."""
    from ipusim import machine, workloads

    g = S.generation_model("a100-80gb", "gpt2", max_batch=16)
    for d, r, L in ((1, 1, 32), (4, 4, 128), (8, 8, 256), (2, 12, 512)):
        direct = machine.simulate(
            "a100-80gb", workloads.step("gpt2", [L] * r + [1] * d, phase="prefill")
        ).time_s
        assert g.mixed[d, r, L // g.mixed_step] == pytest.approx(direct, rel=1e-12)
        # decodes at the first context column: no attention beyond what the mixed step holds
        assert g.mixed_s(d, r, L, 1) == g.mixed[d, r, L // g.mixed_step]
        assert g.mixed_s(d, r, L, 1) < g.prefill.table[r, L] + g.decode[d, 1]
        assert g.mixed_s(0, r, L, 0) == g.prefill.table[r, L]
        assert g.mixed_s(d, 0, 0, 300) == g.decode[d, -(-300 // g.ctx_step)]
        # more context costs more (the decode table's increment), never less
        assert g.mixed_s(d, r, L, 600) >= g.mixed_s(d, r, L, 1)
    # off: the sum of the two steps, as before
    off = S.generation_model("a100-80gb", "gpt2", max_batch=16, mixed=False)
    assert off.mixed_s(4, 4, 128, 1) == off.prefill.table[4, 128] + off.decode[4, 1]
    n = 400
    arr, pr, out = _generation_requests(n, 40)
    a, b = (S.simulate_generation(arr, pr, out, P.Continuous(16, 10**6), x) for x in (g, off))
    assert a.gap_weight.sum() == b.gap_weight.sum() == (out - 1).sum()  # token conservation
    assert np.all(np.isfinite(a.finish_s)) and a.batches <= b.batches + n
    assert a.device_busy_s[0] < b.device_busy_s[0]  # the same work in less device time


def test_a_mixed_cell_the_table_cannot_price_runs_as_two_steps():
    """A mixed-table cell that is ``inf`` (next to a grid point whose one step does not fit) is
    priced as the prefill step plus the decode step, as an iteration beyond the table is: the
    run goes on (finite times, as the reference with the same rule) instead of failing."""
    import dataclasses

    g = S.generation_model("a100-80gb", "gpt2", max_batch=16)
    mix = g.mixed.copy()
    mix[:, 2:, :] = np.where(
        np.isnan(mix[:, 2:, :]), np.nan, np.inf
    )  # two prompts or more: unpriced
    h = dataclasses.replace(g, mixed=mix)
    assert h.mixed_s(4, 4, 128, 1) == g.prefill.table[4, 128] + g.decode[4, 1]
    assert h.mixed_s(4, 1, 128, 1) == g.mixed_s(4, 1, 128, 1)
    arr, pr, out = _generation_requests(800, 60)
    for pol, ref in (
        (P.Continuous(16, 100_000), R.continuous_reference),
        (P.Continuous(16, 100_000, chunk_tokens=256), R.chunked_reference),
    ):
        a = S.simulate_generation(arr, pr, out, pol, h)
        steps = []
        args = (pol.max_batch, pol.kv_capacity_tokens) + (
            (pol.chunk_tokens,) if pol.chunk_tokens else ()
        )
        st_, first, fin, iters, gaps = ref(arr, pr, out, h, *args, steps)
        assert np.all(np.isfinite(a.finish_s)) and np.array_equal(a.finish_s, fin)
        assert np.array_equal(a.first_token_s, first) and a.batches == iters
        _same_gaps(a, gaps, out, steps)
        base = S.simulate_generation(arr, pr, out, pol, g)
        assert not np.array_equal(
            base.finish_s, a.finish_s
        )  # some iterations did reach the unpriced cells


def test_gap_table_too_large_lists_mixed_steps_with_the_same_gaps(monkeypatch):
    """Over ``GAP_CELLS_MAX`` the kernels list each mixed step instead of counting it in a
    [decodes, prompts, prompt column, column] table (which at 128 rows would be hundreds of MB):
    the same requests' times, the same multiset of gaps, the same TBT percentiles, and the
    mean to 1e-12 relative (summed in another order)."""
    import ipusim.serving.generation as G

    g = S.generation_model("a100-80gb", "gpt2", max_batch=16)
    arr, pr, out = _generation_requests(400, 30)
    for pol in (P.Continuous(16, 100_000), P.Continuous(16, 3000, chunk_tokens=64)):
        counted = S.simulate_generation(arr, pr, out, pol, g)
        monkeypatch.setattr(G, "GAP_CELLS_MAX", 0)
        listed = S.simulate_generation(arr, pr, out, pol, g)
        monkeypatch.undo()
        assert listed.gap_s.size > counted.gap_s.size  # the mixed steps were listed, not counted
        assert np.array_equal(listed.finish_s, counted.finish_s)
        assert np.array_equal(listed.first_token_s, counted.first_token_s)
        assert np.array_equal(
            np.sort(np.repeat(listed.gap_s, listed.gap_weight)),
            np.sort(np.repeat(counted.gap_s, counted.gap_weight)),
        )
        a, b = listed.summary(), counted.summary()
        assert a["tbt_p50_s"] == b["tbt_p50_s"] and a["tbt_p99_s"] == b["tbt_p99_s"]
        assert a["tbt_mean_s"] == pytest.approx(b["tbt_mean_s"], rel=1e-12)
    # the checklist's 128-row model over GPT-2's prompts: listed (a full table would be ~0.5 GB)
    big = S.generation_model("a100-80gb", "gpt2", max_batch=128, grid="coarse")
    cells = G._gap_cells(128, big, False)
    assert cells.shape[1:3] == (1, 1) and cells.size <= G.GAP_CELLS_MAX


def test_chunked_prefill_matches_reference_and_closed_forms():
    g = S.generation_model("a100-80gb", "gpt2", max_batch=16)
    for n in (1, 60, 300):
        arr, pr, out = _generation_requests(n, 30)
        for pol in (
            P.Continuous(16, 100_000, chunk_tokens=64),
            P.Continuous(16, 3000, chunk_tokens=256),
            P.Continuous(4, 100_000, chunk_tokens=8),
            P.Continuous(24, 100_000, chunk_tokens=512),
        ):
            a = S.simulate_generation(arr, pr, out, pol, g)
            steps = []
            st_, first, fin, iters, gaps = R.chunked_reference(
                arr, pr, out, g, pol.max_batch, pol.kv_capacity_tokens, pol.chunk_tokens, steps
            )
            assert np.array_equal(a.start_s, st_) and np.array_equal(a.first_token_s, first)
            assert np.array_equal(a.finish_s, fin) and a.batches == iters
            _same_gaps(a, gaps, out, steps)  # token conservation: one gap per token after the first
        # chunks larger than every iteration's tokens: exactly the unchunked run
        big = S.simulate_generation(arr, pr, out, P.Continuous(16, 10**6, chunk_tokens=10**9), g)
        off = S.simulate_generation(arr, pr, out, P.Continuous(16, 10**6), g)
        assert np.array_equal(big.finish_s, off.finish_s) and np.array_equal(
            big.first_token_s, off.first_token_s
        )
    # one request alone: its prompt in pieces of 100 tokens, each a prefill step of one prompt
    P_, C, n_out = 350, 100, 5
    one = S.simulate_generation([0.0], [P_], [n_out], P.Continuous(4, 10**6, chunk_tokens=C), g)
    pieces = [C] * (P_ // C) + [P_ % C]
    ttft = 0.0
    for p in pieces:
        ttft += g.prefill.table[1, p]
    assert one.first_token_s[0] == pytest.approx(ttft, rel=1e-12)
    fin = ttft + sum(g.decode[1, -(-(P_ + 1 + k) // g.ctx_step)] for k in range(1, n_out))
    assert one.finish_s[0] == pytest.approx(fin, rel=1e-12)
    with pytest.raises(ValueError, match="chunk_tokens"):
        P.Continuous(4, 100, chunk_tokens=-1)


def test_chunked_prefill_trades_ttft_for_time_between_tokens():
    """At a load where long prompts interrupt decodes, chunking the prefill spreads each prompt
    over several iterations: the p99 gap between tokens falls, the time to first token rises."""
    g = S.generation_model("a100-80gb", "gpt2", max_batch=16)
    n = 600
    arr = A.poisson(25, n, seed=9)
    rng = np.random.default_rng(9)
    pr, out = rng.integers(600, 900, n), rng.integers(20, 120, n)
    whole = S.simulate_generation(arr, pr, out, P.Continuous(16, 10**6), g).summary()
    chunked = S.simulate_generation(
        arr, pr, out, P.Continuous(16, 10**6, chunk_tokens=128), g
    ).summary()
    assert whole["stable"] and chunked["stable"]
    assert chunked["tbt_p99_s"] < whole["tbt_p99_s"]
    assert chunked["ttft_p50_s"] > whole["ttft_p50_s"]


def test_queues_by_length_are_a_stable_sort_by_bucket():
    """``_queues`` (bucket found inside, no queue-id array) against numpy: bucket = the first
    edge >= the length (searchsorted, side left), requests of a bucket in arrival order (a
    stable argsort), offsets from the bucket counts, the longest request of each bucket."""
    rng = np.random.default_rng(4)
    for edges in ((128, 256, 512), (512,), (1, 2, 3, 600), (200, S.MAX_LENGTH)):
        lens = rng.integers(1, edges[-1] + 1 if edges[-1] < 10**6 else 600, 5000)
        e = np.asarray(edges, dtype=np.int64)
        qoff, qidx, qmax = _queues(lens, e)
        k = np.searchsorted(e, lens, side="left")
        assert np.array_equal(qidx, np.argsort(k, kind="stable"))
        assert np.array_equal(
            qoff, np.concatenate([[0], np.cumsum(np.bincount(k, minlength=len(e)))])
        )
        assert np.array_equal(
            qmax, [lens[k == q].max() if np.any(k == q) else 0 for q in range(len(e))]
        )
