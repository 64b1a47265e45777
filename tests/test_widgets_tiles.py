"""The tile widget is wired: changing a control re-simulates with the new value."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest

from ipusim import tiles, workloads
from ipusim.widgets import tiles as wt


def test_explorer_builds_and_reacts_to_controls():
    w = wt.step_explorer(batch=4, seq_len=64)
    w.update()
    assert w.result.chip == "gc200" and w.result.batch == 4
    w.children[2].value = 8  # batch slider
    assert w.result.batch == 8
    w.children[3].value = 32  # length slider
    expect = tiles.simulate("gc200", workloads.step("bert-base", [32] * 8, pad_to=32))
    assert w.result.time_s == pytest.approx(expect.time_s, rel=1e-12)
    w.children[0].value = "bow"  # chip
    assert w.result.chip == "bow" and w.result.time_s < expect.time_s  # higher clock, same tiles
    plt.close("all")


def test_show_step_draws_tile_views():
    r = wt.show_step("gc200", "bert-base", 2, 32)
    fig = plt.gcf()
    assert len(fig.axes) >= 3 and r.kind == "tile"
    titles = " ".join(a.get_title() for a in fig.axes)
    assert "tile memory" in titles and "memory per tile" in titles
    plt.close("all")


def test_show_step_on_a_gpu_uses_machine_simulate():
    r = wt.show_step("a100-80gb", "bert-base", 2, 32)
    assert r.kind == "gpu"
    plt.close("all")


def test_profiler_views_draw_what_they_say():
    from ipusim.plots import tiles as pt

    prof = tiles.profile("gc200", workloads.step("bert-base", [64] * 4, pad_to=64))
    assert np.all(prof.idle_s >= 0) and prof.idle_s.max() > 0
    ax = pt.bsp_trace(prof, groups=8)
    assert ax.get_xlabel().startswith("time") and len(ax.collections) >= 8  # one bar set per group
    ax = pt.fullest_tiles(prof, 5)
    assert len(ax.patches) == 10  # always-live and temporary bar per tile
    ax = pt.memory_histogram(prof)
    assert any(abs(line.get_xdata()[0] - 624) < 1 for line in ax.lines)  # the limit, in KiB
    ax = pt.split_vs([1, 2], [prof.result, prof.result], xlabel="x")
    assert {t.get_text() for t in ax.get_legend().get_texts()} >= {
        "compute",
        "sync",
        "exchange",
        "total",
    }
    ax = pt.throughput_sweep([1, 2, 3], {"a": [1.0, 2.0, 3.0]}, fits={"a": [True, True, False]})
    assert "a: does not fit (no time, bottom band)" in [
        t.get_text() for t in ax.get_legend().get_texts()
    ]
    assert np.isnan(ax.lines[0].get_ydata()[2])  # a step that does not fit breaks the line
    hollow = [ln for ln in ax.lines if ln.get_fillstyle() == "none"]
    assert len(hollow) == 1 and list(hollow[0].get_ydata()) == [0.03]  # axes fraction, no value
    plt.close("all")


def test_show_step_that_does_not_fit_says_so():
    """BERT-large 64 x 512 on GC200 does not fit even with its weights streamed (the tile model
    fits 34 such rows): the result follows the fit rule and the per-op panel says DOES NOT FIT
    instead of plotting an inf time."""
    r = wt.show_step("gc200", "bert-large", 64, 512)
    fig = plt.gcf()
    assert not r.fits and r.time_s == float("inf")
    assert any("DOES NOT FIT" in a.get_title() for a in fig.axes)
    plt.close("all")
