"""The one timing helper of the benchmarks (``run.py`` and every ``bench_*.py`` import it).

``run.py`` and a ``bench_*.py`` run as a script both have this folder first on
``sys.path``, so ``from _timing import best_of`` works from any working directory.
"""

from __future__ import annotations

import time


def best_of(fn, repeat: int = 3) -> float:
    """Smallest wall time of ``repeat`` calls of ``fn()``, seconds."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best
