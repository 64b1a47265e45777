"""Embedding plots return their axes; the explorer widget redraws when a control changes."""

from __future__ import annotations

import matplotlib
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from ipusim.embeddings.sweep import crossover_bytes, table_size_sweep  # noqa: E402
from ipusim.plots import embeddings as pe  # noqa: E402


def test_plots_draw_and_return_their_axes():
    rows = table_size_sweep(["gc200", "a100-80gb"], [1000, 100_000], batch=256)
    ax = pe.lookups_vs_size(rows)
    assert ax.get_xscale() == "log" and len(ax.get_lines()) >= 2
    assert crossover_bytes(rows, "gc200", "a100-80gb") > 0
    ax2 = pe.hit_rate_vs_skew([0.0, 1.0], [0.1, 0.5], [0.1, 0.49])
    assert len(ax2.get_lines()) == 2
    table = [
        {"case": "x", "chip": "gc200", "kind": "tile", "per_w": 2.0},
        {"case": "x", "chip": "a100-80gb", "kind": "gpu", "per_w": 1.0},
    ]
    ax3 = pe.per_watt_bars(table)
    assert [p.get_height() for p in ax3.patches] == [2.0, 1.0]
    ax4 = pe.per_watt_bars(table, against="gc200")  # relative to a named chip
    assert [p.get_height() for p in ax4.patches] == [1.0, 0.5]
    with pytest.raises(ValueError, match="against='h100'.*gc200"):
        pe.per_watt_bars(table, against="h100")
    plt.close("all")


def test_explorer_widget_reacts_to_its_controls():
    from ipusim.widgets import embeddings as we

    w = we.explorer()
    w.children[1].value = 10_000  # rows per table: 133 MB, fits in SRAM
    assert w.result.fit == "on_chip"
    w.children[0].value = "gc2"
    w.children[1].value = 4_000_000
    assert w.result.fit == "does_not_fit"
    plt.close("all")


def test_crossover_compares_single_chips_unless_told():
    rows = [
        {"chip": "gc200", "chips": 1, "table_bytes": b, "lookups_per_s": v}
        for b, v in ((1, 9), (2, 1))
    ]
    rows += [{"chip": "gc200", "chips": 4, "table_bytes": b, "lookups_per_s": 9} for b in (1, 2)]
    rows += [
        {"chip": "a100-80gb", "chips": 1, "table_bytes": b, "lookups_per_s": 5} for b in (1, 2)
    ]
    assert crossover_bytes(rows, "gc200", "a100-80gb") == 1
    assert crossover_bytes(rows, "gc200", "a100-80gb", tile_chips=4) == 2
