"""Percentiles with intervals: independent seeded replications, warm-up discarded
(ipusim.serving.replications), against the M/M/1 closed form, and ``serve --replications``."""

import json
import math

import numpy as np
import pytest

from ipusim import arrivals
from ipusim import policies as P
from ipusim.cli import main
from ipusim.serving import batching, replications
from ipusim.serving import service as S

MEAN_S, RHO, REQUESTS, REPS = 0.01, 0.8, 50_000, 10


def _mm1(seed):
    r = batching.simulate(
        arrivals.poisson(RHO / MEAN_S, REQUESTS, seed=seed),
        1,
        P.Dynamic(1, 0.0),
        S.exponential_service(MEAN_S),
        seed=seed + 1,
        max_waiting=None,
    )
    return r.arrival_s, r.latency_s


def test_interval_covers_mm1_closed_form_in_9_of_10_seeds():
    """M/M/1 sojourn time is exponential with rate mu - lambda: p99 = ln(100) / (mu - lambda),
    p50 = ln(2) / (mu - lambda). Nominal coverage is 95%; the test asks 9 of 10 seeds."""
    gap = 1 / MEAN_S - RHO / MEAN_S
    closed = {"latency_p50_s": math.log(2) / gap, "latency_p99_s": math.log(100) / gap}
    covered = {k: 0 for k in closed}
    for seed in range(10):
        out = replications.replicate(_mm1, REPS, seed=seed)
        for k, v in closed.items():
            covered[k] += out[k]["lo"] <= v <= out[k]["hi"]
    assert covered["latency_p99_s"] >= 9, covered
    assert covered["latency_p50_s"] >= 9, covered


def test_seeds_are_distinct_and_reproducible():
    a = replications.seeds(3, 10)
    assert a == replications.seeds(3, 10) and len(set(a)) == 10
    assert not set(a) & set(replications.seeds(4, 10))


def test_warmup_rule_and_interval_arithmetic():
    arr = np.linspace(0.0, 10.0, 101)
    k = replications.kept(arr, 0.1)
    assert arr[k].min() == pytest.approx(1.0) and k.sum() == 91
    i = replications.interval([1.0, 2.0, 3.0])
    assert i["mean"] == 2.0 and i["hi"] - 2.0 == pytest.approx(4.303 * 1.0 / math.sqrt(3))
    with pytest.raises(ValueError, match="at least 2 replications"):
        replications.interval([1.0])
    with pytest.raises(ValueError, match="whole number >= 2"):
        replications.replicate(_mm1, 1)


def test_serve_replications_json(capsys):
    assert (
        main(
            [
                "serve",
                "--service",
                "exponential",
                "--service-ms",
                "10",
                "--rate",
                "50",
                "--max-batch",
                "1",
                "--requests",
                "5000",
                "--replications",
                "3",
                "--json",
            ]
        )
        == 0
    )
    rep = json.loads(capsys.readouterr().out)["replications"]
    assert rep["replications"] == 3 and "warm-up" not in rep  # the rule is stated in warmup_rule
    for q in ("latency_p50_s", "latency_p99_s"):
        assert rep[q]["lo"] <= rep[q]["mean"] <= rep[q]["hi"] and rep[q]["n"] == 3
    assert "10%" in rep["warmup_rule"]


def test_serve_replications_refused_where_it_does_not_apply(capsys):
    assert main(["serve", "--rate", "10:20:10", "--replications", "3"]) == 2
    assert "--replications" in capsys.readouterr().err


def test_mean_batch_discards_the_warm_up_batches():
    """``mean_batch`` counts, at full size, each batch carrying a request that arrived after the
    warm-up; with no warm-up it is the run's own mean batch."""
    arr = arrivals.poisson(600.0, 2_000, seed=5)
    r = batching.simulate(
        arr, 1, P.Dynamic(16, 0.002), S.fixed_service(0.004, per_request_s=0.001, max_batch=16)
    )
    assert replications.mean_batch(r, 0.0) == pytest.approx(r.summary()["mean_batch"])
    sizes = np.bincount(r.batch_id)
    late = np.unique(r.batch_id[arr >= arr[0] + 0.5 * (arr[-1] - arr[0])])
    assert replications.mean_batch(r, 0.5) == pytest.approx(sizes[late].mean())
    with pytest.raises(ValueError, match="warmup_fraction"):
        replications.mean_batch(r, 1.0)


@pytest.mark.parametrize("rate, max_waiting", [(600.0, None), (1_000.0, 500)])
def test_mean_batch_is_the_mean_over_the_unique_carried_batches_bit_for_bit(rate, max_waiting):
    """``mean_batch`` finds the batches carrying a kept request by counting ids, not by
    ``np.unique``: the same batches in the same order, so the same mean to the last bit, also
    for a run stopped early (requests never served have batch id -1)."""
    arr = arrivals.poisson(rate, 5_000, seed=3)
    r = batching.simulate(
        arr,
        1,
        P.Dynamic(16, 0.002),
        S.fixed_service(0.004, per_request_s=0.001, max_batch=16),
        max_waiting=max_waiting,
    )
    ids = np.asarray(r.batch_id)
    assert (ids < 0).any() == (max_waiting is not None)  # the overloaded run stopped early
    served = ids >= 0
    for wf in (0.0, 0.1, 0.37, 0.9):
        late = np.unique(ids[served & replications.kept(arr, wf)])
        if not late.size:  # the early stop came before the warm-up ended
            with pytest.raises(ValueError, match="no request after the warm-up"):
                replications.mean_batch(r, wf)
            continue
        expected = float(np.bincount(ids[served])[late].mean())
        assert replications.mean_batch(r, wf) == expected
