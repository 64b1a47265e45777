"""The roofline explorer's wiring: build it, change a control, check the result follows."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest

from ipusim.widgets.roofline import roofline_explorer


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _control(w, name):
    return next(c for c in w.children if getattr(c, "description", None) == name)


def test_explorer_builds_with_a_result():
    w = roofline_explorer()
    r = w.result
    assert r.chip.name == "gc200" and r.step.model.name == "bert-base"
    assert r.step.batch == 8 and r.step.real_tokens == 8 * 128


def test_batch_change_scales_the_step():
    w = roofline_explorer(batch=8)
    before = w.result
    _control(w, "batch").value = 64
    after = w.result
    assert after.step.batch == 64
    assert after.step.flops == pytest.approx(8 * before.step.flops, rel=1e-9)
    assert after.time_s > before.time_s


def test_chip_change_switches_machine():
    w = roofline_explorer(chip="gc200", model="gpt2", phase="decode", batch=1, seq_len=512)
    assert w.result.where == "tile SRAM"
    _control(w, "chip").value = "h100-sxm"
    assert w.result.chip.name == "h100-sxm" and w.result.where == "HBM"
    assert w.result.chip.peak_flops > 900e12


def test_model_and_seq_len_changes_follow_and_clip():
    w = roofline_explorer()
    _control(w, "model").value = "llama-2-7b"
    assert w.result.step.model.name == "llama-2-7b"
    assert not w.result.fits  # 13.5 GB of weights on one GC200
    _control(w, "model").value = "bert-base"
    _control(w, "seq len").value = 4096  # beyond BERT's 512: clipped
    assert w.result.step.lengths.max() == 512
    _control(w, "phase").value = "train"
    assert w.result.step.phase == "train"


def test_fused_checkbox_lowers_the_bound_on_a_gpu():
    """BERT-base 32 x 512 on the A100: the fused bound drops the l^2 scores and GELU traffic,
    so it is strictly below the unfused one."""
    w = roofline_explorer(chip="a100-80gb", batch=32, seq_len=512)
    unfused = w.result.time_s
    _control(w, "fused kernels").value = True
    assert w.result.fused and w.result.time_s < unfused
