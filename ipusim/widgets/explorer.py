"""The one wrapper every explorer is built with: ``ipywidgets.interactive`` whose errors show.

Plain ``ipywidgets.interactive`` sends an exception raised by its callback to the kernel's
log (or to a traceback outside the output area), so a bad value typed into a control (a
misspelt chip in a candidates string, two identical axes of a heat map) leaves the previous
view on screen with no message. ``interactive`` here wraps the callback: an exception is shown
in the explorer's own output area as one line, ``"ValueError: what was wrong"``, the figures
the failed call had opened are closed (no half-drawn panel), and the explorer's ``result`` is
that line (a ``str``), so a script can see it too.

The first call, made while the explorer is built from its default values, is different in two
ways. An error there means the explorer itself is broken, so it is raised from the builder (a
notebook run then fails at the widget cell instead of passing with a message nobody reads).
And its output (printed text, figures) is captured in the kernel and put into the output area's
state (``Output.outputs``) instead of being routed through the output area while the cell
runs. Routed output is what stalls a headless run: ``jupyter nbconvert --execute`` (nbclient)
mirrors an output area itself, and for each output routed into it during a cell it sends a
state update to the kernel on the shell channel while it is waiting on that channel for the
cell's reply; now and then that reply is then not seen until the cell's timeout expires, after
which the run goes on and exits 0 as if nothing had happened (nbclient issue 312; the tile
explorer of notebook 02 did this). Set as state, the first view reaches JupyterLab the same
way and nbclient has nothing to send. A manual explorer (a "Run" button) makes no call until
the button is pressed.

Later calls hold the text the callback prints until its figures are shown (text then comes
below the figure): printed while a figure was still open, the text made that figure arrive in
JupyterLab as a blank image.
"""

from __future__ import annotations

import contextlib
import functools
import io
import sys

import ipywidgets as widgets
import matplotlib.pyplot as plt
from IPython.utils.capture import capture_output
from ipywidgets.widgets.interaction import show_inline_matplotlib_plots


def error_line(exc: BaseException) -> str:
    """``"TypeName: message"`` on one line (newlines and runs of spaces folded to one space)."""
    if not isinstance(exc, BaseException):
        raise ValueError(f"error_line takes an exception, got {type(exc).__name__}")
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def interactive(fn, *args, **controls) -> widgets.interactive:
    """``ipywidgets.interactive(fn, *args, **controls)`` with ``fn``'s errors shown as one line.

    ``args`` and ``controls`` are passed on unchanged (e.g. ``{"manual": True}`` and the
    widgets per parameter). Returns the ``ipywidgets.interactive``; its ``result`` is ``fn``'s
    return value, or the one-line message of the exception ``fn`` raised. An exception in the
    call made while building (default values) is raised from here.
    """
    if not callable(fn):
        raise ValueError(f"interactive needs a callable, got {type(fn).__name__}")
    building = True
    first_error: list[Exception] = []
    first_view = []

    def shown(*a, **kw):
        opened = set(plt.get_fignums())
        try:
            return fn(*a, **kw)
        except Exception as exc:  # shown in the output area, never swallowed
            for num in set(plt.get_fignums()) - opened:
                plt.close(num)
            if building:
                first_error.append(exc)
            line = error_line(exc)
            print(line, file=sys.stderr, flush=True)  # inside the explorer's output area
            return line

    @functools.wraps(fn)
    def call(*a, **kw):
        if not building:
            # text printed while the figure is still open arrives, after a control moved in
            # JupyterLab, with that figure as a blank image (tests/test_browser.py saw it in the
            # roofline and training explorers); so the text is held until the figures are shown
            with contextlib.redirect_stdout(io.StringIO()) as text:
                value = shown(*a, **kw)
            show_inline_matplotlib_plots()
            sys.stdout.write(text.getvalue())
            return value
        with capture_output() as cap:  # the first view: kept, put into the output area below
            value = shown(*a, **kw)
            show_inline_matplotlib_plots()  # the figures the call drew, as display data
        first_view.append(cap)
        return value

    w = widgets.interactive(call, *args, **controls)
    building = False
    for c in w.children:  # labels in full ("max delay ms", not "max dela..."), unless set
        style = getattr(c, "style", None)
        if (
            getattr(c, "description", "")
            and hasattr(style, "description_width")
            and not style.description_width
        ):
            style.description_width = "initial"
    if first_error:  # the explorer's default view fails: say so where it is built
        raise first_error[0]
    if first_view:
        w.out.outputs = _as_outputs(first_view[0])
    return w


def _as_outputs(cap) -> tuple:
    """A ``capture_output`` result as ``Output.outputs`` entries: text first, then displays."""
    outs = [
        {"output_type": "stream", "name": name, "text": text}
        for name, text in (("stdout", cap.stdout), ("stderr", cap.stderr))
        if text
    ]
    outs += [
        {"output_type": "display_data", "data": o.data, "metadata": o.metadata or {}}
        for o in cap.outputs
    ]
    return tuple(outs)


__all__ = ["error_line", "interactive"]
