"""Generation serving on one device: continuous (iteration-level) and static (run-to-completion) batching.

A ``GenerationModel`` holds the iteration times of a decoder on a chip: a prefill table
(rows = prompts, column = longest prompt) and a decode table (rows = sequences, column =
mean context). ``simulate_generation`` runs

* ``policies.Continuous`` (Orca, vLLM): requests join and leave the running batch at every
  iteration; an iteration that admits new prompts runs their prefill and one decode step
  of the running sequences as one step (the weights read once: ``GenerationModel.mixed``);
* ``policies.Static`` (FasterTransformer-style): a batch of up to ``batch`` requests leaves
  when full or when its oldest has waited ``timeout_s``, runs its prefill, then decodes
  all its rows until the longest reply is done; every request of the batch is returned at
  its end.

Results carry the time to first token and the time between tokens beside the latency.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import policies as P
from .._validate import positive
from . import generation_kernels as kernels
from .plan import arrival_array, tokens_and_max
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
    # float64 [rows, rows, n_prompt + 1], s: mixed[d, r, j] one step prefilling r prompts of
    # j * mixed_step tokens beside d decoding sequences (serving.mixed_steps.mixed_table); empty: none
    mixed: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 0)), repr=False)
    mixed_step: int = 32  # tokens per prompt column of ``mixed``

    def mixed_s(self, decodes: int, prompts: int, longest_prompt: int, mean_ctx: int) -> float:
        """Seconds of one continuous-batching iteration that prefills ``prompts`` prompts (the
        longest ``longest_prompt`` tokens) and decodes ``decodes`` sequences of mean context
        ``mean_ctx``: the mixed step (weights read once) plus the decodes' attention over
        their context beyond the first decode column, ``decode[d, col] - decode[d, 1]``.
        Without a mixed table (or beyond it): the prefill step plus the decode step."""
        return float(
            kernels.iteration_s(
                self.prefill.table,
                self.prefill.len_step,
                self.decode,
                self.ctx_step,
                self.mixed,
                self.mixed_step,
                int(prompts),
                int(longest_prompt),
                int(decodes),
                int(mean_ctx),
            )
        )

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


def generation_model(
    chip,
    model="gpt2",
    *,
    max_batch: int = 64,
    max_ctx: int | None = None,
    ctx_step: int = 64,
    prompt_step: int = 32,
    max_prompt: int | None = None,
    chips: int = 1,
    streaming: bool | None = None,
    grid: str = "fine",
    placement=None,
    mixed: bool = True,
) -> GenerationModel:
    """Build a ``GenerationModel`` of ``model`` on ``chip`` (a replica of ``chips`` chips) from
    the machine model; ``grid`` and ``placement`` as in ``chip_service`` (a searched placement
    must fit one sequence of ``max_ctx`` tokens in prefill and in decode). ``mixed`` (default)
    also builds the table of mixed prefill + decode steps (``serving.mixed_steps.mixed_table``: ``max_batch``
    rows, on the same grid whatever ``grid`` is; refused over the memory budget); without it an
    iteration with both costs the prefill step plus the decode step."""
    from .. import hardware, workloads
    from . import mixed_steps, tables

    c, m = hardware.chip(chip), workloads.model(model)
    if m.kind != "decoder":
        raise ValueError(f"generation needs a decoder model; {m.name} is an {m.kind}")
    max_ctx = m.max_positions if max_ctx is None else positive("max_ctx", max_ctx, integer=True)
    max_prompt = max_ctx if max_prompt is None else positive("max_prompt", max_prompt, integer=True)
    b = positive("max_batch", max_batch, integer=True)
    ps, cs = (
        positive("prompt_step", prompt_step, integer=True),
        positive("ctx_step", ctx_step, integer=True),
    )
    spec = tables.replica(
        c,
        m,
        chips=positive("chips", chips, integer=True),
        streaming=streaming,
        placement=placement,
        phases=("prefill", "decode"),
        length=max_ctx,
    )
    where = f" {spec.label()}" if spec.label() else ""
    if grid not in ("fine", "coarse"):
        raise ValueError(f"unknown grid {grid!r}; valid: fine, coarse")
    # first: a mixed table over the memory budget is refused before any table is built
    mix = (
        mixed_steps.mixed_table(spec, b, max_prompt, ps, name="max_batch")
        if mixed
        else np.zeros((0, 0, 0))
    )
    if grid == "fine":
        exact = (
            c.kind == "gpu"
        )  # as in chip_service: GPU times are not linear in rows, tile calls are slow
        # phase "prefill": the prompt pass writes the KV cache (its bytes count in the fit check)
        pre_tab = tables.time_table(spec, "prefill", b, max_prompt, ps, exact)
        pre = ServiceModel(
            f"{c.name}{where} {m.name} prefill", pre_tab, 1, source=tables.source(spec)
        )
        dec = tables.time_table(spec, "decode", b, max_ctx, cs, exact)
    else:  # coarse
        pcols = np.arange(1, -(-max_prompt // ps) + 1) * ps
        pre_tab = tables.coarse_table(spec, "prefill", b, m.max_positions, pcols)
        pre = ServiceModel(
            f"{c.name}{where} {m.name} prefill", pre_tab, ps, source=tables.source(spec)
        )
        dec = tables.coarse_table(
            spec, "decode", b, m.max_positions, np.arange(1, -(-max_ctx // cs) + 1) * cs
        )
    return GenerationModel(
        f"{c.name}{where} {m.name}",
        pre,
        dec,
        cs,
        source=tables.source(spec),
        mixed=mix,
        mixed_step=ps,
    )


def table_lengths(
    model, longest_prompt: int, longest_ctx: int, *, prompt_step: int = 32, ctx_step: int = 64
) -> tuple[int, int]:
    """(max_prompt, max_ctx) of the shortest tables of ``generation_model`` whose cells for
    prompts up to ``longest_prompt`` tokens and contexts up to ``longest_ctx`` hold the same
    values as the full tables' (the model's ``max_positions``), bit for bit: the mixed table's
    prompt lengths are ``prompt_step`` x powers of two (``serving.mixed_steps.mixed_grid``), so its longest
    prompt is the first of them at or above ``longest_prompt``; the prefill table's columns
    below it are the same multiples of ``prompt_step`` (and the memory cliffs between them), and
    every decode column is computed on its own, so ``max_ctx`` is ``longest_ctx`` rounded up to a
    multiple of ``ctx_step``; both at most ``max_positions``. A caller that knows its requests
    builds only the columns they read (a GC200 GPT-2 table up to 512-token prompts costs half
    the machine-model steps of one up to 1,024)."""
    from .. import workloads
    from .tables import pow2_grid

    m = workloads.model(model)
    lp = positive("longest_prompt", longest_prompt, integer=True)
    lc = positive("longest_ctx", longest_ctx, integer=True)
    ps = positive("prompt_step", prompt_step, integer=True)
    cs = positive("ctx_step", ctx_step, integer=True)
    top = m.max_positions
    mp = next((v for v in pow2_grid(ps, top)[:-1] if v >= lp), top)
    return mp, min(top, -(-lc // cs) * cs)


def _rows_up_to(table, rows):
    """``table`` with rows 0 .. max(``rows``, its own), each row as ``lookup_s`` prices it
    (beyond the table: whole tables in series, ``full x`` the last row plus the rest's row, the
    same operations), so that the kernels index it directly: a writable float64 C array (one
    kernel signature). NumPy, row by row: a kernel here cost a newcomer's first generation run
    0.3 s of compile for a copy."""
    tab = np.asarray(table, dtype=np.float64)
    rmax = tab.shape[0] - 1
    out = np.empty((max(int(rows), rmax) + 1, tab.shape[1]))
    out[: rmax + 1] = tab
    for r in range(rmax + 1, out.shape[0]):
        full = r // rmax
        out[r] = full * tab[rmax]
        if r - full * rmax > 0:
            out[r] += tab[r - full * rmax]
    return out


GAP_CELLS_MAX = 1 << 21  # entries (16 MiB): a larger gap-count table lists its mixed steps instead


def _gap_cells(max_batch: int, gen: GenerationModel, static: bool) -> np.ndarray:
    """The zeroed gap-count table a generation kernel fills: [decodes, prompts, prompt column,
    column] with a prompt axis for each mixed step the mixed table prices, or, when that would
    exceed ``GAP_CELLS_MAX`` entries (a 128-row table over long prompts is hundreds of MB, and
    scanning it after each run would cost more than the run), [decodes, 1, 1, column]: decode-only
    iterations counted, mixed steps listed one by one like any other iteration with prefills
    (at most one per request unchunked). The gaps are the same values either way."""
    dec_cols = gen.decode.shape[1]
    rows, cols = gen.mixed.shape[0], gen.mixed.shape[2]
    if static or rows == 0 or (max_batch + 1) * rows * cols * dec_cols > GAP_CELLS_MAX:
        rows = cols = 1  # no prompt axis: decode-only iterations counted, mixed steps listed
    return np.zeros((max_batch + 1, rows, cols, dec_cols), dtype=np.int64)


def _counted_gaps(gap_s, gap_w, cells, dec_tab, mixed):
    """Every gap between tokens a generation kernel counted, as (seconds, tokens) arrays: the
    gaps it listed one by one (``gap_s``, ``gap_w``), then each non-empty cell
    ``cells[decodes, prompts, prompt column, column]`` in C order at its iteration time: with no
    prompts the decode step ``dec_tab[decodes, column]``, else the mixed step plus the
    decodes' attention beyond the first column (``_step_s``'s sum, the same bits). A run of
    millions of iterations fills a few thousand cells: counting them in the kernel leaves the
    summary a few thousand entries to reduce, not one per iteration. NumPy (``np.nonzero``
    lists the cells in C order): as a kernel it cost a newcomer's first run 0.5 s of compile.
    The flat indices unravelled: the same index arrays as ``np.nonzero(cells)``, 2.4x faster on
    claim 10's 233k-cell tables."""
    d, r, j, c = np.unravel_index(np.flatnonzero(cells), cells.shape)
    s = dec_tab[d, c]
    mix = r > 0
    if mix.any():
        dm, cm = d[mix], c[mix]
        s[mix] = mixed[dm, r[mix], j[mix]] + (dec_tab[dm, cm] - dec_tab[dm, 1])
    return (
        np.concatenate((np.asarray(gap_s, dtype=np.float64), s)),
        np.concatenate((np.asarray(gap_w, dtype=np.int64), cells[d, r, j, c])),
    )


def continuous_kernel():
    """The continuous-batching kernel (a Numba dispatcher): for a caller that asks whether
    Numba's cache holds it (``ipusim.background.cached``)."""
    return kernels.continuous_loop


def simulate_generation(
    arrival_s,
    prompt_tokens,
    output_tokens,
    policy,
    gen: GenerationModel,
    *,
    latency_target_s: float = 10.0,
    replicas: int = 1,
) -> ServingResult:
    """Generation requests with ``policy`` (``Continuous`` or ``Static``) on ``replicas`` devices.

    Each request brings ``prompt_tokens`` and generates ``output_tokens`` (>= 1; the first
    comes from the prefill). Requests are dealt to the replicas in turn (request i to
    replica i mod ``replicas``), each running the policy on its own. The result's
    ``first_token_s`` gives the time to first token and its summary the time between tokens.
    """
    if not isinstance(policy, (P.Continuous, P.Static)):
        raise ValueError(
            "simulate_generation needs a policies.Continuous or policies.Static policy"
        )
    if not isinstance(gen, GenerationModel):
        raise ValueError("gen must be a GenerationModel (see generation_model)")
    arr = arrival_array(arrival_s)
    n = arr.size
    pr, pr_max = tokens_and_max("prompt_tokens", prompt_tokens, n)
    out = tokens_and_max("output_tokens", output_tokens, n)[0]
    nr = positive("replicas", replicas, integer=True)
    need_max = int((pr + out).max())  # NumPy: a kernel for it cost a first run 0.1 s of compile
    if isinstance(policy, P.Continuous) and need_max > policy.kv_capacity_tokens:
        raise ValueError(
            f"a request needs {need_max} KV tokens, more than kv_capacity_tokens "
            f"{policy.kv_capacity_tokens}"
        )
    if need_max > gen.max_ctx or pr_max > gen.prefill.max_len:
        raise ValueError(
            f"prompt + output up to {need_max} tokens exceeds the model's tables "
            f"(context {gen.max_ctx}, prompt {gen.prefill.max_len})"
        )
    B = policy.max_batch
    start, first, finish = np.empty(n), np.empty(n), np.empty(n)
    busy = np.zeros(nr)
    iters, slots = 0, 0
    gaps_s, gaps_w = [], []
    pre, dec = _rows_up_to(gen.prefill.table, B), _rows_up_to(gen.decode, B)
    ps = gen.prefill.len_step
    mixed = gen.mixed.view()  # read-only, as a cached table is: one kernel signature
    mixed.setflags(write=False)
    for k in range(min(nr, n)):
        sl = slice(k, None, nr)
        # the replica's requests as writable C-contiguous arrays in and out (every nr-th
        # request is a strided view, which Numba types apart from a contiguous one, and a
        # read-only array apart from a writable one): one array type at every call, so each
        # kernel compiles one signature whatever the replicas
        a_k, p_k, o_k = (np.require(x[sl], requirements="CW") for x in (arr, pr, out))
        times_k = (start, first, finish) if nr == 1 else tuple(np.empty(a_k.size) for _ in "sff")
        m = -(-n // nr)  # iterations with prefills and decodes: at most one per request (unchunked)
        if isinstance(policy, P.Continuous) and policy.chunk_tokens:
            m = arr[sl].size + int(np.sum(-(-pr[sl] // policy.chunk_tokens)))
        elif isinstance(policy, P.Static):
            m = 0
        while True:
            info = np.zeros(3, dtype=np.int64)
            cells = _gap_cells(B, gen, isinstance(policy, P.Static))
            g_s, g_w = np.empty(m), np.empty(m, dtype=np.int64)
            if isinstance(policy, P.Static):
                kernels.static_loop(
                    a_k,
                    p_k,
                    o_k,
                    pre,
                    ps,
                    dec,
                    gen.ctx_step,
                    B,
                    policy.timeout_s,
                    *times_k,
                    info,
                    busy[k : k + 1],
                    cells,
                )
            elif policy.chunk_tokens:
                kernels.chunked_loop(
                    a_k,
                    p_k,
                    o_k,
                    pre,
                    ps,
                    dec,
                    gen.ctx_step,
                    mixed,
                    gen.mixed_step,
                    B,
                    policy.kv_capacity_tokens,
                    policy.chunk_tokens,
                    *times_k,
                    info,
                    busy[k : k + 1],
                    cells,
                    g_s,
                    g_w,
                )
            else:
                kernels.continuous_loop(
                    a_k,
                    p_k,
                    o_k,
                    pre,
                    ps,
                    dec,
                    gen.ctx_step,
                    mixed,
                    gen.mixed_step,
                    B,
                    policy.kv_capacity_tokens,
                    *times_k,
                    info,
                    busy[k : k + 1],
                    cells,
                    g_s,
                    g_w,
                )
            if info[1] != -1:
                break
            m *= 2  # the chunked kernel ran out of room for its gaps
        if nr > 1:
            start[sl], first[sl], finish[sl] = times_k
        g_s, g_w = _counted_gaps(g_s[: info[2]], g_w[: info[2]], cells, dec, gen.mixed)
        gaps_s.append(g_s)
        gaps_w.append(g_w)
        iters += int(info[0])
        slots += int(info[1])
    if not np.isfinite(busy).all():
        raise ValueError(
            f"an iteration of up to {B} sequences does not fit {gen.name} (the machine model has no time "
            "for it; prefill writes the KV cache too): lower the policy's max_batch"
        )
    tokens = int(out.sum())
    if isinstance(policy, P.Continuous):
        slots = tokens
    device = np.zeros(n, dtype=np.int16) if nr == 1 else (np.arange(n) % nr).astype(np.int16)
    return ServingResult(
        policy=policy.describe(),
        devices=(gen.name,) * nr,
        arrival_s=arr,
        lengths=pr,
        times=(start, finish, device),
        batch_id=np.broadcast_to(np.int32(-1), (n,)),
        device_busy_s=busy,
        device_real_tokens=np.array([tokens]),
        device_computed_tokens=np.array([slots]),
        batches=iters,
        stopped_early=False,
        latency_target_s=positive("latency_target_s", latency_target_s),
        max_waiting=n,
        capacity_rps=float("nan"),
        first_token_s=first,
        output_tokens=out,
        gap_s=gaps_s[0] if nr == 1 else np.concatenate(gaps_s),
        gap_weight=gaps_w[0] if nr == 1 else np.concatenate(gaps_w),
    )
