"""Run-time settings read from the environment, in one place.

``IPUSIM_QUICK=1`` shrinks heavy sweeps (fewer points, fewer simulated requests) so that
the notebooks run fast as tests; the numbers the lessons assert stay within their stated
tolerances at the quick size. The test suite sets it; a person in JupyterLab gets the
full size unless they set it.

``IPUSIM_PROGRESS=0`` turns the progress bars off: a headless run (a test, a site build, nbclient
or nbconvert) sets it, so that no executed notebook stores a frozen "0%" bar.
"""

from __future__ import annotations

import os
import sys


def quick() -> bool:
    """True when ``IPUSIM_QUICK`` is set to anything but "", "0", "false" or "no"."""
    return os.environ.get("IPUSIM_QUICK", "").strip().lower() not in ("", "0", "false", "no")


def progress_bars() -> bool:
    """False under ``IPUSIM_QUICK`` or when ``IPUSIM_PROGRESS`` is "0", "false" or "no"."""
    off = os.environ.get("IPUSIM_PROGRESS", "").strip().lower() in ("0", "false", "no")
    return not (quick() or off)


def sweep_size(full: int, quick_size: int) -> int:
    """``quick_size`` under ``IPUSIM_QUICK``, else ``full``."""
    return quick_size if quick() else full


class _NoBar:
    """What ``progress`` returns when the bar is off: the calls a caller makes, doing nothing."""

    def __init__(self, iterable=None):
        self._iterable = iterable

    def __iter__(self):
        return iter(self._iterable if self._iterable is not None else ())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def update(self, n=1):
        pass

    def set_postfix_str(self, s="", refresh=True):
        pass

    def set_description(self, desc=None, refresh=True):
        pass

    def close(self):
        pass


def progress(iterable=None, *, desc: str = "", total: int | None = None, **kwargs):
    """A tqdm progress bar (a widget in Jupyter, text in a terminal; silent under IPUSIM_QUICK or
    IPUSIM_PROGRESS=0, ``progress_bars``).

    Off (``disable=True`` or IPUSIM_QUICK), it is a stand-in that imports nothing; in a terminal
    it is ``tqdm.std`` (``tqdm.auto`` there would import asyncio for nothing: ~0.1 s of start-up)."""
    kwargs.setdefault("disable", not progress_bars())
    if kwargs["disable"] is True:
        return _NoBar(iterable)
    if "ipykernel" in sys.modules:  # a Jupyter kernel: let tqdm choose the widget
        from tqdm.auto import tqdm
    else:
        from tqdm.std import tqdm
    # no monitor thread (it only tunes bars whose refresh interval goes stale): a second thread
    # would keep a later background worker from being a fork (ipusim.background.can_fork)
    tqdm.monitor_interval = 0
    return tqdm(iterable, desc=desc, total=total, **kwargs)
