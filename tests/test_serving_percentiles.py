"""The serving summary's percentiles (``ipusim.serving.percentiles``) are numpy's, bit for bit:
the one-pass path (values copied from windows around each wanted rank), its fallbacks (a
second pass when the sample misleads), and the counting of a value repeated many times."""

import dataclasses

import numpy as np
import pytest

from ipusim import arrivals as A
from ipusim import lengths
from ipusim import policies as P
from ipusim import serving as S
from ipusim.serving import percentiles, result, weighted


@pytest.mark.parametrize("pick", ["numpy", "kernel", "no kernel"])
@pytest.mark.parametrize("case", ["dynamic", "ties", "overload"])
def test_summary_percentiles_are_numpys(case, pick, monkeypatch):
    """The summary's one-pass percentiles (picked from the copies in the sample's windows, in
    NumPy for a small run or by the kernel for a large one), its fallback (a second pass:
    one value repeated, or a run unlike its sample) and its NumPy path for runs too small to
    pay for compiling ``run_totals`` ("no kernel") are exact: numpy.percentile of the served
    requests' latency and queueing delay, bit for bit."""
    monkeypatch.setattr(percentiles, "_COPIES_NUMPY_MAX", 1 << 40 if pick == "numpy" else -1)
    monkeypatch.setattr(percentiles, "_TOTALS_NUMPY_MAX", 1 << 40 if pick == "no kernel" else -1)
    n = 30_000
    arr = A.poisson({"dynamic": 1000.0, "ties": 50.0, "overload": 20_000.0}[case], n, seed=3)
    lens = lengths.sample(n, long_fraction=0.3, seed=4)
    chip = S.chip_service("gc200", "bert-base", max_batch=32)
    dev = S.fixed_service(0.001) if case == "ties" else chip
    pol = P.Dynamic(1, 0.0) if case == "ties" else P.Dynamic(S.largest_batch(chip, 512), 0.002)
    r = S.simulate(arr, lens, pol, dev, max_waiting=None if case != "overload" else 5000)
    s = r.summary()
    ok = ~np.isnan(r.finish_s)
    lat, wait = (r.finish_s - r.arrival_s)[ok], (r.start_s - r.arrival_s)[ok]
    assert [
        s["latency_p50_s"],
        s["latency_p90_s"],
        s["latency_p99_s"],
        s["latency_p999_s"],
    ] == list(np.percentile(lat, [50, 90, 99, 99.9]))
    assert s["queueing_p99_s"] == np.percentile(wait, 99)
    assert s["latency_mean_s"] == np.cumsum(lat)[-1] / lat.size  # summed in request order
    assert s["served"] == lat.size and (case != "overload" or not s["stable"])


@pytest.mark.parametrize("by_batch", [False, True])
@pytest.mark.parametrize("case", ["sample of one value", "sample unlike the run"])
def test_summary_percentiles_when_the_sample_misleads(case, by_batch, monkeypatch):
    """Requests whose latencies repeat with the sample's stride: the sample sees one value (the
    bins are spread again over the true range) or only the low ones (the wanted order
    statistics are outside its windows: a second pass gathers them). Still numpy's values."""
    monkeypatch.setattr(percentiles, "_TOTALS_NUMPY_MAX", -1)  # the kernels' path, at any size
    n = 100_003
    step = max(n // percentiles._SAMPLE, 1)
    rng = np.random.default_rng(9)
    arr = np.arange(n, dtype=np.float64)  # whole seconds: (a + 0.25) - a is 0.25 exactly
    sampled = np.arange(n) % step == 0
    if case == "sample of one value":
        lat = np.where(sampled, 0.25, rng.random(n))
        wait = np.where(sampled, 0.125, lat * rng.random(n))
    else:
        lat = np.where(sampled, rng.random(n) * 1e-3, 1.0 + rng.random(n))
        wait = lat * rng.random(n)
    times = (arr + wait, arr + lat, np.zeros(n, dtype=np.int16))
    if by_batch:  # each request its own batch, read through batch_id (and the entry after the last)
        times = tuple(
            np.append(t, np.nan if t.dtype.kind == "f" else -1).astype(t.dtype) for t in times
        )
    r = result.ServingResult(
        policy="synthetic",
        devices=("d",),
        arrival_s=arr,
        lengths=np.ones(n, dtype=np.int64),
        times=times,
        by_batch=by_batch,
        batch_id=np.arange(n, dtype=np.int32),
        device_busy_s=np.array([lat.sum()]),
        device_real_tokens=np.array([n]),
        device_computed_tokens=np.array([n]),
        batches=n,
    )
    s = r.summary()
    lat_r, wait_r = r.finish_s - arr, r.start_s - arr
    assert [
        s["latency_p50_s"],
        s["latency_p90_s"],
        s["latency_p99_s"],
        s["latency_p999_s"],
    ] == list(np.percentile(lat_r, [50, 90, 99, 99.9]))
    assert s["queueing_p99_s"] == np.percentile(wait_r, 99)


def test_quantiles_count_a_repeated_value_before_gathering():
    """One value repeated more than a sixteenth of the values (and 65,536 times) in a wanted
    bin: a sweep counts its copies first, so only the others are gathered. numpy's values."""
    rng = np.random.default_rng(11)
    n = 200_000
    x = np.where(rng.random(n) < 0.7, 0.5, rng.random(n))
    x[rng.random(n) < 0.01] = np.nan
    q = (0, 10, 50, 90, 99, 100)
    assert np.array_equal(S.quantiles(x, None, q), np.percentile(x[~np.isnan(x)], q))


@pytest.mark.parametrize(
    "m", [1, 7, 5000, weighted._WEIGHTED_NUMPY_MAX + 1]
)  # the last: the kernel
def test_weighted_quantiles_are_numpys_percentiles_of_the_repeated_values(m):
    rng = np.random.default_rng(m)
    v = np.round(rng.exponential(1.0, m), 2)  # ties
    w = rng.integers(0, 5, m)
    w[0] = 3
    qs = (0, 1, 50, 99, 99.9, 100)
    assert np.array_equal(S.weighted_quantiles(v, w, qs), np.percentile(np.repeat(v, w), qs))
    assert np.isnan(S.weighted_quantiles(v, np.zeros(m, dtype=int))).all()
    with pytest.raises(ValueError, match=">= 0"):
        S.weighted_quantiles(v, -w)


@pytest.mark.parametrize("n", [1, 2, 1000, 50_000])
def test_quantiles_are_numpys_percentiles(n):
    rng = np.random.default_rng(n)
    q = (0, 1, 50, 90, 99, 99.9, 100)
    for x in (
        rng.exponential(1, n),
        np.round(rng.random(n) * 4) / 4,
        np.where(rng.random(n) < 0.3, 2e-3, rng.random(n)),
    ):
        y = x.copy()
        y[rng.random(n) < 0.05] = np.nan
        ok = ~np.isnan(y)
        expect = np.percentile(y[ok], q) if ok.any() else np.full(len(q), np.nan)
        assert np.array_equal(S.quantiles(y, None, q), expect, equal_nan=True)


@pytest.mark.parametrize("path", ["kernels", "numpy"])
@pytest.mark.parametrize("case", ["one device", "two devices", "stopped early"])
def test_times_kept_per_batch_read_as_per_request(case, path, monkeypatch):
    """A batched run keeps start, finish and device once per batch, with one entry more (NaN,
    NaN, -1) that requests not served read through batch id -1; ``start_s``, ``finish_s`` and
    ``device`` gathered per request, the summary and ``slo_view`` read from the batches are
    those of the same run held per request, exactly."""
    n = 40_000
    arr = A.poisson(30_000.0 if case == "stopped early" else 1500.0, n, seed=5)
    lens = lengths.sample(n, long_fraction=0.3, seed=6)
    chip = S.chip_service("gc200", "bert-base", max_batch=32)
    devs = [chip, chip] if case == "two devices" else chip
    r = S.simulate(
        arr, lens, P.Dynamic(16, 0.002), devs, max_waiting=2000 if case == "stopped early" else None
    )
    start, finish, device = r.times
    assert r.by_batch and start.shape == finish.shape == device.shape == (r.batches + 1,)
    assert np.isnan(start[-1]) and np.isnan(finish[-1]) and device[-1] == -1
    served = r.batch_id >= 0
    assert (
        r.stopped_early == (case == "stopped early")
        and served.any()
        and (case != "stopped early" or not served.all())
    )
    assert np.array_equal(r.finish_s[served], finish[r.batch_id[served]])
    assert np.isnan(r.start_s[~served]).all() and (r.device[~served] == -1).all()
    limit = -1 if path == "kernels" else 1 << 40
    monkeypatch.setattr(percentiles, "_TOTALS_NUMPY_MAX", limit)
    per_request = dataclasses.replace(r, times=(r.start_s, r.finish_s, r.device), by_batch=False)
    assert r.summary() == per_request.summary()
    for q in (50.0, 99.0, 99.5):
        fresh = dataclasses.replace(r)  # no cached summary: slo_view runs its own kernels
        assert fresh.slo_view(q) == dataclasses.replace(per_request).slo_view(q)


def test_result_pickles_and_copies():
    """A result survives pickle (as for a Dask worker), copy and deepcopy, before and after its
    summary; it once recursed: unpickling asked the summary fallback for ``__setstate__``."""
    import copy
    import pickle

    r = S.simulate(np.arange(50) * 0.01, 128, P.Dynamic(4, 0.001), S.fixed_service(0.005))
    for summarized in (False, True):
        if summarized:
            r.summary()
        for back in (pickle.loads(pickle.dumps(r)), copy.copy(r), copy.deepcopy(r)):
            assert back.summary() == r.summary() and np.array_equal(back.finish_s, r.finish_s)
            assert (
                back.by_batch and back.latency_p99_s == r.latency_p99_s
            )  # a summary key as an attribute
    with pytest.raises(AttributeError):
        _ = r.no_such_key


@pytest.mark.parametrize("kind", ["random", "ties", "ascending", "descending", "one value"])
def test_select_ranks_puts_the_sorted_value_at_each_rank(kind):
    """The written-out selection (``_select_ranks``, ``_select_kth``) against a full sort: at
    each wanted rank the sorted array's value, nothing larger before it, nothing smaller
    after it, the same values overall (ranks given unsorted and repeated)."""
    rng = np.random.default_rng(5)
    n = 10_001
    a = {
        "random": rng.random(n),
        "ties": np.round(rng.random(n), 1),
        "ascending": np.arange(n, dtype=float),
        "descending": np.arange(n, 0, -1, dtype=float),
        "one value": np.full(n, 0.5),
    }[kind]
    ks = np.array([n - 1, 0, n // 2, 1, n // 2, n - 2, 99 * n // 100], dtype=np.int64)
    b = a.copy()
    percentiles._select_ranks(b, ks.copy(), ks.size)
    srt = np.sort(a)
    for k in ks:
        assert b[k] == srt[k] and (b[:k] <= b[k]).all() and (b[k + 1 :] >= b[k]).all()
    assert np.array_equal(np.sort(b), srt)


def _generation_run():
    gen = S.generation_model("a100-80gb", "gpt2", max_batch=8)
    rng = np.random.default_rng(1)
    arr = A.poisson(20.0, 400, seed=2)
    return S.simulate_generation(
        arr, rng.integers(16, 128, 400), rng.integers(8, 64, 400), P.Continuous(8, 10**6), gen
    )


@pytest.mark.parametrize("case", ["two devices", "stopped early", "generation"])
def test_summary_in_numpy_is_the_kernels(case, monkeypatch):
    """A run of up to ``_TOTALS_NUMPY_MAX`` requests is summarized in NumPy (no kernel to
    compile); every number of the summary and of ``slo_view`` is the kernels', bit for bit:
    counts, sums in request order, extremes, per-device counts, percentiles, time to first
    token, per batch and per request."""
    if case == "generation":
        r = _generation_run()
    else:
        n = 20_000
        arr = A.poisson(30_000.0 if case == "stopped early" else 2500.0, n, seed=7)
        chip = S.chip_service("gc200", "bert-base", max_batch=32)
        r = S.simulate(
            arr,
            lengths.sample(n, long_fraction=0.3, seed=8),
            P.Dynamic(16, 0.002),
            [chip, chip] if case == "two devices" else chip,
            max_waiting=2000 if case == "stopped early" else None,
        )
    got = {}
    for path, limit in (("kernels", -1), ("numpy", 1 << 40)):
        monkeypatch.setattr(percentiles, "_TOTALS_NUMPY_MAX", limit)
        fresh = dataclasses.replace(r)  # no cached summary
        got[path] = (
            fresh.summary(),
            [dataclasses.replace(r).slo_view(q) for q in (50.0, 97.5, 99.0)],
        )
    assert got["numpy"] == got["kernels"]
    assert r.stopped_early == (case == "stopped early")
