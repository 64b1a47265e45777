"""Energy within physics: a simulated step's average power never exceeds its chips' board power."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ipusim import energy, hardware, machine, workloads

# Workloads of the property: each model with its phases, and batches x lengths that fit.
WORKLOADS = {
    "bert-base": ("forward",),
    "bert-large": ("forward",),
    "gpt2": ("prefill", "decode"),
    "llama-2-7b": ("prefill", "decode"),
}
SHAPES = ((1, 128), (8, 128), (32, 384))


def _power_ratio(chip: str, model: str, phase: str, batch: int, length: int) -> float:
    """Implied average power (energy_j / time_s) over board power; nan when the step does not fit."""
    s = workloads.step(
        model, [length] * batch, phase=phase, pad_to=length if phase == "forward" else None
    )
    r = machine.simulate(chip, s)
    if not r.fits:
        return math.nan
    return r.energy_j / r.time_s / r.board_power_w


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    chip=st.sampled_from(hardware.PRESETS),
    model=st.sampled_from(sorted(WORKLOADS)),
    shape=st.sampled_from(SHAPES),
    data=st.data(),
)
def test_implied_power_stays_within_board_power(chip, model, shape, data):
    """Every preset, model, phase and shape that fits: energy / time <= board power (no tolerance:
    the dynamic energy must not exceed what the board can draw)."""
    phase = data.draw(st.sampled_from(WORKLOADS[model]))
    ratio = _power_ratio(chip, model, phase, *shape)
    assert math.isnan(ratio) or ratio <= 1.0, (chip, model, phase, shape, ratio)


def test_llama_2_7b_prefill_on_h200_within_board_power():
    """The case that implied 774 W on a 700 W H200 with 45 nm FLOP prices."""
    assert _power_ratio("h200", "llama-2-7b", "prefill", 32, 384) <= 1.0


def test_flop_scale_follows_the_scaling_fits():
    """1 at 45 nm; smaller at each finer node; the 7 nm factor for nodes below 7 nm."""
    assert energy.flop_scale(45) == pytest.approx(1.0)
    assert 1.0 > energy.flop_scale(16) > energy.flop_scale(7) == energy.flop_scale(4) > 0
    assert energy.flop_scale(16) == pytest.approx(0.2263, abs=1e-4)
    assert energy.flop_scale(7) == pytest.approx(0.1237, abs=1e-4)
    with pytest.raises(ValueError, match="process_nm"):
        energy.flop_scale(0)


@pytest.mark.parametrize("chip", ["gc200", "h100-sxm"])
def test_multi_chip_result_reports_board_power_of_all_its_chips(chip):
    s = workloads.step("llama-2-7b", [512] * 4, phase="decode")
    r = machine.simulate(chip, s, chips=4)
    used = r.placement.chips_used
    assert r.fits and used >= 1
    assert r.board_power_w == pytest.approx(hardware.chip(chip).power_w * used, rel=1e-12)
    assert r.board_energy_j == pytest.approx(r.board_power_w * r.time_s, rel=1e-12)
    assert r.energy_j / r.time_s <= r.board_power_w
