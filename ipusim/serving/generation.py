"""Generation serving on one device: continuous (iteration-level) and static (run-to-completion) batching.

A ``GenerationModel`` holds the iteration times of a decoder on a chip: a prefill table
(rows = prompts, column = longest prompt) and a decode table (rows = sequences, column =
mean context). ``simulate_generation`` runs

* ``policies.Continuous`` (Orca, vLLM): requests join and leave the running batch at every
  iteration; an iteration that admits new prompts runs their prefill beside one decode
  step of the running sequences;
* ``policies.Static`` (FasterTransformer-style): a batch of up to ``batch`` requests leaves
  when full or when its oldest has waited ``timeout_s``, runs its prefill, then decodes
  all its rows until the longest reply is done; every request of the batch is returned at
  its end.

Results carry the time to first token and the time between tokens beside the latency.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import njit

from .. import policies as P
from .._validate import positive
from .batching import arrival_array, token_array
from .result import ServingResult
from .service import ServiceModel, lookup_s


@dataclass(frozen=True)
class GenerationModel:
    """Iteration times of a decoder on a chip: prefill of new prompts + one decode step of the rest.

    ``prefill`` is a padded ``ServiceModel`` (rows = new prompts, column = longest prompt);
    ``decode[b, j]`` is one decode step of ``b`` sequences whose mean context is
    ``j * ctx_step`` tokens (decode cost is linear in the total context for these models,
    so the mean stands for the mix).
    """

    name: str
    prefill: ServiceModel
    decode: np.ndarray = field(repr=False)  # float64 [rows + 1, n_ctx + 1], s
    ctx_step: int = 64  # tokens per decode column
    source: str = ""

    @property
    def max_ctx(self) -> int:
        return (self.decode.shape[1] - 1) * self.ctx_step

    def static_batch_s(self, rows: int, prompt: int, output: int) -> float:
        """Seconds for a static batch of ``rows`` prompts of ``prompt`` tokens each generating
        ``output`` tokens: the prefill (first token) then ``output - 1`` decode steps."""
        t = lookup_s(self.prefill.table, rows, -(-int(prompt) // self.prefill.len_step))
        for k in range(1, int(output)):
            t += lookup_s(self.decode, rows, -(-(int(prompt) + k) // self.ctx_step))
        return float(t)


def generation_model(chip, model="gpt2", *, max_batch: int = 64, max_ctx: int | None = None,
                     ctx_step: int = 64, prompt_step: int = 32, max_prompt: int | None = None,
                     chips: int = 1, streaming: bool | None = None, grid: str = "fine",
                     placement=None) -> GenerationModel:
    """Build a ``GenerationModel`` of ``model`` on ``chip`` (a replica of ``chips`` chips) from
    the machine model; ``grid`` and ``placement`` as in ``chip_service`` (a searched placement
    must fit one sequence of ``max_ctx`` tokens in prefill and in decode)."""
    from .. import hardware, workloads
    from . import tables

    c, m = hardware.chip(chip), workloads.model(model)
    if m.kind != "decoder":
        raise ValueError(f"generation needs a decoder model; {m.name} is an {m.kind}")
    max_ctx = m.max_positions if max_ctx is None else positive("max_ctx", max_ctx, integer=True)
    max_prompt = max_ctx if max_prompt is None else positive("max_prompt", max_prompt, integer=True)
    b = positive("max_batch", max_batch, integer=True)
    ps, cs = positive("prompt_step", prompt_step, integer=True), positive("ctx_step", ctx_step, integer=True)
    spec = tables.replica(c, m, chips=positive("chips", chips, integer=True), streaming=streaming,
                          placement=placement, phases=("prefill", "decode"), length=max_ctx)
    where = f" {spec.label()}" if spec.label() else ""
    if grid == "fine":
        exact = c.kind == "gpu"  # as in chip_service: GPU times are not linear in rows, tile calls are slow
        # phase "prefill": the prompt pass writes the KV cache (its bytes count in the fit check)
        pre_tab = tables.time_table(spec, "prefill", b, max_prompt, ps, exact)
        pre = ServiceModel(f"{c.name}{where} {m.name} prefill", pre_tab, 1, source=tables.source(spec))
        dec = tables.time_table(spec, "decode", b, max_ctx, cs, exact)
    elif grid == "coarse":
        pcols = np.arange(1, -(-max_prompt // ps) + 1) * ps
        pre_tab = tables.coarse_table(spec, "prefill", b, m.max_positions, pcols)
        pre = ServiceModel(f"{c.name}{where} {m.name} prefill", pre_tab, ps, source=tables.source(spec))
        dec = tables.coarse_table(spec, "decode", b, m.max_positions, np.arange(1, -(-max_ctx // cs) + 1) * cs)
    else:
        raise ValueError(f"unknown grid {grid!r}; valid: fine, coarse")
    return GenerationModel(f"{c.name}{where} {m.name}", pre, dec, cs, source=tables.source(spec))


@njit(cache=True, error_model="numpy")
def _continuous_kernel(arrival, prompt, output, pre_tab, pre_step, dec_tab, ctx_step, max_batch, kv_cap,
                       start, first, finish, info, busy_out):
    """Iteration-level batching on one device (Orca-style: prefills join an iteration).

    Preconditions: ``arrival`` sorted; every ``prompt + output <= kv_cap`` and every
    context fits the tables; outputs of size n (every entry is written). Admission is
    first-come first-served: the head request waits until a batch slot and its whole KV
    reservation (prompt + output tokens) are free. ``info[0]`` gets the iterations,
    ``busy_out[0]`` the busy seconds.
    """
    n = arrival.shape[0]
    run_id = np.empty(max_batch, dtype=np.int64)
    run_ctx = np.empty(max_batch, dtype=np.int64)
    run_left = np.empty(max_batch, dtype=np.int64)
    nrun = 0
    nxt = 0
    done = 0
    kv = 0
    t = 0.0
    iters = 0
    busy = 0.0
    while done < n:
        if nrun == 0 and arrival[nxt] > t:
            t = arrival[nxt]
        old = nrun
        ctx_sum = 0
        for r in range(old):
            ctx_sum += run_ctx[r]
        nnew = 0
        pmax = 0
        while nxt < n and arrival[nxt] <= t and nrun < max_batch and kv + prompt[nxt] + output[nxt] <= kv_cap:
            run_id[nrun] = nxt
            run_ctx[nrun] = prompt[nxt]
            run_left[nrun] = output[nxt]
            kv += prompt[nxt] + output[nxt]
            start[nxt] = t
            if prompt[nxt] > pmax:
                pmax = prompt[nxt]
            nrun += 1
            nnew += 1
            nxt += 1
        dt = 0.0
        if nnew > 0:
            dt += lookup_s(pre_tab, nnew, (pmax + pre_step - 1) // pre_step)
        if old > 0:
            mean_ctx = (ctx_sum + old - 1) // old + 1  # context including the new token
            dt += lookup_s(dec_tab, old, (mean_ctx + ctx_step - 1) // ctx_step)
        t = t + dt
        busy += dt
        iters += 1
        w = 0
        for r in range(nrun):
            i = run_id[r]
            if r >= old:  # prefilled this iteration: its first token is out
                first[i] = t
            left = run_left[r] - 1
            if left <= 0:
                finish[i] = t
                kv -= prompt[i] + output[i]
                done += 1
            else:
                run_id[w] = i
                run_ctx[w] = run_ctx[r] + 1
                run_left[w] = left
                w += 1
        nrun = w
    info[0] = iters
    busy_out[0] = busy


@njit(cache=True, error_model="numpy")
def _static_kernel(arrival, prompt, output, pre_tab, pre_step, dec_tab, ctx_step, batch, timeout,
                   start, first, finish, info, busy_out):
    """Run-to-completion batches on one device (FasterTransformer-style static batching).

    Preconditions: ``arrival`` sorted; contexts fit the tables; outputs of size n (every
    entry is written). A batch of up to ``batch`` requests leaves when the device is free
    and ``batch`` requests have arrived, or the oldest has waited ``timeout``; it runs the
    prefill of all its prompts (padded to the longest; first tokens out), then decode
    steps of all its rows (context at the mean prompt plus the step) until its longest
    reply is done; every request is returned at the end. ``info[0]`` gets the iterations
    (prefill and decode steps), ``info[1]`` the token slots run (rows x longest reply),
    ``busy_out[0]`` the busy seconds.
    """
    n = arrival.shape[0]
    free = 0.0
    h = 0
    iters = 0
    slots = 0
    busy = 0.0
    while h < n:
        ready = arrival[h] + timeout
        if h + batch - 1 < n and arrival[h + batch - 1] < ready:
            ready = arrival[h + batch - 1]
        t = ready if ready > free else free
        size = 0
        pmax = 0
        psum = 0
        omax = 0
        while h + size < n and size < batch and arrival[h + size] <= t:
            i = h + size
            if prompt[i] > pmax:
                pmax = prompt[i]
            psum += prompt[i]
            if output[i] > omax:
                omax = output[i]
            size += 1
        dt = lookup_s(pre_tab, size, (pmax + pre_step - 1) // pre_step)
        t_first = t + dt
        pmean = (psum + size - 1) // size
        for k in range(1, omax):
            dt += lookup_s(dec_tab, size, (pmean + k + ctx_step - 1) // ctx_step)
        fin = t + dt
        for i in range(h, h + size):
            start[i] = t
            first[i] = t_first
            finish[i] = fin
        free = fin
        busy += dt
        iters += omax
        slots += size * omax
        h += size
    info[0] = iters
    info[1] = slots
    busy_out[0] = busy


def simulate_generation(arrival_s, prompt_tokens, output_tokens, policy, gen: GenerationModel, *,
                        latency_target_s: float = 10.0, replicas: int = 1) -> ServingResult:
    """Generation requests with ``policy`` (``Continuous`` or ``Static``) on ``replicas`` devices.

    Each request brings ``prompt_tokens`` and generates ``output_tokens`` (>= 1; the first
    comes from the prefill). Requests are dealt to the replicas in turn (request i to
    replica i mod ``replicas``), each running the policy on its own. The result's
    ``first_token_s`` gives the time to first token and its summary the time between tokens.
    """
    if not isinstance(policy, (P.Continuous, P.Static)):
        raise ValueError("simulate_generation needs a policies.Continuous or policies.Static policy")
    if not isinstance(gen, GenerationModel):
        raise ValueError("gen must be a GenerationModel (see generation_model)")
    arr = arrival_array(arrival_s)
    n = arr.size
    pr = token_array("prompt_tokens", prompt_tokens, n)
    out = token_array("output_tokens", output_tokens, n)
    nr = positive("replicas", replicas, integer=True)
    need_max = int((pr + out).max())
    if isinstance(policy, P.Continuous) and need_max > policy.kv_capacity_tokens:
        raise ValueError(f"a request needs {need_max} KV tokens, more than kv_capacity_tokens "
                         f"{policy.kv_capacity_tokens}")
    if need_max > gen.max_ctx or pr.max() > gen.prefill.max_len:
        raise ValueError(f"prompt + output up to {need_max} tokens exceeds the model's tables "
                         f"(context {gen.max_ctx}, prompt {gen.prefill.max_len})")
    B = policy.max_batch
    start, first, finish = np.empty(n), np.empty(n), np.empty(n)
    busy = np.zeros(nr)
    iters, slots = 0, 0
    for k in range(min(nr, n)):
        sl = slice(k, None, nr)
        info = np.zeros(2, dtype=np.int64)
        if isinstance(policy, P.Continuous):
            _continuous_kernel(arr[sl], pr[sl], out[sl], gen.prefill.table, gen.prefill.len_step, gen.decode,
                               gen.ctx_step, B, policy.kv_capacity_tokens, start[sl], first[sl], finish[sl], info,
                               busy[k:k + 1])
        else:
            _static_kernel(arr[sl], pr[sl], out[sl], gen.prefill.table, gen.prefill.len_step, gen.decode,
                           gen.ctx_step, B, policy.timeout_s, start[sl], first[sl], finish[sl], info, busy[k:k + 1])
        iters += int(info[0])
        slots += int(info[1])
    if not np.isfinite(busy).all():
        raise ValueError(f"an iteration of up to {B} sequences does not fit {gen.name} (the machine model has no time "
                         "for it; prefill writes the KV cache too): lower the policy's max_batch")
    tokens = int(out.sum())
    if isinstance(policy, P.Continuous):
        slots = tokens
    device = np.zeros(n, dtype=np.int16) if nr == 1 else (np.arange(n) % nr).astype(np.int16)
    return ServingResult(
        policy=policy.describe(), devices=(gen.name,) * nr, arrival_s=arr, lengths=pr, start_s=start,
        finish_s=finish, device=device, batch_id=np.full(n, -1, dtype=np.int32),
        device_busy_s=busy, device_real_tokens=np.array([tokens]),
        device_computed_tokens=np.array([slots]), batches=iters, stopped_early=False,
        latency_target_s=positive("latency_target_s", latency_target_s), max_waiting=n,
        capacity_rps=float("nan"), first_token_s=first, output_tokens=out,
    )
