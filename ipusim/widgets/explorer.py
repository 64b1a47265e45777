"""The one wrapper every explorer is built with: ``ipywidgets.interactive`` whose errors show.

Plain ``ipywidgets.interactive`` sends an exception raised by its callback to the kernel's
log (or to a traceback outside the output area), so a bad value typed into a control (a
misspelt chip in a candidates string, two identical axes of a heat map) leaves the previous
view on screen with no message. ``interactive`` here wraps the callback: an exception is shown
in the explorer's own output area as one line, ``"ValueError: what was wrong"``, the figures
the failed call had opened are closed (no half-drawn panel), and the explorer's ``result`` is
that line (a ``str``), so a script can see it too.

The first call, made while the explorer is built from its default values, is different: an
error there means the explorer itself is broken, so it is raised from the builder (a notebook
run then fails at the widget cell instead of passing with a message nobody reads). A manual
explorer (a "Run" button) makes no call until the button is pressed.
"""

from __future__ import annotations

import functools
import sys

import ipywidgets as widgets
import matplotlib.pyplot as plt


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

    @functools.wraps(fn)
    def call(*a, **kw):
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

    w = widgets.interactive(call, *args, **controls)
    building = False
    if first_error:  # the explorer's default view fails: say so where it is built
        raise first_error[0]
    return w


__all__ = ["error_line", "interactive"]
