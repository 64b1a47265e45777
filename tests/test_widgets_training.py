"""The training explorer's controls reach ipusim.training (plain pytest, no kernel)."""

import matplotlib

matplotlib.use("Agg")

import ipywidgets  # noqa: E402, F401  (a core dependency: import it plainly, never skip)

from ipusim.widgets import training as wt  # noqa: E402


def test_explorer_reacts_to_controls():
    w = wt.training_explorer()
    ctl = {c.description: c for c in w.children if hasattr(c, "description")}
    ctl["model"].value = "gpt2"
    ctl["chip"].value = "a100-80gb"
    ctl["chips"].value = 8
    assert w.result.model == "gpt2" and w.result.chips == 8 and w.result.fit == "on_chip"
    ctl["chip"].value = "gc200"
    ctl["model"].value = "llama-2-7b"
    ctl["chips"].value = 64
    slow = w.result.step_time_s
    ctl["Streaming GB/s"].value = 1.0  # the streamed states now crawl in
    assert w.result.chip == "gc200" and w.result.step_time_s > slow
