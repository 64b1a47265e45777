"""Packing strategies: published efficiencies, kernels vs references, accounting, bad input."""

import numpy as np
import packing_reference
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ipusim import lengths, packing, validation, workloads

# ---------------------------------------------------------------------------------------------
# Published results (ipusim/data/README.md; docs/facts.md §4.1, reruns of GC-TUT code)
# ---------------------------------------------------------------------------------------------


def _published(row_id):  # the figure as the registry (ipusim/data/published.csv) states it
    return validation.row(row_id)["value"]


@pytest.mark.parametrize(
    "ds, L, published",
    [
        ("wikipedia-512", 512, _published("krell-pad-wikipedia-512")),
        ("squad-384", 384, _published("krell-pad-squad-384")),
    ],
)
def test_padding_waste_matches_published(ds, L, published):
    p = packing.pack(ds, L, "pad")
    assert p.padding_fraction == pytest.approx(published, abs=0.0005)  # published to 0.1 pt


@pytest.mark.parametrize(
    "ds, L, k, published, tol",
    [
        (
            "wikipedia-512",
            512,
            3,
            _published("krell-spfhp-wikipedia-512-k3"),
            0.001,
        ),  # rerun of the published code
        ("squad-384", 384, 3, _published("krell-spfhp-squad-384-k3"), 0.001),
        ("wikipedia-512", 512, 16, _published("krell-spfhp-wikipedia-512-k16"), 0.001),
    ],
)
def test_spfhp_matches_published(ds, L, k, published, tol):
    p = packing.pack(ds, L, "spfhp", max_per_row=k)
    assert p.efficiency == pytest.approx(published, abs=tol)


@pytest.mark.parametrize(
    "ds, L, k", [("wikipedia-512", 512, 3), ("wikipedia-512", 512, 16), ("squad-384", 384, 3)]
)
def test_better_methods_at_or_above_spfhp(ds, L, k):
    sp = packing.pack(ds, L, "spfhp", max_per_row=k)
    for better in ("bfhp", "nnlshp"):
        p = packing.pack(ds, L, better, max_per_row=k)
        assert p.efficiency >= sp.efficiency, better
        assert p.sequences == sp.sequences and p.real_tokens == sp.real_tokens


def test_nnlshp_near_published_nnlshp_on_wikipedia():
    # Krell et al. NNLSHP, depth 3, rerun of the published code: 99.75% (docs/facts.md §4.1)
    nn = packing.pack("wikipedia-512", 512, "nnlshp", max_per_row=3)
    assert nn.efficiency == pytest.approx(_published("krell-nnlshp-wikipedia-512-k3"), abs=0.002)


def test_token_lower_bound_on_rows():
    h = lengths.dataset("wikipedia-512")
    for s in ("spfhp", "bfhp", "nnlshp"):
        p = packing.pack(h, 512, s, max_per_row=16)
        assert p.rows >= -(-h.tokens // 512)  # no packing beats ceil(tokens / row)


# ---------------------------------------------------------------------------------------------
# Kernels against their plain-Python references, seeded inputs of several sizes
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 10, 200, 2000])
@pytest.mark.parametrize("k", [1, 2, 3, 64])
def test_ffd_kernel_matches_reference(n, k):
    rng = np.random.default_rng(n * 100 + k)
    x = rng.integers(1, 129, n)
    p = packing.pack(x, 128, "ffd", max_per_row=k)
    ref_row, ref_rows = packing_reference.ffd(list(map(int, x)), 128, k)
    assert p.rows == ref_rows
    assert np.array_equal(p.seq_row, np.array(ref_row))


def _random_counts(rng, L, n):
    c = np.bincount(rng.integers(1, L + 1, n), minlength=L + 1)[1:]
    c[rng.random(L) < 0.3] *= 50  # some heavy lengths, so groups split
    return c


def _spfhp_by(run, c, k, shortest_first):
    """``run_spfhp``'s tables filled by ``run`` (the compiled kernel or its interpreted source)."""
    cap = 2 * c.size + 1
    comp, ncomp, cnt, rem = np.zeros((cap, k), np.int64), *(np.zeros(cap, np.int64) for _ in "abc")
    ng = run(c.copy(), k, shortest_first, comp, ncomp, cnt, rem)
    return comp[:ng], cnt[:ng]


@pytest.mark.parametrize("seed, L, n", [(0, 16, 5), (1, 64, 200), (2, 128, 3000), (3, 512, 20000)])
@pytest.mark.parametrize("k", [1, 2, 3, 16])
@pytest.mark.parametrize("shortest_first", [True, False])
def test_spfhp_kernel_matches_reference(seed, L, n, k, shortest_first):
    """The compiled kernel, its source run by the interpreter (``run_spfhp`` runs that while
    compiling would cost more) and ``run_spfhp`` all give the reference's packs."""
    c = _random_counts(np.random.default_rng(seed), L, n)
    want = packing_reference.spfhp(c, k, shortest_first)
    kernel = packing.spfhp._spfhp
    for comps, reps in (
        _spfhp_by(kernel, c, k, shortest_first),
        _spfhp_by(kernel.py_func, c, k, shortest_first),
        packing.spfhp.run_spfhp(c, k, shortest_first),
    ):
        got = [
            (tuple(int(v) for v in row if v), int(r)) for row, r in zip(comps, reps, strict=True)
        ]
        assert got == want


@pytest.mark.parametrize("seed, L, n", [(0, 12, 30), (1, 40, 500), (2, 90, 5000)])
@pytest.mark.parametrize("depth, slack", [(1, 0), (2, 0), (3, 0), (3, 3)])
def test_nnls_compositions_match_reference(seed, L, n, depth, slack):
    c = _random_counts(np.random.default_rng(seed), L, n)
    out = np.zeros((L**3, 3), np.int64)
    s = packing.nnls._nnls_compositions(c, depth, slack, out)
    got = {tuple(int(v) for v in row if v) for row in out[:s]}
    assert s == len(got)  # no duplicates
    assert got == packing_reference.nnls_compositions(c, depth, slack)


@pytest.mark.parametrize("seed, L, n, sweeps", [(0, 12, 30, 1), (1, 40, 500, 5), (2, 60, 3000, 20)])
def test_nnls_cd_matches_reference(seed, L, n, sweeps):
    c = _random_counts(np.random.default_rng(seed), L, n)
    out = np.zeros((L**3, 3), np.int64)
    comp = out[: packing.nnls._nnls_compositions(c, 3, 2, out)]
    x1, x2 = np.zeros(len(comp)), np.zeros(len(comp))
    r1 = packing.nnls._nnls_cd(comp, c, sweeps, x1)
    r2 = packing_reference.nnls_cd(comp, c, sweeps, x2)
    np.testing.assert_allclose(x1, x2, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(r1, r2, rtol=1e-9, atol=1e-6)


@pytest.mark.parametrize("seed, L, n", [(0, 12, 30), (1, 40, 500), (2, 60, 3000)])
def test_nnls_repair_matches_reference_and_removes_overuse(seed, L, n):
    rng = np.random.default_rng(seed)
    c = _random_counts(rng, L, n)
    out = np.zeros((L**3, 3), np.int64)
    comp = out[: packing.nnls._nnls_compositions(c, 3, 1, out)]
    reps = rng.integers(0, 5, len(comp))  # deliberately too many packs
    used = np.zeros(L, np.int64)
    for j in range(3):
        m = comp[:, j] > 0
        np.add.at(used, comp[m, j] - 1, reps[m])
    want = packing_reference.nnls_repair(comp, reps, c)
    packing.nnls._nnls_repair(comp, reps, used, c)
    assert reps.tolist() == want
    assert (used <= c).all() and (reps >= 0).all()


def test_nnls_cd_converges_to_an_exact_packing():
    # counts built from known compositions have a zero-residual solution
    comp = np.array([[6, 4, 0], [5, 5, 0], [10, 0, 0], [4, 3, 3]])
    x_true = np.array([7.0, 3.0, 2.0, 5.0])
    c = np.zeros(10, np.int64)
    for row, r in zip(comp, x_true, strict=True):
        for v in row[row > 0]:
            c[v - 1] += int(r)
    x = np.zeros(4)
    r = packing.nnls._nnls_cd(comp, c, 2000, x)
    assert np.abs(r).max() < 1e-6


# ---------------------------------------------------------------------------------------------
# Properties: every sequence once, no row too long or too crowded, tokens conserved
# ---------------------------------------------------------------------------------------------


def _check_list_packing(x, L, k, p):
    rows = p.rows_as_lists()
    flat = sorted(v for r in rows for v in r)
    assert flat == sorted(int(v) for v in x)  # every sequence placed exactly once
    assert all(sum(r) <= rl for r, rl in zip(rows, p.row_lengths(), strict=True))
    assert all(len(r) <= (k if p.strategy in packing.PACKING_STRATEGIES else 1) for r in rows)
    assert p.real_tokens == int(np.sum(x))
    assert p.real_tokens + p.padded_tokens == p.total_tokens == int(p.row_lengths().sum())
    # seq_row names the row each input sequence sits in, consistently with the rows
    assert p.seq_row is not None and p.seq_row.size == len(x)
    for r, row in enumerate(rows):
        assert sorted(np.asarray(x)[p.seq_row == r].tolist()) == sorted(row)


@settings(max_examples=40, deadline=None)
@given(
    x=st.lists(st.integers(1, 64), min_size=1, max_size=120),
    k=st.integers(1, 6),
    strategy=st.sampled_from(packing.STRATEGIES),
)
@example(x=[64], k=4, strategy="nnlshp")  # NNLS packs everything, nothing left for SPFHP
def test_packing_properties(x, k, strategy):
    p = packing.pack(x, 64, strategy, max_per_row=k)
    _check_list_packing(x, 64, k, p)


@pytest.mark.parametrize("strategy", packing.STRATEGIES)
@pytest.mark.parametrize("seed", [0, 1])
def test_packing_properties_seeded(strategy, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(1, 200, 3000)
    p = packing.pack(x, 256, strategy, max_per_row=4)
    _check_list_packing(x, 256, 4, p)


@pytest.mark.parametrize("strategy", packing.STRATEGIES)
def test_histogram_counts_conserved(strategy):
    h = lengths.dataset("squad-384")
    p = packing.pack(h, 384, strategy, max_per_row=3)
    got = np.zeros(384, np.int64)
    for row, r in zip(p.compositions, p.repeats, strict=True):
        for v in row[row > 0]:
            got[v - 1] += r
    assert np.array_equal(got, h.counts)
    assert (p.compositions.sum(axis=1) <= p.row_len).all()
    assert p.real_tokens == h.tokens


def test_bucket_rows_use_smallest_boundary():
    p = packing.pack([10, 60, 64, 65, 200], 256, "bucket", buckets=[64, 128])
    assert sorted(p.row_lengths().tolist()) == [64, 64, 64, 128, 256]
    assert (
        packing.pack("squad-384", 384, "pad").efficiency
        < packing.pack("squad-384", 384, "bucket").efficiency
        < 1
    )


# ---------------------------------------------------------------------------------------------
# FLOPs: the accounting reproduces workloads.step (an independent op-list count)
# ---------------------------------------------------------------------------------------------


def test_padded_flops_equal_a_padded_step():
    x = [30, 100, 7, 128, 64]
    f = packing.pack(x, 128, "pad").flops("bert-base")
    assert f["computed_flops"] == pytest.approx(
        workloads.step("bert-base", x, pad_to=128).flops, rel=1e-12
    )
    assert f["useful_flops"] == pytest.approx(workloads.step("bert-base", x).flops, rel=1e-12)


def test_full_packed_rows_waste_nothing_with_block_attention():
    x = [256, 256, 100, 412, 512]  # rows of 512 filled exactly
    p = packing.pack(x, 512, "ffd", max_per_row=2)
    f = p.flops("bert-base")
    assert p.padded_tokens == 0
    assert f["computed_flops"] == pytest.approx(workloads.step("bert-base", x).flops, rel=1e-12)
    assert f["wasted_flops"] == pytest.approx(0.0, abs=1.0)
    dense = p.flops("bert-base", attention="dense")
    assert dense["computed_flops"] > f["computed_flops"]  # the whole 512^2 square per row


def test_packing_wastes_less_than_padding_on_wikipedia():
    pad = packing.pack("wikipedia-512", 512, "pad").flops()
    sp = packing.pack("wikipedia-512", 512, "spfhp", max_per_row=3).flops()
    assert pad["useful_flops"] == pytest.approx(sp["useful_flops"], rel=1e-12)
    assert sp["wasted_fraction"] < 0.12 < 0.5 < pad["wasted_fraction"]


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source, L, words",
    [
        ([10, 600], 512, "600 tokens is longer than the row"),
        ([10, 0], 512, ">= 1 token"),
        ([10, -3], 512, ">= 1 token"),
        ([10, 2.5], 512, "whole numbers"),
        ([], 512, "empty"),
        ("squad-384", 256, "longer than the row"),
    ],
)
def test_bad_input_names_the_problem(source, L, words):
    with pytest.raises(ValueError, match=words):
        packing.pack(source, L, "spfhp")


def test_bad_options_name_the_problem():
    with pytest.raises(ValueError, match="unknown strategy"):
        packing.pack([1, 2], 8, "best")
    with pytest.raises(ValueError, match="max_per_row must be > 0"):
        packing.pack([1, 2], 8, "ffd", max_per_row=0)
    with pytest.raises(ValueError, match="negative count"):
        packing.pack(lengths.Histogram(np.array([1, -1])), 8)


def test_result_face():
    p = packing.pack([3, 5, 8], 8, "ffd")
    assert "efficiency" in repr(p) and "<table>" in p._repr_html_()
    d = p.to_dict()
    for key in ("efficiency", "rows", "real_tokens", "padded_tokens"):
        assert key in d
    assert d["rows"] == 2 and d["real_tokens"] == 16 and d["padded_tokens"] == 0
