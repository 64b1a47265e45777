"""Disaggregated generation serving: a prefill pool and a decode pool, on different chips.

A request arrives at the prefill pool, which batches prompts as any batched service does
(``batching.simulate`` with the prefill chip's ``GenerationModel.prefill`` table, padded rows,
the pool's own policy; by default a dynamic batcher without delay, of at most the largest
batch that fits the chip at every prompt length up to the longest): the first token is out when its prefill batch ends (TTFT). Its KV cache
(``prompt x model.kv_bytes_per_token()`` bytes) then crosses a link of ``kv_link_bytes_per_s``;
each prefill device sends its requests' caches one after another, in the order their prefills
end. The request joins the decode pool (request i to decode device i mod ``decode_count``), which
runs continuous batching: at each iteration every running sequence makes one token, in one
decode step of the decode chip's table (rows = running sequences, column = their mean context,
as ``GenerationModel.static_batch_s`` reads it: a sequence making its token k + 1 attends over
prompt + k tokens); a ready request joins at the next iteration while the batch has fewer than
``max_batch`` rows and the KV cache holds its prompt + output tokens.

The decode loop is a Numba kernel (``_decode_device``; its plain reference is
``tests/serving_reference.decode_device_reference``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .. import policies as P
from .._validate import positive
from .batching import simulate
from .generation import GenerationModel
from .result import ServingResult

DEFAULT_KV_LINK_BYTES_PER_S = 12.5e9
"""ASSUMPTION: one 100 Gb/s network port (12.5 GB/s) between a prefill device and the decode pool
(the IPU-M2000's and a DGX's node-to-node Ethernet/InfiniBand class; a chip-to-chip fabric such as
NVLink or IPU-Links does not join a GPU to a tile chip). Set it to your fabric's figure."""


def prompt_batch_limit(gen: GenerationModel, longest: int, cap: int) -> int:
    """The most prompts (at most ``cap``) one prefill pass of ``gen`` holds at every prompt length up
    to ``longest`` tokens (padded; the tables' fit can dip between lengths, so each is read)."""
    fit = min(cap, gen.prefill.fit_limit_up_to(longest))
    if fit < 1:
        raise ValueError(f"a prompt of {longest} tokens does not fit the prefill chip {gen.name}")
    return fit


def decode_batch_limit(gen: GenerationModel, longest_ctx: int, cap: int) -> int:
    """The most sequences (at most ``cap``) one decode step of ``gen`` holds at every context up to
    ``longest_ctx`` tokens (the KV cache of every running sequence must fit beside the weights)."""
    cols = gen.decode[1 : cap + 1, 1 : -(-longest_ctx // gen.ctx_step) + 1]
    ok = np.isfinite(cols).all(axis=1)
    fit = int(np.argmin(ok)) if not ok.all() else int(ok.size)
    if fit < 1:
        raise ValueError(
            f"one sequence of {longest_ctx} tokens does not fit a decode step of {gen.name}"
        )
    return fit


@njit(cache=True, error_model="numpy")
def _decode_device(
    ready, order, prompt, out, dec_tab, ctx_step, max_batch, kv_cap, first, finish, gaps
):
    """Continuous batching of decodes on one device (every ``out`` >= 2): writes ``finish`` and
    ``gaps`` (one gap a token after the first, in iteration order) and returns (busy s,
    iterations, gaps written, rows, mean context); rows > 0 flags a step that does not fit.
    ``order``: ``np.argsort(ready, kind="stable")``, sorted by the caller (Numba's stable
    argsort compiled here cost a first run 1.5 s; one stable order is the same permutation).
    Reference: ``tests/serving_reference.decode_device_reference``."""
    n = order.size
    rmax = dec_tab.shape[0] - 1
    run_i = np.empty(max_batch, dtype=np.int64)  # request
    run_k = np.empty(max_batch, dtype=np.int64)  # tokens made
    run_t = np.empty(max_batch, dtype=np.float64)  # time of its last token
    rows = 0
    t = 0.0
    busy = 0.0
    nxt = 0
    iters = 0
    ng = 0
    kv = 0
    while nxt < n or rows > 0:
        if rows == 0 and ready[order[nxt]] > t:
            t = ready[order[nxt]]
        while nxt < n and ready[order[nxt]] <= t and rows < max_batch:
            i = order[nxt]
            need = prompt[i] + out[i]
            if rows > 0 and kv + need > kv_cap:
                break
            run_i[rows] = i
            run_k[rows] = 1
            run_t[rows] = first[i]
            rows += 1
            kv += need
            nxt += 1
        ctx = 0
        for r in range(rows):
            ctx += prompt[run_i[r]] + run_k[r]
        mean = -(-ctx // rows)
        j = -(-mean // ctx_step)
        if rows <= rmax:
            dt = dec_tab[rows, j]
        else:
            full = rows // rmax
            dt = full * dec_tab[rmax, j]
            if rows - full * rmax > 0:
                dt += dec_tab[rows - full * rmax, j]
        if not np.isfinite(dt):
            return busy, iters, ng, rows, mean
        t += dt
        busy += dt
        iters += 1
        keep = 0
        for r in range(rows):
            gaps[ng] = t - run_t[r]
            ng += 1
            run_k[r] += 1
            run_t[r] = t
            i = run_i[r]
            if run_k[r] >= out[i]:
                finish[i] = t
                kv -= prompt[i] + out[i]
            else:
                run_i[keep] = i
                run_k[keep] = run_k[r]
                run_t[keep] = run_t[r]
                keep += 1
        rows = keep
    return busy, iters, ng, 0, 0


def decode_kernel():
    """The decode pool's kernel (``_decode_device``, a Numba dispatcher): for a caller that
    compiles it ahead of its first use (the claims command's background worker)."""
    return _decode_device


def simulate_disaggregated(
    arrival_s,
    prompt_tokens,
    output_tokens,
    *,
    prefill: GenerationModel,
    decode: GenerationModel,
    kv_bytes_per_token: float,
    prefill_policy=None,
    prefill_count: int = 1,
    decode_count: int = 1,
    max_batch: int = 32,
    kv_capacity_tokens: int = 200_000,
    kv_link_bytes_per_s: float = DEFAULT_KV_LINK_BYTES_PER_S,
    latency_target_s: float = 10.0,
) -> tuple[ServingResult, dict]:
    """Run requests through a prefill pool and a decode pool (see the module docstring).

    Returns the ``ServingResult`` (devices: the decode pool; ``first_token_s`` from the prefill
    pool; ``gap_s`` every gap between tokens, the first decode gap including the KV transfer)
    and a dict of the pools: prefill busy seconds and batches, KV transfer seconds, decode busy
    seconds (the result's ``batches`` are decode iterations).
    """
    arr = np.asarray(arrival_s, dtype=np.float64)
    pr = np.asarray(prompt_tokens, dtype=np.int64)
    out = np.asarray(output_tokens, dtype=np.int64)
    n = arr.size
    if not (pr.shape == out.shape == arr.shape) or n == 0:
        raise ValueError(
            "arrival_s, prompt_tokens and output_tokens must be non-empty and of one length"
        )
    if out.min() < 1 or pr.min() < 1:
        raise ValueError("prompt_tokens and output_tokens must be >= 1 each")
    npf, ndc = (
        positive(k, v, integer=True)
        for k, v in (("prefill_count", prefill_count), ("decode_count", decode_count))
    )
    B = positive("max_batch", max_batch, integer=True)
    link = positive("kv_link_bytes_per_s", kv_link_bytes_per_s)
    kvb = positive("kv_bytes_per_token", kv_bytes_per_token)
    if int((pr + out).max()) > decode.max_ctx or int(pr.max()) > prefill.prefill.max_len:
        raise ValueError(
            f"prompt + output up to {int((pr + out).max())} tokens exceeds the model's tables "
            f"(decode context {decode.max_ctx}, prompt {prefill.prefill.max_len})"
        )
    if prefill_policy is None:
        prefill_policy = P.make(
            "dynamic", max_batch=prompt_batch_limit(prefill, int(pr.max()), B), max_delay_s=0.0
        )
    pol = prefill_policy
    pre = simulate(
        arr, pr, pol, [prefill.prefill] * npf, latency_target_s=latency_target_s, max_waiting=None
    )
    first = np.asarray(pre.finish_s, dtype=np.float64).copy()
    if not np.isfinite(first).all():
        raise ValueError(
            "the prefill pool did not serve every request (a prompt batch does not fit the prefill chip)"
        )
    # KV transfer: per prefill device, FIFO in the order prefills end
    send = pr * kvb / link
    ready = np.empty(n)
    pdev = np.asarray(pre.device)
    for d in range(npf):
        idx = np.flatnonzero(pdev == d)
        idx = idx[np.argsort(first[idx], kind="stable")]
        free, done = 0.0, []
        keep = done.append
        # Python floats (the same IEEE doubles as NumPy's scalars, a fraction of the cost); the
        # later of the link coming free and the prefill ending, as max(free, f) picks it
        for f, s in zip(first[idx].tolist(), send[idx].tolist(), strict=True):
            free = (f if f > free else free) + s
            keep(free)
        ready[idx] = done
    finish = np.where(out == 1, first, np.nan)
    gaps = np.empty(int(np.maximum(out - 1, 1).sum()), dtype=np.float64)
    ng = 0
    busy, iters = np.zeros(ndc), 0
    dec_tab = decode.decode
    for d in range(ndc):
        idx = np.flatnonzero((np.arange(n) % ndc == d) & (out > 1))
        if idx.size:
            sub_f = np.full(idx.size, np.nan)
            rdy = ready[idx]
            busy[d], it, written, rows, mean = _decode_device(
                rdy,
                np.argsort(rdy, kind="stable"),
                pr[idx],
                out[idx],
                np.ascontiguousarray(dec_tab[: B + 1] if dec_tab.shape[0] > B + 1 else dec_tab),
                int(decode.ctx_step),
                B,
                int(kv_capacity_tokens),
                first[idx],
                sub_f,
                gaps[ng:],
            )
            if rows:
                raise ValueError(
                    f"a decode step of {rows} sequences (mean context {mean}) does not fit the "
                    "decode chip: lower max_batch"
                )
            ng += written
            finish[idx] = sub_f
            iters += it
    device = (np.arange(n) % ndc).astype(np.int16)
    g = gaps[:ng]
    res = ServingResult(
        policy=f"disaggregated: prefill {pol.describe()} on {npf} x {prefill.name}; decode continuous max batch "
        f"{B} on {ndc} x {decode.name}; KV over {link / 1e9:g} GB/s",
        devices=(decode.name,) * ndc,
        arrival_s=arr,
        lengths=pr,
        times=(pre.start_s, finish, device),
        batch_id=np.broadcast_to(np.int32(-1), (n,)),
        device_busy_s=busy,
        device_real_tokens=np.array([int(out.sum())]),
        device_computed_tokens=np.array([int(out.sum())]),
        batches=iters,
        latency_target_s=positive("latency_target_s", latency_target_s),
        max_waiting=n,
        first_token_s=first,
        output_tokens=out,
        gap_s=g,
        gap_weight=np.ones(g.size, dtype=np.int64),
    )
    pools = {
        "prefill_chip": prefill.name,
        "prefill_count": npf,
        "decode_chip": decode.name,
        "decode_count": ndc,
        "prefill_busy_s": float(np.sum(pre.device_busy_s)),
        "prefill_batches": pre.batches,
        "kv_transfer_s": float(send.sum()),
        "kv_link_bytes_per_s": link,
        "decode_busy_s": float(busy.sum()),
    }
    return res, pools
