"""Run-time settings read from the environment, in one place.

``IPUSIM_QUICK=1`` shrinks heavy sweeps (fewer points, fewer simulated requests) so that
the notebooks run fast as tests; the numbers the lessons assert stay within their stated
tolerances at the quick size. The test suite sets it; a person in JupyterLab gets the
full size unless they set it.
"""

from __future__ import annotations

import os


def quick() -> bool:
    """True when ``IPUSIM_QUICK`` is set to anything but "", "0", "false" or "no"."""
    return os.environ.get("IPUSIM_QUICK", "").strip().lower() not in ("", "0", "false", "no")


def sweep_size(full: int, quick_size: int) -> int:
    """``quick_size`` under ``IPUSIM_QUICK``, else ``full``."""
    return quick_size if quick() else full


def progress(iterable=None, *, desc: str = "", total: int | None = None, **kwargs):
    """A tqdm progress bar (a widget in Jupyter, text in a terminal, silent under IPUSIM_QUICK)."""
    from tqdm.auto import tqdm

    kwargs.setdefault("disable", quick())
    return tqdm(iterable, desc=desc, total=total, **kwargs)
