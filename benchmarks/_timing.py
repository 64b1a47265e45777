"""The one timing helper of the benchmarks (``run.py`` and every ``bench_*.py`` import it).

``run.py`` and a ``bench_*.py`` run as a script both have this folder first on
``sys.path``, so ``from _timing import best_of`` works from any working directory.
"""

from __future__ import annotations

import compileall
import contextlib
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


@contextlib.contextmanager
def environ(set_: dict, drop=()):
    """Environment variables ``set_`` set and ``drop`` removed while the block runs (a kernel or
    child process started inside inherits them), each put back as it was afterwards."""
    saved = {k: os.environ.get(k) for k in (*set_, *drop)}
    os.environ.update(set_)
    for k in drop:
        os.environ.pop(k, None)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


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
    return {
        "name": name,
        "kernel_s": best_of(kernel, repeat),
        "reference_s": best_of(reference, 1),
        "goal": goal,
        "note": note,
    }


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


# Code for a child process: adds up in _s["cpu"] the CPU seconds Numba spends compiling (outermost
# compile events only: a kernel's callees are inside it).
COMPILE_LISTENER = """
import time
from numba.core import event
_s = {"depth": 0, "t0": 0.0, "cpu": 0.0}
class _L(event.Listener):
    def on_start(self, ev):
        if _s["depth"] == 0:
            _s["t0"] = time.process_time()
        _s["depth"] += 1
    def on_end(self, ev):
        _s["depth"] -= 1
        if _s["depth"] == 0:
            _s["cpu"] += time.process_time() - _s["t0"]
event.register("numba:compile", _L())
"""

# Run in a child: ``ipusim ARGS`` as ``python -m ipusim`` runs it, writing the CPU seconds Numba
# spent compiling to the file named by $IPUSIM_BENCH_COMPILE_OUT when the process exits.
_COMPILE_PROBE = (
    COMPILE_LISTENER
    + """
import atexit, os, sys
def _write():
    with open(os.environ["IPUSIM_BENCH_COMPILE_OUT"], "w") as f:
        f.write(repr(_s["cpu"]))
atexit.register(_write)
sys.argv = ["ipusim", *sys.argv[1:]]
from ipusim.cli import entry
raise SystemExit(entry())
"""
)


def newcomer_times(args, caches: str, package: str | None = None) -> tuple[float, float, float]:
    """(wall, CPU user+sys, CPU compiling kernels) seconds of one ``ipusim ARGS`` child whose
    Numba cache (``NUMBA_CACHE_DIR``) and table cache (``IPUSIM_CACHE_DIR``) are folders in
    ``caches``: empty there on the first call (what a newcomer's first command meets right
    after ``pip install``), filled by it for the next (a warm run). The child runs in
    ``caches`` (files a command writes land there); ``package``: a folder holding another
    copy of ``ipusim`` to import instead of this one (first on ``PYTHONPATH``)."""
    env = dict(
        os.environ,
        NUMBA_CACHE_DIR=os.path.join(caches, "numba"),
        IPUSIM_CACHE_DIR=os.path.join(caches, "tables"),
        IPUSIM_BENCH_COMPILE_OUT=os.path.join(caches, "compile_s"),
    )
    if package:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package, env.get("PYTHONPATH")) if p)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", _COMPILE_PROBE, *args],
        check=True,
        capture_output=True,
        env=env,
        cwd=caches,
    )
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(env["IPUSIM_BENCH_COMPILE_OUT"]) as f:
        comp = float(f.read())
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), comp


def package_at(ref: str, into: str) -> str:
    """Extract ``ipusim`` as committed at git ``ref`` of this repository into folder ``into``,
    compile its bytecode (as ``pip install`` does) and return ``into`` (for ``newcomer_times``)."""
    import io
    import tarfile

    root = Path(__file__).resolve().parent.parent
    tar = subprocess.run(
        ["git", "-C", str(root), "archive", ref, "ipusim"], check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        t.extractall(into, filter="data")
    compileall.compile_dir(os.path.join(into, "ipusim"), quiet=1)
    return into
