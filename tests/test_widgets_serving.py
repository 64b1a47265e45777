"""The notebook-03 widget wires its controls to a simulation (set a value, read the result)."""

import matplotlib
import pytest

matplotlib.use("Agg")

from ipusim.widgets import serving as ws  # noqa: E402


@pytest.mark.filterwarnings(
    "error::UserWarning"
)  # e.g. a p99 label below an axis of 3 requests broke tight_layout
def test_explorer_reacts_to_controls():
    w = ws.explore(n=500)
    kw = {c.description: c for c in w.kwargs_widgets}
    w.update()
    base = w.result
    assert base.n == 500 and base.stable
    kw["max batch"].value = 1
    assert w.result.summary()["mean_batch"] == 1.0
    kw["policy"].value = "token"
    assert "token budget" in w.result.policy
    kw["rate (req/s)"].value = 10**4.5  # far past capacity
    assert not w.result.stable


def test_explorer_shows_a_refusal_instead_of_a_traceback(monkeypatch):
    """A setting the simulator refuses (a batch past the chip's fit limit; the refusal itself is
    tested in tests/test_serving.py) shows the reason and returns it."""
    w = ws.explore(n=200)
    kw = {c.description: c for c in w.kwargs_widgets}

    def refuse(*a, **k):
        raise ValueError(
            "dynamic max batch 64 does not fit gc200 bert-base: largest batch that fits at 512 tokens: 60"
        )

    monkeypatch.setattr(ws.serving, "simulate", refuse)
    kw["long share"].value = 1.0
    assert isinstance(w.result, str) and "largest batch that fits" in w.result


def test_explorer_offers_the_claims_comparison_pair_by_default():
    """One comparator everywhere: the widget's chips default to the claims' same-generation pair."""
    from ipusim.claims.comparisons import SAME_GENERATION

    w = ws.explore(n=200)
    chip = next(c for c in w.kwargs_widgets if c.description == "chip")
    assert tuple(chip.options) == SAME_GENERATION == ("gc200", "a100-80gb")
