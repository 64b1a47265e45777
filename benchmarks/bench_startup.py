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

Bytecode is compiled first (``compileall``, as ``pip install`` does): with
``PYTHONDONTWRITEBYTECODE`` set and stale ``.pyc`` files, every run would also compile the
package's sources, which no installed copy does.
"""

from __future__ import annotations

import sys

from _timing import child_times, compile_package

FLOOR = ("import numpy, numba; from numba.core.registry import cpu_target; cpu_target.target_context.refresh(); "
         "import gc; gc.freeze()")
SERVE = ["serve", "--rate", "1000", "--requests", "100000"]


def rows(quick: bool) -> list[dict]:
    compile_package()
    floor = [sys.executable, "-c", FLOOR]
    serve = [sys.executable, "-m", "ipusim", *SERVE]
    md = [sys.executable, "-m", "ipusim", "checklist", "--format", "md", "--no-progress"]
    slow_exit = [sys.executable, "-c", f"import sys; from ipusim.cli import main; sys.exit(main({SERVE!r}))"]
    cmds = {"floor": floor, "serve": serve}
    if not quick:
        cmds.update(checklist=md, slow_exit=slow_exit)
        for argv in cmds.values():  # warm: table cache and Numba cache filled, files in the page cache
            child_times(argv)
    repeat = 1 if quick else 5
    runs = {k: [] for k in cmds}
    for _ in range(repeat):  # alternating, so that a change of load on a shared machine hits all alike
        for k, argv in cmds.items():
            runs[k].append(child_times(argv))
    best = {k: (min(w for w, _ in v), min(c for _, c in v)) for k, v in runs.items()}
    fw, fc = best["floor"]
    out = [{"name": "start-up floor: numpy + Numba + Numba context set-up", "kernel_s": fw, "reference_s": None,
            "goal": "", "note": f"CPU {fc:.2f} s; no ipusim code runs"}]
    for k, name, goal in (("serve", "ipusim serve --rate 1000 --requests 100000, warm", "warm < 1.5 s"),
                          ("checklist", "ipusim checklist --format md, warm", "warm < 3 s")):
        if k not in best:
            continue
        w, c = best[k]
        out.append({"name": f"{name} | floor", "kernel_s": w, "reference_s": fw, "goal": goal,
                    "note": f"ratio = floor / run; CPU {c:.2f} s, of which ipusim's own {c - fc:.2f} s "
                            f"(best of {repeat})"})
    if "slow_exit" in best:
        (w, c), (sw, sc) = best["serve"], best["slow_exit"]
        out.append({"name": "ipusim serve, warm: entry() | main() + plain exit", "kernel_s": w, "reference_s": sw,
                    "goal": "", "note": f"ratio = what gc.freeze() before exit saves; CPU {c:.2f} s vs {sc:.2f} s"})
    return out


if __name__ == "__main__":
    for r in rows("--quick" in sys.argv):
        print(r)
