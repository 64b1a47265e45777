"""Serving simulator speed: the Numba event loop vs the Python reference and a simpy model.

Rows (dynamic policy, the largest batch that fits, BERT-base on GC200, 1,000 req/s Poisson, 30% long requests; a stable load):
* requests simulated per second by the kernel (goal: >= 10 million/s on one core);
* the same inputs through the simpy model (goal: kernel >= 100x faster, identical results);
* the same inputs through the plain-Python event-driven reference;
* continuous batching (GPT-2 generation on an A100): the whole simulate_generation call with
  the kernel vs with its Python reference;
* memory of a 10-million-request run, bytes per request (goal: about 100 or less).
"""

from __future__ import annotations

import tracemalloc

import numpy as np
from _timing import best_of

from ipusim import arrivals, policies, serving


def _inputs(n, seed=0):
    arr = arrivals.poisson(1000.0, n, seed=seed)
    lens = serving.sample_lengths(n, long_fraction=0.3, seed=seed + 1)
    return arr, lens


def rows(quick: bool) -> list[dict]:
    dev = serving.chip_service("gc200", "bert-base", max_batch=32)
    pol = policies.Dynamic(serving.largest_batch(dev, 512), 0.002)  # 18: 32 rows of 512 tokens do not fit a GC200
    out = []
    # 1. kernel throughput on a long run
    n_big = 200_000 if quick else 10_000_000
    arr, lens = _inputs(n_big)
    plan = serving._prepare(arr, lens, pol, [dev], None, 0, None)
    serving._run_kernel(serving._prepare(arr[:100], lens[:100], pol, [dev], None, 0, None))  # compile / load
    k = best_of(lambda: serving._run_kernel(plan), 1 if not quick else 3)
    out.append({"name": f"serving dynamic kernel, {n_big:,} requests", "kernel_s": k, "reference_s": None,
                "goal": ">= 10M requests/s", "note": f"{n_big / k / 1e6:,.1f}M requests/s"})
    # 2. simpy and the Python reference on the same inputs
    n = 20_000 if quick else 1_000_000
    arr, lens = arr[:n], lens[:n]
    plan = serving._prepare(arr, lens, pol, [dev], None, 0, None)
    kept = {}
    k = best_of(lambda: kept.__setitem__("k", serving._run_kernel(plan)))
    s = best_of(lambda: kept.__setitem__("simpy", serving.simpy_dynamic(arr, lens, pol, [dev])), 1)
    st, fi, de, bi = kept["simpy"]
    same = np.array_equal(kept["k"][0], st) and np.array_equal(kept["k"][1], fi) and np.array_equal(kept["k"][3], bi)
    out.append({"name": f"serving dynamic kernel vs simpy, {n:,} requests", "kernel_s": k, "reference_s": s,
                "goal": ">= 100x, identical results", "note": f"identical: {same}"})
    r = best_of(lambda: kept.__setitem__("ref", serving._simulate_reference(plan)), 1)
    ref = kept["ref"]
    same = np.array_equal(kept["k"][1], ref[1]) and np.array_equal(kept["k"][3], ref[3])
    out.append({"name": f"serving dynamic kernel vs Python reference, {n:,}", "kernel_s": k, "reference_s": r,
                "goal": "identical results", "note": f"identical: {same}"})
    # 3. continuous batching (generation): kernel vs its Python reference, same inputs
    gen = serving.generation_model("a100-80gb", "gpt2", max_batch=32)
    ng = 5_000 if quick else 100_000
    rng = np.random.default_rng(7)
    arr_g = arrivals.poisson(100.0, ng, seed=7)
    pr, outl = rng.integers(32, 257, ng), rng.integers(16, 257, ng)
    pol_c = policies.Continuous(32, 10**6)
    serving.simulate_generation(arr_g[:50], pr[:50], outl[:50], pol_c, gen)  # compile / load
    kept_c = {}
    k = best_of(lambda: kept_c.__setitem__("k", serving.simulate_generation(arr_g, pr, outl, pol_c, gen)))
    r = best_of(lambda: kept_c.__setitem__("ref", serving.simulate_generation(arr_g, pr, outl, pol_c, gen,
                                                                                engine="python")), 1)
    ref_c = kept_c["ref"]
    same = np.array_equal(kept_c["k"].finish_s, ref_c.finish_s) and np.array_equal(
        kept_c["k"].first_token_s, ref_c.first_token_s)
    out.append({"name": f"serving continuous kernel vs reference, {ng:,}", "kernel_s": k, "reference_s": r,
                "goal": "identical results", "note": f"identical: {same}; {ref_c.batches:,} iterations"})
    # 4. memory of a whole run (inputs, outputs, summary), bytes per request
    n_mem = 1_000_000 if quick else 10_000_000
    tracemalloc.start()
    a, ln = _inputs(n_mem, seed=5)
    res = serving.simulate(a, ln, pol, dev, max_waiting=None)
    summ = res.summary()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    del a, ln, res
    out.append({"name": f"serving memory, {n_mem:,} requests", "kernel_s": None, "reference_s": None,
                "goal": "<= ~100 bytes/request",
                "note": f"peak {peak / n_mem:,.0f} bytes/request (tracemalloc, inputs + results + summary); "
                        f"stable={summ['stable']}"})
    return out


if __name__ == "__main__":
    import sys

    for row in rows("--quick" in sys.argv):
        print(row)
