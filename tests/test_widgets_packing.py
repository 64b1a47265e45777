"""The packing explorer's controls reach the packing code (plain pytest, no kernel)."""

import matplotlib

matplotlib.use("Agg")

import ipywidgets  # noqa: E402, F401  (a core dependency: import it plainly, never skip)
import pytest  # noqa: E402

from ipusim import lengths, packing  # noqa: E402
from ipusim.widgets import packing as wp  # noqa: E402


def test_explorer_reacts_to_controls():
    w = wp.packing_explorer()
    ctl = {c.description: c for c in w.children if hasattr(c, "description")}
    ctl["lengths"].value = "wikipedia-512"
    ctl["row length"].value = 512
    ctl["strategy"].value = "pad"
    assert w.result.strategy == "pad"
    assert w.result.efficiency == pytest.approx(1 - 0.5003, abs=1e-4)  # published 50.0% waste
    ctl["strategy"].value = "spfhp"
    ctl["seqs/row"].value = 3
    assert w.result.efficiency == pytest.approx(0.8944, abs=0.001)  # published SPFHP, 3/row


def test_explorer_truncates_to_the_row_and_mixes():
    w = wp.packing_explorer()
    ctl = {c.description: c for c in w.children if hasattr(c, "description")}
    ctl["lengths"].value = "long-text mix"
    ctl["long texts %"].value = 0
    ctl["row length"].value = 128
    assert (
        w.result.max_len == 128
        and w.result.real_tokens
        == lengths.long_text_mix(0, resolution=100_000).truncate(128).tokens
    )
    ctl["strategy"].value = "ffd"
    assert (
        w.result.strategy == "ffd"
        and w.result.efficiency
        > packing.pack(
            lengths.long_text_mix(0, resolution=100_000).truncate(128), 128, "pad"
        ).efficiency
    )


def test_plots_return_axes():
    import matplotlib.pyplot as plt

    from ipusim.plots import packing as P

    res = packing.compare("squad-384", 384)
    assert P.efficiency_bars(res, published={"spfhp <=3": 0.9755}) is not None
    assert P.rows_picture(res[3]).get_xlabel().startswith("token")
    assert P.throughput_bars({"0%": {"a": 1.0}}, claims={"0%": {"gpu": 2.0}}) is not None
    assert P.waste_vs_long_share([0, 0.5], {"pad": [0.5, 0.4]}) is not None
    plt.close("all")
