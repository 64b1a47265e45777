"""The planner's memos (``map_matmul``'s plans, ``_deal_same``'s piece counts) hand out what a
fresh, un-memoised computation gives, bit for bit, and nothing a caller can edit in place."""

import dataclasses

import numpy as np
import pytest

from ipusim import hardware, tileplan, tiles, workloads
from ipusim.tileplan import base, rows

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
