"""The notebook-03 widget wires its controls to a simulation (set a value, read the result)."""

import matplotlib

matplotlib.use("Agg")

from ipusim.widgets import serving as ws  # noqa: E402


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

    kw["rate (req/s)"].value = 100
    kw["policy"].value = "dynamic"
    kw["max batch"].value = 64
    kw["long share"].value = 1.0  # 64 rows of up to 512 tokens do not fit a GC200: refused, not timed
    assert isinstance(w.result, str) and "largest batch that fits" in w.result
