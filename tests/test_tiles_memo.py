"""tiles.profile plans a step once per chip's planned fields: chips that differ only in
``tiles.NOT_PLANNED_FIELDS`` (clock, Streaming Memory, links, power, process, name) share one
plan and one program, and the result equals a fresh simulation bit for bit."""

import dataclasses

import numpy as np
import pytest

from ipusim import hardware, tileplan, tiles, workloads

STEP = workloads.step("bert-base", [128] * 8, pad_to=128)
# a small chip whose BERT-base step streams its weights, so the Streaming Memory fields matter
BASE = hardware.chip("gc200").replace(tiles=736, sram_per_tile_bytes=256 * 1024)
CHANGES = {
    "name": "other",
    "clock_hz": 1.9e9,
    "offchip_bytes": 2 * BASE.offchip_bytes,
    "offchip_bandwidth_bytes_per_s": 3 * BASE.offchip_bandwidth_bytes_per_s,
    "link_bandwidth_bytes_per_s": 5 * BASE.link_bandwidth_bytes_per_s,
    "power_w": 2 * BASE.power_w,
    "process_nm": 7.0,
}


def _same(a, b):
    assert (a.time_s, a.fits, a.fit_message, a.energy_j) == (
        b.time_s,
        b.fits,
        b.fit_message,
        b.energy_j,
    )
    assert a.split == b.split and a.energy_split == b.energy_split and a.extra == b.extra
    for k in ("op_time_s", "unit_busy_s", "unit_memory_bytes"):
        np.testing.assert_array_equal(getattr(a, k), getattr(b, k))
    assert a.op_split.keys() == b.op_split.keys()
    for k in a.op_split:
        np.testing.assert_array_equal(a.op_split[k], b.op_split[k])


def test_every_not_planned_name_is_a_chip_field():
    names = {f.name for f in dataclasses.fields(hardware.TileChip)}
    assert set(CHANGES) == set(tiles.NOT_PLANNED_FIELDS) <= names


@pytest.mark.parametrize("field", tiles.NOT_PLANNED_FIELDS)
def test_memoised_plan_equals_a_fresh_one(field):
    other = BASE.replace(**{field: CHANGES[field]})
    tiles.profile(BASE, STEP)  # plans the step for BASE's planned fields
    reused = tiles.profile(other, STEP)
    assert reused.plans is tiles.profile(BASE, STEP).plans  # one plan for both chips
    tileplan.clear_plan_cache()
    fresh = tiles.profile(other, STEP)
    assert reused.plans is not fresh.plans  # the first came from the memo, the second did not
    _same(reused.result, fresh.result)
    assert reused.result.chip == other.name and reused.result.board_power_w == other.power_w


def test_streaming_time_follows_the_bandwidth_on_a_shared_plan():
    fast = BASE.replace(offchip_bandwidth_bytes_per_s=2 * BASE.offchip_bandwidth_bytes_per_s)
    a, b = tiles.simulate(BASE, STEP), tiles.simulate(fast, STEP)
    assert a.extra["weights"] == "streamed"
    assert b.split["streaming"] == pytest.approx(a.split["streaming"] / 2, rel=1e-12)
    assert b.split["compute"] == a.split["compute"]


def test_a_planned_field_is_planned_again():
    more = BASE.replace(tiles=1472)
    assert tiles.profile(more, STEP).plans is not tiles.profile(BASE, STEP).plans


def test_shared_program_is_read_only():
    prog = tiles.profile(BASE, STEP).program
    with pytest.raises(ValueError):
        prog.comp[0, 0] = 0.0


def test_shared_plans_are_read_only_too():
    """The plans a memoised profile hands out (weights, temporaries, every phase's per-tile
    arrays) are shared with every chip of the same planned fields: none can be edited in place."""
    plans = tiles.profile(BASE, STEP).plans
    arrays = [a for p in plans for a in (p.weights, p.temp)]
    arrays += [a for p in plans for f in p.phases for a in (f.flops, f.load, f.recv, f.send)]
    assert arrays
    for a in arrays:
        with pytest.raises(ValueError):
            a[...] = 0


def _program_bytes(prog):
    return [a.tobytes() for a in (prog.comp, prog.exch, prog.slowest, prog.totals)]


def test_kept_superstep_cycles_are_those_of_a_fresh_run_and_follow_the_phases_arrays():
    """run_program keeps a frozen plan's superstep cycles on its phases: a second run reads them
    and equals a run of an unfrozen copy bit for bit; a phase given a new array, or a chip of
    other rates, is timed afresh."""
    from ipusim import supersteps
    from ipusim.workloads import Op

    c = hardware.chip("gc200")
    op = Op("update", "activation", 1, 3.0e6, 0.0, 8.0e6, 0.0)

    def plan():
        return tileplan.map_elementwise(op, c, 1_000_003, 8.0)

    kept = plan()
    kept.freeze()
    first = supersteps.run_program(c, [kept])
    assert "_cycles" in kept.phases[0].__dict__  # kept for the next run
    again = supersteps.run_program(c, [kept])
    fresh = supersteps.run_program(c, [plan()])  # not frozen: nothing kept
    assert _program_bytes(first) == _program_bytes(again) == _program_bytes(fresh)
    # a new array: timed again, as an unfrozen phase with that array is
    kept.phases[0].flops = kept.phases[0].flops * 7.0
    other = plan()
    other.phases[0].flops = other.phases[0].flops * 7.0
    got, want = supersteps.run_program(c, [kept]), supersteps.run_program(c, [other])
    assert _program_bytes(got) == _program_bytes(want)
    assert got.slowest[0, 0] != first.slowest[0, 0]
    # other rates: timed at those
    slow = c.replace(sram_bytes_per_cycle_per_tile=c.sram_bytes_per_cycle_per_tile / 3)
    got = supersteps.run_program(slow, [kept])
    assert _program_bytes(got) == _program_bytes(supersteps.run_program(slow, [other]))
    assert got.slowest[0, 0] > first.slowest[0, 0]  # load-bound: a third of the SRAM rate
