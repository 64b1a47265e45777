"""The LLM-serving metrics of a generation run, named as vLLM's ``benchmark_serving`` names them.

Per request (seconds): TTFT = first token - arrival; E2EL = finish - arrival; TPOT = (finish -
first token) / (output tokens - 1), for requests with more than one output token (vLLM leaves
the others out too). ITL is every gap between two consecutive tokens of a request (the
run's ``gap_s`` counted ``gap_weight`` times), so its percentiles are over tokens, not requests.

``llm_metrics`` reports, as vLLM does, in milliseconds: ``mean_/median_/std_/pNN_`` of ``ttft_ms``,
``tpot_ms``, ``itl_ms`` and ``e2el_ms`` (pNN for each of ``PERCENTILES``), ``request_throughput``
(req/s), ``output_throughput`` and ``total_token_throughput`` (tokens/s), ``completed``,
``total_input_tokens``, ``total_output_tokens``, ``duration`` (s, first arrival to last finish)
and ``request_goodput`` (req/s meeting every SLO given, vLLM's ``--goodput ttft:MS tpot:MS e2el:MS``).
"""

from __future__ import annotations

import math

import numpy as np

from .weighted import weighted_quantiles

PERCENTILES = (50, 90, 95, 99)
METRICS = ("ttft", "tpot", "itl", "e2el")
DEFAULT_GOODPUT_SLOS_MS = {"ttft": 1000.0, "tpot": 100.0}
"""ASSUMPTION (no published source): an interactive chat budget, first token within 1 s and
100 ms per output token after it (10 tokens/s, faster than people read). Pass your own."""


def parse_goodput(items) -> dict:
    """``["ttft:500", "tpot:50"]`` -> ``{"ttft": 500.0, "tpot": 50.0}`` (milliseconds)."""
    out = {}
    for it in items or ():
        key, sep, val = str(it).partition(":")
        key = key.strip().lower()
        try:
            ms = float(val)
        except ValueError:
            ms = math.nan
        if not sep or key not in ("ttft", "tpot", "e2el") or not (math.isfinite(ms) and ms > 0):
            raise ValueError(
                f"--goodput {it!r}: use ttft:MS, tpot:MS or e2el:MS with MS > 0 (milliseconds)"
            )
        out[key] = ms
    return out


def per_request(result) -> dict:
    """Per-request arrays (s): ``ttft``, ``tpot`` (NaN for one output token), ``e2el``; NaN when not served."""
    if result.first_token_s is None:
        raise ValueError("LLM metrics need a generation run (serving.simulate_generation)")
    arr, first, finish = result.arrival_s, result.first_token_s, result.finish_s
    out = np.asarray(result.output_tokens, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(out > 1, (finish - first) / (out - 1), np.nan)
    return {"ttft": first - arr, "tpot": tpot, "e2el": finish - arr}


def _stats(name: str, v: np.ndarray, w: np.ndarray | None = None) -> dict:
    """mean, median, std and PERCENTILES of ``v`` (s) in ms; ``w`` weights (whole counts) or None."""
    if w is None:
        v = v[np.isfinite(v)]
        w = np.ones(v.size, dtype=np.int64)
    total = int(w.sum())
    if total == 0:
        q, mean, std = np.full(len(PERCENTILES) + 1, math.nan), math.nan, math.nan
    else:
        q = weighted_quantiles(v, w, (50, *PERCENTILES))
        mean = float(np.dot(v, w) / total)
        std = float(math.sqrt(max(float(np.dot((v - mean) ** 2, w) / total), 0.0)))
    d = {
        f"mean_{name}_ms": mean * 1e3,
        f"median_{name}_ms": float(q[0]) * 1e3,
        f"std_{name}_ms": std * 1e3,
    }
    d.update({f"p{p}_{name}_ms": float(x) * 1e3 for p, x in zip(PERCENTILES, q[1:], strict=True)})
    return d


def llm_metrics(result, *, goodput_slos_ms: dict | None = None) -> dict:
    """vLLM-named serving metrics of a generation ``ServingResult`` (see the module docstring)."""
    slos = dict(DEFAULT_GOODPUT_SLOS_MS if goodput_slos_ms is None else goodput_slos_ms)
    r = per_request(result)
    served = np.isfinite(result.finish_s)
    n = int(served.sum())
    out_tok = np.asarray(result.output_tokens)[served]
    in_tok = np.asarray(result.lengths)[served]
    duration = float(np.max(result.finish_s[served]) - result.arrival_s[0]) if n else math.nan
    d = {
        "completed": n,
        "total_input_tokens": int(in_tok.sum()),
        "total_output_tokens": int(out_tok.sum()),
        "duration": duration,
        "request_throughput": n / duration if n else math.nan,
        "output_throughput": float(out_tok.sum()) / duration if n else math.nan,
        "total_token_throughput": float(out_tok.sum() + in_tok.sum()) / duration if n else math.nan,
    }
    good = served.copy()
    for (
        key,
        ms,
    ) in slos.items():  # a NaN TPOT (one output token) meets any TPOT target, as vLLM's 0 does
        good &= np.nan_to_num(r[key], nan=0.0) <= ms / 1e3
    d["request_goodput"] = float(good.sum()) / duration if n else math.nan
    d["goodput_slos_ms"] = slos
    for key in ("ttft", "tpot", "e2el"):
        d.update(_stats(key, r[key][served]))
    if result.gap_s is not None:
        d.update(
            _stats("itl", np.asarray(result.gap_s, dtype=np.float64), np.asarray(result.gap_weight))
        )
    else:
        d.update(_stats("itl", np.zeros(0), np.zeros(0, dtype=np.int64)))
    return d


def request_rows(result) -> dict:
    """Columns of the per-request CSV: arrival, start, first token, finish (s), input and output
    tokens, device, and the request's TTFT, TPOT and E2EL (s)."""
    r = per_request(result)
    return {
        "arrival_s": result.arrival_s,
        "start_s": result.start_s,
        "first_token_s": result.first_token_s,
        "finish_s": result.finish_s,
        "input_tokens": result.lengths,
        "output_tokens": result.output_tokens,
        "device": result.device,
        "ttft_s": r["ttft"],
        "tpot_s": r["tpot"],
        "e2el_s": r["e2el"],
    }
