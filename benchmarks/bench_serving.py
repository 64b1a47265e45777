"""Serving simulator speed, end to end: what a user calls, beside the kernel, a Python reference and simpy.

Rows (BERT-base on GC200, 30% long requests, Poisson at 1,000 req/s: a stable load):
* ``simulate`` + ``summary`` per policy (dynamic, static, token budget on packed rows,
  length buckets, adaptive), requests per second (goals: dynamic >= 30M/s, every policy
  >= 10M/s), with the kernel alone beside it;
* the same inputs through the simpy model (goal: public path incl. summary >= 100x, identical);
* the same inputs through the plain-Python event-driven reference (identical);
* generation (GPT-2 on an A100-80GB), continuous and static batching: ``simulate_generation``
  + ``summary`` (goal >= 5M requests/s), beside the Python reference;
* memory of a 10-million-request run, bytes per request (goal: about 100 or less);
* ``ipusim serve`` (100,000 requests) and ``ipusim checklist --format md`` as a user runs
  them, with a warm table cache (goals: under 1.5 s and 3 s) beside a cold one (an empty
  ``IPUSIM_CACHE_DIR``: tables built from the machine model), wall and CPU time;
* per policy (``cold_policy_rows``; ``python benchmarks/bench_serving.py --cold --against REF``
  for before and after): the CPU its first simulate and first summary spend compiling from an
  empty Numba cache, beside its warm requests/s.
"""

from __future__ import annotations

import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
from _timing import COMPILE_LISTENER, best_of, child_times, cold_child_times, compile_package

from ipusim import arrivals, lengths, policies, serving
from ipusim.serving import batching
from ipusim.serving.plan import make_plan

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import serving_reference as R  # noqa: E402  (the plain-Python references live beside the tests)


def _inputs(n, seed=0):
    arr = arrivals.poisson(1000.0, n, seed=seed)
    lens = lengths.sample(n, long_fraction=0.3, seed=seed + 1)
    return arr, lens


def _end_to_end(arr, lens, pol, dev):
    return serving.simulate(arr, lens, pol, dev, max_waiting=None).summary()


def _cpu_of(fn, repeat: int = 1) -> tuple[float, float]:
    """(smallest wall time, smallest CPU time user+sys of this process) of ``repeat`` calls, s.
    The machine may be shared: CPU time is what the run itself cost."""
    wall, cpu = float("inf"), float("inf")
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall, cpu = min(wall, time.perf_counter() - w0), min(cpu, time.process_time() - c0)
    return wall, cpu


def _cli_s(args) -> tuple[float, float]:
    """(wall, CPU user+sys) seconds of ``python -m ipusim ARGS`` in a child process."""
    return child_times([sys.executable, "-m", "ipusim", *args])


def _best_cli(args, repeat):
    runs = [_cli_s(args) for _ in range(repeat)]
    return min(w for w, _ in runs), min(c for _, c in runs)


def rows(quick: bool) -> list[dict]:
    dev = serving.chip_service("gc200", "bert-base", max_batch=32)
    packed = serving.chip_service("gc200", "bert-base", max_batch=64, packed=True)
    b = serving.largest_batch(dev, 512)  # 18: 32 rows of 512 tokens do not fit a GC200
    out = []
    n_big = 200_000 if quick else 10_000_000
    arr, lens = _inputs(n_big)
    cases = [
        ("dynamic", policies.Dynamic(b, 0.002), dev, 30e6),
        ("static", policies.Static(16, 0.005), dev, 10e6),
        ("token budget, packed", policies.TokenBudget(4096, 0.002, 64), packed, 10e6),
        ("length buckets", policies.LengthBuckets((128, 256, 512), 16, 0.003), dev, 10e6),
        ("adaptive", policies.Adaptive(0.02, 16), dev, 10e6),
    ]
    for name, pol, d, goal in cases:
        _end_to_end(arr[:1000], lens[:1000], pol, d)  # compile / load
        plan = make_plan(arr, lens, pol, [d])
        k, kc = _cpu_of(lambda plan=plan: batching.run_plan(plan), 2 if not quick else 3)
        e, ec = _cpu_of(lambda pol=pol, d=d: _end_to_end(arr, lens, pol, d), 2 if not quick else 3)
        out.append(
            {
                "name": f"serving {name}: simulate + summary, {n_big:,} requests",
                "kernel_s": e,
                "reference_s": None,
                "goal": f">= {goal / 1e6:.0f}M requests/s end to end",
                "note": f"{n_big / e / 1e6:,.1f}M requests/s end to end (wall), {n_big / ec / 1e6:,.1f}M per "
                f"CPU-second (CPU {ec:.2f} s user+sys); kernel alone {n_big / k / 1e6:,.1f}M/s wall, "
                f"{n_big / kc / 1e6:,.1f}M per CPU-second",
            }
        )
    # simpy and the Python reference on the same inputs, against the public path with its summary
    pol = policies.Dynamic(b, 0.002)
    n = 20_000 if quick else 1_000_000
    a_s, ln_s = arr[:n], lens[:n]
    kept = {}

    def public():
        kept["r"] = serving.simulate(a_s, ln_s, pol, dev, max_waiting=None)
        return kept["r"].summary()

    e, ec = _cpu_of(public, 3)
    s, sc = _cpu_of(lambda: kept.__setitem__("simpy", R.simpy_dynamic(a_s, ln_s, pol, [dev])), 1)
    st, fi, de, bi = kept["simpy"]
    r = kept["r"]
    same = (
        np.array_equal(r.start_s, st)
        and np.array_equal(r.finish_s, fi)
        and np.array_equal(r.device, de)
        and np.array_equal(r.batch_id, bi)
    )
    out.append(
        {
            "name": f"serving dynamic simulate + summary vs simpy, {n:,} requests",
            "kernel_s": e,
            "reference_s": s,
            "goal": ">= 100x, identical results",
            "note": f"identical: {same}; CPU time user+sys {ec:.3f} s vs {sc:.2f} s: {sc / ec:,.0f}x",
        }
    )
    plan = make_plan(a_s, ln_s, pol, [dev])
    p = best_of(lambda: kept.__setitem__("ref", R.simulate_reference(plan)), 1)
    same = np.array_equal(r.finish_s, kept["ref"][1]) and np.array_equal(r.batch_id, kept["ref"][3])
    out.append(
        {
            "name": f"serving dynamic simulate + summary vs Python reference, {n:,}",
            "kernel_s": e,
            "reference_s": p,
            "goal": "identical results",
            "note": f"identical: {same}",
        }
    )
    # generation: continuous and static batching, end to end, beside the Python references
    gen = serving.generation_model("a100-80gb", "gpt2", max_batch=32)
    ng = 200_000 if quick else 10_000_000
    rng = np.random.default_rng(7)
    arr_g = arrivals.poisson(100.0, ng, seed=7)
    pr, outl = rng.integers(32, 257, ng), rng.integers(16, 257, ng)
    nr = 5_000 if quick else 100_000
    for name, pol_g, ref in (
        (
            "continuous",
            policies.Continuous(32, 10**6),
            lambda: R.continuous_reference(arr_g[:nr], pr[:nr], outl[:nr], gen, 32, 10**6),
        ),
        (
            "static",
            policies.Static(32, 0.05),
            lambda: R.static_reference(arr_g[:nr], pr[:nr], outl[:nr], gen, 32, 0.05),
        ),
    ):
        serving.simulate_generation(
            arr_g[:50], pr[:50], outl[:50], pol_g, gen
        ).summary()  # compile / load
        e, ec = _cpu_of(
            lambda pol_g=pol_g: serving.simulate_generation(arr_g, pr, outl, pol_g, gen).summary(),
            2,
        )
        k, kc = _cpu_of(
            lambda pol_g=pol_g: serving.simulate_generation(arr_g, pr, outl, pol_g, gen), 2
        )
        small = serving.simulate_generation(arr_g[:nr], pr[:nr], outl[:nr], pol_g, gen)
        k_small = best_of(
            lambda pol_g=pol_g: serving.simulate_generation(
                arr_g[:nr], pr[:nr], outl[:nr], pol_g, gen
            ).summary()
        )
        kept_r = {}
        rr = best_of(lambda ref=ref, kept_r=kept_r: kept_r.__setitem__("r", ref()), 1)
        same = np.array_equal(small.finish_s, kept_r["r"][2]) and np.array_equal(
            small.first_token_s, kept_r["r"][1]
        )
        out.append(
            {
                "name": f"serving generation {name}: simulate_generation + summary, {ng:,}",
                "kernel_s": e,
                "reference_s": None,
                "goal": ">= 5M requests/s end to end",
                "note": f"{ng / e / 1e6:,.1f}M requests/s end to end (wall), {ng / ec / 1e6:,.1f}M per "
                f"CPU-second (CPU {ec:.2f} s user+sys); without the summary {ng / k / 1e6:,.1f}M/s "
                f"wall, {ng / kc / 1e6:,.1f}M per CPU-second",
            }
        )
        out.append(
            {
                "name": f"serving generation {name} vs Python reference, {nr:,}",
                "kernel_s": k_small,
                "reference_s": rr,
                "goal": "identical results",
                "note": f"identical: {same}",
            }
        )
    # memory of a whole run (inputs, outputs, summary), bytes per request
    n_mem = 1_000_000 if quick else 10_000_000
    tracemalloc.start()
    a, ln = _inputs(n_mem, seed=5)
    res = serving.simulate(a, ln, pol, dev, max_waiting=None)
    summ = res.summary()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    del a, ln, res
    out.append(
        {
            "name": f"serving memory, {n_mem:,} requests",
            "kernel_s": None,
            "reference_s": None,
            "goal": "<= ~100 bytes/request",
            "note": f"peak {peak / n_mem:,.0f} bytes/request (tracemalloc, inputs + results + summary); "
            f"stable={summ['stable']}",
        }
    )
    # the command line as a user runs it: warm (tables cached on disk by the rows above / a first
    # run) beside cold (an empty table cache: a fresh IPUSIM_CACHE_DIR; Numba's cache stays warm)
    compile_package()
    serve = ["serve", "--rate", "1000", "--requests", "100000"]
    md = ["checklist", "--format", "md", "--no-progress"]
    cmds = [(serve, "ipusim serve --rate 1000 --requests 100000 (GC200)", "warm < 1.5 s")]
    if not quick:
        cmds.append((md, "ipusim checklist --format md", "warm < 3 s"))
    for args, name, goal in cmds:
        _cli_s(args)  # fills the table cache if it was empty
        warm_w, warm_c = _best_cli(args, 1 if quick else 3)
        if quick:  # a cold run rebuilds the tables from the machine model: full runs only
            out.append(
                {
                    "name": name + ": warm",
                    "kernel_s": warm_w,
                    "reference_s": None,
                    "goal": goal,
                    "note": f"CPU user+sys {warm_c:.2f} s (cold: full run only)",
                }
            )
            continue
        cold_w, cold_c = cold_child_times([sys.executable, "-m", "ipusim", *args])
        out.append(
            {
                "name": name + ": warm | cold",
                "kernel_s": warm_w,
                "reference_s": cold_w,
                "goal": goal,
                "note": f"wall warm {warm_w:.2f} s | cold {cold_w:.2f} s (ratio = cold / warm); CPU user+sys "
                f"warm {warm_c:.2f} s | cold {cold_c:.2f} s",
            }
        )
    return out + cold_policy_rows(quick)


# Run in a child with an empty Numba cache (the table cache warm): one policy's first simulate and
# summary of 1,000 requests (compile CPU seconds of each), then simulate + summary of N requests
# twice (warm: the best wall and CPU); prints one JSON object, with the summary of the N run.
_POLICY_PROBE = (
    COMPILE_LISTENER
    + """
import json, sys
import numpy as np
from ipusim import arrivals, lengths, policies as P, serving
name, n = sys.argv[1], int(sys.argv[2])
if name in ("continuous", "static generation"):
    gen = serving.generation_model("a100-80gb", "gpt2", max_batch=32)
    rng = np.random.default_rng(7)
    arr = arrivals.poisson(100.0, n, seed=7)
    pr, ol = rng.integers(32, 257, n), rng.integers(16, 257, n)
    pol = P.Continuous(32, 10**6) if name == "continuous" else P.Static(32, 0.05)
    sim = lambda m: serving.simulate_generation(arr[:m], pr[:m], ol[:m], pol, gen)
else:
    dev = serving.chip_service("gc200", "bert-base", max_batch=32)
    if name == "token budget, packed":
        dev = serving.chip_service("gc200", "bert-base", max_batch=64, packed=True)
    b = serving.largest_batch(serving.chip_service("gc200", "bert-base", max_batch=32), 512)
    pol = {"dynamic": P.Dynamic(b, 0.002), "static": P.Static(16, 0.005),
           "token budget, packed": P.TokenBudget(4096, 0.002, 64),
           "length buckets": P.LengthBuckets((128, 256, 512), 16, 0.003), "adaptive": P.Adaptive(0.02, 16)}[name]
    arr = arrivals.poisson(1000.0, n, seed=0)
    lens = lengths.sample(n, long_fraction=0.3, seed=1)
    sim = lambda m: serving.simulate(arr[:m], lens[:m], pol, dev, max_waiting=None)
c0 = _s["cpu"]
r = sim(1000)
c1 = _s["cpu"]
r.summary()
c2 = _s["cpu"]
best = [float("inf")] * 2
for _ in range(2):
    w0, p0 = time.perf_counter(), time.process_time()
    summ = sim(n).summary()
    best = [min(best[0], time.perf_counter() - w0), min(best[1], time.process_time() - p0)]
print(json.dumps({"compile_sim": c1 - c0, "compile_summary": c2 - c1, "wall": best[0], "cpu": best[1],
                  "summary": repr(sorted(summ.items()))}))
"""
)

POLICIES = (
    "dynamic",
    "static",
    "token budget, packed",
    "length buckets",
    "adaptive",
    "continuous",
    "static generation",
)


def _policy_probe(name, n, tables, package=None):
    """One ``_POLICY_PROBE`` child: a fresh Numba cache, the table cache in folder ``tables``."""
    import json
    import os
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix="ipusim-numba-") as d:
        env = dict(os.environ, NUMBA_CACHE_DIR=d, IPUSIM_CACHE_DIR=tables)
        if package:
            env["PYTHONPATH"] = os.pathsep.join(p for p in (package, env.get("PYTHONPATH")) if p)
        # run in the temporary folder: ``python -c`` puts the working directory first on sys.path,
        # where a checkout's own ipusim would shadow ``package``
        out = subprocess.run(
            [sys.executable, "-c", _POLICY_PROBE, name, str(n)],
            check=True,
            capture_output=True,
            text=True,
            env=env,
            cwd=d,
        )
    return json.loads(out.stdout.strip().splitlines()[-1])


def cold_policy_rows(quick: bool, against: str | None = None) -> list[dict]:
    """Per serving policy: compile CPU of its first simulate and of its first summary (an empty
    Numba cache), beside warm simulate + summary of 10M requests (generation a tenth of that;
    quick: the dynamic policy, 20,000 requests), requests/s; with ``against`` a git ref, the
    same from the package as committed there, and whether the two summaries are identical."""
    import tempfile

    from _timing import package_at

    out = []
    with (
        tempfile.TemporaryDirectory(prefix="ipusim-tables-") as tables,
        tempfile.TemporaryDirectory(prefix="ipusim-before-") as tmp,
    ):
        before = package_at(against, tmp) if against else None
        for name in POLICIES[:1] if quick else POLICIES:
            n = (20_000 if quick else 10_000_000) // (
                10 if name in ("continuous", "static generation") else 1
            )
            a = _policy_probe(name, n, tables)
            note = (
                f"first run compiles: simulate {a['compile_sim']:.2f} s + summary {a['compile_summary']:.2f} s "
                f"CPU; warm {n / a['wall'] / 1e6:,.1f}M requests/s wall, {n / a['cpu'] / 1e6:,.1f}M per "
                "CPU-second"
            )
            if before:
                b = _policy_probe(name, n, tables, before)
                note += (
                    f" | at {against}: compiles {b['compile_sim']:.2f} s + {b['compile_summary']:.2f} s; warm "
                    f"{n / b['wall'] / 1e6:,.1f}M/s wall, {n / b['cpu'] / 1e6:,.1f}M per CPU-second; "
                    f"summaries identical: {a['summary'] == b['summary']}"
                )
            out.append(
                {
                    "name": f"serving {name}: first compile | warm {n:,} requests",
                    "kernel_s": a["wall"],
                    "reference_s": None,
                    "goal": "compile in seconds; warm as before",
                    "note": note,
                }
            )
    return out


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--cold", action="store_true", help="only the per-policy first-compile rows")
    ap.add_argument(
        "--against",
        metavar="REF",
        help="git ref whose package is timed beside this one (with --cold)",
    )
    a = ap.parse_args()
    for row in cold_policy_rows(a.quick, a.against) if a.cold else rows(a.quick):
        print(row)
