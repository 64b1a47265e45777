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


def kernel_row(name: str, kernel, reference, *, goal: str, note: str, repeat: int = 3) -> dict:
    """One benchmark row: best of ``repeat`` calls of ``kernel()`` beside one call of ``reference()``, seconds."""
    return {"name": name, "kernel_s": best_of(kernel, repeat), "reference_s": best_of(reference, 1),
            "goal": goal, "note": note}
