"""The fast planner (the ``_grid_search`` and ``_attention_cost_kernel`` kernels) against the
exhaustive searches of ``tests/tileplan_reference.py``: the same plans and costs, bit
for bit (tolerance: none, every float compared by its bytes), over chips, models, phases,
batch sizes and lengths."""

from __future__ import annotations

import numpy as np
import pytest
import tileplan_reference

from ipusim import hardware, tileplan, workloads
from ipusim.tileplan import attention as tp_attention
from ipusim.tileplan import base as tp_base
from ipusim.tileplan import matmul as tp_matmul
from ipusim.tileplan import rows as tp_rows
from ipusim.tileplan import search as tp_search

TILE_CHIPS = tuple(hardware.TILE_PRESETS)  # gc2, gc200, bow


def _bits(x):
    """Everything a plan holds, floats and arrays by their bytes (so 1e-300 differences count)."""
    if isinstance(x, np.ndarray):
        return (x.dtype.str, x.shape, x.tobytes())
    if isinstance(x, float):
        return x.hex()
    if isinstance(x, (list, tuple)):
        return tuple(_bits(v) for v in x)
    if hasattr(x, "__dataclass_fields__"):
        return (type(x).__name__,) + tuple(
            (k, x.op.name if k == "op" and not isinstance(x.op, str) else _bits(getattr(x, k)))
            for k in x.__dataclass_fields__
        )
    return x


def _grid_cases(count: int, seed: int):
    """(fits, none fits) counts of ``count`` seeded shapes on every tile chip, every pass axis,
    budgets from none-fits to all-fit, each checked against the exhaustive search."""
    rng = np.random.default_rng(seed)
    done = {"fits": 0, "none fits": 0}
    for i in range(count):
        c = hardware.chip(TILE_CHIPS[i % len(TILE_CHIPS)])
        m, k, n = (int(v) for v in rng.integers(1, 40_000, 3))
        axis = ("", "m", "n", "k")[i % 4]
        passes = 1 if not axis else int(rng.integers(2, 64))
        if axis and passes > {"m": m, "n": n, "k": k}[axis]:
            passes = 2 if {"m": m, "n": n, "k": k}[axis] >= 2 else 1
            axis = axis if passes > 1 else ""
        budget = float(rng.choice([10.0, 2e3, 2e4, 1e5, 3.8e5, 1e12]))
        dt = int(rng.choice([1, 2, 4]))
        fast = tp_matmul._best_grid(m, k, n, dt, c, axis, passes, budget)
        old = tileplan_reference.best_grid_numpy(m, k, n, dt, c, axis, passes, budget)
        assert _bits(tuple(fast)) == _bits(tuple(old)), (c.name, m, k, n, dt, axis, passes, budget)
        done["fits" if old.fits else "none fits"] += 1
    return done


def test_grid_kernel_equals_the_exhaustive_numpy_search_bit_for_bit():
    done = _grid_cases(250, seed=12)
    assert min(done.values()) > 25, done  # both branches of the pick were exercised


@pytest.mark.slow
def test_grid_kernel_equals_the_exhaustive_numpy_search_many_shapes():
    done = _grid_cases(5000, seed=13)
    assert min(done.values()) > 500, done


def test_grid_kernel_equals_the_exhaustive_search_on_decode_shapes():
    """Few rows against model-sized weights (decode steps, claim 10's tables): most grids there
    are skipped by the kernel's bound once one fits; the picks are still the exhaustive ones."""
    rng = np.random.default_rng(21)
    fitted = 0
    for i in range(120):
        c = hardware.chip(TILE_CHIPS[i % len(TILE_CHIPS)])
        m = int(rng.integers(1, 200))
        k, n = (int(rng.choice([768, 1024, 2304, 3072, 4096, 50257])) for _ in range(2))
        axis = ("", "m", "n", "k")[i % 4]
        passes = 1 if not axis else min(int(rng.integers(2, 9)), {"m": m, "n": n, "k": k}[axis])
        axis = axis if passes > 1 else ""
        budget = float(rng.choice([2e4, 1e5, 3.8e5, 1e12]))
        fast = tp_matmul._best_grid(m, k, n, 2, c, axis, passes, budget)
        old = tileplan_reference.best_grid_numpy(m, k, n, 2, c, axis, passes, budget)
        assert _bits(tuple(fast)) == _bits(tuple(old)), (c.name, m, k, n, axis, passes, budget)
        fitted += old.fits
    assert fitted > 60  # the skip applies only once a grid fits: most cases must fit


def test_least_bytes_bounds_every_grid_and_probe_agrees():
    """``_least_bytes`` is at most the least working set of every grid (the exhaustive search
    under a budget nothing fits returns that least), and ``_probe`` answers as ``_best_grid``
    whenever its bound lets it search; when it does not, nothing fits."""
    rng = np.random.default_rng(22)
    skipped = 0
    for i in range(200):
        c = hardware.chip(TILE_CHIPS[i % len(TILE_CHIPS)])
        m, k, n = (int(v) for v in rng.integers(1, 20_000, 3))
        axis = ("m", "n", "k")[i % 3]
        passes = min(int(rng.integers(2, 64)), {"m": m, "n": n, "k": k}[axis])
        if passes < 2:
            continue
        dt = int(rng.choice([1, 2, 4]))
        least = tileplan_reference.best_grid_numpy(m, k, n, dt, c, axis, passes, -1.0)
        assert not least.fits
        bound = tp_matmul._least_bytes(m, k, n, dt, c.tiles, axis, passes)
        assert bound <= least.temp_bytes, (c.name, m, k, n, dt, axis, passes)
        budget = float(least.temp_bytes * rng.choice([0.5, 0.9, 1.0, 1.5]))
        probe = tp_matmul._probe(m, k, n, dt, c, axis, passes, budget)
        full = tileplan_reference.best_grid_numpy(m, k, n, dt, c, axis, passes, budget)
        if probe is tp_matmul._NO_FIT:
            skipped += 1
            assert not full.fits
        else:
            assert _bits(tuple(probe)) == _bits(tuple(full))
    assert skipped > 20  # the bound does skip searches


def test_distribute_of_repeated_rows_equals_distribute_of_the_repeated_table():
    rng = np.random.default_rng(3)
    for B, rep, T in ((1, 1, 7), (3, 12, 1472), (64, 5, 1472), (7, 300, 1216), (2, 2, 5)):
        rows = rng.random((B, 6)) * 1e6
        a, b = np.zeros((T, 7)), np.zeros((T, 7))
        tp_base._distribute(rows, rep, T, a)
        tp_base._distribute(np.repeat(rows, rep, axis=0), 1, T, b)
        assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize(
    "chip,model,phase,lengths,pad",
    [
        ("gc200", "bert-base", "forward", [128] * 8, 128),
        ("bow", "bert-large", "forward", [384] * 24, 384),
        ("gc2", "gpt2", "prefill", [5, 77, 300, 1024], None),
        ("gc200", "gpt2", "decode", [100] * 32, None),
        ("gc2", "llama-2-7b", "prefill", [512] * 2, 512),
        # a mixed step's rows (prompts beside decodes) and a padded batch of many alike tiles
        ("gc200", "gpt2", "prefill", [256] * 5 + [1] * 7, None),
        ("gc200", "gpt2", "prefill", [96] * 27, 96),
        ("gc200", "gpt2", "prefill", [40, 40, 7, 40, 7, 7, 300], None),
    ],
)
def test_attention_cost_kernel_equals_the_dealt_tables(chip, model, phase, lengths, pad):
    """Every chunk count and key-block count the planner tries, cost and working set bit for bit."""
    c = hardware.chip(chip)
    s = workloads.step(model, lengths, phase=phase, pad_to=pad)
    keys = int(tp_attention._query_chunks(s)[1].max())
    blocks = [1] if phase == "decode" else tp_attention._key_block_counts(keys)[::3]
    for r in (1, 2, 5, max(1, c.tiles // (s.model.heads * s.batch))):
        for nb in blocks:
            fast = tp_attention._attention_cost(s, c, r, nb)
            old = tileplan_reference.attention_cost(s, c, r, nb)
            assert _bits(fast) == _bits(old), (r, nb)


def test_attention_cost_kernel_equals_the_dealt_tables_on_runs_of_alike_rows():
    """Random steps of a few runs of equal lengths (the kernel skips tiles alike to one it has
    costed, and jumps over a run once both piece counts of a tile are seen): chunk counts with
    fewer pieces than tiles and more, with and without a remainder, bit for bit."""
    rng = np.random.default_rng(28)
    done = {"fewer": 0, "more": 0}
    for _ in range(30):
        chip = str(rng.choice(TILE_CHIPS))
        c = hardware.chip(chip)
        phase = str(rng.choice(["prefill", "decode"]))
        runs = rng.integers(1, 4)
        lengths = [
            int(v) for _ in range(runs) for v in [rng.integers(1, 700)] * int(rng.integers(1, 12))
        ]
        s = workloads.step("gpt2", lengths, phase=phase)
        keys = int(tp_attention._query_chunks(s)[1].max())
        blocks = [1] if phase == "decode" else tp_attention._key_block_counts(keys)[:3]
        for r in (1, 3, 7, 24):
            done["more" if s.batch * s.model.heads * r > c.tiles else "fewer"] += 1
            for nb in blocks:
                fast = tp_attention._attention_cost(s, c, r, nb)
                old = tileplan_reference.attention_cost(s, c, r, nb)
                assert _bits(fast) == _bits(old), (chip, lengths, phase, r, nb)
    assert min(done.values()) > 10, done


def test_attention_cost_kernel_equals_the_dealt_tables_on_few_tiles():
    """A chip of few tiles, so that tiles straddling two runs of rows (which the kernel must
    cost, never skip) often hold the slowest tile; random runs of lengths, bit for bit."""
    import dataclasses

    rng = np.random.default_rng(2028)
    for _ in range(200):
        c = dataclasses.replace(hardware.chip("gc200"), tiles=int(rng.integers(1, 40)))
        lengths = [
            int(v)
            for _ in range(rng.integers(1, 5))
            for v in [rng.integers(1, 9) * 16] * int(rng.integers(1, 21))
        ]
        if rng.random() < 0.5:  # a long run of short rows, then one long row: a straddling
            lengths = [16] * int(rng.integers(8, 40)) + [int(rng.integers(20, 33)) * 16]  # tile
        phase = str(rng.choice(["prefill", "decode"]))
        s = workloads.step("gpt2", lengths, phase=phase)
        r, nb = int(rng.integers(1, 4)), 1 if phase == "decode" else int(rng.integers(1, 4))
        fast = tp_attention._attention_cost(s, c, r, nb)
        old = tileplan_reference.attention_cost(s, c, r, nb)
        assert _bits(fast) == _bits(old), (c.tiles, lengths, phase, r, nb)


STEPS = [  # (chip, model, phase, batch, length, padded, unlimited)
    ("gc200", "bert-base", "forward", 1, 16, True, False),
    ("gc200", "bert-base", "forward", 32, 384, True, False),  # serial passes and key blocks
    ("bow", "bert-large", "forward", 8, 512, True, False),
    ("gc2", "gpt2", "prefill", 3, 1000, False, False),
    ("gc200", "gpt2", "decode", 48, 700, False, False),
    (
        "gc2",
        "llama-2-7b",
        "prefill",
        1,
        128,
        True,
        False,
    ),  # weights stream: budgets cut, plans redone
    ("bow", "bert-base", "forward", 16, 128, True, True),
]
MORE_STEPS = [
    (ch, m, ph, b, L, pad, False)
    for ch in TILE_CHIPS
    for m, ph, pad in (
        ("bert-base", "forward", True),
        ("bert-large", "forward", True),
        ("gpt2", "prefill", False),
        ("gpt2", "decode", False),
        ("llama-2-7b", "prefill", True),
    )
    for b in (1, 5, 24, 64)
    for L in (64, 200, 512)
]


@pytest.mark.parametrize("chip,model,phase,batch,length,pad,unlimited", STEPS)
def test_plan_step_equals_the_exhaustive_planner_bit_for_bit(
    chip, model, phase, batch, length, pad, unlimited
):
    _same_plans(chip, model, phase, batch, length, pad, unlimited)


@pytest.mark.slow
@pytest.mark.parametrize("chip,model,phase,batch,length,pad,unlimited", MORE_STEPS)
def test_plan_step_equals_the_exhaustive_planner_more_steps(
    chip, model, phase, batch, length, pad, unlimited
):
    _same_plans(chip, model, phase, batch, length, pad, unlimited)


def _same_plans(chip, model, phase, batch, length, pad, unlimited):
    c = hardware.chip(chip)
    lengths = [length] * batch if pad else [max(1, length - 37 * i) for i in range(batch)]
    s = workloads.step(
        model, lengths, phase=phase, pad_to=length if pad and phase != "decode" else None
    )
    tileplan.clear_plan_cache()
    fast = _bits(tileplan.plan_step(c, s, unlimited=unlimited))
    with tileplan_reference.plain():
        old = _bits(tileplan.plan_step(c, s, unlimited=unlimited))
    assert fast == _bits(tileplan.plan_step(c, s, unlimited=unlimited))  # the kernels are back
    assert fast == old


def test_candidates_are_shared_and_read_only():
    a = tp_search.candidates(4096, 1472)
    assert a is tp_search.candidates(4096, 1472) and not a.flags.writeable
    assert a[0] == 1 and a[-1] == 1472 and np.all(np.diff(a) > 0)


def test_distinct_equals_unique():
    rng = np.random.default_rng(5)
    for n, size in ((1, 3), (2, 0), (30522, 1), (30522, 4096), (50257, 20_000)):
        idx = rng.integers(0, n, size=size)
        assert np.array_equal(tp_rows._distinct(idx, n), np.unique(idx))
    assert np.array_equal(
        tp_rows._distinct(np.array([7, 3, 7]), 5), [3, 7]
    )  # out of range: np.unique
