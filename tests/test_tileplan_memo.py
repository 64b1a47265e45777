"""The planner's memos (``map_matmul``'s plans, the grid search's results over budgets,
``_deal_same``'s piece counts) hand out what a fresh, un-memoised computation gives, bit for
bit, and nothing a caller can edit in place."""

import dataclasses

import numpy as np
import pytest
import tileplan_reference

from ipusim import hardware, tileplan, tiles, workloads
from ipusim.tileplan import base, rows
from ipusim.tileplan import matmul as tp_matmul
from ipusim.tileplan import search as tp_search

GC200 = hardware.chip("gc200")
TIGHT = GC200.replace(sram_per_tile_bytes=160 * 1024)  # serial passes and over-budget plans
CASES = [  # (chip, model, lengths, phase)
    (GC200, "bert-base", [128] * 8, "forward"),
    (GC200, "gpt2", [300, 17, 1024], "prefill"),
    (GC200, "llama-2-7b", [900] * 4, "decode"),
    (hardware.chip("gc2"), "bert-large", [384] * 16, "forward"),
    (TIGHT, "bert-large", [512] * 32, "forward"),
    (TIGHT, "gpt2", [64] * 3, "decode"),
]


def _plan_fields(p):
    """Every value of an OpPlan, arrays as bytes, phases unrolled."""
    out = []
    for f in dataclasses.fields(p):
        v = getattr(p, f.name)
        if f.name == "phases":
            v = [
                tuple(
                    (a.dtype.str, a.shape, a.tobytes()) if isinstance(a, np.ndarray) else a
                    for a in (getattr(ph, g.name) for g in dataclasses.fields(ph))
                )
                for ph in v
            ]
        elif isinstance(v, np.ndarray):
            v = (v.dtype.str, v.shape, v.tobytes())
        out.append((f.name, v))
    return out


@pytest.mark.parametrize("chip, model, lengths, phase", CASES)
def test_memoised_matmul_plans_equal_fresh_ones(chip, model, lengths, phase):
    s = workloads.step(model, lengths, phase=phase)
    tileplan.clear_plan_cache()
    first = tiles.map_step(chip, s)
    again = tiles.map_step(chip, s)  # every matmul plan from the memo
    matmuls = [i for i, p in enumerate(first) if p.op.kind == "matmul"]
    assert matmuls and all(again[i] is first[i] for i in matmuls)
    tileplan.clear_plan_cache()
    fresh = tiles.map_step(chip, s)
    assert all(fresh[i] is not first[i] for i in matmuls)
    assert [_plan_fields(p) for p in again] == [_plan_fields(p) for p in fresh]


def test_tight_case_exercises_passes_and_tight_budgets():
    """The cases above reach serial passes and budgets below ``budget_bytes`` (else the memo's
    key on the budget and the held input would go untested)."""
    s = workloads.step("bert-large", [512] * 32)
    plans = [p for p in tiles.map_step(TIGHT, s) if p.op.kind == "matmul"]
    assert any(p.passes > 1 for p in plans)
    assert any(p.budget_bytes < tileplan.budget_bytes(TIGHT) for p in plans)


def test_a_different_budget_or_held_input_is_planned_again():
    op = workloads.step("gpt2", [256] * 4, phase="prefill").ops[1]
    assert op.kind == "matmul"
    a = tileplan.map_matmul(op, GC200, 2, budget=200e3)
    assert tileplan.map_matmul(op, GC200, 2, budget=200e3) is a
    b = tileplan.map_matmul(op, GC200, 2, budget=100e3)
    c = tileplan.map_matmul(op, GC200, 2, budget=200e3, live_bytes=1024.0)
    assert b is not a and c is not a
    assert c.temp.tolist() == (a.temp + 1024.0).tolist()


def test_memoised_matmul_plan_is_read_only():
    op = workloads.step("bert-base", [128] * 2).ops[1]
    p = tileplan.map_matmul(op, GC200, 2)
    arrays = [p.weights, p.temp] + [getattr(ph, k) for ph in p.phases for k in base.PHASE_ARRAYS]
    for a in arrays:
        with pytest.raises(ValueError):
            a[0] = 1.0


@pytest.mark.parametrize("P, T", [(1, 7), (5, 7), (7, 7), (100, 7), (3000, 1472), (1472, 1472)])
def test_deal_same_equals_deal_of_the_repeated_row(P, T):
    row = [1.5, 2.0, 0.0, 3.25, 7.0, 0.5]
    rows._pieces_per_tile.cache_clear()
    got = rows._deal_same(row, P, T)
    assert got.tobytes() == base.deal(np.tile(row, (P, 1)), T).tobytes()
    assert rows._deal_same(row, P, T).tobytes() == got.tobytes()  # memoised counts, same bits
    got[0, 0] = -1.0  # the caller's table is its own
    assert rows._deal_same(row, P, T)[0, 0] != -1.0


GRID_SHAPES = [  # (m, k, n, dt, axis, passes)
    (128, 768, 768, 2, "", 1),
    (4096, 1024, 4096, 2, "k", 4),
    (40_000, 4096, 11_008, 2, "m", 16),
    (333, 12_288, 9_999, 4, "n", 3),
    (1, 8192, 8192, 1, "k", 2),
]


@pytest.mark.parametrize("m, k, n, dt, axis, passes", GRID_SHAPES)
@pytest.mark.parametrize("order", ["descending", "ascending", "shuffled"])
def test_grid_memo_over_budgets_equals_a_fresh_search(
    m, k, n, dt, axis, passes, order, monkeypatch
):
    """The same sub-matmul under many budgets, in the order a table or a training search might
    ask: every answer (memoised or not) equals a fresh kernel search and the NumPy reference."""
    c = TIGHT if m > 10_000 else GC200
    first = tp_matmul._best_grid(m, k, n, dt, c, axis, passes, 1e12)  # the fastest grid's bytes
    least = tp_matmul._best_grid(m, k, n, dt, c, axis, passes, 0.0)  # none fits: least bytes
    edges = [least.temp_bytes, first.temp_bytes]
    budgets = sorted({*np.geomspace(1e3, 2e6, 25), *edges, *(np.nextafter(e, 0) for e in edges)})
    budgets = [float(b) for b in budgets]
    if order == "descending":
        budgets.reverse()
    elif order == "shuffled":
        np.random.default_rng(3).shuffle(budgets)
    tileplan.clear_plan_cache()
    searches = []
    kernel = tp_matmul._grid_search
    monkeypatch.setattr(tp_matmul, "_grid_search", lambda *a: searches.append(1) or kernel(*a))
    memo = [tp_matmul._best_grid(m, k, n, dt, c, axis, passes, b) for b in budgets]
    monkeypatch.undo()
    if order == "descending":  # each result holds down to its own bytes: most budgets reuse one
        assert len(searches) < len(budgets) / 2
    for b, got in zip(budgets, memo, strict=True):
        tileplan.clear_plan_cache()
        fresh = tp_matmul._best_grid(m, k, n, dt, c, axis, passes, b)
        ref = tileplan_reference.best_grid_numpy(m, k, n, dt, c, axis, passes, b)
        assert tuple(got) == tuple(fresh) == tuple(ref), (b, got, fresh)
    fits = {p.fits for p in memo}
    assert fits == {True, False}  # the budgets span both kinds of result


def test_grid_memo_reuses_a_result_only_within_its_budgets():
    """A result that fits holds from its own bytes up to the budget it was found under; one
    that does not fit holds below the least bytes; outside those the kernel searches again."""
    memo = tp_search.BudgetMemo(maxsize=4)
    memo.put("a", 100.0, "fit", True, 60.0)
    memo.put("b", 50.0, "none", False, 80.0)
    assert [memo.get("a", b) for b in (59.0, 60.0, 100.0, 101.0)] == [None, "fit", "fit", None]
    assert [memo.get("b", b) for b in (10.0, 79.9, 80.0)] == ["none", "none", None]
    tileplan.clear_plan_cache()  # empties every BudgetMemo too
    assert memo.get("a", 80.0) is None


def test_budgets_with_one_plan_share_one_layout():
    """map_matmul keeps its layouts by the planner's choice: two budgets that choose the same
    grid hand out copies of one layout (the same arrays and phases) that differ only in
    ``budget_bytes``, each equal to a fresh plan under its budget."""
    op = workloads.step("gpt2", [256] * 4, phase="prefill").ops[1]
    tileplan.clear_plan_cache()
    a = tileplan.map_matmul(op, GC200, 2, budget=300e3)
    b = tileplan.map_matmul(op, GC200, 2, budget=290e3)
    assert tileplan.plan_matmul(GC200, op.m, op.k, op.n, budget=300e3) == tileplan.plan_matmul(
        GC200, op.m, op.k, op.n, budget=290e3
    )
    assert a is not b and a.phases is b.phases and a.temp is b.temp
    assert (a.budget_bytes, b.budget_bytes) == (300e3, 290e3)
    tileplan.clear_plan_cache()
    fresh = tileplan.map_matmul(op, GC200, 2, budget=290e3)
    assert fresh.phases is not b.phases
    assert _plan_fields(fresh) == _plan_fields(b)
    for a_ in [b.weights, b.temp] + [getattr(f, k) for f in b.phases for k in base.PHASE_ARRAYS]:
        assert not a_.flags.writeable


def test_row_plans_are_memoised_read_only_and_equal_fresh_ones():
    s = workloads.step("gpt2", [300, 17], phase="prefill")
    norm = next(op for op in s.ops if op.kind == "norm")
    tileplan.clear_plan_cache()
    a = tileplan.map_rows(norm, s, GC200, s.model.d_model, exchange=True)
    other = workloads.step("gpt2", [17, 300], phase="prefill")  # same tokens, same op
    assert tileplan.map_rows(norm, other, GC200, s.model.d_model, exchange=True) is a
    tileplan.clear_plan_cache()
    fresh = tileplan.map_rows(norm, s, GC200, s.model.d_model, exchange=True)
    assert fresh is not a and _plan_fields(fresh) == _plan_fields(a)
    with pytest.raises(ValueError):
        a.temp[0] = 1.0


@pytest.mark.parametrize("chip, model, lengths, phase", CASES)
def test_supersteps_are_the_distinct_phases_with_their_counts(chip, model, lengths, phase):
    plans = tiles.map_step(chip, workloads.step(model, lengths, phase=phase))
    for p in plans:
        got = p.supersteps()
        assert [id(f) for f, _ in got] == list(dict.fromkeys(map(id, p.phases)))
        assert [n for f, n in got] == [sum(g is f for g in p.phases) for f, _ in got]
        assert sum(n for _, n in got) == len(p.phases)


def test_passes_are_laid_out_in_pass_order():
    """map_matmul's passes: pass i is the Phase of its size (``_splits``: one object per size),
    with a reduction after every pass, or after the last one only for passes over k."""
    seen = set()
    for chip, model, lengths, phase in CASES:
        for p in tiles.map_step(chip, workloads.step(model, lengths, phase=phase)):
            if p.op.kind != "matmul" or p.passes == 1:
                continue
            dim = {"m": p.op.m, "k": p.op.k, "n": p.op.n}[p.pass_axis]
            sizes = tp_matmul._splits(dim, p.passes).tolist()
            mm = [f for f in p.phases if f.label == "matmul"]
            red = [f for f in p.phases if f.label == "reduce"]
            by_size = {}
            assert len(mm) == p.passes
            assert all(by_size.setdefault(s, f) is f for f, s in zip(mm, sizes, strict=True))
            assert len({id(f) for f in mm}) == len(set(sizes))
            if red and p.pass_axis == "k":
                assert len(red) == 1 and p.phases[-1] is red[0]
            elif red:
                assert [id(f) for f in p.phases] == [
                    id(f) for pair in zip(mm, red, strict=True) for f in pair
                ]
            seen.add((p.pass_axis, bool(red), len(set(sizes))))
    assert {a for a, _, _ in seen} >= {"k", "m"} and any(n == 2 for _, _, n in seen), seen
