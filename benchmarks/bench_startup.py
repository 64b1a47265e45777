"""Start-up of the command line: what a warm run costs beside the floor no ipusim change can lower.

The floor is a Python process that imports numpy and Numba and sets up Numba's CPU target
context (``BaseContext.refresh``: Numba imports its NumPy, random, linalg and typed-container
implementations and installs their typing and lowering registries; with cffi installed, as
Jupyter brings it, that includes pycparser's lexer regexes). Numba does this before it
loads the first cached kernel, so every ``ipusim`` command that runs a kernel pays it. The
floor exits as the command line does (``ipusim.cli.entry``: ``gc.freeze()`` before the
interpreter shuts down, so shutdown does not hand Numba's objects to the cyclic collector).

Rows (wall best of N alternating runs, CPU user+sys of the same runs; tables and kernels warm):
* the floor alone;
* ``ipusim serve --rate 1000 --requests 100000`` (GC200) beside the floor (ratio = floor / run);
* ``ipusim checklist --format md`` beside the floor (full runs only);
* the same ``serve`` through ``ipusim.cli.main`` and a plain interpreter exit, beside the
  command line's ``entry`` (full runs only): what the quick exit saves.

* each command's first run as a newcomer meets it (``newcomer_rows``): an empty Numba cache
  and an empty table cache (a fresh ``NUMBA_CACHE_DIR`` and ``IPUSIM_CACHE_DIR`` in a new
  temporary folder per command), beside its warm run (the same caches, filled by the first):
  wall, CPU user+sys, and the share of the first run's CPU that Numba spends compiling.
  A command's background worker (``ipusim.background``; ``IPUSIM_WORKERS=1`` turns it off) is
  waited for, so its CPU is in the command's (``RUSAGE_CHILDREN`` counts waited-for
  descendants); the compiling figure is the command's own process only.
  Goals (issue 28): at most 10 s wall on an idle 2-core machine, ``serve`` at most 8 s.
  ``python benchmarks/bench_startup.py --newcomer --against REF`` times the same commands
  from the package as committed at git ``REF`` beside this one, command by command (before
  and after a change; on a shared machine compare CPU times, and the two side by side).

* ``--notebooks [NAME ...]``: each notebook's first cell that compiles a kernel (the first that
  simulates anything), run headless in quick mode from empty caches: its wall time and compile
  CPU (goal: compiles in under 15 s); with ``--against REF`` beside the package at REF.

Bytecode is compiled first (``compileall``, as ``pip install`` does): with
``PYTHONDONTWRITEBYTECODE`` set and stale ``.pyc`` files, every run would also compile the
package's sources, which no installed copy does.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

from _timing import (
    COMPILE_LISTENER,
    child_times,
    compile_package,
    environ,
    newcomer_times,
    package_at,
)

FLOOR = (
    "import numpy, numba; from numba.core.registry import cpu_target; cpu_target.target_context.refresh(); "
    "import gc; gc.freeze()"
)
SERVE = ["serve", "--rate", "1000", "--requests", "100000"]


def rows(quick: bool) -> list[dict]:
    compile_package()
    floor = [sys.executable, "-c", FLOOR]
    serve = [sys.executable, "-m", "ipusim", *SERVE]
    md = [sys.executable, "-m", "ipusim", "checklist", "--format", "md", "--no-progress"]
    slow_exit = [
        sys.executable,
        "-c",
        f"import sys; from ipusim.cli import main; sys.exit(main({SERVE!r}))",
    ]
    cmds = {"floor": floor, "serve": serve}
    if not quick:
        cmds.update(checklist=md, slow_exit=slow_exit)
        for (
            argv
        ) in cmds.values():  # warm: table cache and Numba cache filled, files in the page cache
            child_times(argv)
    repeat = 1 if quick else 5
    runs = {k: [] for k in cmds}
    for _ in range(
        repeat
    ):  # alternating, so that a change of load on a shared machine hits all alike
        for k, argv in cmds.items():
            runs[k].append(child_times(argv))
    best = {k: (min(w for w, _ in v), min(c for _, c in v)) for k, v in runs.items()}
    fw, fc = best["floor"]
    out = [
        {
            "name": "start-up floor: numpy + Numba + Numba context set-up",
            "kernel_s": fw,
            "reference_s": None,
            "goal": "",
            "note": f"CPU {fc:.2f} s; no ipusim code runs",
        }
    ]
    for k, name, goal in (
        ("serve", "ipusim serve --rate 1000 --requests 100000, warm", "warm < 1.5 s"),
        ("checklist", "ipusim checklist --format md, warm", "warm < 3 s"),
    ):
        if k not in best:
            continue
        w, c = best[k]
        out.append(
            {
                "name": f"{name} | floor",
                "kernel_s": w,
                "reference_s": fw,
                "goal": goal,
                "note": f"ratio = floor / run; CPU {c:.2f} s, of which ipusim's own {c - fc:.2f} s "
                f"(best of {repeat})",
            }
        )
    out += newcomer_rows(quick)
    if "slow_exit" in best:
        (w, c), (sw, sc) = best["serve"], best["slow_exit"]
        out.append(
            {
                "name": "ipusim serve, warm: entry() | main() + plain exit",
                "kernel_s": w,
                "reference_s": sw,
                "goal": "",
                "note": f"ratio = what gc.freeze() before exit saves; CPU {c:.2f} s vs {sc:.2f} s",
            }
        )
    return out


# a newcomer's first commands (sweep: two points, one process, into a file in the run's folder)
NEWCOMER = {
    "simulate": [
        "simulate",
        "--chip",
        "gc200",
        "--model",
        "bert-base",
        "--batch",
        "32",
        "--seq-len",
        "128",
    ],
    "serve": SERVE,
    "pack": [
        "pack",
        "--dataset",
        "wikipedia-512",
        "--max-len",
        "512",
        "--strategy",
        "spfhp",
        "--max-per-row",
        "3",
    ],
    "train": [
        "train",
        "--model",
        "llama-2-70b",
        "--chip",
        "a100-80gb",
        "--chips",
        "2048",
        "--tokens",
        "2e12",
    ],
    "embed": [
        "embed",
        "--chip",
        "gc200",
        "--tables",
        "26",
        "--rows",
        "4000000",
        "--dim",
        "128",
        "--batch",
        "2048",
        "--zipf",
        "1.05",
    ],
    "checklist": ["checklist", "--format", "md", "--no-progress"],
    "claims": ["claims"],
    "sweep": [
        "sweep",
        "--chip",
        "gc200",
        "--vary",
        "tiles=736,1472",
        "--model",
        "bert-base",
        "--batch",
        "32",
        "--seq-len",
        "128",
        "--serial",
        "--out",
        "sweep.csv",
        "--overwrite",  # the warm runs write the same file again
    ],
}


def _first_and_warm(args, package, warm_runs):
    """(first run, best warm run): each (wall, CPU, compile CPU) s, in one fresh temporary folder of caches."""
    with tempfile.TemporaryDirectory(prefix="ipusim-newcomer-") as d:
        first = newcomer_times(args, d, package)
        warm = [newcomer_times(args, d, package) for _ in range(warm_runs)]
    return first, tuple(min(x[i] for x in warm) for i in range(3))


def newcomer_rows(quick: bool, against: str | None = None, only=None):
    """One row per command of ``NEWCOMER`` (quick: ``pack`` alone), each yielded when measured:
    its first run from empty caches beside its warm run, wall (``kernel_s`` first,
    ``reference_s`` warm) and CPU; with ``against`` a git ref, the same from the package as
    committed there, run alternately."""
    compile_package()
    names = only or (["pack"] if quick else list(NEWCOMER))
    warm_runs = 1 if quick else 3
    with tempfile.TemporaryDirectory(prefix="ipusim-before-") as tmp:
        before_pkg = package_at(against, tmp) if against else None
        for name in names:
            args = NEWCOMER[name]
            load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
            (fw, fc, fk), (ww, wc, _) = _first_and_warm(args, None, warm_runs)
            goal = "first <= 8 s" if name == "serve" else "first <= 10 s"
            note = (
                f"first: CPU {fc:.2f} s, of which compiling in the command's process {fk:.2f} s "
                f"({fk / fc:.0%}); "
                f"warm: wall {ww:.2f} s, CPU {wc:.2f} s"
            )
            if before_pkg:
                (bw, bc, bk), (bww, bwc, _) = _first_and_warm(args, before_pkg, warm_runs)
                note += (
                    f" | at {against}: first wall {bw:.2f} s, CPU {bc:.2f} s (compiling {bk:.2f} s); "
                    f"warm wall {bww:.2f} s, CPU {bwc:.2f} s"
                )
            yield {
                "name": f"newcomer's first {name} | warm",
                "kernel_s": fw,
                "reference_s": ww,
                "goal": goal,
                "note": note + f" (ratio = warm / first; load average before: {load:.2f}, "
                "which a second process needs idle)",
            }


# Run in a notebook's kernel before its first cell: Numba's compile CPU, read after each cell.
_NOTEBOOK_PROBE = COMPILE_LISTENER.replace("_s = ", "_ipusim_bench_s = ").replace(
    '_s["', '_ipusim_bench_s["'
)


def _notebook_first_compile(path, package=None) -> dict:
    """Run notebook ``path`` headless (``IPUSIM_QUICK=1``) from empty caches (a fresh
    ``NUMBA_CACHE_DIR`` and ``IPUSIM_CACHE_DIR``), cell by cell up to the first cell that
    compiles a kernel (the first that simulates anything): that cell's number, wall time and
    compile CPU, and the whole run's up to it. ``package``: another copy of ``ipusim`` to
    import (first on ``PYTHONPATH``)."""
    import os
    import time

    import nbclient
    import nbformat

    nb = nbformat.read(path, as_version=4)
    probe = nbformat.v4.new_code_cell(_NOTEBOOK_PROBE)
    read = nbformat.v4.new_code_cell('print(repr(_ipusim_bench_s["cpu"]))')
    with tempfile.TemporaryDirectory(prefix="ipusim-notebook-") as d:
        env = {
            "NUMBA_CACHE_DIR": os.path.join(d, "numba"),
            "IPUSIM_CACHE_DIR": os.path.join(d, "tables"),
            "IPUSIM_QUICK": "1",
            "MPLBACKEND": "Agg",
        }
        if package:
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (package, os.environ.get("PYTHONPATH")) if p
            )
        with environ(env):  # the kernel process inherits them
            client = nbclient.NotebookClient(
                nb,
                timeout=900,
                kernel_name="python3",
                resources={"metadata": {"path": str(path.parent)}},
            )
            with client.setup_kernel():
                client.execute_cell(probe, 0)
                before = 0.0
                t_all = time.perf_counter()
                for i, cell in enumerate(nb.cells):
                    if cell.cell_type != "code":
                        continue
                    t0 = time.perf_counter()
                    client.execute_cell(cell, i)
                    wall = time.perf_counter() - t0
                    read.outputs = []
                    client.execute_cell(read, i)
                    comp = float(read.outputs[0]["text"])
                    if comp - before > 0.05:
                        return {
                            "cell": i,
                            "wall": wall,
                            "compile": comp - before,
                            "until_wall": time.perf_counter() - t_all,
                        }
                    before = comp
    return {"cell": None, "wall": 0.0, "compile": 0.0, "until_wall": 0.0}


def notebook_rows(against: str | None = None, only=None):
    """One row per notebook, yielded when measured: its first cell that compiles a kernel,
    from empty caches (goal: compiles in under 15 s); with ``against`` a git ref, the same
    from the package there."""
    from pathlib import Path

    compile_package()
    folder = Path(__file__).resolve().parent.parent / "notebooks"
    with tempfile.TemporaryDirectory(prefix="ipusim-before-") as tmp:
        before_pkg = package_at(against, tmp) if against else None
        for path in sorted(folder.glob("*.ipynb")):
            if only and not any(o in path.name for o in only):
                continue
            a = _notebook_first_compile(path)
            note = (
                f"cell {a['cell']}: wall {a['wall']:.2f} s, compiling {a['compile']:.2f} s CPU; "
                f"notebook up to it {a['until_wall']:.2f} s wall"
            )
            if before_pkg:
                b = _notebook_first_compile(path, before_pkg)
                note += (
                    f" | at {against}: cell {b['cell']}: wall {b['wall']:.2f} s, compiling "
                    f"{b['compile']:.2f} s CPU; up to it {b['until_wall']:.2f} s wall"
                )
            yield {
                "name": f"notebook {path.stem}: first cell that compiles, cold",
                "kernel_s": a["compile"],
                "reference_s": None,
                "goal": "compiles < 15 s",
                "note": note,
            }


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--newcomer", action="store_true", help="only the first-run rows")
    ap.add_argument(
        "--against", metavar="REF", help="git ref whose package is timed beside this one"
    )
    ap.add_argument(
        "--only", nargs="*", choices=sorted(NEWCOMER), help="these commands only (with --newcomer)"
    )
    ap.add_argument(
        "--notebooks",
        nargs="*",
        metavar="NAME",
        help="only each notebook's first compiling cell, cold (these notebooks: part of the name)",
    )
    a = ap.parse_args()
    if a.notebooks is not None:
        found = notebook_rows(a.against, a.notebooks)
    elif a.newcomer:
        found = newcomer_rows(a.quick, a.against, a.only)
    else:
        found = rows(a.quick)
    for r in found:
        print(r, flush=True)
