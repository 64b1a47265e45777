"""The mixed prefill + decode table (``serving.mixed_steps.mixed_table``): exact at its grid points,
linear between them, one rule for ``serve`` and the checklist, refused over the memory budget."""

from __future__ import annotations

import numpy as np
import pytest

from ipusim import hardware, limits, machine, workloads
from ipusim import serving as S
from ipusim.checklist import search
from ipusim.serving import mixed_steps, tables

CHIP, MODEL, ROWS, PROMPT, STEP = "a100-80gb", "gpt2", 16, 256, 32
# The GPU model's step time grows with rows and tokens only up to wave and tile quantisation: a
# step with a few more rows may be up to this share faster (measured: 0.07% at 16 rows).
NON_MONOTONE = 0.01


def _direct(d, r, L):
    """The machine model's step: ``r`` prompts of ``L`` tokens and ``d`` one-token rows, s."""
    return machine.simulate(
        _CHIP, workloads.step(_MODEL, [L] * r + [1] * d, phase="prefill")
    ).time_s


_CHIP, _MODEL = hardware.chip(CHIP), workloads.model(MODEL)


@pytest.fixture(scope="module")
def tab():
    spec = tables.Replica(hardware.chip(CHIP), workloads.model(MODEL))
    return mixed_steps.mixed_table(spec, ROWS, PROMPT, STEP)


def test_exact_at_every_grid_point(tab):
    lines, edge, lens = mixed_steps.mixed_grid(ROWS, PROMPT, STEP)
    assert sorted(lines) == [1, 2, 3, 4, 6, 8, 12, 15] and lens == [32, 64, 128, 256]
    points = {(d, r) for d, rs in lines.items() for r in rs} | {(ROWS - r, r) for r in edge}
    assert all(d >= 1 and r >= 1 and d + r <= ROWS for d, r in points)
    for d, r in sorted(points):
        for L in lens:
            assert tab[d, r, L // STEP] == pytest.approx(_direct(d, r, L), rel=1e-12), (d, r, L)


def test_linear_in_decodes_between_grid_points(tab):
    """A cell whose prompt count and length are grid points but whose decode count d is not:
    the straight line between the direct times at the grid d below and above (or the edge
    d = rows - r), to rounding. Bound: the machine model's time grows with d (to within
    ``NON_MONOTONE``), so the table is off the direct time by at most the difference between
    those two times plus that share."""
    checked = 0
    for r in (1, 2, 4, 8):
        top = ROWS - r
        knots = [d for d in mixed_steps.mixed_grid(ROWS, PROMPT, STEP)[0] if d < top] + [top]
        for d in range(1, top + 1):
            if d in knots:
                continue
            lo, hi = max(k for k in knots if k < d), min(k for k in knots if k > d)
            for L in (64, 256):
                t_lo, t, t_hi = _direct(lo, r, L), _direct(d, r, L), _direct(hi, r, L)
                w = (d - lo) / (hi - lo)
                got = tab[d, r, L // STEP]
                assert got == pytest.approx((1 - w) * t_lo + w * t_hi, rel=1e-12)
                slack = NON_MONOTONE * t
                assert t_lo - slack <= t <= t_hi + slack  # more decoding rows cost no less
                assert abs(got - t) <= abs(t_hi - t_lo) + slack
                checked += 1
    assert checked == 2 * (7 + 6 + 5 + 2)  # off-grid d at r = 1, 2, 4, 8, two lengths each


def test_between_grid_points_bounded_by_the_neighbours(tab):
    """Bound between grid points: every knot the table interpolates a cell (d, r, L) from lies in
    the box of prompt counts [r_lo, r_hi] (``ROW_GRID`` around r), lengths [L_lo, L_hi] (the
    length grid around L) and decode counts [d_lo, rows - r_lo] (d_lo: the grid d at or below
    d; the edge knots d = rows - r' with r' >= r_lo reach at most rows - r_lo). With times
    that grow with d, r and L the cell and the direct time both lie between the direct times
    at the box's low corner and high corner (to within ``NON_MONOTONE``): the error is at most
    that spread (seeded sample)."""
    lines, _, lens = mixed_steps.mixed_grid(ROWS, PROMPT, STEP)
    rows = list(tables.ROW_GRID)
    rng = np.random.default_rng(0)
    cells = np.argwhere(np.isfinite(tab))
    for d, r, j in cells[rng.choice(len(cells), size=40, replace=False)]:
        L = j * STEP

        def bracket(grid, x):
            return max(g for g in grid if g <= x), min(g for g in grid if g >= x)

        r_lo, r_hi = bracket(rows, r)
        L_lo, L_hi = bracket(lens, L)
        d_lo = max(g for g in lines if g <= d)
        d_hi = ROWS - r_lo  # the farthest knot in d: the edge at the lower prompt count
        lo, hi = _direct(d_lo, r_lo, L_lo), _direct(d_hi, r_hi, L_hi)
        t = _direct(d, r, L)
        assert lo * (1 - NON_MONOTONE) <= tab[d, r, j] <= hi * (1 + NON_MONOTONE), (d, r, L)
        assert lo * (1 - NON_MONOTONE) <= t <= hi * (1 + NON_MONOTONE), (d, r, L)


def test_one_rule_for_serve_and_the_checklist(tab):
    """The same table whatever the grid of the other tables, and in the checklist's setup: the
    checklist's 128 rows get a mixed table too (no row cap)."""
    fine = S.generation_model(CHIP, MODEL, max_batch=ROWS, max_prompt=PROMPT, prompt_step=STEP)
    coarse = S.generation_model(
        CHIP, MODEL, max_batch=ROWS, max_prompt=PROMPT, prompt_step=STEP, grid="coarse"
    )
    assert np.array_equal(fine.mixed, tab, equal_nan=True) and np.array_equal(
        coarse.mixed, tab, equal_nan=True
    )
    m = workloads.model(MODEL)
    su = search.setup(
        hardware.chip(CHIP), m, "padded", max_batch=ROWS, output_tokens=m.max_positions - PROMPT
    )
    assert np.array_equal(su.service.mixed, tab, equal_nan=True)


def test_no_row_cap(monkeypatch):
    """The checklist's 128 rows (and more) get a mixed table: ``generation_model`` asks for one of
    ``max_batch`` rows first, before any other table is built (stopped here by a sentinel)."""

    class Asked(Exception):
        pass

    def ask(spec, rows, max_prompt, step, *, name):
        raise Asked(rows, max_prompt, step, name)

    monkeypatch.setattr(mixed_steps, "mixed_table", ask)
    for rows in (128, 512):
        with pytest.raises(Asked) as got:
            S.generation_model(CHIP, MODEL, max_batch=rows, max_prompt=896, grid="coarse")
        assert got.value.args == (rows, 896, 32, "max_batch")
    S.generation_model(CHIP, MODEL, max_batch=ROWS, max_prompt=PROMPT, mixed=False)  # not asked


def test_refused_over_the_memory_budget_before_allocation():
    need = mixed_steps.mixed_table_bytes(20_000, 1024, 32)
    assert need == 8 * 20_000**2 * 33
    assert need > limits.max_memory_bytes()
    with pytest.raises(ValueError, match=r"max_batch = 20,000: needs about 106 GB .*memory budget"):
        S.generation_model(CHIP, MODEL, max_batch=20_000)
    spec = tables.Replica(hardware.chip(CHIP), workloads.model(MODEL))
    with pytest.raises(ValueError, match=r"max_rows = 20,000"):
        mixed_steps.mixed_table(spec, 20_000, 1024, 32)
    limits.set_max_memory("1M")
    try:
        with pytest.raises(ValueError, match=r"max_rows = 128: needs about 4.33 MB"):
            mixed_steps.mixed_table(spec, 128, 1024, 32)
    finally:
        limits.set_max_memory(None)
