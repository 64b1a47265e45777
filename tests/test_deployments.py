"""Co-located, length-routed and disaggregated generation deployments at one hourly cost."""

from __future__ import annotations

import numpy as np
import pytest

from ipusim import arrivals, lengths, policies, serving
from ipusim.serving import deployments as DP


@pytest.mark.parametrize(
    "usd_a, usd_b, counts", [(2.0, 1.6, (4, 5)), (1.6, 1.6, (1, 1)), (3.5, 2.0, (4, 7))]
)
def test_equal_cost_counts_are_the_fewest_chips_of_equal_cost(usd_a, usd_b, counts):
    n_a, n_b = DP.equal_cost_counts(usd_a, usd_b)
    assert (n_a, n_b) == counts and n_a * usd_a == pytest.approx(n_b * usd_b)


def test_equal_cost_counts_refuses_a_bad_price():
    with pytest.raises(ValueError, match="usd_b"):
        DP.equal_cost_counts(2.0, 0.0)


@pytest.fixture(scope="module")
def gens():
    return {c: serving.generation_model(c, "gpt2", max_batch=8) for c in ("a100-80gb", "gc200")}


@pytest.mark.parametrize("chip", ["a100-80gb", "gc200"])
def test_tables_as_long_as_the_requests_read_hold_the_full_tables_cells(gens, chip):
    # compare builds tables up to table_lengths: every cell a request up to those lengths reads
    # must be the full table's, bit for bit (NaN and inf where they are)
    mp, mc = serving.generation.table_lengths("gpt2", 300, 340)
    assert (mp, mc) == (512, 384)  # 32 x 2^4 >= 300; 340 rounded up to a multiple of 64
    assert serving.generation.table_lengths("gpt2", 1000, 1024) == (1024, 1024)
    short, full = (
        serving.generation_model(chip, "gpt2", max_batch=8, max_prompt=mp, max_ctx=mc),
        gens[chip],
    )
    assert short.prefill.max_len == 512 and short.max_ctx == 384
    np.testing.assert_array_equal(short.prefill.table, full.prefill.table[:, : mp + 1])
    np.testing.assert_array_equal(short.decode, full.decode[:, : mc // 64 + 1])
    np.testing.assert_array_equal(short.mixed, full.mixed[:, :, : mp // 32 + 1])
    with pytest.raises(ValueError, match="longest_prompt"):
        serving.generation.table_lengths("gpt2", 0, 10)


def test_routed_run_is_each_pool_run_on_its_own_requests(gens):
    n = 300
    pr = lengths.sample_long_text_mix(n, 0.4, seed=3)
    out = np.random.default_rng(4).integers(4, 40, n)
    arr = arrivals.poisson(200.0, n, seed=5)
    pol = policies.Continuous(max_batch=8)
    r = DP.simulate_routed(
        arr, pr, out, (gens["a100-80gb"], 2, pol), (gens["gc200"], 3, pol), threshold=255
    )
    assert r.devices == ("a100-80gb gpt2",) * 2 + ("gc200 gpt2",) * 3
    for (gen, count, offset), idx in (
        ((gens["a100-80gb"], 2, 0), np.flatnonzero(pr <= 255)),
        ((gens["gc200"], 3, 2), np.flatnonzero(pr > 255)),
    ):
        own = serving.simulate_generation(arr[idx], pr[idx], out[idx], pol, gen, replicas=count)
        np.testing.assert_array_equal(r.finish_s[idx], own.finish_s)
        np.testing.assert_array_equal(r.first_token_s[idx], own.first_token_s)
        np.testing.assert_array_equal(r.device[idx], own.device + offset)
    assert int(r.gap_weight.sum()) == int(out.sum()) - n  # every token after the first, once


def test_compare_spends_one_budget_and_every_capacity_meets_the_target(gens):
    n = 400
    pr = lengths.sample_long_text_mix(n, 0.4, seed=1)
    out = np.random.default_rng(2).integers(16, 129, n)
    c = DP.compare("a100-80gb", "gc200", "gpt2", pr, out, slo_p99_s=0.5, max_batch=8, iters=5)
    assert {d.kind for d in c.deployments} == set(DP.KINDS)
    # 8 x 2.00 = 10 x 1.60 = 4 x 2.00 + 5 x 1.60 USD an hour; a split spends at most that
    assert {d.usd_per_hour for d in c.deployments if d.kind != "disaggregated"} == {16.0}
    splits = [d for d in c.deployments if d.kind == "disaggregated"]
    assert len(splits) == 7 + 8 and all(14.0 <= d.usd_per_hour <= 16.0 for d in splits)
    assert "disaggregated: prefill 1 x a100-80gb, decode 8 x gc200" in [d.name for d in splits]
    for d in c.deployments:
        assert d.capacity_rps > 0 and d.result.stable and d.result.latency_p99_s <= 0.5
    best = c.best("disaggregated")
    assert c.gain("disaggregated") == best.capacity_rps / c.best("co-located").capacity_rps
    with pytest.raises(ValueError, match="kind"):
        c.best("hybrid")


def test_rows_up_to_prices_each_row_as_lookup_s_does():
    # the generation kernels index this table for every batch size up to their policy's
    from ipusim.serving.generation import _rows_up_to
    from ipusim.serving.service import lookup_s

    rng = np.random.default_rng(7)
    tab = rng.random((6, 9)) * 1e-3
    tab[3, 4] = np.inf
    tab.setflags(write=False)
    for rows in (2, 5, 17):
        out = _rows_up_to(tab, rows)
        assert out.shape == (max(rows, 5) + 1, 9) and out.flags.c_contiguous and out.flags.writeable
        want = [[lookup_s(tab, r, j) for j in range(9)] for r in range(out.shape[0])]
        assert out.tobytes() == np.array(want).tobytes()


@pytest.mark.parametrize("prompt_axis", [True, False])
def test_counted_gaps_list_each_cell_as_the_plain_loops_do(prompt_axis):
    import serving_reference as R

    from ipusim.serving.generation import _counted_gaps

    rng = np.random.default_rng(11)
    dec = rng.random((9, 6)) * 1e-2
    mixed = rng.random((9, 9, 4)) * 1e-2
    shape = (9, 9, 4, 6) if prompt_axis else (9, 1, 1, 6)
    cells = np.where(rng.random(shape) < 0.2, rng.integers(1, 50, shape), 0)
    gap_s, gap_w = rng.random(5), rng.integers(1, 9, 5)
    got = _counted_gaps(gap_s, gap_w, cells, dec, mixed if prompt_axis else np.zeros((0, 0, 0)))
    want = R.counted_gaps_reference(gap_s, gap_w, cells, dec, mixed)
    assert got[0].tobytes() == want[0].tobytes() and got[1].tobytes() == want[1].tobytes()
    assert got[0].size == 5 + np.count_nonzero(cells)
