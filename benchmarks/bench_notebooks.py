"""Reader time: how long each notebook takes to run top to bottom, as a reader runs it.

Each notebook runs in a fresh kernel through nbclient, from the ``notebooks/`` folder, with the
reader's default (inline) backend. Rows (wall seconds; a kernel's start-up included):

* the newcomer's first notebook: ``01_memory_wall.ipynb`` in full mode with an empty Numba cache
  and an empty table cache (a fresh ``NUMBA_CACHE_DIR`` and ``IPUSIM_CACHE_DIR``), as right after
  ``pip install``: its wall time and the CPU seconds Numba spends compiling (a listener on
  Numba's compile events runs in the kernel). Goal (issue 26): compiling at most 15 s.
* every notebook in full mode (``IPUSIM_QUICK=0``), run twice with the caches as they are: the
  first run may compile and fill the caches, the second is the time a reader waits after the
  first compile (``kernel_s``; ``reference_s`` is the first run, so the ratio is first / warm),
  with the slowest cell of the warm run and its CPU seconds (the kernel's and its children's,
  such as Dask workers: on a shared machine the wall time includes others' work, the CPU time
  does not). Goal: under 45 s each on an idle 2-core machine.

``--quick`` (the smoke run of tests/test_benchmarks_smoke.py): notebook 01 once in quick mode.
``python benchmarks/bench_notebooks.py --only 03 05`` times the notebooks whose names start so.
On a shared machine the times include the other work on it: compare CPU-light hours, or rerun.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import resource
import tempfile
import time
from pathlib import Path

from _timing import COMPILE_LISTENER, environ

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
FIRST = "01_memory_wall.ipynb"  # the notebook a newcomer opens first
CELL_TIMEOUT_S = 1800
GOAL_WARM = "full mode < 45 s after first compile"
GOAL_COMPILE = "compiling <= 15 s"


def run_notebook(name: str, *, quick: bool, env=None, probe_compile: bool = False) -> dict:
    """Run notebook ``name`` in a fresh kernel: {"wall_s", "cpu_s" (the kernel's CPU seconds and
    its children's, counted when the kernel exits), "slowest_cell", "slowest_s", "compile_cpu_s"
    (with ``probe_compile``)}; ``env``: variables set for the kernel."""
    import nbclient
    import nbformat

    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    if probe_compile:
        nb.cells.insert(0, nbformat.v4.new_code_cell(COMPILE_LISTENER))
        nb.cells.append(nbformat.v4.new_code_cell('print(repr(_s["cpu"]))'))
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    # the reader's default backend (inline): MPLBACKEND dropped
    with environ({"IPUSIM_QUICK": "1" if quick else "0", **(env or {})}, drop=("MPLBACKEND",)):
        nbclient.NotebookClient(
            nb,
            timeout=CELL_TIMEOUT_S,
            kernel_name="python3",
            resources={"metadata": {"path": str(NOTEBOOKS)}},
        ).execute()
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = {
        "wall_s": time.perf_counter() - t0,
        "cpu_s": (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime),
    }
    code = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    if probe_compile:
        out["compile_cpu_s"] = float(code[-1][1].outputs[0]["text"])
        code = code[1:-1]

    def _t(stamp):
        return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))

    times = [
        (i, (_t(m["shell.execute_reply"]) - _t(m["iopub.execute_input"])).total_seconds())
        for i, c in code
        for m in [c.metadata.get("execution", {})]
        if "shell.execute_reply" in m and "iopub.execute_input" in m
    ]
    i, s = max(times, key=lambda x: x[1]) if times else (-1, 0.0)
    out["slowest_cell"] = i - (1 if probe_compile else 0)
    out["slowest_s"] = s
    return out


def newcomer_row() -> dict:
    """Notebook 01 in full mode from empty caches: wall time and Numba's compile CPU seconds."""
    with tempfile.TemporaryDirectory(prefix="ipusim-newcomer-nb-") as d:
        env = {
            "NUMBA_CACHE_DIR": os.path.join(d, "numba"),
            "IPUSIM_CACHE_DIR": os.path.join(d, "tables"),
        }
        r = run_notebook(FIRST, quick=False, env=env, probe_compile=True)
    return {
        "name": f"newcomer's first notebook {FIRST[:2]}: compile CPU | wall",
        "kernel_s": r["compile_cpu_s"],
        "reference_s": r["wall_s"],
        "goal": GOAL_COMPILE,
        "note": f"full mode, empty Numba and table caches; slowest cell {r['slowest_cell']} "
        f"({r['slowest_s']:.1f} s); ratio = wall / compile",
    }


def rows(quick: bool, only=None) -> list[dict]:
    names = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
    if only:
        names = [n for n in names if any(n.startswith(o) for o in only)]
    if quick:
        r = run_notebook(FIRST, quick=True)
        return [
            {
                "name": f"notebook {FIRST}, quick mode",
                "kernel_s": r["wall_s"],
                "reference_s": None,
                "goal": "",
                "note": f"smoke run; slowest cell {r['slowest_cell']} ({r['slowest_s']:.1f} s)",
            }
        ]
    out = [newcomer_row()] if not only or FIRST in names else []
    for name in names:
        first = run_notebook(name, quick=False)
        warm = run_notebook(name, quick=False)
        out.append(
            {
                "name": f"notebook {name[:-6]}, full mode",
                "kernel_s": warm["wall_s"],
                "reference_s": first["wall_s"],
                "goal": GOAL_WARM,
                "note": f"warm run: CPU {warm['cpu_s']:.1f} s, slowest cell {warm['slowest_cell']} "
                f"({warm['slowest_s']:.1f} s); ratio = first run / warm run",
            }
        )
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="notebook 01 once, in quick mode")
    ap.add_argument("--only", nargs="*", help="notebooks whose names start with these")
    a = ap.parse_args()
    for r in rows(a.quick, a.only):
        extra = "; ".join(x for x in (r["goal"], r["note"]) if x)
        ref = "-" if r["reference_s"] is None else f"{r['reference_s']:.1f} s"
        print(f"{r['name']:52s} {r['kernel_s']:8.1f} s {ref:>9s}  {extra}", flush=True)
