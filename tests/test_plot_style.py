"""The series' visual vocabulary: one colour per chip, one marker style per fit state."""

import matplotlib

matplotlib.use("Agg")

import pytest

from ipusim import hardware
from ipusim.plots import style
from ipusim.result import FIT_STATES


def test_every_preset_has_its_own_colour():
    colours = [style.chip_color(n) for n in hardware.PRESETS]
    assert len(set(colours)) == len(colours)
    assert style.chip_color(hardware.chip("gc200")) == style.chip_color("gc200")


def test_every_fit_state_has_a_distinct_style():
    seen = {tuple(sorted(style.fit_style(s).items())) for s in FIT_STATES}
    assert len(seen) == len(FIT_STATES) and set(style.FIT_LABELS) == set(FIT_STATES)
    with pytest.raises(ValueError, match="fit state must be one of"):
        style.fit_style("fits")
    with pytest.raises(ValueError, match="no colour"):
        style.chip_color("tpu-v4")
