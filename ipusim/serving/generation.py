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
from numba import njit

from .. import policies as P
from .._validate import positive
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
            _iteration_s(
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


@njit(cache=True, error_model="numpy", inline="always")
def _step_s(nnew, old, pre_s, dec_s, dec_first_s, mixed_s, mixed_fits):
    """Seconds of an iteration prefilling ``nnew`` prompts beside ``old`` decoding sequences,
    from its table entries: ``pre_s`` the prefill step of the prompts, ``dec_s`` the decode
    step at the decodes' context column (``dec_first_s`` at the first column) and, when
    ``mixed_fits``, ``mixed_s`` the mixed step, to which the decodes' attention beyond the
    first column is added (see ``GenerationModel.mixed_s``). ``mixed_fits`` is false beyond
    the mixed table and where its cell is ``inf`` (next to a grid point whose one step does not
    fit): then the iteration runs as the prefill step plus the decode step. Scalars only: inlined into the
    kernels, a helper taking arrays would cost reference counting on every iteration."""
    dt = 0.0
    if nnew == 0:
        if old > 0:
            dt = dec_s
    elif old == 0:
        dt = pre_s
    elif mixed_fits:
        dt = mixed_s + (dec_s - dec_first_s)
    else:
        dt = pre_s + dec_s
    return dt


@njit(cache=True, error_model="numpy")
def _iteration_s(
    pre_tab, pre_step, dec_tab, ctx_step, mixed, mixed_step, nnew, pmax, old, mean_ctx
):
    """Seconds of an iteration prefilling ``nnew`` prompts (longest ``pmax``) and decoding
    ``old`` sequences of mean context ``mean_ctx`` (see ``GenerationModel.mixed_s``)."""
    mc = (pmax + mixed_step - 1) // mixed_step
    fits = nnew > 0 and old > 0 and old + nnew <= mixed.shape[0] and mixed[old, nnew, mc] < np.inf
    return _step_s(
        nnew,
        old,
        lookup_s(pre_tab, nnew, (pmax + pre_step - 1) // pre_step),
        lookup_s(dec_tab, old, (mean_ctx + ctx_step - 1) // ctx_step),
        dec_tab[old, 1] if fits else 0.0,
        mixed[old, nnew, mc] if fits else 0.0,
        fits,
    )


@njit(cache=True, inline="always")
def _admits(arrived_s, tokens, t, nrun, max_batch, kv, kv_cap):
    """A request that arrived at ``arrived_s`` needing ``tokens`` KV tokens (prompt + output)
    joins the running batch at ``t``: it has arrived, and a batch slot and its whole KV
    reservation are free (first come, first served). Scalars only (see ``_step_s``)."""
    return arrived_s <= t and nrun < max_batch and kv + tokens <= kv_cap


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


@njit(cache=True, inline="always")
def _end_of_run(info, busy_out, iters, busy, m):
    """Write a generation kernel's totals: ``info[0]`` iterations, ``busy_out[0]`` busy seconds,
    ``info[2]`` the ``m`` gaps listed one by one (in ``gap_s``, ``gap_w``). Inlined (Numba IR):
    not a kernel of its own to compile on a first run."""
    info[0] = iters
    busy_out[0] = busy
    info[2] = m


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


@njit(cache=True, error_model="numpy")
def _continuous_kernel(
    arrival,
    prompt,
    output,
    pre_tab,
    pre_step,
    dec_tab,
    ctx_step,
    mixed,
    mixed_step,
    max_batch,
    kv_cap,
    start,
    first,
    finish,
    info,
    busy_out,
    gap_cells,
    gap_s,
    gap_w,
):
    """Iteration-level batching on one device (Orca-style: prefills join an iteration).

    Preconditions: ``arrival`` sorted; every ``prompt + output <= kv_cap`` and every
    context fits the tables; ``pre_tab`` and ``dec_tab`` hold rows up to ``max_batch``
    (``_rows_up_to``); outputs of size n (every entry is written); ``gap_cells`` [max_batch
    + 1, max(mixed rows, 1), max(mixed columns, 1), decode columns] zeroed, or [max_batch + 1,
    1, 1, decode columns] to list every mixed step too (``_gap_cells``); ``gap_s``,
    ``gap_w`` of size n.
    Admission: ``_admits``. Work per iteration is O(1) plus O(log max_batch) per request:
    the running sequences' context sum is kept as a total and their last iterations in a
    binary heap, and no helper taking arrays is called in the loop. Gaps between tokens:
    every sequence that decodes in an iteration waits that iteration's time for its token;
    a decode-only iteration or one mixed step adds its sequences to ``gap_cells[decodes,
    prompts, prompt column, column]`` (decode-only: [decodes, 0, 0, column]); any other
    iteration with prefills writes (seconds, sequences) to ``gap_s``, ``gap_w``
    (``_counted_gaps`` lists them all). ``info`` gets [iterations, 0, entries written], ``busy_out[0]`` the
    busy seconds.
    """
    n = arrival.shape[0]
    hkey = np.empty(max_batch, dtype=np.int64)  # heap: last iteration of each running sequence
    hid = np.empty(max_batch, dtype=np.int64)
    ctx_sum = 0  # context tokens of the running sequences
    # running sequences, next request, requests done, KV tokens held, iterations, gap entries
    nrun = nxt = done = kv = iters = nmix = 0
    t = busy = 0.0  # s
    while done < n:
        if nrun == 0 and arrival[nxt] > t:
            t = arrival[nxt]
        old = nrun
        old_ctx = ctx_sum
        first_new = nxt
        pmax = 0
        while nxt < n and _admits(
            arrival[nxt], prompt[nxt] + output[nxt], t, nrun, max_batch, kv, kv_cap
        ):
            kv += prompt[nxt] + output[nxt]
            ctx_sum += prompt[nxt]
            start[nxt] = t
            if prompt[nxt] > pmax:
                pmax = prompt[nxt]
            # push (last iteration, id): sift up from the new leaf
            key = iters + output[nxt] - 1
            c = nrun
            nrun += 1
            while c > 0 and hkey[(c - 1) // 2] > key:
                hkey[c], hid[c] = hkey[(c - 1) // 2], hid[(c - 1) // 2]
                c = (c - 1) // 2
            hkey[c], hid[c] = key, nxt
            nxt += 1
        nnew = nxt - first_new
        col = 0
        mean_ctx = 0
        if old > 0:
            mean_ctx = (old_ctx + old - 1) // old + 1  # context including the new token
            col = (mean_ctx + ctx_step - 1) // ctx_step
        mc = (pmax + mixed_step - 1) // mixed_step
        fits = (
            nnew > 0 and old > 0 and old + nnew <= mixed.shape[0] and mixed[old, nnew, mc] < np.inf
        )
        dt = _step_s(
            nnew,
            old,
            pre_tab[nnew, (pmax + pre_step - 1) // pre_step],
            dec_tab[old, col],
            dec_tab[old, 1],
            mixed[old, nnew, mc] if fits else 0.0,
            fits,
        )
        if nnew == 0 and old > 0:
            # A run of decode-only iterations of the same time: no sequence ends before the
            # last of them, the mean context (one more each time) stays in this column, and
            # no request is admitted (the batch or KV cache is full until a sequence ends,
            # or the next request arrives after the iteration's start).
            K = min(hkey[0] - iters, col * ctx_step - mean_ctx + 1)
            if K >= 1:
                a_next = np.inf  # the next request's arrival, if it would be admitted then
                if nxt < n and _admits(
                    arrival[nxt], prompt[nxt] + output[nxt], np.inf, nrun, max_batch, kv, kv_cap
                ):
                    a_next = arrival[nxt]
                j = 0
                while True:
                    t += dt
                    j += 1
                    if j >= K or a_next <= t:
                        break
                busy += j * dt
                iters += j
                ctx_sum += nrun * j
                gap_cells[old, 0, 0, col] += old * j
                if j < K or hkey[0] - iters + j >= col * ctx_step - mean_ctx + 1 or a_next <= t:
                    continue
                # else the next iteration, in which the first sequence ends, is one more of the
                # same (same decodes and column, nobody admitted): run it here, not from the top
        t = t + dt
        busy += dt
        for i in range(first_new, nxt):  # prefilled this iteration: first token out
            first[i] = t
        if old > 0 and (
            nnew == 0 or (fits and gap_cells.shape[1] > 1)
        ):  # a table cell (mc = 0 without prompts)
            gap_cells[old, nnew, mc, col] += old
        elif old > 0:  # prefills not in one mixed step: listed (at most one per request)
            gap_s[nmix] = dt
            gap_w[nmix] = old
            nmix += 1
        ctx_sum += nrun  # every running sequence holds one more token
        while nrun > 0 and hkey[0] == iters:  # pop the sequences whose last token this was
            i = hid[0]
            finish[i] = t
            kv -= prompt[i] + output[i]
            ctx_sum -= prompt[i] + output[i]
            done += 1
            nrun -= 1  # the last leaf sifts down from the root
            key, j = hkey[nrun], hid[nrun]
            c = 0
            while 2 * c + 1 < nrun:
                ch = 2 * c + 1
                if ch + 1 < nrun and hkey[ch + 1] < hkey[ch]:
                    ch += 1
                if hkey[ch] >= key:
                    break
                hkey[c], hid[c] = hkey[ch], hid[ch]
                c = ch
            hkey[c], hid[c] = key, j
        iters += 1
    _end_of_run(info, busy_out, iters, busy, nmix)


def continuous_kernel():
    """The continuous-batching kernel (a Numba dispatcher): for a caller that asks whether
    Numba's cache holds it (``ipusim.background.cached``)."""
    return _continuous_kernel


@njit(cache=True, error_model="numpy")
def _chunked_kernel(
    arrival,
    prompt,
    output,
    pre_tab,
    pre_step,
    dec_tab,
    ctx_step,
    mixed,
    mixed_step,
    max_batch,
    kv_cap,
    chunk,
    start,
    first,
    finish,
    info,
    busy_out,
    gap_cells,
    gap_s,
    gap_w,
):
    """Continuous batching with chunked prefill on one device (SARATHI, facts §7).

    Preconditions: as ``_continuous_kernel``; ``chunk`` >= 1 tokens. Gaps as there; when
    ``gap_s``, ``gap_w`` are full the kernel stops with ``info[1] = -1`` (the caller retries
    with larger ones). Each iteration:
    every decoding sequence decodes one token; the tokens left of ``chunk`` go to the
    sequences still prefilling, oldest first, then to newly admitted requests (``_admits``),
    one piece each. The iteration is priced as one step: the pieces as prompts padded to
    the longest piece beside the decodes (``_step_s``). ASSUMPTION: a piece's attention over the earlier pieces
    of its prompt is left out (the step runs the piece as a prompt of its own). A sequence's
    first token is out at the end of the iteration that prefills its last piece. Work is
    O(max_batch) per iteration.
    """
    n = arrival.shape[0]
    rid = np.empty(max_batch, dtype=np.int64)
    rem = np.empty(max_batch, dtype=np.int64)  # prompt tokens not prefilled yet
    ctx = np.empty(max_batch, dtype=np.int64)
    left = np.empty(max_batch, dtype=np.int64)
    piece = np.empty(max_batch, dtype=np.int64)
    nrun = nxt = done = kv = iters = nmix = 0  # as in _continuous_kernel
    t = busy = 0.0
    while done < n:
        if nrun == 0 and arrival[nxt] > t:
            t = arrival[nxt]
        d = 0
        ctx_sum = 0
        for r in range(nrun):
            piece[r] = 0
            if rem[r] == 0:
                d += 1
                ctx_sum += ctx[r]
        budget = chunk - d
        npc = 0
        lmax = 0
        for r in range(nrun):
            if budget <= 0:
                break
            if rem[r] > 0:
                p = min(rem[r], budget)
                piece[r] = p
                budget -= p
                npc += 1
                lmax = max(lmax, p)
        while (
            budget > 0
            and nxt < n
            and _admits(arrival[nxt], prompt[nxt] + output[nxt], t, nrun, max_batch, kv, kv_cap)
        ):
            kv += prompt[nxt] + output[nxt]
            start[nxt] = t
            rid[nrun] = nxt
            rem[nrun] = prompt[nxt]
            ctx[nrun] = 0
            left[nrun] = output[nxt]
            p = min(prompt[nxt], budget)
            piece[nrun] = p
            budget -= p
            npc += 1
            lmax = max(lmax, p)
            nrun += 1
            nxt += 1
        mean_ctx = (ctx_sum + d - 1) // d + 1 if d > 0 else 0
        col = (mean_ctx + ctx_step - 1) // ctx_step
        mc = (lmax + mixed_step - 1) // mixed_step
        fits = npc > 0 and d > 0 and d + npc <= mixed.shape[0] and mixed[d, npc, mc] < np.inf
        dt = _step_s(
            npc,
            d,
            pre_tab[npc, (lmax + pre_step - 1) // pre_step],
            dec_tab[d, col],
            dec_tab[d, 1],
            mixed[d, npc, mc] if fits else 0.0,
            fits,
        )
        t = t + dt
        busy += dt
        iters += 1
        if d > 0 and (npc == 0 or (fits and gap_cells.shape[1] > 1)):
            gap_cells[d, npc, mc, col] += d
        elif d > 0:
            if nmix == gap_s.shape[0]:  # no room: the caller retries with more
                info[1] = -1
                return
            gap_s[nmix] = dt
            gap_w[nmix] = d
            nmix += 1
        w = 0
        for r in range(nrun):
            i = rid[r]
            keep = True
            if rem[r] == 0:  # decoded one token
                ctx[r] += 1
                left[r] -= 1
            elif piece[r] > 0:
                rem[r] -= piece[r]
                if rem[r] == 0:  # prompt done: first token out
                    first[i] = t
                    ctx[r] = prompt[i] + 1
                    left[r] -= 1
            if rem[r] == 0 and left[r] == 0:
                finish[i] = t
                kv -= prompt[i] + output[i]
                done += 1
                keep = False
            if keep:
                rid[w] = i
                rem[w] = rem[r]
                ctx[w] = ctx[r]
                left[w] = left[r]
                w += 1
        nrun = w
    _end_of_run(info, busy_out, iters, busy, nmix)


@njit(cache=True, error_model="numpy")
def _static_kernel(
    arrival,
    prompt,
    output,
    pre_tab,
    pre_step,
    dec_tab,
    ctx_step,
    batch,
    timeout,
    start,
    first,
    finish,
    info,
    busy_out,
    gap_cells,
):
    """Run-to-completion batches on one device (FasterTransformer-style static batching).

    Preconditions: ``arrival`` sorted; contexts fit the tables, which hold rows up to
    ``batch`` (``_rows_up_to``); outputs of size n (every entry is written); ``gap_cells``
    [batch + 1, 1, 1, decode columns] zeroed. A batch of up to
    ``batch`` requests leaves when the device is free and ``batch`` requests have arrived,
    or the oldest has waited ``timeout``; it runs the prefill of all its prompts (padded to
    the longest; first tokens out), then decode steps of all its rows (context at the mean
    prompt plus the step) until its longest reply is done; every request is returned at the
    end. Decode steps in one context column cost the same, so the batch's decode time is
    a sum over columns of (steps in the column) x (the column's step time). Gaps between
    tokens: request i's tokens 2..output_i each wait one decode step; ``gap_cells[rows, 0,
    0, column]`` counts them (listed by ``_counted_gaps``). ``info[0]``
    gets the iterations (prefill and decode steps), ``info[1]`` the token slots run (rows x
    longest reply), ``busy_out[0]`` the busy seconds.
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
        dt = pre_tab[size, (pmax + pre_step - 1) // pre_step]
        t_first = t + dt
        pmean = (psum + size - 1) // size
        # decode steps k = 1 .. omax - 1 at context pmean + k, grouped by column
        lo = pmean + 1
        hi = pmean + omax - 1
        while lo <= hi:
            c = (lo + ctx_step - 1) // ctx_step
            top = min(hi, c * ctx_step)
            dt += (top - lo + 1) * dec_tab[size, c]
            lo = top + 1
        for i in range(h, h + size):
            lo = pmean + 1
            hi = pmean + output[i] - 1
            while lo <= hi:
                c = (lo + ctx_step - 1) // ctx_step
                top = min(hi, c * ctx_step)
                gap_cells[size, 0, 0, c] += top - lo + 1
                lo = top + 1
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
    info[1] = slots
    _end_of_run(info, busy_out, iters, busy, 0)


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
                _static_kernel(
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
                _chunked_kernel(
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
                _continuous_kernel(
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
