"""The shared explorer wrapper: an error inside a callback shows as one line in the output area
(here: the process's stderr, which is the output area inside a kernel), and becomes ``result``;
an error in the default view is raised where the explorer is built."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import ipywidgets as W  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from ipusim.widgets import explorer  # noqa: E402


def _lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


def test_a_bad_value_shows_one_line_and_closes_its_figure(capsys):
    def show(n):
        fig, ax = plt.subplots()  # a figure opened before the error is closed, not shown half-drawn
        if n > 3:
            raise ValueError(f"n = {n} is too large;\n  allowed: 1 to 3")
        ax.plot(range(n))
        return n * 10

    w = explorer.interactive(show, n=W.IntSlider(value=2, min=1, max=9))
    assert w.result == 20
    capsys.readouterr()
    plt.close("all")
    w.children[0].value = 5
    err = capsys.readouterr().err
    assert _lines(err) == ["ValueError: n = 5 is too large; allowed: 1 to 3"], err
    assert w.result == "ValueError: n = 5 is too large; allowed: 1 to 3"
    assert plt.get_fignums() == []
    w.children[0].value = 3  # a good value again: the view and result come back
    assert w.result == 30 and capsys.readouterr().err == ""


def test_a_broken_default_view_raises_where_the_explorer_is_built():
    def show(n):
        raise KeyError(n)

    with pytest.raises(KeyError):
        explorer.interactive(show, n=W.IntSlider(value=2))


def test_checklist_form_shows_a_bad_candidates_string(capsys, monkeypatch):
    """Notebook 05's form: an unknown chip leaves the old report on screen under plain
    ``interactive``; here the form says what was wrong."""
    monkeypatch.setenv("IPUSIM_QUICK", "1")
    from ipusim.widgets.checklist import checklist_form

    w = checklist_form(show_figure=False)
    box = next(c for c in w.children if getattr(c, "description", None) == "candidates")
    box.value = "gc200:two"  # a text box of a manual form runs it (as Return in the box does)
    err = _lines(capsys.readouterr().err)
    assert err == ["ValueError: candidate 'gc200:two': count 'two' is not a whole number"], err
    assert w.result == err[0]


def test_sweep_explorer_shows_two_equal_axes_as_a_message(capsys):
    table = pd.DataFrame({"a": [1, 1, 2, 2], "b": [1, 2, 1, 2], "ratio": [1.0, 2.0, 3.0, 4.0]})
    from ipusim.widgets.sweep import pair_explorer

    w = pair_explorer(table, ["a", "b"])
    assert len(w.result) == 4
    w.children[1].value = "a"  # y = x
    assert _lines(capsys.readouterr().err) == ["ValueError: pick two different parameters"]
    plt.close("all")


@pytest.mark.parametrize("bad", [None, 3, "text"])
def test_wrapper_refuses_what_it_cannot_wrap(bad):
    with pytest.raises(ValueError, match="callable"):
        explorer.interactive(bad)
    with pytest.raises(ValueError, match="exception"):
        explorer.error_line(bad)


def test_error_line_without_a_message_is_the_type_name():
    assert explorer.error_line(KeyError()) == "KeyError"
    assert explorer.error_line(ValueError("a\n\n b")) == "ValueError: a b"


def test_text_a_callback_prints_still_reaches_the_output_area(capsys):
    """Later calls hold printed text until the figures are shown (a blank-figure fix seen only in
    JupyterLab, checked by tests/test_browser.py); the text must still arrive, once."""

    def show(n):
        print(f"n is {n}")
        return n

    w = explorer.interactive(show, n=W.IntSlider(value=1, min=1, max=9))
    capsys.readouterr()
    w.children[0].value = 4
    out = capsys.readouterr().out
    assert out.count("n is") == 1 and out.endswith("n is 4\n") and w.result == 4, out


def test_labels_are_shown_in_full_unless_a_width_is_set():
    import ipywidgets as W

    from ipusim.widgets.explorer import interactive

    w = interactive(
        lambda a, b: a + b,
        a=W.FloatSlider(value=2.0, description="max delay ms"),
        b=W.FloatSlider(value=1.0, description="b", style={"description_width": "90px"}),
    )
    widths = {
        c.description: c.style.description_width
        for c in w.children
        if getattr(c, "description", "")
    }
    assert widths["max delay ms"] == "initial" and widths["b"] == "90px"
