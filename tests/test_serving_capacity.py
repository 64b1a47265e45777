"""``serving.capacity``: ``capacity_at`` against the plain bisection it speeds up, on several cases.

The plain search (``plain_capacity_at`` below) runs every probe as a whole ``serving.simulate``
and reads its summary: a rate passes when the run is stable, its p99 latency is within the
target and it is busy less than ``MAX_UTILIZATION`` of the time. ``capacity_at`` builds the
serving plan once, stops a run as soon as its p99 can no longer meet the target, and must give
the same capacity (bit for bit) and the same run there (its whole summary).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from checklist_reference import log_bisection

from ipusim import policies as P
from ipusim import serving
from ipusim.serving import capacity


def plain_capacity_at(
    target_s,
    lengths,
    policy,
    devices,
    *,
    top,
    iters=10,
    seed=0,
    max_waiting=None,
    latency_target_s=1.0,
):
    """(capacity req/s, ServingResult there): bisection in log rate between top / 1e4 and top."""
    n = len(lengths)
    unit = np.cumsum(np.random.default_rng(seed).exponential(1.0, n))
    unit *= n / unit[-1]

    def run(rate):
        return serving.simulate(
            unit / rate,
            lengths,
            policy,
            devices,
            latency_target_s=latency_target_s,
            max_waiting=max_waiting,
        )

    def ok(r):
        s = r.summary()
        return (
            s["stable"]
            and s["latency_p99_s"] <= target_s
            and s["utilization"] < capacity.MAX_UTILIZATION
        )

    return log_bisection(run, ok, top, iters)


def _same_summary(a, b):
    sa, sb = a.summary(), b.summary()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert sa[k] == sb[k] or (
            isinstance(sa[k], float) and math.isnan(sa[k]) and math.isnan(sb[k])
        ), k


def _lengths(n=1500, seed=3):
    return np.random.default_rng(seed).integers(16, 512, n)


CASES = {
    # name: (devices, policy, target s, top req/s)
    "one server, batch 1": ([serving.fixed_service(0.002)], P.Dynamic(1, 0.0), 0.02, 1000.0),
    "dynamic batch 8, per-request cost": (
        [serving.fixed_service(0.004, per_request_s=0.001, max_batch=8)],
        P.Dynamic(8, 0.002),
        0.03,
        2000.0,
    ),
    "two servers, dynamic 4": (
        [serving.fixed_service(0.003, max_batch=4)] * 2,
        P.Dynamic(4, 0.005),
        0.05,
        5000.0,
    ),
    "target below one service time": (
        [serving.fixed_service(0.01)],
        P.Dynamic(1, 0.0),
        0.005,
        100.0,
    ),
    "top passes": ([serving.fixed_service(0.001)], P.Dynamic(1, 0.0), 1.0, 50.0),
    "exponential service": ([serving.exponential_service(0.002)], P.Dynamic(1, 0.0), 0.03, 1000.0),
}


@pytest.mark.parametrize("name", list(CASES))
def test_capacity_at_is_the_plain_bisection(name):
    devices, policy, target, top = CASES[name]
    lens = _lengths()
    want, r_want = plain_capacity_at(
        target, lens, policy, devices, top=top, iters=8, seed=1, max_waiting=1000
    )
    got, r_got = capacity.capacity_at(
        target, lens, policy, devices, top=top, iters=8, seed=1, max_waiting=1000
    )
    assert got == want
    _same_summary(r_got, r_want)
    if name == "target below one service time":
        assert got == 0.0
    if name == "top passes":
        assert got == top
    for above in (
        want * 0.999,
        want,
        want * 1.001,
    ):  # stopped early only when it cannot beat `above`
        c, _ = capacity.capacity_at(
            target, lens, policy, devices, top=top, iters=8, seed=1, max_waiting=1000, above=above
        )
        assert (c is None and want <= above) or c == want


def test_capacity_is_within_its_stated_bracket():
    """The capacity passes, and the next rate up the bisection's last step would have failed: a
    batch-1 server of S seconds is saturated at 1/S req/s, so the capacity is below 1/S."""
    devices, policy, target, top = CASES["one server, batch 1"]
    cap, r = capacity.capacity_at(target, _lengths(), policy, devices, top=top, iters=12)
    assert 0 < cap < 1 / 0.002 * capacity.MAX_UTILIZATION * 1.01
    s = r.summary()
    assert (
        s["stable"] and s["latency_p99_s"] <= target and s["utilization"] < capacity.MAX_UTILIZATION
    )


def test_largest_batch_reads_a_service_table_and_refuses_other_devices():
    table = np.zeros((9, 3))
    table[1:, 1] = 0.001 * np.arange(1, 9)  # every row fits at the first length column
    table[1:, 2] = [
        0.002,
        0.004,
        0.006,
        np.inf,
        np.inf,
        np.inf,
        np.inf,
        np.inf,
    ]  # 3 rows fit the second
    svc = serving.ServiceModel("t", table, 128)
    assert capacity.largest_batch(svc, 100) == 8
    assert capacity.largest_batch(svc, 256) == 3
    assert serving.largest_batch is capacity.largest_batch
    with pytest.raises(ValueError, match="device must be"):
        capacity.largest_batch("gc200", 128)


def test_fit_limit_up_to_is_the_least_fit_limit_over_the_lengths():
    """``ServiceModel.fit_limit_up_to(L)`` reads all length columns up to ``L`` at once: the least
    ``fit_limit`` over the lengths ``len_step, 2 len_step, ...`` up to ``L``, a dip between
    lengths included; a packed or length-free model has one answer for every length."""
    rng = np.random.default_rng(4)
    table = np.full((9, 7), 1e-3)
    table[0, :] = table[:, 0] = 0.0
    table[6:, 2] = np.inf  # 5 rows fit at the second length
    table[3:, 4] = np.inf  # 2 rows at the fourth (a dip: the fifth fits 8 again)
    table[1:, 6] = np.inf  # none at the sixth
    for t in (table, np.where(rng.random(table.shape) < 0.3, np.inf, table)):
        svc = serving.ServiceModel("t", t, 16)
        for longest in range(1, 6 * 16 + 1):
            loop = min(svc.fit_limit(k) for k in range(16, longest + 16, 16))
            assert svc.fit_limit_up_to(longest) == loop, longest
    svc = serving.ServiceModel("t", table, 16)
    assert [svc.fit_limit_up_to(L) for L in (16, 17, 48, 64, 80, 96)] == [8, 5, 5, 2, 2, 0]
    with pytest.raises(ValueError, match="outside"):
        svc.fit_limit_up_to(97)
    packed = serving.ServiceModel("p", table, 16, packed=True, pack_len=96)
    assert packed.fit_limit_up_to(1) == packed.fit_limit_up_to(96) == packed.fit_limit(50) == 8
    assert serving.fixed_service(0.01, max_batch=4).fit_limit_up_to(10**6) == 4
