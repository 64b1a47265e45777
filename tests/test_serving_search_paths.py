"""The serving package's paths for a search that runs many simulations (the checklist's capacity
at a p99 target), each against the full path it stands in for: ``ServingResult.slo_view``
against ``summary()``, ``run_plan``'s stop once a percentile is certain to miss its target
against the whole run, ``with_arrivals`` against ``make_plan``, and the disk-cached
``capacity.largest_batch`` of a replica against its build."""

import dataclasses
import math

import numpy as np
import pytest

from ipusim import arrivals as A
from ipusim import lengths
from ipusim import policies as P
from ipusim import serving as S
from ipusim.serving import batching, capacity, result, tables
from ipusim.serving import plan as plan_module
from ipusim.serving.plan import Plan, _requests_pass, make_plan, with_arrivals


@pytest.fixture(scope="module")
def devs():
    return {
        "gc200": S.chip_service("gc200", "bert-base", max_batch=16, grid="coarse"),
        "a100": S.chip_service("a100-40gb", "bert-base", max_batch=16, grid="coarse"),
        "packed": S.chip_service("gc200", "bert-base", max_batch=32, packed=True, grid="coarse"),
    }


def _runs(devs):
    """(policy, devices) x rates from light load to far past saturation (stable and not)."""
    cases = [
        (P.Dynamic(8, 0.002), [devs["gc200"]]),
        (P.Static(8, 0.005), [devs["a100"]]),
        (P.TokenBudget(4096, 0.002, 32), [devs["packed"]]),
        (P.Dynamic(16, 0.004), [devs["gc200"], devs["a100"]]),
    ]
    for k, (pol, d) in enumerate(cases):
        for rate in (50.0, 800.0, 3000.0, 30000.0):
            n = 1500 + 37 * k
            yield (
                pol,
                d,
                A.poisson(rate, n, seed=k),
                lengths.sample(n, long_fraction=0.4, seed=k + 10),
            )


def _same(a, b):
    return a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b))


def test_slo_view_is_the_summarys_numbers(devs):
    """Bit for bit: the same stability rule, utilization and percentile as the full summary,
    for stable runs and for runs stopped or overloaded (16 runs, 4 policies)."""
    kinds = set()
    for pol, d, arr, ln in _runs(devs):
        fast = S.simulate(arr, ln, pol, d, max_waiting=500)
        full = S.simulate(
            arr, ln, pol, d, max_waiting=500
        ).summary()  # a separate result: no shared cache
        kinds.add(full["stable"])
        for q, key in ((99.0, "latency_p99_s"), (50.0, "latency_p50_s"), (99.9, "latency_p999_s")):
            v = fast.slo_view(q)
            assert _same(v["latency_q_s"], full[key]), (pol, q)
            assert v["stable"] == full["stable"] and _same(v["utilization"], full["utilization"])
        assert fast.slo_view(99) == {
            "latency_q_s": full["latency_p99_s"],
            "stable": full["stable"],
            "utilization": full["utilization"],
        }
    assert kinds == {True, False}  # both sides of the stability rule were exercised


def test_slo_view_percentile_is_numpys_on_other_percentiles(devs):
    arr = A.poisson(500.0, 3000, seed=3)
    ln = lengths.sample(3000, long_fraction=0.3, seed=4)
    r = S.simulate(arr, ln, P.Dynamic(8, 0.003), devs["gc200"], max_waiting=None)
    lat = r.finish_s - r.arrival_s
    for q in (0.0, 1.0, 33.3, 75.0, 95.0, 99.5, 100.0):
        assert r.slo_view(q)["latency_q_s"] == np.percentile(lat, q)
    with pytest.raises(ValueError, match="between 0 and 100"):
        r.slo_view(101)


def test_slo_numbers_numpy_path_is_the_kernels(devs, monkeypatch):
    """``slo_numbers`` reduces runs up to ``_TOTALS_NUMPY_MAX`` requests in NumPy and calls the
    ``run_totals`` and ``select_percentile`` kernels above: both give the same numbers, bit
    for bit, per batch (with requests not served) and per request, ties included."""
    from ipusim.serving import percentiles as Q

    arr = A.poisson(20_000.0, 4000, seed=5)
    ln = lengths.sample(4000, long_fraction=0.3, seed=6)
    chip = devs["gc200"]
    r = S.simulate(arr, ln, P.Dynamic(8, 0.003), [chip, chip], max_waiting=300)
    start, finish, device = r.times
    ns = int(np.count_nonzero(r.batch_id >= 0))
    assert 0 < ns < arr.size  # stopped early: some requests not served (batch id -1)
    per_req = (start[r.batch_id], finish[r.batch_id], device[r.batch_id])
    for q in (0.0, 12.5, 50.0, 99.0, 99.9, 100.0):
        for times, idx in (((start, finish, device), r.batch_id), (per_req, np.zeros(0, np.int32))):
            got = []
            for limit in (-1, 1 << 40):
                monkeypatch.setattr(Q, "_TOTALS_NUMPY_MAX", limit)
                got.append(Q.slo_numbers(arr, *times, idx, 2, q))
            (a, b) = got
            assert a[:3] == b[:3] and np.array_equal(a[3], b[3]) and a[4] == b[4], q
            assert a[0] == ns and a[4] == np.percentile((per_req[1] - arr)[r.batch_id >= 0], q)


def test_slo_view_of_a_generation_run_is_its_summarys():
    gen = S.generation_model("a100-80gb", "gpt2", max_batch=8)
    rng = np.random.default_rng(1)
    arr, pr, out = (
        A.poisson(20.0, 400, seed=2),
        rng.integers(16, 128, 400),
        rng.integers(8, 64, 400),
    )
    r = S.simulate_generation(arr, pr, out, P.Continuous(8, 10**6), gen)
    full = S.simulate_generation(arr, pr, out, P.Continuous(8, 10**6), gen).summary()
    v = r.slo_view(99)
    assert v["latency_q_s"] == full["latency_p99_s"] and v["stable"] == full["stable"]
    assert v["utilization"] == full["utilization"]


@pytest.mark.parametrize("n", [1, 2, 7, 100, 8000, 8001])
def test_percentile_rank_is_the_lower_order_statistic(n):
    x = np.random.default_rng(n).random(n)
    srt = np.sort(x)
    for q in (0.0, 50.0, 90.0, 99.0, 99.9, 100.0):
        k = result.percentile_rank(q, n)
        p = np.percentile(x, q)
        # p lies in [rank k, rank k + 1): the values are distinct, so when q lands on a rank exactly,
        # that rank is k, not k - 1
        assert srt[k] <= p and (k + 1 >= n or p < srt[k + 1]), (q, k)
    with pytest.raises(ValueError, match="count"):
        result.percentile_rank(99, 0)


def test_a_run_stopped_as_late_would_have_missed_its_target(devs):
    """``run_plan(late_s, late_limit=n - k)`` stops only runs whose whole p99 is above late_s; a
    run it does not stop is the whole run, bit for bit. Both outcomes occur below."""
    outcomes = set()
    for pol, d, arr, ln in _runs(devs):
        plan = make_plan(arr, ln, pol, d, max_waiting=500)
        whole = batching.run_plan(plan)
        p99 = batching.result_of(plan, d, pol, whole, 1.0).slo_view(99)["latency_q_s"]
        n = arr.size
        for target in (0.005, 0.02, 0.1):
            cut = batching.run_plan(
                plan, late_s=target, late_limit=n - result.percentile_rank(99.0, n)
            )
            stopped = cut[-1][1] == 2
            outcomes.add(stopped)
            if stopped:
                assert (
                    whole[-1][1] == 1 or p99 > target
                )  # stopped by max_waiting anyway, or it misses
            else:
                assert all(
                    np.array_equal(a, b, equal_nan=True) for a, b in zip(cut, whole, strict=True)
                )
    assert outcomes == {True, False}


def test_with_arrivals_is_make_plan_with_those_arrivals(devs):
    arr = A.poisson(400.0, 1000, seed=5)
    ln = lengths.sample(1000, long_fraction=0.4, seed=6)
    pol = P.LengthBuckets((128, 256, 512), 8, 0.003)
    plan = make_plan(arr, ln, pol, [devs["gc200"], devs["a100"]])
    other = A.poisson(900.0, 1000, seed=7)
    a, b = with_arrivals(plan, other), make_plan(other, ln, pol, [devs["gc200"], devs["a100"]])
    for f in Plan.__dataclass_fields__:
        x, y = getattr(a, f), getattr(b, f)
        assert np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y, f
    with pytest.raises(ValueError, match="one arrival time per request"):
        with_arrivals(plan, other[:-1])
    with pytest.raises(ValueError, match="sorted"):
        with_arrivals(plan, other[::-1])


def test_largest_batch_of_a_replica_is_cached_on_disk(tmp_path, monkeypatch):
    from ipusim import hardware, workloads

    spec = tables.Replica(hardware.chip("a100-80gb"), workloads.model("bert-base"), 1, False)
    want = capacity._largest_replica_batch(spec, 512, ("forward",), 64)
    monkeypatch.setenv("IPUSIM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tables, "_memory", {})
    assert capacity.largest_batch(spec, 512, cap=64) == want
    monkeypatch.setattr(tables, "_memory", {})  # a new process: read from disk, not rebuilt
    monkeypatch.setattr(capacity, "_largest_replica_batch", lambda *a: pytest.fail("rebuilt"))
    assert capacity.largest_batch(spec, 512, cap=64) == want
    assert len(list(tmp_path.iterdir())) == 1


def _requests_pass_reference(arrival, lens):
    """Plain Python: sorted and finite (every step >=, so NaN fails), min, max, sum of lengths."""
    ordered = all(arrival[i] >= arrival[i - 1] for i in range(1, len(arrival)))
    return ordered, min(lens), max(lens), sum(int(x) for x in lens)


@pytest.mark.parametrize("case", ["sorted", "swapped", "nan", "one"])
def test_make_plan_one_pass_check_and_length_mean(case, devs):
    """make_plan's fused pass (arrival order, smallest/largest/sum of lengths) against a plain
    reference, and the plan's mean length (capacity_rps) against numpy's mean, bit for bit."""
    n = 1 if case == "one" else 5000
    arr = A.poisson(100.0, n, seed=3)
    lens = lengths.sample(n, long_fraction=0.3, seed=4)
    if case == "swapped":
        arr[[100, 101]] = arr[[101, 100]]
    if case == "nan":
        arr[2000] = np.nan
    got = _requests_pass(arr, lens)
    want = tuple(int(x) for x in _requests_pass_reference(arr, lens))
    assert tuple(int(x) for x in got) == want
    # make_plan's NumPy path for runs too small to pay for compiling the kernels: the same
    assert tuple(int(x) for x in plan_module.requests_pass(arr, lens)) == want
    assert plan_module._ordered(arr) == bool(got[0]) == plan_module._sorted_finite(arr)
    assert plan_module._lo_hi(lens) == plan_module._min_max(lens)
    pol = P.Dynamic(8, 0.002)
    if not got[0]:
        with pytest.raises(ValueError, match="sorted ascending"):
            make_plan(arr, lens, pol, [devs["gc200"]])
        return
    for given in (lens, int(lens[0])):
        plan = make_plan(arr, given, pol, [devs["gc200"]])
        assert plan.length_mean == plan.lengths.mean()
        counted = batching.capacity_rps([devs["gc200"]], plan)
        assert counted == batching.capacity_rps(
            [devs["gc200"]], dataclasses.replace(plan, length_mean=math.nan)
        )
