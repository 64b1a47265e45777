"""The one fit rule: three states, decided once (ipusim.result) and carried by every StepResult."""

import math

import pytest

import ipusim
from ipusim import machine, result


@pytest.mark.parametrize(
    "fits, streamed, state",
    [
        (True, False, "on_chip"),
        (True, True, "streams"),
        (False, False, "does_not_fit"),
        (False, True, "does_not_fit"),
    ],
)
def test_fit_state(fits, streamed, state):
    assert result.fit_state(fits, streamed) == state
    assert state in result.FIT_STATES


def test_step_results_carry_the_fit_state():
    small = ipusim.step("bert-base", [128] * 8, pad_to=128)
    huge = ipusim.step("bert-base", [512] * 400, pad_to=512)
    for name in ("gc200", "a100-80gb"):
        r = machine.simulate(name, small)
        assert r.fit == "on_chip" and r.to_dict()["fit"] == "on_chip" and math.isfinite(r.time_s)
    r = machine.simulate("gc200", huge)
    assert r.fit == "does_not_fit" and r.time_s == math.inf
