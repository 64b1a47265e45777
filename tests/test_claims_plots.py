"""The verdict views: the scoreboard map and the validation error bars draw what they are given."""

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from ipusim import claims  # noqa: E402
from ipusim.claims import ClaimVerdict  # noqa: E402
from ipusim.plots import claims as pc  # noqa: E402
from ipusim.plots import validation as pv  # noqa: E402


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _v(claim, state, notebooks):
    return ClaimVerdict(
        claim,
        f"claim {claim}",
        state,
        "s",
        "r",
        break_even="x" if state == "depends" else "",
        notebooks=tuple(notebooks),
    )


def test_verdict_palette_is_the_claims_states_and_no_chip_colour():
    from ipusim.plots.style import CHIP_COLORS, KIND_COLORS

    assert pc.STATES == claims.STATES
    assert set(pc.VERDICT_MARKERS) == set(claims.STATES)
    assert not set(pc.VERDICT_COLORS.values()) & (
        set(CHIP_COLORS.values()) | set(KIND_COLORS.values())
    )
    with pytest.raises(ValueError, match="verdict state"):
        pc.verdict_color("maybe")


def test_scoreboard_map_marks_each_teaching_notebook_in_the_verdicts_colour():
    nbs = ["01_a.ipynb", "02_b.ipynb", "03_c.ipynb"]
    board = [
        _v(1, "supported", nbs[:1]),
        _v(2, "depends", nbs[1:]),
        _v(3, "contradicted", nbs[::2]),
    ]
    ax = pc.scoreboard_map(board, nbs)
    lines = [ln for ln in ax.lines if ln.get_marker() != "None" and len(ln.get_xdata())]
    assert [list(ln.get_xdata()) for ln in lines] == [[0], [1, 2], [0, 2]]
    assert [ln.get_color() for ln in lines] == [pc.VERDICT_COLORS[v.state] for v in board]
    assert [ln.get_ydata()[0] for ln in lines] == [2, 1, 0]  # claim 1 on top
    assert [t.get_text() for t in ax.texts] == ["supported", "depends", "contradicted"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == list(claims.STATES)
    with pytest.raises(ValueError, match="not in notebooks: 03_c.ipynb"):
        pc.scoreboard_map(board, nbs[:2])
    with pytest.raises(ValueError):
        pc.scoreboard_map([], nbs)


def test_errors_by_area_draws_in_sample_and_held_out_apart():
    rows = [
        {
            "area": "tile",
            "in_rows": 2,
            "in_geomean_abs_error": 0.01,
            "out_rows": 3,
            "out_geomean_abs_error": 0.2,
        },
        {
            "area": "packing",
            "in_rows": 0,
            "in_geomean_abs_error": math.nan,
            "out_rows": 1,
            "out_geomean_abs_error": 0.0,
        },
    ]
    ax = pv.errors_by_area(rows)
    widths = [p.get_width() for p in ax.patches]
    assert widths == pytest.approx(
        [1.0, 0.0, 20.0, 0.0]
    )  # in sample (tile, packing), then held out
    s = [t.get_text() for t in ax.texts]
    assert s == ["1.0% (2 rows)", "no rows", "20.0% (3 rows)", "0.0% (1 rows)"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["tile", "packing"]
    with pytest.raises(ValueError):
        pv.errors_by_area([])
