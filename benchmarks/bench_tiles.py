"""Tile machine: one BERT-base step (planning included), its kernels and the planner's grid
search against their plain-Python references, the fast planner against the exhaustive one
(``tileplan_reference.exhaustive()`` from tests/, also for a cold ``serve`` and ``checklist``),
a sweep."""

from __future__ import annotations

import itertools
import sys
import time
from pathlib import Path

import numpy as np
from _timing import best_of, cold_child_times, compile_package

from ipusim import hardware, supersteps, tileplan, tiles, workloads
from ipusim.tileplan import base as tp_base
from ipusim.tileplan import matmul as tp_matmul

TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path.insert(0, str(TESTS))
import tileplan_reference  # noqa: E402  (the plain-Python references live beside the tests)
import tiles_reference  # noqa: E402


def _kernel_inputs(prof):
    c, prog = prof.chip, prof.program
    arr = [
        np.ascontiguousarray(np.vstack([getattr(ph, k) for ph in prog.phases]))
        for k in ("flops", "load", "vertices", "recv", "send")
    ]
    rate = np.array(
        [
            c.fp16_flops_per_cycle_per_tile if ph.amp else c.fp32_flops_per_cycle_per_tile
            for ph in prog.phases
        ]
    )
    return (
        *arr,
        rate,
        c.sram_bytes_per_cycle_per_tile,
        c.exchange_bytes_per_cycle_per_tile,
        c.vertex_overhead_cycles,
        supersteps.TILES_PER_EXCHANGE_BUS,
    )


def rows(quick: bool) -> list[dict]:
    c = hardware.chip("gc200")
    batch, seq = (8, 128) if quick else (32, 128)
    s = workloads.step("bert-base", [seq] * batch, pad_to=seq)
    tiles.simulate(c, s)  # compile the kernels

    def planned():  # the planner's cache is cleared: every call plans every op again
        tp_matmul._plan_matmul.cache_clear()
        return tiles.simulate(c, s)

    def planned_plain():
        with tiles_reference.plain():
            return tiles.simulate(c, s)

    step_k = best_of(planned, 3 if quick else 7)
    step_r = best_of(planned_plain, 1 if quick else 3)
    cpu = float(
        "inf"
    )  # CPU seconds of this process: on a loaded machine the wall time is inflated, this is not
    for _ in range(3 if quick else 7):
        t0 = time.process_time()
        planned()
        cpu = min(cpu, time.process_time() - t0)
    out = [
        {
            "name": f"tiles: BERT-base forward b{batch} L{seq}, {c.tiles} tiles, planning included",
            "kernel_s": step_k,
            "reference_s": step_r,
            "goal": "under 50 ms after compilation",
            "note": (
                "whole simulate() with the matmul-plan cache cleared; reference = tests/tiles_reference.plain() (plain loops); "
                f"best CPU time {cpu * 1e3:.1f} ms (wall above includes waiting on a loaded machine)"
            ),
        }
    ]

    grid = (32 * 128, 768, 3072, 2, c, "", 1, tileplan.budget_bytes(c))
    out.append(
        {
            "name": "tiles: planner grid search, one 4096x768x3072 matmul",
            "kernel_s": best_of(lambda: tp_matmul._best_grid(*grid), 20),
            "reference_s": best_of(lambda: tileplan_reference.best_grid(*grid), 1 if quick else 3),
            "goal": ">= 50x reference",
            "note": "_best_grid (the _grid_search kernel) vs tileplan_reference.best_grid (plain loops)",
        }
    )
    out.append(
        {
            "name": "tiles: planner grid search, kernel vs exhaustive NumPy",
            "kernel_s": best_of(lambda: tp_matmul._best_grid(*grid), 20),
            "reference_s": best_of(lambda: tileplan_reference.best_grid_numpy(*grid), 5),
            "goal": "faster, same plan bit for bit",
            "note": "_best_grid (kernel) vs tileplan_reference.best_grid_numpy (the search before the kernel)",
        }
    )
    out += _planner_rows(quick)
    big = workloads.step("bert-base", [384] * 36, pad_to=384)
    tiles.simulate(c, big)
    out.append(
        {
            "name": "tiles: BERT-base forward b36 L384 (serial passes), planning included",
            "kernel_s": best_of(
                lambda: (tp_matmul._plan_matmul.cache_clear(), tiles.simulate(c, big)),
                1 if quick else 3,
            ),
            "reference_s": None,
            "goal": "well under a second",
            "note": "the pass search runs only for ops whose one-pass working set does not fit",
        }
    )

    prof = tiles.profile(c, s)
    args = _kernel_inputs(prof)
    S, T = args[0].shape
    comp, exch, mx = np.empty((S, T)), np.empty((S, T)), np.empty((S, 2))
    supersteps._superstep_cycles(*args, comp, exch, mx)
    out.append(
        {
            "name": f"tiles: superstep kernel ({S} supersteps x {T} tiles)",
            "kernel_s": best_of(lambda: supersteps._superstep_cycles(*args, comp, exch, mx), 20),
            "reference_s": best_of(
                lambda: tiles_reference.superstep_cycles(*args), 1 if quick else 3
            ),
            "goal": ">= 50x reference",
            "note": "_superstep_cycles vs tiles_reference.superstep_cycles",
        }
    )

    pieces = np.random.default_rng(0).random((s.tokens * 4, 6))
    dist = np.zeros((T, 7))
    out.append(
        {
            "name": f"tiles: distribute kernel ({pieces.shape[0]} pieces -> {T} tiles)",
            "kernel_s": best_of(
                lambda: (dist.fill(0), tp_base._distribute(pieces, 1, T, dist)), 20
            ),
            "reference_s": best_of(
                lambda: tileplan_reference.distribute(pieces, T), 1 if quick else 3
            ),
            "goal": ">= 50x reference",
            "note": "_distribute vs tileplan_reference.distribute",
        }
    )

    chips = ("gc200", "bow", "gc2")
    models = ("bert-base", "gpt2")
    batches = (1, 2, 4, 8, 16, 32, 48, 64) if not quick else (1, 8)
    lens = tuple(range(32, 513, 16)) if not quick else (64, 128)
    grid = list(itertools.product(chips, models, batches, lens))[: 50 if quick else 1000]

    def sweep():
        for ch, m, b, L in grid:
            tiles.simulate(ch, workloads.step(m, [L] * b, pad_to=L))

    sweep_s = best_of(sweep, 1)
    out.append(
        {
            "name": f"tiles: sweep of {len(grid):,} configurations",
            "kernel_s": sweep_s,
            "reference_s": None,
            "goal": "1,000 configurations in seconds",
            "note": f"{sweep_s / len(grid) * 1e3:.2f} ms per configuration, first visit of each matmul shape",
        }
    )
    return out


def _cpu_wall(fn):
    """(wall, CPU) seconds of one call of ``fn`` (CPU of this process: not inflated by a loaded machine)."""
    w0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w0, time.process_time() - c0


# the exhaustive planner (``tileplan_reference.exhaustive()``, from tests/) around the whole command
_OLD = (
    f"import sys\nsys.path.insert(0, {str(TESTS)!r})\nimport tileplan_reference\nfrom ipusim.cli import main\n"
    "with tileplan_reference.exhaustive():\n    rc = main(sys.argv[1:])\nsys.exit(rc)"
)
_NEW = "import sys; from ipusim.cli import main; sys.exit(main(sys.argv[1:]))"


def _cold_cli(code: str, args: list) -> tuple[float, float]:
    """(wall, CPU user+sys) seconds of ``python -c code args`` with an empty table cache."""
    return cold_child_times([sys.executable, "-c", code, *args])


def _planner_rows(quick: bool) -> list[dict]:
    """The fast planner against the exhaustive one (``tileplan_reference.exhaustive()``), same run."""
    c = hardware.chip("gc200")
    # the steps the serving tables plan: padded BERT-base batches of 1..32 rows, lengths up to 512
    batches, lens = (
        ((1, 8, 32), (64, 512)) if quick else ((1, 2, 4, 8, 16, 24, 32), (32, 128, 256, 384, 512))
    )
    steps = [workloads.step("bert-base", [L] * b, pad_to=L) for b in batches for L in lens]

    def plan_all():
        tileplan.clear_plan_cache()
        for s in steps:
            tileplan.plan_step(c, s)

    plan_all()  # compile / load the kernels
    new_w, new_c = _cpu_wall(plan_all)
    with tileplan_reference.exhaustive():
        old_w, old_c = _cpu_wall(plan_all)
    out = [
        {
            "name": f"tiles: plan_step of {len(steps)} serve-table steps, fast vs exhaustive",
            "kernel_s": new_w,
            "reference_s": old_w,
            "goal": "same plans (tests), faster",
            "note": f"CPU {new_c:.2f} s vs {old_c:.2f} s ({old_c / new_c:.1f}x); plan cache cleared for each",
        }
    ]
    if quick:
        return out
    compile_package()
    for args in (
        ["serve", "--rate", "1000", "--requests", "100000"],
        ["checklist", "--format", "md"],
    ):
        _cold_cli(
            _NEW, args
        )  # compiles any kernel not in Numba's cache yet, so neither timed run does
        new_w, new_c = _cold_cli(_NEW, args)
        old_w, old_c = _cold_cli(_OLD, args)
        out.append(
            {
                "name": f"ipusim {' '.join(args[:3] if args[0] == 'serve' else args)}, cold tables",
                "kernel_s": new_w,
                "reference_s": old_w,
                "goal": "report (fast vs exhaustive planner)",
                "note": f"CPU user+sys {new_c:.2f} s vs {old_c:.2f} s ({old_c / new_c:.1f}x); empty table cache each",
            }
        )
    return out
