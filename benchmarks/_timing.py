"""The one timing helper of the benchmarks (``run.py`` and every ``bench_*.py`` import it).

``run.py`` and a ``bench_*.py`` run as a script both have this folder first on
``sys.path``, so ``from _timing import best_of`` works from any working directory.
"""

from __future__ import annotations

import compileall
import os
import resource
import subprocess
import tempfile
import time
from pathlib import Path


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


def child_times(argv, env=None) -> tuple[float, float]:
    """(wall, CPU user+sys) seconds of one child process running ``argv`` (output captured; a
    failing command raises); ``env``: its environment (default: this process's)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, env=env)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def cold_child_times(argv) -> tuple[float, float]:
    """``child_times`` with an empty table cache (a fresh ``IPUSIM_CACHE_DIR``: tables built from
    the machine model; Numba's cache stays as it is)."""
    with tempfile.TemporaryDirectory() as d:
        return child_times(argv, env=dict(os.environ, IPUSIM_CACHE_DIR=d))


def compile_package() -> None:
    """Compile ipusim's bytecode, as ``pip install`` does, before timing a command in a child
    process: with ``PYTHONDONTWRITEBYTECODE`` set and stale ``.pyc`` files, every child would
    also compile the package's changed sources, which no installed copy does."""
    import ipusim

    compileall.compile_dir(str(Path(ipusim.__file__).parent), quiet=1)
